"""The runbook lock (a Lease write) is taken and released only with the writing phases' tags: a task
tagged `always` or `preflight` runs under `--tags preflight`, which must write nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
LOCK_TASKS = ("lock_acquire", "lock_release")


def _tasks(tasks: list[dict[str, Any]], block: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], list]]:
    """Every task with the block it belongs to (block, rescue and always of one block together)."""
    for task in tasks or []:
        if "block" in task:
            members = [*task["block"], *(task.get("rescue") or []), *(task.get("always") or [])]
            yield from _tasks(members, members)
        else:
            yield task, block


def _lock_uses() -> list[tuple[str, dict[str, Any], list]]:
    uses = []
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        for task, block in _tasks(yaml.safe_load(path.read_text()) or [], []):
            role = task.get("ansible.builtin.import_role") or {}
            if role.get("tasks_from") in LOCK_TASKS:
                uses.append((f"{path.relative_to(ROLES)}: {task['name']}", task, block))
    return uses


def test_every_writing_runbook_takes_the_lock() -> None:
    assert {name.split("/")[0] for name, _, _ in _lock_uses()} >= {"timeslicing", "timeslicing_rollback", "mig"}


@pytest.mark.parametrize(("name", "task", "block"), _lock_uses(), ids=[n for n, _, _ in _lock_uses()])
def test_the_lock_runs_only_with_a_writing_phase(name: str, task: dict[str, Any], block: list) -> None:
    tags = set(task.get("tags") or [])
    assert tags, f"{name}: untagged, so it runs under any --tags"
    assert not tags & {"always", "preflight", "never"}, f"{name}: tagged {sorted(tags)}"
    phase_tags = {t for other in block if other is not task and "import_tasks" in str(other.keys())
                  for t in other.get("tags") or []} - {"always"}
    assert phase_tags <= tags, f"{name}: a phase tagged {sorted(phase_tags - tags)} would run without the lock"
