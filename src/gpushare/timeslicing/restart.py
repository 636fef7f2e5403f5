"""Restarting the config readers (device plugin, GFD) of some nodes only: their pods are deleted
and their DaemonSets re-create them from the current template, reading the ConfigMap as it is
now. Never a DaemonSet-wide `rollout restart`, which would walk the whole fleet."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from gpushare.k8s.session import Session
from gpushare.model.operands import CONFIG_READERS, Operand, OperandPod, last_write
from gpushare.polling import pauses


@dataclass
class RestartResult:
    restarted: dict[str, list[str]] = field(default_factory=dict)  # node -> "daemonset/pod" deleted
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"restarted": self.restarted, "problems": self.problems}


def stale_pods(operands: dict[str, Operand], pods: list[OperandPod], nodes: list[str],
               configmap: dict[str, Any] | None, force: bool) -> list[OperandPod]:
    """The config-reader pods of `nodes` that must restart: on an old template, started before the
    ConfigMap's last write, or all of them when `force`."""
    stale = []
    for pod in pods:
        operand = operands.get(pod.daemonset)
        if operand is None or pod.node not in nodes or pod.terminating:
            continue
        if force or not operand.current(pod) or not pod.sees(configmap):
            stale.append(pod)
    return stale


def _past_last_write(configmap: dict[str, Any] | None) -> None:
    """Wait (a second at most) until the clock is past the second of the ConfigMap's last write:
    timestamps are whole seconds, so a pod created within that second could not be told from one
    that read the content before the write, and a re-run would restart it again."""
    written = last_write(configmap) if configmap else None
    if written is not None:
        wait = (written + dt.timedelta(seconds=1) - dt.datetime.now(dt.timezone.utc)).total_seconds()
        time.sleep(min(max(wait, 0.0), 1.0))


def restart_readers(session: Session, namespace: str, nodes: list[str], configmap_name: str, force: bool,
                    check_mode: bool, timeout_s: float, interval_s: float = 1.0) -> RestartResult:
    """Delete the stale readers of `nodes`, then wait until every reader their DaemonSets run there
    (those deleted, and those a roll of the operator's is replacing) runs the current template, Ready,
    started after the ConfigMap's last write."""
    operands = {d["metadata"]["name"]: Operand(d) for d in session.list("DaemonSet", namespace)
                if d["metadata"]["name"] in CONFIG_READERS}
    pods = [OperandPod(p) for p in session.pods_on(nodes, namespace)]
    configmap = session.get("ConfigMap", configmap_name, namespace) if configmap_name else None
    result = RestartResult()
    stale = stale_pods(operands, pods, nodes, configmap, force)
    if stale and not check_mode:
        _past_last_write(configmap)
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
        late = [p for p in pods if (p.node, p.daemonset) in wanted and not p.terminating and not p.sees(configmap)]
        if late:  # re-created within the second of the ConfigMap's last write: it cannot be told from a stale one
            _past_last_write(configmap)
        for pod in late:
            session.delete("Pod", pod.name, namespace, preconditions={"uid": pod.uid})
            result.restarted.setdefault(pod.node, []).append(f"{pod.daemonset}/{pod.name}")
            gone.add(pod.uid)
        pods = [p for p in pods if p.uid not in gone]
        problems = []
        for node, daemonset in sorted(wanted):
            mine = [p for p in pods if p.node == node and p.daemonset == daemonset and not p.terminating]
            if not any(p.ready and daemonset in operands and operands[daemonset].current(p) for p in mine):
                problems.append(f"{node}: {daemonset} " + (f"pod {mine[0].name}: {mine[0].problem()}" if mine
                                                           else "has not re-created its pod yet"))
        if not problems or time.monotonic() >= deadline:
            result.problems = problems
            return result
        time.sleep(next(pause))
        operands = {d["metadata"]["name"]: Operand(d) for d in session.list("DaemonSet", namespace)
                    if d["metadata"]["name"] in CONFIG_READERS}
