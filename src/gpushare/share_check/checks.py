"""What the share check waits for, as problem lists (empty: done) that `gpushare_wait` polls: the
check's objects gone, each pod asking for 2 decided by the kubelet, every pod of each Deployment
running on its node, and the scheduler's verdict on each pod beyond the free replicas."""

from __future__ import annotations

from gpushare.k8s.session import Session
from gpushare.model.pods import Pod
from gpushare.share_check.report import describe, role_of


def _pods(session: Session, namespace: str, selector: str) -> list[Pod]:
    return [Pod(p) for p in session.list("Pod", namespace, selector)]


def share_check_cleared(session: Session, namespace: str, selector: str, namespace_gone: bool) -> list[str]:
    """The namespace is gone (`namespace_gone`), or no object of `selector` is left in it."""
    if namespace_gone:
        found = session.get("Namespace", namespace)
        return [f"namespace {namespace} still exists ({(found.get('status') or {}).get('phase', '')})"] if found else []
    left = [f"{kind} {o['metadata']['name']}" for kind in ("Deployment", "ReplicaSet", "Pod")
            for o in session.list(kind, namespace, selector)]
    return [f"{namespace}: {', '.join(left)} still there"] if left else []


def share_check_refused(session: Session, namespace: str, selector: str, pods: list[str]) -> list[str]:
    """Each pod asking for 2 has left Pending (the kubelet admitted or refused it)."""
    found = {p.name: p for p in _pods(session, namespace, selector)}
    return [f"{name} does not exist" if name not in found else f"{describe(found[name])}, not yet admitted or refused"
            for name in pods if name not in found or found[name].phase == "Pending"]


def share_check_running(session: Session, namespace: str, selector: str, replicas: dict[str, int]) -> list[str]:
    """`replicas`: node -> pods of its Deployment, each of which runs on that node."""
    pods = [p for p in _pods(session, namespace, selector) if not p.terminating]
    problems = []
    for node, wanted in sorted(replicas.items()):
        mine = [p for p in pods if role_of(p) == ("replica", node)]
        running = [p for p in mine if p.phase == "Running" and p.node == node]
        if len(running) != int(wanted):
            others = "; ".join(describe(p) for p in sorted(mine, key=lambda p: p.name) if p not in running)
            problems.append(f"{node}: {len(running)} of {wanted} pods run on it" + (f": {others}" if others else ""))
    return problems


def share_check_scheduled(session: Session, namespace: str, selector: str, pods: list[str]) -> list[str]:
    """The scheduler has placed each of these pods, or said why it cannot."""
    found = {p.name: p for p in _pods(session, namespace, selector)}
    return [f"{name} does not exist" if name not in found else f"{name} not yet tried by the scheduler"
            for name in pods if name not in found or not (found[name].node or found[name].unschedulable)]


CHECKS = {
    "share_check_cleared": share_check_cleared,
    "share_check_refused": share_check_refused,
    "share_check_running": share_check_running,
    "share_check_scheduled": share_check_scheduled,
}
