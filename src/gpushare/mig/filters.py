"""The `mig` role's filters (plugins/filter/mig.py registers them): each turns what a
phase read into the plan or the report, in Python."""

from __future__ import annotations

from typing import Any

from gpushare.clock import stamp, utc_now
from gpushare.mig import plan, report
from gpushare.mig.settings import MigSettings
from gpushare.ansible_values import plain, read_resources
from gpushare.runbook.state import ClusterState


def mig_plan(read: dict[str, Any], runbook: str, inputs: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    """The plan of enable-mig or rollback-mig from one gpushare_read of the cluster."""
    read, inputs, targets = plain(read), plain(inputs), plain(targets)
    resources = read_resources(read)
    return plan.plan(ClusterState.of(resources), resources.get("pods_on_targets") or [],
                     MigSettings.of(str(runbook), inputs), list(targets), read.get("caller") or {},
                     utc_now()).as_dict()


def mig_report(read: dict[str, Any], plan_: dict[str, Any], runbook: str, check_mode: bool, record_path: str) -> list[str]:
    read, plan_ = plain(read), plain(plan_)
    return report.report((read.get("resources") or {}).get("nodes") or [], plan_, str(runbook), bool(check_mode),
                         str(record_path))


def mig_change_record(read: dict[str, Any], plan_: dict[str, Any], runbook: str, invocation: dict[str, Any],
                      started: str, failure: str) -> str:
    read, plan_ = plain(read), plain(plan_)
    return report.change_record((read.get("resources") or {}).get("nodes") or [], plan_, str(runbook),
                                plain(invocation) or {}, str(started), stamp(utc_now()), str(failure or ""))


FILTERS = {"mig_plan": mig_plan, "mig_report": mig_report, "mig_change_record": mig_change_record}
