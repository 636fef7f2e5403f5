"""The filters every runbook role shares (the lock, output paths, problem nodes) and the helpers
every role's filters use (plain, read_resources); each role's own filters live in its package."""

from __future__ import annotations

import os
from typing import Any

from ansible.template import is_trusted_as_template

from gpushare.clock import utc_now
from gpushare.output_dir import directory, output_path
from gpushare.runbook import lock


# Exactly these types carry no Ansible tag (a tagged value is an instance of a subclass), so they
# are neither trusted templates nor in need of a copy.
UNTAGGED = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """Ansible's values as plain Python data (what the models and yaml expect). A string Ansible
    trusts as a template is rendered; the rest is copied as stored, without rendering each value
    through Ansible's lazy containers: on a 500-node read that rendering took most of a run."""
    if type(value) in UNTAGGED:
        return value
    non_lazy = getattr(value, "_non_lazy_copy", None)  # ansible-core's lazy dict and list
    raw = non_lazy() if non_lazy is not None else value
    if isinstance(raw, dict):
        return {str(k): plain(value[k] if _template(v) else v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return [plain(value[i] if _template(v) else v) for i, v in enumerate(raw)]
    for native in (str, bool, int, float):  # tagged subclasses as the plain type
        if isinstance(raw, native):
            return native(raw)
    return raw


def _template(value: Any) -> bool:
    return type(value) not in UNTAGGED and is_trusted_as_template(value)


def read_resources(read: dict[str, Any]) -> dict[str, Any]:
    """What a gpushare_read of a phase found, as ClusterState.of takes it."""
    return {**(read.get("resources") or {}), "not_served": read.get("not_served") or [],
            "nodes_version": (read.get("versions") or {}).get("nodes", "")}


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
