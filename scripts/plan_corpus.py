#!/usr/bin/env python3
"""Record what the runbooks' plans say over the unit tests' inputs, and compare two recordings.

A restructuring of a plan must not change its output. This runs the plan-related unit tests with
every public function of every plan module (`src/gpushare/**/plan.py`: `plan`, `refusals`,
`needs_fleet`, ...) and the `*problem(s)` methods of the settings beside it (`Settings.problems`,
the inputs' refusals) wrapped, and writes each call's output (a plan's `as_dict()`: its refusals'
text, printed lines, changes, expected state; any other value as plain data; an exception's type
and text) to a JSON corpus, keyed by test id and call index. Only the outermost call is recorded
(a plan calling another public function of its module records once), so moving code between a
plan's own functions does not change the keys.

    python scripts/plan_corpus.py record before.json            # the default plan tests
    python scripts/plan_corpus.py record after.json tests/unit/test_mig_plan.py
    python scripts/plan_corpus.py compare before.json after.json

`record` exits with pytest's status; `compare` prints the figures (calls in each, identical, and
each difference) and exits 1 when the corpora differ. Two recordings of the same code are identical:
the random suffixes of run records and lock holders come from a counter (one per test), the fuzzed
tests' seed and pytest's temporary directory are fixed, and the times near now (where a filter takes
the current time), this process's parent (in a lock holder) and the checkout's path are written
`<now>`, `<ppid>` and `<repo>` (so a checkout of the old code elsewhere compares with this one).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import difflib
import functools
import importlib
import importlib.util
import inspect
import itertools
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
TMP = Path(tempfile.gettempdir()) / "gpushare-plan-corpus"  # pytest's basetemp: the same paths in every recording
# The unit tests that reach a plan, directly or through a runbook's filters.
PLAN_TESTS = [f"tests/unit/test_{name}.py" for name in (
    "timeslicing_plan", "timeslicing_settings", "mps_enable", "timeslicing_partial_read", "timeslicing_records",
    "timeslicing_report", "records_untrusted", "timeslicing_rollback_plan", "timeslicing_rollback_report",
    "rollback_write_model", "rbac_access", "plan_keys", "mig_plan", "mig_report", "share_check", "rollout_plan",
    "rollout_report", "dra_pilot", "release_gates", "upgrade", "change_record")]


def plan_modules() -> list[ModuleType]:
    names = sorted(".".join(p.relative_to(REPO / "src").with_suffix("").parts)
                   for p in (REPO / "src" / "gpushare").rglob("plan.py"))
    return [importlib.import_module(name) for name in names]


def settings_modules() -> list[ModuleType]:
    """Each plan's settings module (its inputs' problems are refusals of the plan)."""
    names = sorted(f"{module.__name__.rpartition('.')[0]}.settings" for module in plan_modules())
    return [importlib.import_module(name) for name in names if importlib.util.find_spec(name) is not None]


def plain(value: Any) -> Any:
    """A call's output as JSON data."""
    if hasattr(value, "as_dict") and not isinstance(value, type):
        return plain(value.as_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"<type>": type(value).__name__, **{f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


class Recorder:
    """A pytest plugin: knows the running test, and holds what the wrapped functions returned."""

    def __init__(self) -> None:
        self.corpus: dict[str, dict[str, Any]] = {}
        self.test = "<collection>"
        self.calls: Iterator[int] = itertools.count()
        self.suffixes: Iterator[int] = itertools.count()
        self.depth = 0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.test, self.calls, self.suffixes = item.nodeid, itertools.count(), itertools.count()
        yield

    def token_hex(self, nbytes: int) -> str:
        return f"{next(self.suffixes):0{2 * nbytes}x}"

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return function(*args, **kwargs)
            self.depth += 1
            try:
                result = function(*args, **kwargs)
                output = {"returned": plain(result)}
            except Exception as err:
                output = {"raised": type(err).__name__, "text": str(err)}
                raise
            finally:
                self.depth -= 1
                self.corpus[f"{self.test}#{next(self.calls)}"] = {
                    "function": name, **_normalized(output)}
            return result
        return recorded

    def install(self) -> None:
        """Wrap before any test module imports a plan, so `from ... import plan` takes the wrapper."""
        from gpushare.runbook import lock, records  # noqa: PLC0415

        records.secrets = lock.secrets = SimpleNamespace(token_hex=self.token_hex)
        for module in plan_modules():
            for attr, value in list(vars(module).items()):
                if inspect.isfunction(value) and value.__module__ == module.__name__ and not attr.startswith("_"):
                    setattr(module, attr, self.wrap(f"{module.__name__}.{attr}", value))
        for module in settings_modules():
            for cls in [v for v in vars(module).values() if inspect.isclass(v) and v.__module__ == module.__name__]:
                for attr, value in list(vars(cls).items()):
                    if inspect.isfunction(value) and not attr.startswith("_") and attr.endswith(("problem", "problems")):
                        setattr(cls, attr, self.wrap(f"{module.__name__}.{cls.__name__}.{attr}", value))


_MOMENTS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:Z|\+00:00)|\d{8}[Tt]\d{6}[Zz]")


def _normalized(output: dict[str, Any]) -> dict[str, Any]:
    """The output with the times near now (a filter's utc_now, and a lease's end from it), in each
    form a plan writes them, this process's parent (a lock holder's) and the checkout's path written
    <now>, <ppid> and <repo>.
    The tests' own moments (fixed, days away) stay."""
    now = dt.datetime.now(dt.timezone.utc)

    def near_now(found: re.Match[str]) -> str:
        text = found.group(0)
        moment = (dt.datetime.fromisoformat(text.replace("Z", "+00:00")) if "-" in text
                  else dt.datetime.strptime(text.upper(), "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc))
        return "<now>" if abs(moment - now) < dt.timedelta(days=2) else text

    text = json.dumps(output, sort_keys=True).replace(f"/{os.getppid()}/", "/<ppid>/").replace(str(REPO), "<repo>")
    return json.loads(_MOMENTS.sub(near_now, text))


def record(path: Path, tests: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    recorder = Recorder()
    recorder.install()
    status = pytest.main(["-q", "-p", "no:cacheprovider", "--hypothesis-seed=0", f"--basetemp={TMP}", *(tests or PLAN_TESTS)],
                         plugins=[recorder])
    path.write_text(json.dumps(recorder.corpus, indent=1, sort_keys=True) + "\n")
    functions = sorted({call["function"] for call in recorder.corpus.values()})
    print(f"{len(recorder.corpus)} plan calls recorded in {path} ({len(functions)} functions: {', '.join(functions)})")
    return int(status)


def compare(before_path: Path, after_path: Path) -> int:
    before, after = json.loads(before_path.read_text()), json.loads(after_path.read_text())
    identical = [k for k in before if k in after and before[k] == after[k]]
    differing = [k for k in before if k in after and before[k] != after[k]]
    only_before, only_after = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    print(f"{before_path}: {len(before)} calls; {after_path}: {len(after)} calls; {len(identical)} identical, "
          f"{len(differing)} different, {len(only_before)} only in {before_path}, {len(only_after)} only in {after_path}")
    for key in differing:
        print(f"DIFFERENT {key} ({before[key]['function']})")
        old = json.dumps(before[key], indent=1, sort_keys=True).splitlines()
        new = json.dumps(after[key], indent=1, sort_keys=True).splitlines()
        print("\n".join(list(difflib.unified_diff(old, new, lineterm="", n=1))[2:40]))
    for key in only_before:
        print(f"ONLY IN {before_path}: {key} ({before[key]['function']})")
    for key in only_after:
        print(f"ONLY IN {after_path}: {key} ({after[key]['function']})")
    return 1 if differing or only_before or only_after else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recording = commands.add_parser("record", help="run the plan tests and write the corpus")
    recording.add_argument("corpus", type=Path)
    recording.add_argument("tests", nargs="*", help=f"pytest arguments (default: the {len(PLAN_TESTS)} plan test files)")
    comparing = commands.add_parser("compare", help="compare two corpora")
    comparing.add_argument("before", type=Path)
    comparing.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        return record(args.corpus, args.tests)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
