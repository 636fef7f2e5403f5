"""The plan of the DRA pilot's rollback, from one read: refused before any write while a claim the
runbooks did not create is allocated from the node's pool (its owners move it first); else in order
the run record, the cordon, the verify's pods and claim deleted (and a wait until the node's pool holds
no allocation), the DRA kubelet plugin's label removed (and a wait until the node has no slices of the
driver), the device-plugin label restored as the node's mark recorded it (and a wait for allocatable
nvidia.com/gpu to equal the node's GPUs), the pilot taint removed when the enable added it, the
uncordon and the mark removed; the node's enable records are marked rolled back. A node without the pilot's marks plans nothing."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gpushare.dra.mark import DEVICE_PLUGIN_LABEL, MARK
from gpushare.dra.plan import CHECK_LABEL, TAINT, read_mark
from gpushare.dra.plan import RUNBOOK as ENABLE
from gpushare.dra.settings import PilotSettings
from gpushare.k8s.changes import Change
from gpushare.model.node import CORDONED_BY, Node
from gpushare.runbook.inputs import NOTHING
from gpushare.runbook.plan import Plan
from gpushare.runbook.records import Intent, Record, new_record, record_name, state_patch

RUNBOOK = "rollback-dra-pilot"


@dataclass
class RollbackPlan(Plan):
    node: str = ""
    cordons: bool = False
    foreign_claims: list[str] = field(default_factory=list)


def _allocated_here(claim: dict[str, Any], node: str, driver: str) -> bool:
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
    return any(r.get("driver") == driver and r.get("pool") == node for r in results)


def foreign_claims(claims: list[dict[str, Any]], node: str, driver: str) -> list[str]:
    """Claims allocated from the node's pool that the runbooks did not create, with the pods they serve."""
    found = []
    for claim in claims:
        meta = claim["metadata"]
        if (meta.get("labels") or {}).get(CHECK_LABEL) == node or not _allocated_here(claim, node, driver):
            continue
        pods = [r.get("name", "") for r in (claim.get("status") or {}).get("reservedFor") or [] if r.get("resource") == "pods"]
        found.append(f"{meta.get('namespace')}/{meta['name']}" + (f" (pods {', '.join(pods)})" if pods else ""))
    return sorted(found)


def plan(read: dict[str, Any], settings: PilotSettings, invocation: dict[str, str], now: dt.datetime) -> RollbackPlan:
    """`read`: node, claims (every ResourceClaim), check_pods and check_claims (the verify's), records (the run
    records: the enables of the node are marked rolled back), records_namespace."""
    result = RollbackPlan()
    problems = settings.problems()
    if read.get("node") is None:
        problems.append("the node is not a node of this cluster: check -l.")
    if problems:
        result.refusals = [f"{p} {NOTHING}" for p in problems]
        return result
    node = Node(read["node"])
    driver = settings.readiness.device_class
    result.node = node.name
    result.foreign_claims = foreign_claims(read.get("claims") or [], node.name, driver)
    if result.foreign_claims:
        result.refusals = [f"{node.name}: {len(result.foreign_claims)} claim(s) the runbooks did not create are allocated "
                           f"from its pool: {', '.join(result.foreign_claims)}. Their owners move them first (delete the "
                           f"pods, then the claims), then run this again. {NOTHING}"]
        return result
    mark, distrust = read_mark(node, read.get("records") or [], settings.records_namespace)
    if distrust:
        result.refusals = [distrust]
        return result
    tainted = any(t.key == TAINT["key"] and t.value == TAINT["value"] and t.effect == TAINT["effect"] for t in node.taints)
    labelled = settings.plugin_label in node.labels
    ours = node.unschedulable and node.cordoned_by == RUNBOOK
    checks = [*(read.get("check_pods") or []), *(read.get("check_claims") or [])]
    if mark is None and not labelled and not checks and not ours:
        result.lines = [f"Nothing to do: {node.name} is not in the DRA pilot (no {MARK} mark, no "
                        f"{settings.plugin_label} label). {NOTHING}"]
        return result
    before = mark.device_plugin if mark else None
    record = record_name(RUNBOOK, now)
    result.record = record
    result.cordons = not node.unschedulable or ours
    changes: dict[str, list[Change]] = {}
    intent = Intent(RUNBOOK, [node.name], node_labels={node.name: {
        DEVICE_PLUGIN_LABEL: node.labels.get(DEVICE_PLUGIN_LABEL), settings.plugin_label: node.labels.get(settings.plugin_label)}})
    changes["record"] = [Change("create", "ConfigMap", record, namespace=settings.records_namespace,
                                body=new_record(record, settings.records_namespace, intent, None, now, invocation),
                                why="record the run and the node labels it changes")]
    if result.cordons and not ours:
        changes["cordon"] = [Change("merge", "Node", node.name,
                                    body={"spec": {"unschedulable": True}, "metadata": {"annotations": {CORDONED_BY: RUNBOOK}}},
                                    why="no new pods while the node goes back to the device plugin")]
    changes["checks"] = [Change("delete", obj.get("kind") or kind, obj["metadata"]["name"], namespace=obj["metadata"]["namespace"],
                                preconditions={"uid": obj["metadata"]["uid"]}, why="the verify's pods and claim")
                         for kind, objs in (("Pod", read.get("check_pods") or []), ("ResourceClaim", read.get("check_claims") or []))
                         for obj in objs]
    if labelled:
        changes["kubelet_plugin"] = [Change("merge", "Node", node.name, body={"metadata": {"labels": {settings.plugin_label: None}}},
                                            why="stop the DRA kubelet plugin on the node")]
    if node.labels.get(DEVICE_PLUGIN_LABEL) != before:
        changes["device_plugin"] = [Change("merge", "Node", node.name, body={"metadata": {"labels": {DEVICE_PLUGIN_LABEL: before}}},
                                           why=f"the device plugin back ({DEVICE_PLUGIN_LABEL} as it was: {before or 'unset'})")]
    finish: list[Change] = []
    if tainted and (mark is None or mark.taint_added):
        finish.append(Change("untaint", "Node", node.name, body=dict(TAINT), why="the pilot taint goes"))
    body: dict[str, Any] = {"metadata": {"annotations": {MARK: None} if mark is not None else {}}}
    if result.cordons:
        body["spec"] = {"unschedulable": None}
        body["metadata"]["annotations"][CORDONED_BY] = None
    if body.get("spec") or body["metadata"]["annotations"]:
        finish.append(Change("merge", "Node", node.name, body=body, why="uncordon and drop the pilot's mark"))
    changes["uncordon"] = finish
    enables = [r for r in (Record.of(c) for c in read.get("records") or [] if Record.is_record(c))
               if not r.problem and r.runbook == ENABLE and node.name in r.intent.nodes and r.state in ("in-progress", "complete")]
    changes["finish"] = [*(Change("merge", "ConfigMap", r.name, namespace=settings.records_namespace,
                                  body=state_patch("rolled-back", now), why="the enable is rolled back") for r in enables),
                         Change("merge", "ConfigMap", record, namespace=settings.records_namespace,
                                body=state_patch("complete", now), why="mark the run complete")]
    result.changes = {k: v for k, v in changes.items() if v}
    result.expected = {"node": node.name, "gpus": node.gpus or 0, "driver": driver, "namespace": settings.namespace,
                       "check_namespace": settings.check_namespace, "device_plugin": before}
    steps = [("cordon" if "cordon" in changes else "keep the cordon" if ours else "already cordoned by someone else"),
             f"delete the verify's {len(changes['checks'])} pod(s) and claim(s), wait until no claim holds the pool",
             f"remove {settings.plugin_label}, wait until the node has no {driver} slices" if labelled
             else f"{settings.plugin_label} is gone already",
             f"set {DEVICE_PLUGIN_LABEL} back to {before or 'unset'}, wait for allocatable nvidia.com/gpu = "
             f"{node.gpus or 0}" if "device_plugin" in changes else "the device plugin label is as recorded",
             "remove the pilot taint and uncordon" if finish else "nothing to uncordon"]
    result.lines = [f"Plan ({RUNBOOK}): {node.name} back to the device plugin"]
    result.lines += [f"  {i}. {step}" for i, step in enumerate(steps, 1)]
    result.lines.append(f"Record: ConfigMap {settings.records_namespace}/{record}, written before the first change")
    return result
