"""The gpu_operator entry points the runbooks run as their own steps take the calling role's plan:
they are imported without a second argument-spec validation, which would fork one more task per step
in every run (docs/runbook-conventions.md, "Validation that runs")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
STEPS = ("lock_acquire", "lock_release", "fleet_roll", "uncordon")


def _tasks(tasks: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for task in tasks or []:
        if "block" in task:
            yield from _tasks([*task["block"], *(task.get("rescue") or []), *(task.get("always") or [])])
        else:
            yield task


def _imports() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            role = task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role") or {}
            if role.get("name") == "gpushare.gpu_sharing.gpu_operator":
                found.append((f"{path.relative_to(ROLES)}: {task['name']}", role))
    return found


def test_the_runbooks_run_every_operator_step() -> None:
    assert {role["tasks_from"] for _, role in _imports()} >= set(STEPS)


@pytest.mark.parametrize(("name", "role"), _imports(), ids=[name for name, _ in _imports()])
def test_an_operator_step_is_not_validated_again(name: str, role: dict[str, Any]) -> None:
    if role.get("tasks_from") in STEPS:
        assert role.get("rolespec_validate") is False, f"{name}: validates {role['tasks_from']}'s spec in every run"
