"""What the enable runbook waits for, as problem lists: empty means done. Each check reads the
cluster through a Session; `gpushare_wait` polls one until it is empty or time runs out."""

from __future__ import annotations

import datetime as dt
from typing import Any

from gpushare import mps
from gpushare.k8s.session import Session
from gpushare.model.node import CONFIG_LABEL, GPU, SHARED, Node, Pool
from gpushare.model.operands import DEVICE_PLUGIN, MPS, Operand, OperandPod
from gpushare.polling import DeadEnd
from gpushare.runbook.checks import bystanders_unchanged, driver_upgrade_dead_ends, gpu_nodes, reader_problems

# How long a device plugin may be Ready on its current template while its node advertises no GPU at
# all before it is taken for NVIDIA/k8s-device-plugin#1645 (open): a plugin start on a labelled node
# that registers 0 devices until the pod restarts. Registration follows readiness within seconds.
ZERO_DEVICES_GRACE_S = 20
BUG_1645 = "NVIDIA/k8s-device-plugin#1645"


def timeslicing_enabled(session: Session, namespace: str, expected: dict[str, Any],
                        restarted: list[str] | None = None) -> list[str]:
    """The targets share as planned, their config readers are Ready on the current template, and,
    once they are (the fleet is read only then), every other GPU node is as it was. In a run that
    starts a driver upgrade, a node it leaves upgrade-failed ends the wait; so does a target whose
    device plugin advertises no GPU while Ready (k8s-device-plugin#1645; `restarted`: the targets
    whose plugin this run restarted for it already)."""
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
    per_node_mps = expected.get("strategy") == "mps" and expected["scope"] == "node"  # cluster scope needs no signal
    if per_node_mps and problems:
        _never_served(session, namespace, nodes, expected)
    required = (DEVICE_PLUGIN, MPS) if expected.get("strategy") == "mps" else (DEVICE_PLUGIN,)
    problems += reader_problems(session, namespace, sorted(expected["targets"]), required)
    if problems:
        zero = zero_device_plugins(session, namespace, {n: nodes[n] for n in expected["targets"] if n in nodes},
                                   dt.datetime.now(dt.timezone.utc), per_node_mps)
        if zero:
            raise DeadEnd([_zero_problem(name, pod, set(restarted or ())) for name, pod in zero.items()])
    return problems or bystanders_unchanged(session, expected, pool, nodes)


def _never_served(session: Session, namespace: str, nodes: dict[str, Node], expected: dict[str, Any]) -> None:
    """An MPS target whose daemon will never serve ends the wait at once (gpushare.mps.never_serves)."""
    pods = session.pods_on(sorted(expected["targets"]), namespace)
    resource = SHARED if expected["rename"] else GPU
    dead = [problem for name, node in sorted(nodes.items()) if name in expected["targets"]
            for problem in [mps.never_serves(name, None, resource,
                                             node.allocatable(resource), pods)] if problem]
    if dead:
        raise DeadEnd(dead)


def zero_device_plugins(session: Session, namespace: str, nodes: dict[str, Node], now: dt.datetime,
                        per_node_mps: bool = False) -> dict[str, str]:
    """zero_devices of the nodes as the cluster has them now (their pods read only when one advertises
    nothing). `per_node_mps`: the nodes are per-node MPS targets, and one whose MPS daemon is within its
    config-manager's failure window is left to the MPS verdict (gpushare.mps.failure_pending)."""
    idle = [name for name, node in nodes.items() if node.allocatable(GPU) == 0 and node.allocatable(SHARED) == 0]
    if not idle:
        return {}
    plugin = next((Operand(d) for d in session.list("DaemonSet", namespace) if d["metadata"]["name"] == DEVICE_PLUGIN), None)
    pods = session.pods_on(idle, namespace)
    if per_node_mps:
        idle = [name for name in idle if not mps.failure_pending(name, pods)]
    return zero_devices({n: nodes[n] for n in idle}, [OperandPod(p) for p in pods], plugin, now)


def zero_devices(nodes: dict[str, Node], pods: list[OperandPod], plugin: Operand | None, now: dt.datetime) -> dict[str, str]:
    """node -> its device-plugin pod, for the nodes that advertise no GPU at all (nvidia.com/gpu and
    nvidia.com/gpu.shared allocatable 0) while that pod has been Ready on the current template for
    ZERO_DEVICES_GRACE_S: k8s-device-plugin#1645, which waiting does not cure."""
    found = {}
    for pod in pods:
        node, since = nodes.get(pod.node), pod.ready_since
        if (node is not None and node.allocatable(GPU) == 0 and node.allocatable(SHARED) == 0
                and pod.daemonset == DEVICE_PLUGIN and plugin is not None and plugin.current(pod) and since
                and (now - since).total_seconds() >= ZERO_DEVICES_GRACE_S):
            found[pod.node] = pod.name
    return found


def _zero_problem(node: str, pod: str, restarted: set[str]) -> str:
    if node in restarted:
        return (f"{node}: its device plugin advertises no GPU again after the restart this run did ({pod} Running and "
                f"Ready for {ZERO_DEVICES_GRACE_S} s or more, {BUG_1645}): one more restart is not tried. Restart it by hand "
                "(kubectl delete pod), look at its log, or roll back with playbooks/rollback-timeslicing.yml.")
    return (f"{node}: device plugin pod {pod} is Running and Ready for {ZERO_DEVICES_GRACE_S} s or more while the node "
            f"advertises no GPU ({BUG_1645}: a plugin start on a labelled node may register 0 devices until its pod "
            "restarts).")


CHECKS = {"timeslicing_enabled": timeslicing_enabled}
