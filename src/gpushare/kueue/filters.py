"""The queue_backfill role's filters (registered by plugins/filter/queue_backfill.py): the queue-backfill
runbook's questions over plain mappings, as Ansible passes them. `description` is {cohort, flavors,
teams, priority_classes}."""

from __future__ import annotations

from typing import Any

from gpushare.k8s.changes import Change
from gpushare.kueue import capacity, render
from gpushare.kueue.description import Description, DescriptionError, parse
from gpushare.kueue.status import parse_time


def _parsed(description: dict[str, Any]) -> Description:
    return parse(**description)


def description_problems(description: dict[str, Any]) -> list[str]:
    try:
        _parsed(description)
    except DescriptionError as err:
        return err.problems
    return []


def kueue_problems(unserved_kinds: list[str], lease: dict[str, Any] | None, lease_ref: str, now: str) -> list[str]:
    return render.kueue_problems(unserved_kinds, lease, lease_ref, parse_time(now))


def cluster_problems(description: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    return capacity.cluster_problems(_parsed(description), nodes)


def plan(description: dict[str, Any], resources: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """From the preflight's read (`resources`: the runbook's objects by kind, `namespaces`): the missing
    namespaces and the gpushare_apply changes (the Kueue objects render.plan names). Check
    mode leaves out the objects in namespaces not created yet: the API server cannot dry-run them."""
    parsed = _parsed(description)
    existing = [obj for kind in render.KINDS for obj in resources.get(kind) or []]
    names = {ns["metadata"]["name"] for ns in resources.get("namespaces") or []}
    missing = [name for name in render.namespaces(parsed) if name not in names]
    skip = set(missing) if check_mode else set()
    objects = [o for o in render.plan(render.kueue_objects(parsed), existing) if o["metadata"].get("namespace") not in skip]
    return {"missing_namespaces": missing, "changes": [c.as_dict() for c in render.changes(objects, existing, missing)]}


def writes(plan_: dict[str, Any], check_mode: bool) -> str:
    return render.writes([Change.from_dict(c) for c in plan_["changes"]], check_mode)


def report(description: dict[str, Any], cluster_queues: list[dict[str, Any]]) -> str:
    return render.report(_parsed(description), cluster_queues)


FILTERS = {
    "queue_backfill_description_problems": description_problems,
    "queue_backfill_kueue_problems": kueue_problems,
    "queue_backfill_cluster_problems": cluster_problems,
    "queue_backfill_plan": plan,
    "queue_backfill_report": report,
    "queue_backfill_writes": writes,
}
