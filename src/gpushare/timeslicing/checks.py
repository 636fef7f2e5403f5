"""What the time-slicing runbooks wait for, as problem lists: empty means done. Each check reads
the cluster through a Session; `gpushare_wait` polls one until it is empty or time runs out."""

from __future__ import annotations

from typing import Any

from gpushare import driver_upgrade as du
from gpushare.clock import utc_now
from gpushare.k8s.session import Session
from gpushare.model.node import CONFIG_LABEL, GPU, SHARED, Node, Pool, unpacked
from gpushare.model.operands import CONFIG_READERS, DEVICE_PLUGIN, DRIVER, MPS, Operand, OperandPod
from gpushare.model.pods import Pod
from gpushare.polling import DeadEnd
from gpushare.runbook.checks import NAMED_READS_MAX, bystander_problems, bystanders_now, gpu_nodes

STARTING_S = 120


def _reader_problems(session: Session, namespace: str, nodes: list[str], required: tuple[str, ...] = (DEVICE_PLUGIN,)) -> list[str]:
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


def timeslicing_enabled(session: Session, namespace: str, expected: dict[str, Any]) -> list[str]:
    """The targets share as planned, their config readers are Ready on the current template, and,
    once they are (the fleet is read only then), every other GPU node is as it was. In a run that
    starts a driver upgrade, a node it leaves upgrade-failed ends the wait."""
    if expected.get("driver_upgrade"):
        driver_upgrade_dead_ends(session, expected["driver_upgrade"])
    nodes = gpu_nodes(session, expected["targets"])
    pool = Pool.of(expected["pool"])
    replicas = int(expected["replicas"])
    problems = []
    for name, want in sorted(expected["targets"].items()):
        node = nodes.get(name)
        if node is None:
            problems.append(f"{name}: not a GPU node any more")
            continue
        gpus = int(want["gpus"])
        shares = gpus * replicas
        checks = [("label nvidia.com/gpu.count", node.labels.get("nvidia.com/gpu.count"), str(gpus)),
                  ("label nvidia.com/gpu.replicas", node.labels.get("nvidia.com/gpu.replicas"), str(replicas)),
                  ("label nvidia.com/gpu.sharing-strategy", node.strategy, expected.get("strategy", "time-slicing"))]
        if expected.get("strategy") == "mps":
            checks.append(("label nvidia.com/mps.capable", node.labels.get("nvidia.com/mps.capable"), "true"))
        if expected["rename"]:
            checks += [(f"allocatable {SHARED}", node.allocatable(SHARED), shares), (f"allocatable {GPU}", node.allocatable(GPU), 0)]
        else:
            checks.append((f"allocatable {GPU}", node.allocatable(GPU), shares))
        if expected["scope"] == "node":
            checks.append((f"label {CONFIG_LABEL}", node.config_label, expected["key"]))
        if want["pool"]:
            checks.append((f"label {pool.label_key}", node.labels.get(pool.label_key), pool.label_value))
            if pool.taint:
                checks.append((f"taint {pool.taint.key}:NoSchedule", "present" if node.pool_taint(pool) else "missing",
                               "present"))
        problems += [f"{name}: {what} is {got!r}, expected {wanted!r}" for what, got, wanted in checks if got != wanted]
    required = (DEVICE_PLUGIN, MPS) if expected.get("strategy") == "mps" else (DEVICE_PLUGIN,)
    problems += _reader_problems(session, namespace, sorted(expected["targets"]), required)
    return problems or _bystanders_unchanged(session, expected, pool, nodes)


def _bystanders_unchanged(session: Session, expected: dict[str, Any], pool: Pool, nodes: dict[str, Node]) -> list[str]:
    """`nodes`: the targets as just read (with many targets, every GPU node)."""
    bystanders = unpacked(expected["bystanders"])
    if not bystanders:
        return []
    now = ({name: nodes.get(name) for name in bystanders} if len(expected["targets"]) > NAMED_READS_MAX
           else bystanders_now(session, expected, nodes, bystanders))
    return bystander_problems(now, bystanders, pool, expected["compare_allocatable"], expected["compare_schedulable"])


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


CHECKS = {
    "timeslicing_enabled": timeslicing_enabled,
    "operator_rendered": operator_rendered,
    "operator_rolled_out": operator_rolled_out,
}


def whole_cards(session: Session, nodes: dict[str, Any], found: dict[str, Node] | None = None) -> list[str]:
    """`nodes`: name -> {gpus}: each advertises its physical GPUs as whole cards, nothing shared
    (`found`: those nodes as just read)."""
    found = found if found is not None else gpu_nodes(session, nodes)
    problems = []
    for name, want in sorted(nodes.items()):
        node = found.get(name)
        if node is None:
            problems.append(f"{name}: not a GPU node any more")
            continue
        checks = [(f"allocatable {GPU}", node.allocatable(GPU), int(want["gpus"])),
                  (f"allocatable {SHARED}", node.allocatable(SHARED), 0),
                  ("label nvidia.com/gpu.replicas", node.replicas, 1),
                  ("label nvidia.com/gpu.sharing-strategy", node.strategy, "none")]
        problems += [f"{name}: {what} is {got!r}, expected {wanted!r}" for what, got, wanted in checks if got != wanted]
    return problems


def timeslicing_disabled(session: Session, namespace: str, expected: dict[str, Any], clusterpolicy: str) -> list[str]:
    """The targets are whole again, their readers Ready on the current template, the ClusterPolicy
    restored; once the targets are (the fleet is read only then), every other GPU node is as it was.
    In a run that starts a driver upgrade, a node it leaves upgrade-failed ends the wait."""
    from gpushare.k8s.patch import resolve  # noqa: PLC0415

    if expected.get("driver_upgrade"):
        driver_upgrade_dead_ends(session, clusterpolicy)

    nodes = gpu_nodes(session, expected["targets"])
    pool = Pool.of(expected["pool"])
    keys = set(expected["keys"])
    problems = whole_cards(session, expected["targets"], nodes)
    for name in sorted(expected["targets"]):
        node = nodes.get(name)
        if node is None:
            continue
        if node.config_label in keys:
            problems.append(f"{name}: still labelled {CONFIG_LABEL}={node.config_label}")
        if node.in_pool(pool):
            problems.append(f"{name}: still labelled {pool.label_key}={pool.label_value}")
        if pool.taint and node.pool_taint(pool) == pool.taint and (node.mark is None or node.mark.taint_added):
            problems.append(f"{name}: still tainted {pool.taint}")
    problems += _reader_problems(session, namespace, sorted(expected["targets"]))
    if expected.get("clusterpolicy"):
        policy = session.get("ClusterPolicy", clusterpolicy) or {}
        for path, value in sorted(expected["clusterpolicy"].items()):
            if resolve(policy, path, None) != value:
                problems.append(f"ClusterPolicy {path.removeprefix('/spec/')} is {resolve(policy, path, None)!r}, "
                                f"expected {value!r}")
    return problems or _bystanders_unchanged(session, expected, pool, nodes)


def scheduler_tried(session: Session, evicted: list[dict[str, str]]) -> list[str]:
    """Every evicted workload's pods are placed, or the scheduler has said why it cannot place them."""
    problems = []
    for namespace in sorted({e["namespace"] for e in evicted}):
        owners = {e["controller_uid"]: e["workload"] for e in evicted if e["namespace"] == namespace and e["controller_uid"]}
        for raw in session.list("Pod", namespace):
            pod = Pod(raw)
            if pod.controller.get("uid") in owners and not pod.node and not pod.pending_reason() and not pod.terminating:
                problems.append(f"{owners[pod.controller['uid']]}: pod {pod.ref} not yet tried by the scheduler")
    return problems


def whereabouts(pods: list[dict[str, Any]], evicted: list[dict[str, str]]) -> list[str]:
    """Where each evicted workload's pods are now, one line per workload."""
    lines = []
    for uid, workload in sorted({(e["controller_uid"], e["workload"]) for e in evicted}, key=lambda x: x[1]):
        mine = [Pod(p) for p in pods if Pod(p).controller.get("uid") == uid and not Pod(p).terminating]
        places = sorted(f"{p.name} on {p.node} ({p.phase})" if p.node else f"{p.name} Pending: {p.pending_reason() or 'not yet tried by the scheduler'}"
                        for p in mine)
        lines.append(f"{workload}: " + ("; ".join(places) if places else "no pod (scaled down or deleted)"))
    unowned = sorted(e["pod"] for e in evicted if not e["controller_uid"])
    if unowned:
        lines.append(f"Pods without a controller, deleted for good: {', '.join(unowned)}")
    return lines


CHECKS.update({"whole_cards": whole_cards, "timeslicing_disabled": timeslicing_disabled,
               "scheduler_tried": scheduler_tried})
