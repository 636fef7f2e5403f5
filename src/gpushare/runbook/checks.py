"""The checks every runbook's verify shares: the GPU nodes read by name or as the fleet, the
bystanders (the GPU nodes a run does not target) compared with the plan's read, uncordoned nodes
taking pods again, the config readers of some nodes Ready on the current template, and the GPU
Operator's re-render and roll of them (with the driver upgrade a change may start)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpushare import driver_upgrade as du
from gpushare.clock import utc_now
from gpushare.k8s.session import Session
from gpushare.k8s.watch import changed_since
from gpushare.model.node import Node, Pool, fingerprint_changes, unpacked
from gpushare.model.operands import CONFIG_READERS, DEVICE_PLUGIN, DRIVER, Operand, OperandPod
from gpushare.model.pods import UNSCHEDULABLE
from gpushare.polling import DeadEnd

GPU_PRESENT = "nvidia.com/gpu.present=true"
# Up to this many nodes a field-selected list each is cheaper than one list of the whole fleet.
NAMED_READS_MAX = 16
STARTING_S = 120  # a config reader not Ready for longer is a broken node, which the operator's roll does not wait for


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


def bystanders_unchanged(session: Session, expected: dict[str, Any], pool: Pool, nodes: dict[str, Node]) -> list[str]:
    """The bystanders of `expected` (a plan's) as they were, else their problems. `nodes`: the
    targets as just read (with many targets, every GPU node)."""
    bystanders = unpacked(expected["bystanders"])
    if not bystanders:
        return []
    now = ({name: nodes.get(name) for name in bystanders} if len(expected["targets"]) > NAMED_READS_MAX
           else bystanders_now(session, expected, nodes, bystanders))
    return bystander_problems(now, bystanders, pool, expected["compare_allocatable"], expected["compare_schedulable"])


def reader_problems(session: Session, namespace: str, nodes: list[str], required: tuple[str, ...] = (DEVICE_PLUGIN,)) -> list[str]:
    """Config-reader pods of `nodes` that are not Ready on the current template; those of `required`
    also when missing (the MPS control daemon on an MPS node: the device plugin waits for it)."""
    operands = {d["metadata"]["name"]: Operand(d) for d in session.list("DaemonSet", namespace)
                if d["metadata"]["name"] in CONFIG_READERS}
    pods = [OperandPod(p) for p in session.pods_on(nodes, namespace)]
    problems = []
    for node in nodes:
        for name, operand in sorted(operands.items()):
            mine = [p for p in pods if p.node == node and p.daemonset == name and not p.terminating]
            if not mine:
                if name in required:
                    problems.append(f"{node}: no {name} pod")
                continue
            good = [p for p in mine if p.ready and operand.current(p)]
            if not good:
                pod = mine[0]
                state = pod.problem() if not pod.ready else "runs an old template (the operator's roll has not reached it)"
                problems.append(f"{node}: {name} pod {pod.name}: {state}")
    return problems


def driver_upgrade_dead_ends(session: Session, clusterpolicy: str) -> None:
    """In a run whose change starts a driver upgrade: a GPU node the upgrade left upgrade-failed stays
    so (cordoned, and it holds the upgrade of the others) until someone acts: DeadEnd, with why and
    the way on (gpushare.driver_upgrade.failure)."""
    failed = session.list("Node", label_selector=f"{du.STATE_LABEL}={du.FAILED}")
    if not failed:
        return
    policy = du.Policy.of((session.get("ClusterPolicy", clusterpolicy) or {}).get("spec") or {})
    pods = session.pods_on([n["metadata"]["name"] for n in failed])
    raise DeadEnd([du.failure(n["metadata"]["name"], [p for p in pods if p["spec"].get("nodeName") == n["metadata"]["name"]],
                              policy) for n in sorted(failed, key=lambda n: n["metadata"]["name"])])


def operator_rendered(session: Session, namespace: str, configmap: str, mounted: bool) -> list[str]:
    """The operator has re-rendered every config reader so that it mounts (or no longer mounts) `configmap`."""
    problems = []
    for raw in session.list("DaemonSet", namespace):
        operand = Operand(raw)
        if operand.name not in CONFIG_READERS:
            continue
        if operand.mounts(configmap) != mounted:
            problems.append(f"DaemonSet {operand.name} {'does not mount' if mounted else 'still mounts'} ConfigMap "
                            f"{configmap} yet (the operator re-renders it after a ClusterPolicy change)")
    return problems


def operator_rolled_out(session: Session, namespace: str, driver_upgrade: str = "") -> list[str]:
    """The operator's roll of the config readers is over: every node on the current template and
    no pod of it still starting. A pod not Ready for longer than STARTING_S is a broken node, which
    the roll does not wait for. `driver_upgrade`: the ClusterPolicy, when the run's change started a
    driver upgrade: it is over too (every driver pod on the current template, no node mid-upgrade),
    and a node it leaves upgrade-failed ends the wait."""
    problems, unavailable = [], []
    if driver_upgrade:
        driver_upgrade_dead_ends(session, driver_upgrade)
        problems += [f"{n['metadata']['name']}: its driver upgrade is at {n['metadata']['labels'][du.STATE_LABEL]}"
                     for n in session.list("Node", label_selector=du.STATE_LABEL)
                     if n["metadata"]["labels"][du.STATE_LABEL] != "upgrade-done"]
    for raw in session.list("DaemonSet", namespace):
        operand = Operand(raw)
        if driver_upgrade and operand.name == DRIVER and operand.rolling:
            updated, desired = operand.rollout()
            problems.append(f"DaemonSet {DRIVER}: {updated} of {desired} GPU nodes run the new driver pod (the "
                            "upgrade controller takes them maxParallelUpgrades at a time)")
        if operand.name not in CONFIG_READERS:
            continue
        updated, desired = operand.rollout()
        if operand.rolling:
            problems.append(f"DaemonSet {operand.name}: {updated} of {desired} GPU nodes on the current template")
        elif int((raw.get("status") or {}).get("numberUnavailable") or 0):
            unavailable.append(operand)
    if unavailable:
        now = utc_now()
        pods = [OperandPod(p) for p in session.list("Pod", namespace)]
        for operand in unavailable:
            starting = sorted(p.node for p in pods if p.daemonset == operand.name and operand.current(p) and not p.ready
                              and not p.terminating and p.created and (now - p.created).total_seconds() < STARTING_S)
            if starting:
                problems.append(f"DaemonSet {operand.name}: its pods on {', '.join(starting)} are still starting")
    return problems


CHECKS = {"uncordoned": uncordoned, "operator_rendered": operator_rendered, "operator_rolled_out": operator_rolled_out}
