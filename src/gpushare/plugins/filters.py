"""Filters of the runbook roles: each turns what a phase read into a decision, in Python."""

from __future__ import annotations

from typing import Any

from ansible.template import is_trusted_as_template

from gpushare.clock import utc_now
from gpushare.k8s import lock
from gpushare.model.node import unpacked
from gpushare.output_dir import output_path
from gpushare.timeslicing import checks, enable, records, report, rollback
from gpushare.timeslicing.settings import Settings
from gpushare.timeslicing.state import ClusterState


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


def timeslicing_enable_plan(read: dict[str, Any], inputs: dict[str, Any], targets: list[str],
                            fleet: dict[str, Any] | None = None, workloads: dict[str, Any] | None = None) -> dict[str, Any]:
    """The enable runbook's plan (gpushare.timeslicing.enable) from one gpushare_read of the cluster.
    A read whose `nodes` are only the targets, with the nodes that carry a device-plugin config as
    `configured_nodes`, gives a plan that says `needs_fleet` unless it is decided without the other
    nodes; `fleet` (a read of every node) then makes the plan again. A plan that says
    `needs_workloads` is made again with `workloads`, a read of every pod not finished (`pods`).
    A read a skipped task registered counts as none."""
    read, inputs, targets = plain(read), plain(inputs), plain(targets)
    fleet = None if not fleet or plain(fleet).get("skipped") else fleet
    workloads = None if not workloads or plain(workloads).get("skipped") else plain(workloads)
    resources = read_resources(read)
    if workloads:
        resources["workloads"] = (workloads.get("resources") or {}).get("pods") or []
    partial = "configured_nodes" in resources and not fleet
    if fleet:
        fleet = plain(fleet)
        resources["nodes"] = (fleet.get("resources") or {}).get("nodes")
        resources["nodes_version"] = (fleet.get("versions") or {}).get("nodes", "")
    elif partial:
        found = {n["metadata"]["name"]: n for n in [*(unpacked(resources["configured_nodes"]) or []),
                                                     *(resources.get("nodes") or [])]}
        resources["nodes"] = list(found.values())
    settings = Settings.of(inputs)
    result = enable.plan(ClusterState.of(resources), settings, list(targets), read.get("caller") or {}, utc_now(),
                         read.get("access"))
    return {**result.as_dict(), "needs_fleet": partial and not enable.decided_without_fleet(result, settings)}


def timeslicing_with_readers(changes: list[dict[str, Any]], restarted: dict[str, Any], configmap: str) -> list[dict[str, Any]]:
    """The run record's changes, naming the readers the run's restart left running (when it ran)."""
    changes, restarted = plain(changes), plain(restarted)
    if not changes or "readers" not in (restarted or {}):
        return changes
    first = changes[0]
    body = {**first["body"], **records.readers_patch(str(configmap), restarted)}
    return [{**first, "body": body}, *changes[1:]]


def timeslicing_rollback_plan(read: dict[str, Any], inputs: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    """The rollback runbook's plan (gpushare.timeslicing.rollback) from one gpushare_read of the cluster."""
    read, inputs, targets = plain(read), plain(inputs), plain(targets)
    resources = read_resources(read)
    state = ClusterState.of(resources)
    settings = rollback.RollbackSettings.of(inputs)
    return rollback.plan(state, resources.get("pods_on_targets") or [], settings, list(targets),
                         read.get("caller") or {}, utc_now(), read.get("access")).as_dict()


def timeslicing_rollback_report(read: dict[str, Any], plan: dict[str, Any], evicted: list[dict[str, str]],
                                check_mode: bool) -> list[str]:
    read, plan, evicted = plain(read), plain(plan), plain(evicted)
    resources = read.get("resources") or {}
    return report.rollback_report(resources.get("nodes") or [], plan,
                                  checks.whereabouts(resources.get("pods") or [], evicted), bool(check_mode))


def timeslicing_rollback_progress(phase: str, stopped_after: str) -> dict[str, Any]:
    return rollback.progress(str(phase), str(stopped_after))


def gpushare_problem_nodes(problems: list[str], nodes: list[str]) -> list[str]:
    """The nodes a check's problems name (each problem starts with "<node>: ")."""
    return sorted({n for n in plain(nodes) for p in plain(problems) if str(p).startswith(f"{n}:")})


def gpushare_lock(read: dict[str, Any], runbook: str, name: str, namespace: str, duration: int) -> dict[str, Any]:
    """{refusal, take (the change list that takes the Lease), holder} from a read that has `lease`."""
    lease = plain((read.get("resources") or {}).get("lease"))
    now = utc_now()
    holder = lock.holder_identity(runbook, now)
    return {"refusal": lock.refusal(lease, name, namespace, now), "holder": holder,
            "take": [lock.take(lease, name, namespace, holder, int(duration), now)]}


def gpushare_lock_release(taken: dict[str, Any], name: str, namespace: str) -> list[dict[str, Any]]:
    """The change that releases the Lease this run took (none when it took none)."""
    objects = [o for o in (taken or {}).get("objects") or [] if o]
    version = ((objects[0] if objects else {}).get("metadata") or {}).get("resourceVersion", "")
    return [lock.release(name, namespace, version)] if version and taken.get("changed") else []


def timeslicing_enable_report(read: dict[str, Any], plan: dict[str, Any], check_mode: bool,
                              hosts: list[str]) -> list[str]:
    read, plan, hosts = plain(read), plain(plan), plain(hosts)
    resources = read.get("resources") or {}
    return report.enable_report(resources.get("nodes") or [], resources.get("daemonsets") or [], plan, bool(check_mode),
                                hosts)


def gpushare_output_path(given: str | None, subdir: str) -> str:
    """`subdir` of gpushare_output_dir (`given`; its default when empty), as an absolute path."""
    return output_path(plain(given) or None, str(subdir))


FILTERS = {
    "timeslicing_enable_plan": timeslicing_enable_plan,
    "timeslicing_with_readers": timeslicing_with_readers,
    "timeslicing_rollback_plan": timeslicing_rollback_plan,
    "timeslicing_rollback_report": timeslicing_rollback_report,
    "timeslicing_rollback_progress": timeslicing_rollback_progress,
    "gpushare_problem_nodes": gpushare_problem_nodes,
    "gpushare_lock": gpushare_lock,
    "gpushare_lock_release": gpushare_lock_release,
    "gpushare_output_path": gpushare_output_path,
    "timeslicing_enable_report": timeslicing_enable_report,
}
