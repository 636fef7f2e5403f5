"""The `timeslicing_rollback` role's filters (plugins/filter/timeslicing_rollback.py registers them):
each turns what a phase read into the plan or the report, in Python."""

from __future__ import annotations

from typing import Any

from gpushare.clock import utc_now
from gpushare.ansible_values import plain, read_resources
from gpushare.runbook.state import ClusterState
from gpushare.timeslicing_rollback import checks, report
from gpushare.timeslicing_rollback.plan import plan as rollback_plan, progress
from gpushare.timeslicing_rollback.settings import RollbackSettings


def timeslicing_rollback_plan(read: dict[str, Any], inputs: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    """The rollback runbook's plan (gpushare.timeslicing_rollback.plan) from one gpushare_read of the cluster."""
    read, inputs, targets = plain(read), plain(inputs), plain(targets)
    resources = read_resources(read)
    state = ClusterState.of(resources)
    settings = RollbackSettings.of(inputs)
    return rollback_plan(state, resources.get("pods_on_targets") or [], settings, list(targets),
                         read.get("caller") or {}, utc_now(), read.get("access")).as_dict()


def timeslicing_rollback_report(read: dict[str, Any], plan: dict[str, Any], evicted: list[dict[str, str]],
                                check_mode: bool) -> list[str]:
    read, plan, evicted = plain(read), plain(plan), plain(evicted)
    resources = read.get("resources") or {}
    return report.rollback_report(resources.get("nodes") or [], plan,
                                  checks.whereabouts(resources.get("pods") or [], evicted), bool(check_mode))


def timeslicing_rollback_progress(phase: str, stopped_after: str) -> dict[str, Any]:
    return progress(str(phase), str(stopped_after))


FILTERS = {
    "timeslicing_rollback_plan": timeslicing_rollback_plan,
    "timeslicing_rollback_report": timeslicing_rollback_report,
    "timeslicing_rollback_progress": timeslicing_rollback_progress,
}
