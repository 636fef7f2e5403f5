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
from gpushare.model.pods import Pod
from gpushare.timeslicing.rollback import _workload, shared_resources

BUDGET = re.compile(r"disruption budget (\S+)")


@dataclass
class DrainResult:
    evicted: list[dict[str, str]] = field(default_factory=list)  # {pod, workload, controller_uid, namespace}
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"evicted": self.evicted, "problem": self.problem}


def _holding_pods(session: Session, nodes: list[str], resources: tuple[str, ...] | None) -> list[Pod]:
    found = []
    for name in nodes:
        raw = session.get("Node", name)
        if raw is None:
            continue
        held = resources or shared_resources(Node(raw))
        for pod in session.list("Pod", field_selector=f"spec.nodeName={name}"):
            workload = Pod(pod)
            if not workload.finished and not workload.daemonset and workload.holds(held):
                found.append(workload)
    return found


def drain(session: Session, nodes: list[str], timeout_s: float, retry_s: float, grace_period_s: int | None,
          check_mode: bool, resources: tuple[str, ...] | None = None) -> DrainResult:
    """Evict the non-DaemonSet pods of `nodes` that hold any of `resources` (None: the node's shares)."""
    what = "a shared replica" if resources is None else f"one of {', '.join(resources)}"
    result = DrainResult()
    evicted_uids: set[str] = set()
    controllers: dict[str, str] = {}  # controller uid -> workload
    refused: dict[str, str] = {}  # pod -> the budget's refusal
    deadline = time.monotonic() + timeout_s
    while True:
        pods = _holding_pods(session, nodes, resources)
        back = [p for p in pods if p.uid not in evicted_uids and p.controller.get("uid") in controllers]
        if back:
            result.problem = _comeback(back)
            return result
        refused = {}
        for pod in pods:
            if pod.terminating or pod.uid in evicted_uids:
                continue
            try:
                session.evict(pod.name, pod.namespace, dry_run=check_mode, grace_period_seconds=grace_period_s)
            except ApiError as err:
                if err.status == 429:
                    refused[pod.ref] = _budget_text(err, pod.namespace)
                    continue
                if err.status == 404:
                    continue
                raise
            evicted_uids.add(pod.uid)
            if pod.controller.get("uid"):
                controllers[pod.controller["uid"]] = _workload(pod)
            result.evicted.append({"pod": pod.ref, "namespace": pod.namespace, "workload": _workload(pod),
                                   "controller_uid": pod.controller.get("uid", "")})
        if check_mode or not pods:
            return result
        if time.monotonic() >= deadline:
            left = sorted(p.ref for p in pods)
            if refused:
                budgets = sorted(set(refused.values()))
                result.problem = (f"A PodDisruptionBudget refused the eviction of {', '.join(sorted(refused))} for "
                                  f"{timeout_s:.0f} s: {'; '.join(budgets)}. Wait until the budget allows a disruption, "
                                  "move the workload, or relax the budget, then re-run the same command.")
            else:
                result.problem = (f"After {timeout_s:.0f} s these pods still hold {what} (terminating): "
                                  f"{', '.join(left)}. Re-run the same command once they are gone.")
            return result
        time.sleep(retry_s if refused else min(retry_s, 1.0))


def _budget_text(err: ApiError, namespace: str) -> str:
    causes = [c.get("message", "") for c in (err.details or {}).get("causes") or [] if c.get("message")]
    text = "; ".join(causes) or err.message
    match = BUDGET.search(text)
    return f"PodDisruptionBudget {namespace}/{match.group(1)}: {text}" if match else text


def _comeback(back: list[Pod]) -> str:
    parts = []
    for pod in back:
        parts.append(f"{_workload(pod)} re-created {pod.ref} on {pod.node} right after its eviction: it tolerates the "
                     f"cordon ({pod.cordon_toleration()}) and its {pod.selection()} admits {pod.node}")
    return ("; ".join(parts) + ". Evicting again would only repeat this. Scale the workload down, or change its "
            "selector or tolerations so that it cannot land on the node, then re-run the same command.")
