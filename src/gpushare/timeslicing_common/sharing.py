"""What the time-slicing enable and rollback runbooks both use: their names (each one's run
records name the other), the key of the no-sharing config, the only ClusterPolicy fields an enable
changes (hence the only ones a rollback restores), the guarded JSON-patch operations that write
them, and the operator's roll such a change starts."""

from __future__ import annotations

from typing import Any

from gpushare.k8s.patch import escape, pointer, resolve
from gpushare.model.operands import DRIVER
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


def driver_upgrades(state: ClusterState, changes: list[FieldChange]) -> bool:
    """A tolerations change re-renders the driver DaemonSet, whose upgrade controller (autoUpgrade)
    then cordons and drains every GPU node in turn."""
    return (any(c.path == TOLERATIONS for c in changes) and upgrades_driver(state)
            and state.operands[DRIVER].rollout()[1] > 0)


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


def operator_roll(state: ClusterState, names: list[str]) -> str:
    """The plan's line for the operator's re-render of `names`. The driver's pods (OnDelete) are
    restarted by its upgrade controller only, which cordons and drains each node first."""
    line = ("  the operator re-renders these DaemonSets, whose pods restart one node at a time: "
            + spread(state, [n for n in names if n != DRIVER]))
    driver = state.operands.get(DRIVER) if DRIVER in names else None
    nodes = driver.rollout()[1] if driver else 0
    if nodes and state.driver_auto_upgrade:
        parallel = state.driver_parallel_upgrades
        return line + (f"; {DRIVER}'s template changes too, and with driver.upgradePolicy.autoUpgrade on the driver "
                       f"upgrade controller will cordon and drain each of its {nodes} GPU nodes in turn, "
                       + (f"{parallel} at a time (maxParallelUpgrades)" if parallel else
                          "all at once (maxParallelUpgrades=0)")
                       + ", evicting their GPU pods, and reload the driver")
    if nodes:
        line += f"; {DRIVER}'s template changes too (its pods restart only when deleted: autoUpgrade is off)"
    return line + "; running workloads keep their GPUs"
