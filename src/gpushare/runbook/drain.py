"""Drain the pods that hold some resources of some nodes (by default their shared replicas; the
MIG runbook passes every GPU resource) through the eviction API (PodDisruptionBudgets honoured),
bounded, and tell apart the three ways it can fail to finish: a budget refusing evictions, a
workload whose replacements come straight back to the node, and pods slow to terminate."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from gpushare.k8s.session import ApiError, Session
from gpushare.model.node import Node
from gpushare.model.pods import UNSCHEDULABLE, Pod
from gpushare.polling import pauses

BUDGET = re.compile(r"disruption budget (\S+)")
REPLACING = ("ReplicaSet", "StatefulSet")  # controllers that re-create an evicted pod up to spec.replicas
SHARED_RESOURCES = ("nvidia.com/gpu.shared", "nvidia.com/gpu")


def shared_resources(node: Node) -> tuple[str, ...]:
    """The resources that are shares on this node (what the drain evicts for by default):
    nvidia.com/gpu.shared, and nvidia.com/gpu when the node time-slices without renaming."""
    return SHARED_RESOURCES if node.shares and node.shared_resource == SHARED_RESOURCES[1] else SHARED_RESOURCES[:1]


@dataclass
class DrainResult:
    evicted: list[dict[str, str]] = field(default_factory=list)  # {pod, workload, controller_uid, namespace}
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"evicted": self.evicted, "problem": self.problem}


@dataclass
class DrainProgress:
    """The drain's decisions, pass by pass, from the listings of the nodes' pods and the outcome of
    each eviction (no API calls: `drain` makes them)."""

    result: DrainResult = field(default_factory=DrainResult)
    seen: set[str] = field(default_factory=set)  # uids of every pod an earlier listing held
    evicted: set[str] = field(default_factory=set)
    controllers: set[str] = field(default_factory=set)  # controller uids of the evicted pods
    replacing: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # uid -> (kind, namespace, name)
    refused: dict[str, str] = field(default_factory=dict)  # pod -> the budget's refusal, this pass

    def to_evict(self, pods: list[Pod]) -> list[Pod]:
        """This pass's evictions; none, with the problem set, when an evicted pod's controller
        re-created it on the node (a pod no earlier listing held: a budget's refused siblings are not)."""
        back = [p for p in pods if p.uid not in self.seen and p.controller.get("uid") in self.controllers]
        self.seen |= {p.uid for p in pods}
        self.refused = {}
        if back:
            self.result.problem = comeback(back)
            return []
        return [p for p in pods if not p.terminating and p.uid not in self.evicted]

    def unsettled(self, pods: list[Pod], nodes: dict[str, Node]) -> list[Pod]:
        """Of `pods` (those of the evicted pods' namespaces), the replacements of an evicted pod that
        keep the drain going (see `replacement_standing`): one back on a drained node was bound after
        this pass listed the node, and the next pass stops on it as a comeback."""
        return [p for p in pods if p.controller.get("uid") in self.controllers and p.uid not in self.evicted
                and replacement_standing(p, nodes)]

    def uncreated(self, pods: list[Pod], replicas: dict[str, int]) -> list[str]:
        """The ReplicaSets and StatefulSets (uid -> spec.replicas, read now) with fewer live pods in
        `pods` than they want: their controller has not re-created the evicted pods yet, and a
        replacement may still land back on the node (under load the evicted pods can be gone first)."""
        live = [p.controller.get("uid") for p in pods if not p.terminating]
        return sorted(uid for uid, want in replicas.items() if live.count(uid) < want)

    def evicted_pod(self, pod: Pod) -> None:
        self.evicted.add(pod.uid)
        owner = pod.controller
        if owner.get("uid"):
            self.controllers.add(owner["uid"])
            if owner["kind"] in REPLACING:
                self.replacing[owner["uid"]] = (owner["kind"], pod.namespace, owner["name"])
        self.result.evicted.append({"pod": pod.ref, "namespace": pod.namespace, "workload": pod.workload,
                                    "controller_uid": pod.controller.get("uid", "")})

    def refused_pod(self, pod: Pod, refusal: str) -> None:
        self.refused[pod.ref] = refusal

    def timed_out(self, pods: list[Pod], timeout_s: float, what: str) -> None:
        if self.refused:
            budgets = sorted({refusal.rstrip(".") for refusal in self.refused.values()})  # the API's text ends with one
            self.result.problem = (f"A PodDisruptionBudget refused the eviction of {', '.join(sorted(self.refused))} "
                                   f"for {timeout_s:.0f} s: {'; '.join(budgets)}. Wait until the budget allows a "
                                   "disruption, move the workload, or relax the budget, then re-run the same command.")
        else:
            self.result.problem = (f"After {timeout_s:.0f} s these pods still hold {what} (terminating): "
                                   f"{', '.join(sorted(p.ref for p in pods))}. Re-run the same command once they "
                                   "are gone.")


def replacement_standing(pod: Pod, nodes: dict[str, Node]) -> str:
    """Why an evicted pod's replacement `pod` has not moved off the drained `nodes` (yet): "back" on one
    of them; "untried" by the scheduler; "admitted", Pending but fit for a drained node once the
    evicted pods are gone (the scheduler's reason may date from before, and it retries); "" when it
    is placed elsewhere, Pending where no drained node admits it, or finished."""
    if pod.terminating or pod.finished:
        return ""
    if pod.node:
        return "back" if pod.node in nodes else ""
    if not pod.pending_reason():
        return "untried"
    return "admitted" if any(admits(node, pod) for node in nodes.values()) else ""


def admits(node: Node, pod: Pod, dropped_label: str = "") -> bool:
    """The scheduler may place `pod` on the cordoned `node`: it tolerates the cordon and the node's
    taints, and its required node selection admits the node's labels (less `dropped_label`, which
    the rollback removes before its drain)."""
    labels = {k: v for k, v in node.labels.items() if k != dropped_label}
    return pod.tolerates_all([UNSCHEDULABLE, *node.taints]) and pod.selects(node.name, labels)


def read_nodes(session: Session, names: list[str]) -> dict[str, Node]:
    """The nodes of `names` that exist."""
    return {name: Node(raw) for name in names if (raw := session.get("Node", name)) is not None}


def _holding_pods(session: Session, nodes: dict[str, Node], resources: tuple[str, ...] | None) -> list[Pod]:
    found = []
    for name, node in nodes.items():
        held = resources or shared_resources(node)
        for pod in session.list("Pod", field_selector=f"spec.nodeName={name}"):
            workload = Pod(pod)
            if not workload.finished and not workload.daemonset and workload.holds(held):
                found.append(workload)
    return found


def _evicted_namespaces_pods(session: Session, result: DrainResult) -> list[Pod]:
    return [Pod(raw) for namespace in sorted({e["namespace"] for e in result.evicted})
            for raw in session.list("Pod", namespace)]


def _replicas(session: Session, progress: DrainProgress) -> dict[str, int]:
    """spec.replicas of the evicted pods' ReplicaSets and StatefulSets that still exist."""
    wanted = {}
    for uid, (kind, namespace, name) in progress.replacing.items():
        raw = session.get(kind, name, namespace)
        if raw is not None and raw["metadata"].get("uid") == uid:
            wanted[uid] = raw.get("spec", {}).get("replicas", 1)
    return wanted


def _awaiting_replacements(session: Session, progress: DrainProgress, nodes: dict[str, Node]) -> bool:
    around = _evicted_namespaces_pods(session, progress.result)
    return bool(progress.unsettled(around, nodes) or progress.uncreated(around, _replicas(session, progress)))


def drain(session: Session, nodes: list[str], timeout_s: float, retry_s: float, grace_period_s: int | None,
          check_mode: bool, resources: tuple[str, ...] | None = None) -> DrainResult:
    """Evict the non-DaemonSet pods of `nodes` that hold any of `resources` (None: the node's shares)."""
    what = "a shared replica" if resources is None else f"one of {', '.join(resources)}"
    progress = DrainProgress()
    deadline, pause = time.monotonic() + timeout_s, pauses(min(retry_s, 1.0))
    while True:
        found = read_nodes(session, nodes)
        pods = _holding_pods(session, found, resources)
        for pod in progress.to_evict(pods):
            try:
                session.evict(pod.name, pod.namespace, dry_run=check_mode, grace_period_seconds=grace_period_s,
                              uid=pod.uid)
            except ApiError as err:
                if err.status == 429:
                    progress.refused_pod(pod, _budget_text(err, pod.namespace))
                    continue
                if err.status in (404, 409):  # gone, or re-created under its name (the next list shows it)
                    continue
                raise
            progress.evicted_pod(pod)
        if progress.result.problem or check_mode:
            return progress.result
        if not pods and not _awaiting_replacements(session, progress, found):
            return progress.result
        if time.monotonic() >= deadline:
            if pods:
                progress.timed_out(pods, timeout_s, what)
            return progress.result  # replacements not yet created or tried: the confirm phase waits for them
        time.sleep(retry_s if progress.refused else next(pause))


def _budget_text(err: ApiError, namespace: str) -> str:
    causes = [c.get("message", "") for c in (err.details or {}).get("causes") or [] if c.get("message")]
    text = "; ".join(causes) or err.message
    match = BUDGET.search(text)
    return f"PodDisruptionBudget {namespace}/{match.group(1)}: {text}" if match else text


def _why_back(pod: Pod) -> str:
    if not pod.tolerates_cordon:  # the scheduler keeps it off the cordoned node: it was created onto it
        return f"its template names the node (spec.nodeName: {pod.node})"
    selection = pod.selection()
    admits = f"its {selection} admits {pod.node}" if selection else "it has no node selector or required node affinity"
    return f"it tolerates the cordon ({pod.cordon_toleration()}) and {admits}"


def comeback(back: list[Pod]) -> str:
    """The problem of a workload whose replacements landed back on the drained node."""
    parts = [f"{pod.workload} re-created {pod.ref} on {pod.node} right after its eviction: {_why_back(pod)}"
             for pod in back]
    return ("; ".join(parts) + ". Evicting again would only repeat this. Scale the workload down, or change its "
            "selector, tolerations or node name so that it cannot land on the node, then re-run the same command.")
