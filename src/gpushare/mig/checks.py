"""What the MIG runbooks wait for, as problem lists (empty: done), polled by `gpushare_wait`.

`expected` is the plan's: {strategy, targets: {node: {config, resources, product, deploy}},
bystanders: {node: fingerprint}}."""

from __future__ import annotations

from typing import Any

from gpushare.k8s.session import Session
from gpushare.model.node import MIG_CONFIG, MIG_STATE, Node, unpacked
from gpushare.model.operands import DEVICE_PLUGIN, OperandPod
from gpushare.timeslicing.checks import bystander_problems, bystanders_now

PAUSED = "paused-for-mig-change"
MIG_MANAGER = "nvidia-mig-manager"


def _nodes(session: Session, names: list[str]) -> dict[str, Node]:
    return {n: Node(raw) for n in names if (raw := session.get("Node", n)) is not None}


def _resource_problems(node: Node, wanted: dict[str, int]) -> list[str]:
    problems = [f"allocatable {k} is {node.allocatable(k)}, expected {v}" for k, v in sorted(wanted.items())
                if node.allocatable(k) != v]
    capacity = (node.raw.get("status") or {}).get("capacity") or {}
    problems += [f"allocatable {k} is {node.allocatable(k)}, expected 0 (no such instance any more)"
                 for k in sorted(capacity) if k.startswith("nvidia.com/mig-") and k not in wanted and node.allocatable(k)]
    return problems


def mig_settled(session: Session, expected: dict[str, Any]) -> list[str]:
    """The MIG manager has finished on every target: failed, or success with the device plugin
    advertising the new instances (a success left from the previous config does not count)."""
    problems = []
    for name, want in sorted(expected["targets"].items()):
        node = _nodes(session, [name]).get(name)
        if node is None:
            problems.append(f"{name}: the node is gone")
        elif node.mig_config != want["config"]:
            problems.append(f"{name}: {MIG_CONFIG} is {node.mig_config!r} now, not {want['config']!r}: someone else "
                            "changed it; the run stops here")
        elif node.mig_state != "failed":
            if node.mig_state != "success":
                problems.append(f"{name}: {MIG_STATE} is {node.mig_state or 'unset'}, the MIG manager has not finished "
                                f"{want['config']}")
            else:
                problems += [f"{name}: the MIG manager reports success and the device plugin still shows {p}"
                             for p in _resource_problems(node, want["resources"])]
    return problems


def mig_applied(session: Session, namespace: str, expected: dict[str, Any]) -> list[str]:
    """No target's MIG manager reports failed; for one that does, where to read why."""
    problems = []
    for name, want in sorted(expected["targets"].items()):
        node = _nodes(session, [name]).get(name)
        if node is None or node.mig_state != "failed":
            continue
        managers = [OperandPod(p).name for p in session.pods_on([name], namespace) if OperandPod(p).daemonset == MIG_MANAGER]
        events = sorted((e for e in session.list("Event", field_selector=f"involvedObject.kind=Node,involvedObject.name={name}")
                         if e.get("type") == "Warning"), key=lambda e: e.get("lastTimestamp") or "")
        said = f" It said: {events[-1].get('message')}." if events else ""
        where = (f"kubectl -n {namespace} logs {managers[0]}" if managers
                 else f"kubectl -n {namespace} logs -l app={MIG_MANAGER}")
        problems.append(f"{name}: the MIG manager could not apply {want['config']} ({MIG_STATE}=failed).{said} Its log "
                        f"says why: {where}")
    return problems


def mig_verified(session: Session, namespace: str, expected: dict[str, Any]) -> list[str]:
    """Each target shows the plan for the strategy, its GPU clients are deployed as before, its
    device plugin is Ready, and every other GPU node is unchanged in what sharing changes."""
    problems = []
    targets, bystanders = sorted(expected["targets"]), unpacked(expected["bystanders"])
    nodes = _nodes(session, targets)
    plugins = {OperandPod(p).node for p in session.pods_on(targets, namespace)
               if OperandPod(p).daemonset == DEVICE_PLUGIN and OperandPod(p).ready}
    for name in targets:
        want, node = expected["targets"][name], nodes.get(name)
        if node is None:
            problems.append(f"{name}: the node is gone")
            continue
        checks = [(MIG_CONFIG, node.mig_config, want["config"]), (MIG_STATE, node.mig_state, "success"),
                  ("nvidia.com/gpu.product", node.labels.get("nvidia.com/gpu.product"), want["product"])]
        problems += [f"{name}: {what} is {got!r}, expected {wanted!r}" for what, got, wanted in checks if got != wanted]
        problems += [f"{name}: {p}" for p in _resource_problems(node, want["resources"])]
        for label, value in sorted(want["deploy"].items()):
            now = node.labels.get(label)
            if now != value:
                problems.append(f"{name}: {label} is {now!r}, expected {value!r} as before the change"
                                + (" (the MIG manager has not restored it)" if now == PAUSED else ""))
        if name not in plugins:
            problems.append(f"{name}: no Ready {DEVICE_PLUGIN} pod")
    if problems or not bystanders:  # every other GPU node is compared once the targets are done
        return problems
    return bystander_problems(bystanders_now(session, expected, nodes, bystanders), bystanders, None,
                              compare_allocatable=True)


CHECKS = {"mig_settled": mig_settled, "mig_applied": mig_applied, "mig_verified": mig_verified}
