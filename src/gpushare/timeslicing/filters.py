"""The `timeslicing` role's filters (plugins/filter/timeslicing.py registers them): each turns what a
phase read into the plan or the report, in Python."""

from __future__ import annotations

from typing import Any

from gpushare.clock import utc_now
from gpushare.model.node import unpacked
from gpushare.ansible_values import plain, read_resources
from gpushare.runbook import records
from gpushare.runbook.restart import late_readers
from gpushare.runbook.state import ClusterState
from gpushare.timeslicing import report
from gpushare.timeslicing.plan import plan as enable_plan
from gpushare.timeslicing.settings import Settings
from gpushare.timeslicing.xid import XidCheck
from gpushare.timeslicing.xid import query as xid_query


def timeslicing_enable_plan(read: dict[str, Any], inputs: dict[str, Any], targets: list[str],
                            more: dict[str, Any] | None = None) -> dict[str, Any]:
    """The enable runbook's plan (gpushare.timeslicing.plan) from one gpushare_read of the cluster.
    A read whose `nodes` are only the targets, with the nodes that carry a device-plugin config as
    `configured_nodes`, is partial: its plan says `needs_fleet` as gpushare.timeslicing.plan.needs_fleet
    rules, and `needs_workloads` when every pod not finished must be read. `more`, one read of what
    the plan needs (every node as `nodes`, every pod not finished as `pods`), then makes the plan again.
    A read a skipped task registered counts as none."""
    read, inputs, targets = plain(read), plain(inputs), plain(targets)
    more = None if not more or plain(more).get("skipped") else plain(more)
    extra = (more or {}).get("resources") or {}
    resources = read_resources(read)
    if "pods" in extra:
        resources["workloads"] = extra["pods"] or []
    partial = "configured_nodes" in resources and "nodes" not in extra
    if "nodes" in extra:
        resources["nodes"] = extra["nodes"]
        resources["nodes_version"] = ((more or {}).get("versions") or {}).get("nodes", "")
    elif partial:
        found = {n["metadata"]["name"]: n for n in [*(unpacked(resources["configured_nodes"]) or []),
                                                     *(resources.get("nodes") or [])]}
        resources["nodes"] = list(found.values())
    settings = Settings.of(inputs)
    xid = XidCheck.of(settings.prometheus_url, settings.xid_window, inputs.get("xid_answer"), list(targets))
    return enable_plan(ClusterState.of(resources), settings, list(targets), read.get("caller") or {}, utc_now(),
                       read.get("access"), partial, xid).as_dict()


def timeslicing_xid_query(targets: list[str], window: str) -> str:
    """The PromQL of the preflight's Xid check (gpushare.timeslicing.xid)."""
    return xid_query(list(plain(targets)), str(window))


def timeslicing_with_readers(changes: list[dict[str, Any]], restarted: dict[str, Any], configmap: str,
                             settled: dict[str, Any]) -> list[dict[str, Any]]:
    """The run record's changes, naming the readers the run's restart left running (when it ran) and
    those a node label started after it: its late readers (gpushare.runbook.restart.late_readers) in
    `settled`, the gpushare_read of its nodes' operand pods and DaemonSets once the verify succeeded."""
    changes, restarted = plain(changes), plain(restarted)
    if not changes or "readers" not in (restarted or {}):
        return changes
    found = (plain(settled) or {}).get("resources") or {}
    late = late_readers(restarted.get("listed") or {}, unpacked(found.get("daemonsets")) or [],
                        unpacked(found.get("pods")) or [])
    with_late = {**restarted, "readers": sorted({*restarted["readers"], *late})}
    first = changes[0]
    body = {**first["body"], **records.readers_patch(str(configmap), with_late)}
    return [{**first, "body": body}, *changes[1:]]


def timeslicing_enable_report(read: dict[str, Any], plan: dict[str, Any], check_mode: bool,
                              hosts: list[str]) -> list[str]:
    read, plan, hosts = plain(read), plain(plan), plain(hosts)
    resources = read.get("resources") or {}
    return report.enable_report(resources.get("nodes") or [], resources.get("daemonsets") or [], plan, bool(check_mode),
                                hosts)


FILTERS = {
    "timeslicing_enable_plan": timeslicing_enable_plan,
    "timeslicing_with_readers": timeslicing_with_readers,
    "timeslicing_enable_report": timeslicing_enable_report,
    "timeslicing_xid_query": timeslicing_xid_query,
}
