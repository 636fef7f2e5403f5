"""The filters every runbook role shares (the lock, output paths, problem nodes); each role's own
filters live in its package, and the helpers they all use in gpushare.ansible_values."""

from __future__ import annotations

import os
from typing import Any

from gpushare.ansible_values import plain
from gpushare.clock import utc_now
from gpushare.output_dir import directory, output_path
from gpushare.runbook import lock


def gpushare_problem_nodes(problems: list[str], nodes: list[str]) -> list[str]:
    """The nodes a check's problems name (each problem starts with "<node>: ")."""
    return sorted({n for n in plain(nodes) for p in plain(problems) if str(p).startswith(f"{n}:")})


def gpushare_lock(read: dict[str, Any], runbook: str, name: str, namespace: str, duration: int) -> dict[str, Any]:
    """{refusal, take (the change list that takes the Lease), holder} from a read that has `lease`. The
    holder names this run's ansible-playbook process (the parent of the task worker that runs this)."""
    lease = plain((read.get("resources") or {}).get("lease"))
    now = utc_now()
    holder = lock.holder_identity(runbook, now, os.getppid())
    return {"refusal": lock.refusal(lease, name, namespace, now), "holder": holder,
            "take": [lock.take(lease, name, namespace, holder, int(duration), now).as_dict()]}


def gpushare_output_path(given: str | None, subdir: str) -> str:
    """`subdir` of gpushare_output_dir (`given`; its default when empty), as an absolute path."""
    return output_path(plain(given) or None, str(subdir))


def gpushare_output_directory(given: str, cwd: str, variable: str) -> dict[str, str]:
    """{path, problem}: the directory the input `variable` names (`given`), and why the runbooks
    cannot write into it (gpushare.output_dir.directory)."""
    return directory(str(variable), str(given), str(cwd))


FILTERS = {
    "gpushare_problem_nodes": gpushare_problem_nodes,
    "gpushare_lock": gpushare_lock,
    "gpushare_output_path": gpushare_output_path,
    "gpushare_output_directory": gpushare_output_directory,
}
