"""What the enable runbook waits for, as problem lists: empty means done. Each check reads the
cluster through a Session; `gpushare_wait` polls one until it is empty or time runs out."""

from __future__ import annotations

from typing import Any

from gpushare import mps
from gpushare.k8s.session import Session
from gpushare.model.node import CONFIG_LABEL, GPU, SHARED, Node, Pool
from gpushare.model.operands import DEVICE_PLUGIN, MPS
from gpushare.polling import DeadEnd
from gpushare.runbook.checks import bystanders_unchanged, driver_upgrade_dead_ends, gpu_nodes, reader_problems


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
    if expected.get("strategy") == "mps" and expected["scope"] == "node" and problems:  # cluster scope needs no signal
        _never_served(session, namespace, nodes, expected)
    required = (DEVICE_PLUGIN, MPS) if expected.get("strategy") == "mps" else (DEVICE_PLUGIN,)
    problems += reader_problems(session, namespace, sorted(expected["targets"]), required)
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


CHECKS = {"timeslicing_enabled": timeslicing_enabled}
