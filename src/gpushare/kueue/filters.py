"""The queue_backfill role's filters (registered by plugins/filter/queue_backfill.py): the queue-backfill
runbook's questions over plain mappings, as Ansible passes them. `description` is {cohort, flavors,
teams, priority_classes}."""

from __future__ import annotations

from typing import Any

from gpushare.k8s.changes import Change
from gpushare.kueue import capacity, controller, render
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


def kueue_problems(unserved: list[str], lease: dict[str, Any] | None, lease_ref: str, now: str) -> list[str]:
    """`unserved`: the aliases of the preflight's read the cluster does not serve; only Kueue's kinds
    tell that Kueue is missing (a cluster without the DRA API serves no DeviceClass either)."""
    return render.kueue_problems([k for k in unserved if k in render.KINDS], lease, lease_ref, parse_time(now))


def cluster_problems(description: dict[str, Any], nodes: list[dict[str, Any]],
                     device_classes: list[dict[str, Any]] | None = None,
                     resource_slices: list[dict[str, Any]] | None = None) -> list[str]:
    """`device_classes`, `resource_slices`: as read (None where the cluster serves no DRA API)."""
    parsed = _parsed(description)
    classes = {dc["metadata"]["name"]: dc for dc in device_classes or []}
    backed = controller.dra_backed(dict.fromkeys(r for _, r in parsed.flavor_resources()), device_classes)
    dra = {resource: capacity.devices_per_node(resource_slices or [], capacity.drivers(classes[name]))
           for resource, name in backed.items()}
    return capacity.cluster_problems(parsed, nodes, dra)


def plan(description: dict[str, Any], resources: dict[str, Any], check_mode: bool,
         kueue_config_ref: str = "") -> dict[str, Any]:
    """From the preflight's read (`resources`: the runbook's objects by kind, `namespaces`, Kueue's
    configuration ConfigMap `kueue_config` read at `kueue_config_ref`, the `device_classes`): the
    missing namespaces, the gpushare_apply changes (the Kueue objects render.plan names), the plan's
    `lines` on what the running Kueue does with the teams' jobs and its `refusals`. Check mode leaves
    out the objects in namespaces not created yet: the API server cannot dry-run them."""
    parsed = _parsed(description)
    kueue = controller.read(resources.get("kueue_config"), kueue_config_ref)
    dra_lines, refusals = controller.dra_lines_and_problems(
        kueue, dict.fromkeys(r for _, r in parsed.flavor_resources()), resources.get("device_classes"))
    existing = [obj for kind in render.KINDS for obj in resources.get(kind) or []]
    names = {ns["metadata"]["name"] for ns in resources.get("namespaces") or []}
    missing = [name for name in render.namespaces(parsed) if name not in names]
    skip = set(missing) if check_mode else set()
    objects = [o for o in render.plan(render.kueue_objects(parsed), existing) if o["metadata"].get("namespace") not in skip]
    changes = render.changes(objects, existing, missing)
    return {"missing_namespaces": missing, "changes": [c.as_dict() for c in changes],
            "lines": [render.intended(changes), controller.wait_line(kueue), *dra_lines], "refusals": refusals}


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
