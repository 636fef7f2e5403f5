"""Restarting the config readers (device plugin, GFD) of some nodes only: their pods are deleted
and their DaemonSets re-create them from the current template, reading the ConfigMap as it is
now. Never a DaemonSet-wide `rollout restart`, which would walk the whole fleet."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from gpushare.k8s.session import Session
from gpushare.model.operands import CONFIG_READERS, Operand, OperandPod
from gpushare.polling import pauses


@dataclass
class RestartResult:
    restarted: dict[str, list[str]] = field(default_factory=dict)  # node -> "daemonset/pod" deleted
    # The readers running at the end, each started after the ConfigMap's write at this version: a
    # later run can tell them from stale ones even when they started within the write's second.
    readers: list[str] = field(default_factory=list)  # pod uids
    configmap_version: str = ""
    problems: list[str] = field(default_factory=list)
    # node -> the uids of its config readers in the first listing, made after the ConfigMap was read at
    # `configmap_version`: every node of the restart, a key even when it held none (late_readers)
    listed: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"restarted": self.restarted, "readers": self.readers, "configmap_version": self.configmap_version,
                "problems": self.problems, "listed": self.listed}


def stale_pods(operands: dict[str, Operand], pods: list[OperandPod], nodes: list[str],
               configmap: dict[str, Any] | None, force: bool, started_after: Collection[str] = ()) -> list[OperandPod]:
    """The config-reader pods of `nodes` that must restart: on an old template, started before the
    ConfigMap's last write (`started_after`: pods known to have started after it), or all of them
    when `force`."""
    stale = []
    for pod in pods:
        operand = operands.get(pod.daemonset)
        if operand is None or pod.node not in nodes or pod.terminating:
            continue
        if force or not operand.current(pod) or not pod.sees(configmap, started_after):
            stale.append(pod)
    return stale


def trusted_readers(known_readers: dict[str, Any] | None, configmap: dict[str, Any] | None) -> list[str]:
    """The pods of `known_readers` ({"resourceVersion", "pods"}) while the ConfigMap is still at that
    version; none once it was written again."""
    version = ((configmap or {}).get("metadata") or {}).get("resourceVersion", "")
    known = known_readers or {}
    return list(known.get("pods") or []) if version and known.get("resourceVersion") == version else []


def late_readers(listed: dict[str, list[str]], daemonsets: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[str]:
    """The config readers of a restart's nodes (`listed`: its RestartResult.listed) that its first listing
    did not hold, Ready on their DaemonSet's current template: those a node label brought after the
    restart (the MPS control daemon, once GFD labels the node nvidia.com/mps.capable). Each read the
    ConfigMap at the restart's `configmap_version`, trusted only while it is still the ConfigMap's: the
    listing followed the read of that version, and a pod it did not hold was created or bound to its
    node after it, so its kubelet mounted the ConfigMap after that write. `daemonsets`, `pods`: read
    once the verify succeeded."""
    operands = {d["metadata"]["name"]: Operand(d) for d in daemonsets if d["metadata"]["name"] in CONFIG_READERS}
    return sorted(pod.uid for pod in map(OperandPod, pods)
                  if pod.node in listed and pod.uid not in listed[pod.node] and pod.ready
                  and pod.daemonset in operands and operands[pod.daemonset].current(pod))


def _readers(session: Session, namespace: str, daemonsets: Collection[str] = ()) -> dict[str, Operand]:
    return {d["metadata"]["name"]: Operand(d) for d in session.list("DaemonSet", namespace)
            if d["metadata"]["name"] in (daemonsets or CONFIG_READERS)}


def restart_readers(session: Session, namespace: str, nodes: list[str], configmap_name: str, force: bool,
                    check_mode: bool, timeout_s: float, interval_s: float = 1.0,
                    known_readers: dict[str, Any] | None = None, daemonsets: Collection[str] = ()) -> RestartResult:
    """Delete the stale readers of `nodes`, then wait until every reader their DaemonSets run there
    (those deleted, and those a roll of the operator's is replacing) runs the current template, Ready.
    Each of them then reads the ConfigMap as it is: it was not stale, or the listing made after the
    ConfigMap's write did not hold it yet, so it was created after that write. `known_readers`
    ({"resourceVersion", "pods"}, a complete run's): pods that read the ConfigMap at that version,
    trusted while it is still the ConfigMap's. `daemonsets`: only these readers (all when empty)."""
    operands = _readers(session, namespace, daemonsets)
    configmap = session.get("ConfigMap", configmap_name, namespace) if configmap_name else None
    listed = [OperandPod(p) for p in session.pods_on(nodes, namespace)]  # after the ConfigMap's read (late_readers)
    result = RestartResult(configmap_version=((configmap or {}).get("metadata") or {}).get("resourceVersion", ""),
                           listed={node: sorted(p.uid for p in listed if p.node == node and p.daemonset in CONFIG_READERS)
                                   for node in nodes})
    stale = stale_pods(operands, listed, nodes, configmap, force, trusted_readers(known_readers, configmap))
    for pod in stale:
        session.delete("Pod", pod.name, namespace, preconditions={"uid": pod.uid}, dry_run=check_mode)
        result.restarted.setdefault(pod.node, []).append(f"{pod.daemonset}/{pod.name}")
    if check_mode:
        return result
    gone = {p.uid for p in stale}
    wanted = {(p.node, p.daemonset) for p in stale} | {
        (name, daemonset) for name in nodes if (node := session.get("Node", name)) is not None
        for daemonset, operand in operands.items() if operand.selects(node["metadata"].get("labels") or {})}
    deadline, pause = time.monotonic() + timeout_s, pauses(interval_s)
    while True:
        pods = [OperandPod(p) for p in session.pods_on(nodes, namespace) if p["metadata"]["uid"] not in gone]
        problems, running = [], []
        for node, daemonset in sorted(wanted):
            mine = [p for p in pods if p.node == node and p.daemonset == daemonset and not p.terminating]
            good = [p for p in mine if p.ready and daemonset in operands and operands[daemonset].current(p)]
            running += good
            if not good:
                problems.append(f"{node}: {daemonset} " + (f"pod {mine[0].name}: {mine[0].problem()}" if mine
                                                           else "has not re-created its pod yet"))
        if not problems or time.monotonic() >= deadline:
            result.problems = problems
            result.readers = sorted(p.uid for p in running)
            return result
        time.sleep(next(pause))
        operands = _readers(session, namespace, daemonsets)
