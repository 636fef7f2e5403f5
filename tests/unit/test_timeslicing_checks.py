"""The enable's verify: a device plugin Ready that advertises no GPU (NVIDIA/k8s-device-plugin#1645)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from gpushare.model.node import Node
from gpushare.model.operands import Operand, OperandPod
from gpushare.timeslicing.checks import ZERO_DEVICES_GRACE_S, zero_devices
from tests.unit.cluster_objects import daemonset, node, operand_pod

PLUGIN = "nvidia-device-plugin-daemonset"
READY_AT = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.timezone.utc)


def _ready_pod(node_name: str, daemonset_name: str = PLUGIN) -> OperandPod:
    raw = operand_pod(daemonset_name, node_name)
    raw["status"]["conditions"][0]["lastTransitionTime"] = READY_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
    return OperandPod(raw)


def _advertising(shares: int) -> Node:
    raw: dict[str, Any] = node("gpu-node", 1, replicas=2)
    raw["status"]["allocatable"].update({"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": str(shares)})
    return Node(raw)


def test_a_plugin_ready_for_the_grace_period_on_a_node_advertising_nothing_is_1645() -> None:
    late = READY_AT + dt.timedelta(seconds=ZERO_DEVICES_GRACE_S)
    plugin = Operand(daemonset(PLUGIN))
    assert zero_devices({"gpu-node": _advertising(0)}, [_ready_pod("gpu-node")], plugin, late) == {
        "gpu-node": f"{PLUGIN}-gpu-node"}


def test_what_is_not_1645() -> None:
    plugin = Operand(daemonset(PLUGIN))
    late = READY_AT + dt.timedelta(seconds=ZERO_DEVICES_GRACE_S)
    early = late - dt.timedelta(seconds=1)
    assert zero_devices({"gpu-node": _advertising(0)}, [_ready_pod("gpu-node")], plugin, early) == {}, "registration may follow"
    assert zero_devices({"gpu-node": _advertising(2)}, [_ready_pod("gpu-node")], plugin, late) == {}, "it advertises"
    assert zero_devices({"gpu-node": _advertising(0)}, [_ready_pod("gpu-node", "gpu-feature-discovery")], plugin,
                        late) == {}, "GFD is not the plugin"
    old = Operand(daemonset(PLUGIN, generation=2))
    assert zero_devices({"gpu-node": _advertising(0)}, [_ready_pod("gpu-node")], old, late) == {}, "an old template rolls"
    not_ready = OperandPod(operand_pod(PLUGIN, "gpu-node", ready=False))
    assert not_ready.ready_since is None
    assert zero_devices({"gpu-node": _advertising(0)}, [not_ready], plugin, late) == {}, "not Ready: the wait says why"
