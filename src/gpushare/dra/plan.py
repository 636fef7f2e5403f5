"""The plan of the DRA pilot's enable, from one read of the cluster: the readiness's refusals (its
"pods" check aside: the enable drains the node's GPU pods itself), then in order the run record, the
cordon (with the node's mark: the device-plugin label it had), the drain, the device plugin switched
off on the node, the DRA kubelet plugin's label, the pilot's DeviceClass carrying the GpuConfig, and
the uncordon with the pilot taint. Each step is planned only when the cluster is not there yet, so
that a re-run finishes an interrupted run and a finished one changes nothing."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gpushare.bounded import Unreadable
from gpushare.dra import admission, readiness
from gpushare.dra.mark import DEVICE_PLUGIN_LABEL, MARK, PilotMark, pilot_mark, record_disagreement
from gpushare.dra.settings import DRIVER_GATES, PilotSettings
from gpushare.k8s.changes import Change
from gpushare.model.node import CORDONED_BY, Node
from gpushare.model.pods import Pod, outlasting_drain
from gpushare.runbook.inputs import NOTHING
from gpushare.runbook.plan import Plan
from gpushare.runbook.records import Intent, new_record, record_name, state_patch

RUNBOOK = "enable-dra-pilot"
# The pilot taint: its key every GPU Operator operand and the DRA kubelet plugin tolerate (Exists), so
# that they keep running; ordinary GPU pods do not tolerate the value and stay off.
TAINT = {"key": "nvidia.com/gpu", "value": "dra-pilot", "effect": "NoSchedule"}
CHECK_LABEL = "gpushare.io/dra-pilot-check"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")


@dataclass
class PilotPlan(Plan):
    node: str = ""
    gpus: int = 0
    evict: list[str] = field(default_factory=list)
    cordons: bool = False  # this run cordons (and uncordons at the end)


def read_mark(node: Node, records: list[dict[str, Any]], namespace: str) -> tuple[PilotMark | None, str]:
    """(the node's mark, why it cannot be trusted: "" when it can): typed, bounded, and vouched for by its run record."""
    try:
        mark = pilot_mark(node)
    except Unreadable as err:
        return None, (f"{str(err)[0].upper()}{str(err)[1:]}. It was edited or forged: find who wrote it (the API "
                      f"server's audit log), then remove it (kubectl annotate node {node.name} {MARK}-) or restore "
                      f"it from the run record. {NOTHING}")
    why = record_disagreement(mark, node.name, records, namespace) if mark else ""
    return mark, (f"{why[0].upper()}{why[1:]} {NOTHING}" if why else "")


def device_class(settings: PilotSettings) -> dict[str, Any]:
    """The pilot's DeviceClass: the driver's GPUs, with the GpuConfig every claim of it gets."""
    driver = settings.readiness.device_class
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": settings.class_name, "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}' && "
                                                      f"device.attributes['{driver}'].type == 'gpu'"}}],
                 "config": [{"opaque": {"driver": driver, "parameters": settings.gpu_config()}}]},
    }


def _pod_refusals(node: str, pods: list[dict[str, Any]], settings: PilotSettings) -> tuple[list[Pod], list[str]]:
    evict, refusals = [], []
    for raw in pods:
        pod = Pod(raw)
        if pod.node != node or pod.finished or pod.daemonset:
            continue
        ours = (raw["metadata"].get("labels") or {}).get(CHECK_LABEL) == node
        if pod.spec.get("resourceClaims") and not ours:
            refusals.append(f"Pod {pod.ref} on {node} holds a resource claim the pilot did not create: move it first.")
        elif pod.holds(GPU_RESOURCES):
            evict.append(pod)
            if not pod.controller:
                refusals.append(f"Pod {pod.ref} uses a GPU of {node} and has no controller: evicting it deletes it for "
                                "good. Move it yourself first.")
    refusals += outlasting_drain(evict, settings.drain_grace_period, settings.drain_timeout, "dra_pilot_drain_timeout",
                                 "dra_pilot_drain_grace_period")
    return evict, refusals


def _driver_refusals(facts: dict[str, Any], settings: PilotSettings) -> list[str]:
    """The DRA driver must be installed (its DaemonSet and Deployment) with a kubelet plugin the pilot's label places."""
    namespace, label = settings.readiness.driver_namespace, settings.plugin_label
    workloads = facts.get("driver") or []
    selectors = [(((w.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
                 for w in workloads]
    if not workloads:
        return [f"FAIL driver: the NVIDIA DRA driver is not installed in {namespace}. Fix: install its chart with "
                f"kubeletPlugin.nodeSelector {label}=true and featureGates.{DRIVER_GATES[settings.sharing]}=true."]
    if not any(selector.get(label) == "true" for selector in selectors):
        return [f"FAIL driver: no DaemonSet of the DRA driver in {namespace} selects nodes by {label}=true, so labelling "
                f"the pilot node would start no kubelet plugin. Fix: set the chart's kubeletPlugin.nodeSelector "
                f"{label}=true, or give its label as dra_pilot_plugin_label."]
    return []


def plan(facts: dict[str, Any], read: dict[str, Any], settings: PilotSettings, invocation: dict[str, str],
         now: dt.datetime, access: dict[str, Any] | None = None) -> PilotPlan:
    """`facts`: the readiness probe's; `read`: node, pods (on it), device_class, records (the enable's: the mark
    names one), records_namespace; `access`: the authorizer's answers class_get and class_update (none: not asked)."""
    result = PilotPlan()
    result.refusals = _cluster_refusals(facts, read, settings, access)
    if result.refusals:
        return result
    node = Node(read["node"])
    result.node, result.gpus = node.name, node.gpus or 0
    evict, refusals = _pod_refusals(node.name, read.get("pods") or [], settings)
    if refusals:
        result.refusals = [f"{r} {NOTHING}" for r in refusals]
        return result
    result.evict = [p.ref for p in evict]
    mark, distrust = read_mark(node, read.get("records") or [], settings.records_namespace)
    if distrust:
        result.refusals = [distrust]
        return result
    result.record = mark.run if mark else record_name(RUNBOOK, now)
    result.changes = _changes(result, node, mark, _steps(node, settings, read.get("device_class")), settings,
                              invocation, now)
    result.expected = {"node": node.name, "gpus": result.gpus, "driver": settings.readiness.device_class,
                       "driver_namespace": settings.readiness.driver_namespace, "plugin_label": settings.plugin_label,
                       "namespace": settings.namespace, "class_name": settings.class_name,
                       "gpu_config": settings.gpu_config(), "prometheus_url": settings.prometheus_url}
    result.lines = _lines(node, settings, result, mark is not None)
    return result


def _cluster_refusals(facts: dict[str, Any], read: dict[str, Any], settings: PilotSettings,
                      access: dict[str, Any] | None) -> list[str]:
    """The inputs' problems and the identity's access to the class, else the readiness's failed checks
    (its "pods" aside) in one refusal."""
    problems = settings.problems() + admission.class_access_problems(access or {}, settings.class_name)
    if problems:
        return [f"{p} {NOTHING}" for p in problems]
    failed = [c.line for c in readiness.checks(facts, settings.readiness) if not c.ok and c.name != "pods"]
    failed += _driver_refusals(facts, settings)
    if not read.get("records_namespace"):
        failed.append(f"FAIL records: namespace {settings.records_namespace} (the runbooks' records) does not exist. "
                      "Fix: create it (deploy/rbac).")
    return ["The cluster is not ready for the DRA pilot:\n" + "\n".join(failed) + f"\n{NOTHING}"] if failed else []


def _steps(node: Node, settings: PilotSettings, current_class: dict[str, Any] | None) -> dict[str, list[Change]]:
    """The device plugin off, the DRA kubelet plugin's label and the pilot's DeviceClass, each where the cluster is not there yet."""
    steps: dict[str, list[Change]] = {}
    if node.labels.get(DEVICE_PLUGIN_LABEL) != "false":
        steps["device_plugin"] = [Change("merge", "Node", node.name, body={"metadata": {"labels": {DEVICE_PLUGIN_LABEL: "false"}}},
                                         why="stop the device plugin on the node (DRA and it would book a GPU twice)")]
    if node.labels.get(settings.plugin_label) != "true":
        steps["kubelet_plugin"] = [Change("merge", "Node", node.name, body={"metadata": {"labels": {settings.plugin_label: "true"}}},
                                          why="run the DRA driver's kubelet plugin on the node")]
    wanted_class = device_class(settings)
    if current_class is None:
        steps["device_class"] = [Change("create", "DeviceClass", settings.class_name, body=wanted_class,
                                        why="the pilot's DeviceClass with the GpuConfig")]
    elif current_class.get("spec") != wanted_class["spec"]:
        replaced = {**wanted_class, "metadata": {**wanted_class["metadata"],
                                                 "resourceVersion": current_class["metadata"]["resourceVersion"]}}
        steps["device_class"] = [Change("replace", "DeviceClass", settings.class_name, body=replaced,
                                        why="the pilot's DeviceClass with this GpuConfig")]
    return steps


def _changes(result: PilotPlan, node: Node, mark: PilotMark | None, steps: dict[str, list[Change]],
             settings: PilotSettings, invocation: dict[str, str], now: dt.datetime) -> dict[str, list[Change]]:
    """In order: the record (a new run's), the cordon with the node's mark, `steps`, the uncordon with the
    pilot taint, the record marked complete; `result.cordons` says whether this run holds a cordon."""
    record = result.record
    ours = node.unschedulable and node.cordoned_by == RUNBOOK
    tainted = any(t.key == TAINT["key"] and t.effect == TAINT["effect"] for t in node.taints)
    node_steps = bool(steps.keys() - {"device_class"}) or not tainted or ours
    result.cordons = node_steps and (not node.unschedulable or ours)
    changes: dict[str, list[Change]] = {}
    if mark is None:
        intent = Intent(RUNBOOK, [node.name], node_labels={node.name: {
            DEVICE_PLUGIN_LABEL: node.labels.get(DEVICE_PLUGIN_LABEL),
            settings.plugin_label: node.labels.get(settings.plugin_label)}})
        changes["record"] = [Change("create", "ConfigMap", record, namespace=settings.records_namespace,
                                    body=new_record(record, settings.records_namespace, intent, None, now, invocation),
                                    why="record the run and the node labels it changes")]
    cordon: dict[str, Any] = {"metadata": {"annotations": {}}}
    if mark is None:
        cordon["metadata"]["annotations"][MARK] = PilotMark(
            node.labels.get(DEVICE_PLUGIN_LABEL), node.labels.get(settings.plugin_label), not tainted, record).text()
    if result.cordons and not ours:
        cordon["spec"] = {"unschedulable": True}
        cordon["metadata"]["annotations"][CORDONED_BY] = RUNBOOK
    if cordon["metadata"]["annotations"] or "spec" in cordon:
        changes["cordon"] = [Change("merge", "Node", node.name, body=cordon,
                                    why="stop new pods on the node and record its device-plugin label")]
    changes.update(steps)
    uncordon: list[Change] = []
    if not tainted:
        uncordon.append(Change("taint", "Node", node.name, body=dict(TAINT), why="keep ordinary GPU pods off the pilot node"))
    if result.cordons:
        uncordon.append(Change("merge", "Node", node.name,
                               body={"spec": {"unschedulable": None}, "metadata": {"annotations": {CORDONED_BY: None}}},
                               why="uncordon (the pilot taint keeps ordinary GPU pods off)"))
    if uncordon:
        changes["uncordon"] = uncordon
    if changes:
        changes["finish"] = [Change("merge", "ConfigMap", record, namespace=settings.records_namespace,
                                    body=state_patch("complete", now), why="mark the run complete")]
    return changes


def _lines(node: Node, settings: PilotSettings, result: PilotPlan, resumed: bool) -> list[str]:
    strategy = settings.gpu_config()["sharing"]["strategy"]
    if not result.changes:
        return [f"Nothing to do: {node.name} is in the DRA pilot ({strategy} through DeviceClass {settings.class_name}, "
                f"device plugin off, DRA kubelet plugin on, pilot taint set). {NOTHING}"]
    steps = []
    if "cordon" in result.changes:
        steps.append("cordon" if result.cordons and not node.unschedulable else
                     "keep the cordon" if result.cordons else "already cordoned by someone else (stays so)")
    steps.append(f"evict {len(result.evict)} GPU pod(s) ({', '.join(result.evict)})" if result.evict
                 else "no GPU pod to evict")
    steps.append(f"set {DEVICE_PLUGIN_LABEL}=false (was {node.labels.get(DEVICE_PLUGIN_LABEL, 'unset')}), wait for "
                 "the device plugin to leave and allocatable nvidia.com/gpu to reach 0"
                 if "device_plugin" in result.changes else "the device plugin is off already")
    steps.append(f"label {settings.plugin_label}=true, wait for the DRA kubelet plugin Ready"
                 if "kubelet_plugin" in result.changes else "the DRA kubelet plugin's label is there already")
    steps.append(f"wait for a complete pool {node.name} with {result.gpus} device(s), " + (
        f"their UUIDs those DCGM reports ({settings.prometheus_url})" if settings.prometheus_url
        else "UUIDs not compared with DCGM's (no dra_pilot_prometheus_url)"))
    steps.append(("create" if "device_class" in result.changes and result.changes["device_class"][0].action == "create"
                  else "update" if "device_class" in result.changes else "keep") +
                 f" DeviceClass {settings.class_name} with GpuConfig sharing.strategy {strategy}")
    steps.append(f"uncordon with the taint {TAINT['key']}={TAINT['value']}:{TAINT['effect']}"
                 if "uncordon" in result.changes else "the node is uncordoned with the pilot taint already")
    steps.append("verify: 4 pods share one ResourceClaim on the node; a nvidia.com/gpu pod elsewhere runs")
    lines = [f"Plan ({RUNBOOK}): share the {result.gpus} GPU(s) of {node.name} through DRA ({strategy}, driver "
             f"{settings.readiness.device_class})" + (" - finishing an interrupted run" if resumed else "")]
    lines += [f"  {i}. {step}" for i, step in enumerate(steps, 1)]
    lines.append(f"Record: ConfigMap {settings.records_namespace}/{result.record}, written before the first change")
    return lines
