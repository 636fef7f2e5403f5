"""A plan reads as named steps: no function (nested ones and methods included) of a plan module,
src/gpushare/**/plan*.py, runs over 60 lines, its signature, docstring and comments counted."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIMIT = 60


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(f"{path.relative_to(REPO)}:{node.lineno} {node.name}()", node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_plan_modules_are_found() -> None:
    modules = sorted(p.relative_to(REPO / "src/gpushare").as_posix() for p in (REPO / "src/gpushare").rglob("plan*.py"))
    assert {"timeslicing/plan.py", "timeslicing_rollback/plan.py", "mig/plan.py", "dra/plan.py"} <= set(modules)


def test_no_plan_function_is_over_60_lines() -> None:
    long = [f"{name}: {lines} lines" for path in sorted((REPO / "src/gpushare").rglob("plan*.py"))
            for name, lines in _functions(path) if lines > LIMIT]
    assert long == [], f"split these into named steps of at most {LIMIT} lines: {long}"
