"""The checks every runbook's verify shares: the GPU nodes read by name or as the fleet, the
bystanders (the GPU nodes a run does not target) compared with the plan's read, and uncordoned
nodes taking pods again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpushare.k8s.session import Session
from gpushare.k8s.watch import changed_since
from gpushare.model.node import Node, Pool, fingerprint_changes
from gpushare.model.pods import UNSCHEDULABLE

GPU_PRESENT = "nvidia.com/gpu.present=true"
# Up to this many nodes a field-selected list each is cheaper than one list of the whole fleet.
NAMED_READS_MAX = 16


def gpu_nodes(session: Session, names: Iterable[str] | None = None) -> dict[str, Node]:
    """The GPU nodes: all of them, or those of `names` (a superset when there are many)."""
    wanted = sorted(set(names)) if names is not None else None
    if wanted is None or len(wanted) > NAMED_READS_MAX:
        raws = session.list("Node", label_selector=GPU_PRESENT)
    else:
        raws = [n for name in wanted for n in session.list("Node", label_selector=GPU_PRESENT,
                                                             field_selector=f"metadata.name={name}")]
    return {n["metadata"]["name"]: Node(n) for n in raws}


def bystander_problems(nodes: dict[str, Node | None], bystanders: dict[str, Any], pool: Pool | None,
                       compare_allocatable: bool, compare_schedulable: bool = True) -> list[str]:
    """The bystanders (name -> fingerprint before the run) among `nodes` (name -> the node now, None
    when it is no GPU node any more) that sharing changed; a bystander `nodes` leaves out is unchanged."""
    problems = []
    for name, node in sorted(nodes.items()):
        before = bystanders.get(name)
        if before is None:  # a target, or a node that joined since
            continue
        if node is None:
            problems.append(f"{name} (not targeted): not a GPU node any more")
            continue
        changes = fingerprint_changes(before, node.fingerprint(pool), allocatable=compare_allocatable,
                                      schedulable=compare_schedulable)
        if changes:
            problems.append(f"{name} (not targeted): {'; '.join(changes)}")
    return problems


def bystanders_now(session: Session, expected: dict[str, Any], targets: dict[str, Node],
                   bystanders: dict[str, Any]) -> dict[str, Node | None]:
    """The bystanders that may have changed since the plan's read (`expected["since"]`), as they are
    now: those a watch from that read shows changed, up to the `targets` as just read (each written
    since), when the API server can say; else every bystander, read again."""
    before = expected.get("versions") or {}
    seen_at = {name: node.resource_version for name, node in targets.items()
               if before.get(name) not in (None, node.resource_version)}
    changed = changed_since(session, "Node", str(expected.get("since") or ""), GPU_PRESENT, seen_at)
    if changed is not None:
        return {name: Node(raw) if raw else None for name, raw in changed.items()}
    fleet = gpu_nodes(session)
    return {name: fleet.get(name) for name in bystanders}


def uncordoned(session: Session, nodes: list[str]) -> list[str]:
    """The uncordoned `nodes` take pods again: the node lifecycle controller has removed the taint
    node.kubernetes.io/unschedulable it keeps on a cordoned node, which the scheduler honours like any
    other. A node cordoned again since, or deleted, is not this run's to wait for."""
    problems = []
    for name in sorted(set(nodes)):
        raw = session.get("Node", name)
        node = Node(raw) if raw else None
        if node and not node.unschedulable and UNSCHEDULABLE in node.taints:
            problems.append(f"{name}: uncordoned, but still tainted {UNSCHEDULABLE} (the node lifecycle controller "
                            "of kube-controller-manager removes it; until then no pod is scheduled there)")
    return problems


CHECKS = {"uncordoned": uncordoned}
