"""What the time-slicing enable and rollback runbooks both use: their names (each one's run
records name the other), the key of the no-sharing config, the only ClusterPolicy fields an enable
changes (hence the only ones a rollback restores), the guarded JSON-patch operations that write
them, and the operator's roll such a change starts."""

from __future__ import annotations

from typing import Any

from gpushare import driver_upgrade as du
from gpushare.k8s.patch import escape, pointer, resolve
from gpushare.model.operands import DRIVER, VALIDATOR, OperandPod
from gpushare.runbook.records import FieldChange
from gpushare.runbook.state import ClusterState

ENABLE = "enable-timeslicing"
ROLLBACK = "rollback-timeslicing"
DEFAULT_KEY = "default"  # the ConfigMap key of the no-sharing config
CONFIG = "/spec/devicePlugin/config"
CONFIG_NAME = "/spec/devicePlugin/config/name"
CONFIG_DEFAULT = "/spec/devicePlugin/config/default"
TOLERATIONS = "/spec/daemonsets/tolerations"
_ABSENT = object()


def upgrades_driver(state: ClusterState) -> bool:
    """A re-rendered driver DaemonSet makes its upgrade controller drain every GPU node in turn."""
    return state.driver_auto_upgrade and DRIVER in state.operands


def restarts_driver_in_place(state: ClusterState) -> bool:
    """The driver upgrade a tolerations change starts evicts nothing (GPU Operator v26.7: the driver
    config digest is unchanged, gpushare.driver_upgrade.restarts_in_place). Only while every driver pod
    runs the current template: the predicate compares each pod's digest with the template's, and a pod
    left on an older template may carry another one, which takes that node through the full flow."""
    validator, driver = state.operands.get(VALIDATOR), state.operands.get(DRIVER)
    if not (validator and driver and du.restarts_in_place(validator.image, driver.template)):
        return False
    updated, desired = driver.rollout()
    observed = int((driver.raw.get("status") or {}).get("observedGeneration") or 0)
    return updated == desired and observed >= int(driver.raw["metadata"].get("generation") or 0)


def driver_upgrades(state: ClusterState, changes: list[FieldChange]) -> bool:
    """A tolerations change re-renders the driver DaemonSet, whose upgrade controller (autoUpgrade)
    then cordons and drains every GPU node in turn."""
    return (any(c.path == TOLERATIONS for c in changes) and upgrades_driver(state)
            and state.operands[DRIVER].rollout()[1] > 0)


def rolls(state: ClusterState, names: list[str]) -> bool:
    """A re-render of these operand DaemonSets rolls pods: one of them (the driver aside, whose
    upgrade controller restarts its pods) updates by RollingUpdate, not OnDelete."""
    present = [state.operands[n] for n in names if n in state.operands and n != DRIVER]
    return bool(names) and not (present and all(o.on_delete for o in present))


def field_ops(obj: dict[str, Any], changes: list[FieldChange]) -> list[dict[str, Any]]:
    """JSON-patch operations that make each change only if the field still holds its `before` value
    (a `test` first), creating missing parent objects on the way."""
    ops: list[dict[str, Any]] = []
    for change in changes:
        tokens = pointer(change.path)
        for depth in range(1, len(tokens)):
            parent = "/" + "/".join(escape(t) for t in tokens[:depth])
            if resolve(obj, parent, None) is None and not any(o["path"] == parent for o in ops):
                ops.append({"op": "add", "path": parent, "value": {}})
        if resolve(obj, change.path, _ABSENT) is not _ABSENT:
            ops.append({"op": "test", "path": change.path, "value": change.before})
        ops.append({"op": "add", "path": change.path, "value": change.after})
    return ops


def spread(state: ClusterState, names: list[str]) -> str:
    """Each of these operand DaemonSets that has pods, and on how many nodes (the others are left out)."""
    counts = [(name, state.operands[name].rollout()[1]) for name in names if name in state.operands]
    return ", ".join(f"{name} on {nodes} GPU node{'s' if nodes > 1 else ''}" for name, nodes in counts if nodes)


def driver_walk(state: ClusterState, nodes: int) -> str:
    """What the driver upgrade controller does to the GPU nodes after a tolerations change."""
    parallel = state.driver_parallel_upgrades
    pace = f"{parallel} at a time (maxParallelUpgrades)" if parallel else "all at once (maxParallelUpgrades=0)"
    if restarts_driver_in_place(state):
        return (f"the driver upgrade controller will cordon each of its {nodes} GPU nodes in turn, {pace}, and restart "
                "its driver pod in place without evicting GPU pods (GPU Operator v26.7 restart-only path: the "
                f"change leaves {du.DIGEST_ENV} as it is)")
    return (f"the driver upgrade controller will cordon and drain each of its {nodes} GPU nodes in turn, {pace}, "
            "evicting their GPU pods, and reload the driver")


def operator_roll(state: ClusterState, names: list[str]) -> str:
    """The plan's line for the operator's re-render of `names`. The driver's pods (OnDelete) are
    restarted by its upgrade controller only, which cordons and drains each node first."""
    line = ("  the operator re-renders these DaemonSets, whose pods restart one node at a time: "
            + spread(state, [n for n in names if n != DRIVER]))
    driver = state.operands.get(DRIVER) if DRIVER in names else None
    nodes = driver.rollout()[1] if driver else 0
    if nodes and state.driver_auto_upgrade:
        return line + f"; {DRIVER}'s template changes too, and with driver.upgradePolicy.autoUpgrade on " + driver_walk(state, nodes)
    if nodes:
        line += f"; {DRIVER}'s template changes too (its pods restart only when deleted: autoUpgrade is off)"
    return line + "; running workloads keep their GPUs"


def on_delete_line(readers: list[str], nodes: list[str], every_node: bool) -> str:
    """The plan's line for a re-render of the config readers under daemonsets.updateStrategy OnDelete:
    the operator rolls no pod, the run restarts them on `nodes` itself (`every_node`: all GPU nodes)."""
    where = (f"on every GPU node ({len(nodes)}), all at once" if every_node else
             "on the nodes below, the other GPU nodes keep theirs on the old template")
    return (f"  the operator re-renders {' and '.join(readers)}; under daemonsets.updateStrategy OnDelete their pods "
            f"restart only when deleted: this run restarts them itself {where}")


def restart_lines(state: ClusterState, pods: list[OperandPod], readers: list[str], nodes: list[str],
                  why: str) -> list[str]:
    """One plan line per node whose config readers the run restarts, naming the pods it deletes where
    they were read (else the readers whose DaemonSet selects the node)."""
    lines = []
    for name in nodes:
        mine = [p for p in pods if p.node == name and p.daemonset in readers and not p.terminating]
        node = state.nodes.get(name)
        own = ([r for r in readers if any(p.daemonset == r for p in mine)]
               or [r for r in readers if node and r in state.operands and state.operands[r].selects(node.labels)]
               or readers)
        names = [p.name for r in own for p in mine if p.daemonset == r]
        lines.append(f"- {name}: restart its {' and '.join(own)} pods ({', '.join(names) + '; ' if names else ''}{why})")
    return lines
