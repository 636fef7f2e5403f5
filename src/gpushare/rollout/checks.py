"""What the rollout waits for, as problem lists (empty means done), polled by `gpushare_wait`."""

from __future__ import annotations

from gpushare.clock import parse_time, utc_now
from gpushare.k8s.session import Session
from gpushare.model.node import Node


def rollout_soaked(session: Session, until: str, nodes: list[str], replicas: int) -> list[str]:
    """The soak (or the hold interval) is over, and the step's nodes still share their GPUs with the
    step's replicas (read once, when the time is up)."""
    moment = parse_time(until)
    left = (moment - utc_now()).total_seconds() if moment else 0
    if left > 0:
        return [f"soaking until {until} ({left:.0f} s left)"]
    current = {n["metadata"]["name"]: Node(n) for n in session.list("Node", label_selector="nvidia.com/gpu.present=true")}
    problems = []
    for name in nodes:
        node = current.get(name)
        if node is None:
            problems.append(f"{name}: not a GPU node any more")
        elif not node.shares or node.replicas != int(replicas):
            problems.append(f"{name}: advertises {node.replicas} replica(s) per GPU, not {replicas}: something changed "
                            "it during the soak")
    return problems


CHECKS = {"rollout_soaked": rollout_soaked}
