"""The node model (gpushare.model.node): GPU facts from GFD's labels, what the device plugin
advertises, the shared pool and the "unchanged" fingerprint."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpushare.model.node import Node, Pool, fingerprint_changes, quantity
from gpushare.model.taints import Taint
from tests.unit.cluster_objects import POOL_TAINT, node

POOL = Pool.of({"label_key": "gpu-mode", "label_value": "shared", "taint": {"key": "nvidia.com/gpu",
                                                                            "value": "shared"}})


def test_pool() -> None:
    assert POOL.taint == Taint("nvidia.com/gpu", "shared", "NoSchedule")
    assert Pool.of(POOL.as_dict()) == POOL
    bare = Pool.of({"label_key": "gpu-mode", "label_value": "shared", "taint": {"key": "nvidia.com/gpu"}})
    assert bare.taint == Taint("nvidia.com/gpu", "", "NoSchedule")
    untainted = Pool.of({"label_key": "gpu-mode", "label_value": "shared", "taint": None})
    assert untainted.taint is None and untainted.as_dict()["taint"] is None


@pytest.mark.parametrize(("value", "count"), [("8", 8), (8, 8), (None, 0), ("0", 0), ("1k", 0), ("-1", 0),
                                              ("100m", 0)])
def test_quantity(value: Any, count: int) -> None:
    assert quantity(value) == count


def test_a_whole_card_gpu_node() -> None:
    n = Node(node("gpu-node-2", 8))
    assert (n.name, n.gpu_present, n.gpus, n.replicas, n.strategy) == ("gpu-node-2", True, 8, 1, "none")
    assert (n.allocatable("nvidia.com/gpu"), n.allocatable("nvidia.com/gpu.shared"), n.capacity("cpu")) == (8, 0, 64)
    assert not n.shares and not n.mig_enabled and not n.unschedulable
    assert n.config_label == "" and n.cordoned_by == ""


def test_a_time_sliced_node() -> None:
    renamed = Node(node("gpu-node", 1, replicas=4))
    assert renamed.shares and renamed.replicas == 4 and renamed.strategy == "time-slicing"
    assert (renamed.allocatable("nvidia.com/gpu.shared"), renamed.allocatable("nvidia.com/gpu")) == (4, 0)
    not_renamed = Node(node("gpu-node", 1, replicas=4, renamed=False))
    assert not_renamed.shares and not_renamed.allocatable("nvidia.com/gpu") == 4


def test_a_node_shares_as_soon_as_one_sign_says_so() -> None:
    raw = node("gpu-node", 1)
    raw["status"]["allocatable"]["nvidia.com/gpu.shared"] = "2"  # allocatable updated, GFD not yet
    assert Node(raw).shares and not Node(raw).labelled_shared
    mps = Node(node("gpu-node", 1, labels={"nvidia.com/gpu.sharing-strategy": "mps"}))
    assert mps.shares and mps.labelled_shared


def test_right_after_a_rollback_the_kubelets_stale_capacity_is_no_sign_of_sharing() -> None:
    raw = node("gpu-node", 1)
    raw["status"]["capacity"]["nvidia.com/gpu.shared"] = "2"  # endpointStopGracePeriod: capacity kept, allocatable 0
    raw["status"]["allocatable"]["nvidia.com/gpu.shared"] = "0"
    assert not Node(raw).shares


def test_the_shares_go_by_the_renamed_resource_unless_gfd_says_the_gpu_itself_is_shared() -> None:
    assert Node(node("gpu-node", 1, replicas=4)).shared_resource == "nvidia.com/gpu.shared"
    assert Node(node("gpu-node", 1, replicas=4, renamed=False)).shared_resource == "nvidia.com/gpu"


def test_resources_as_the_api_server_wrote_them() -> None:
    n = Node(node("gpu-node-2", 8))
    assert n.resources("allocatable")["cpu"] == "64"
    assert n.resources("capacity", "nvidia.com/") == {"nvidia.com/gpu": "8"}
    assert Node({"metadata": {"name": "new"}}).resources("allocatable") == {}


def test_ready_is_the_kubelets_ready_condition() -> None:
    raw = node("gpu-node")
    assert not Node(raw).ready  # no conditions yet (or a trimmed read)
    raw["status"]["conditions"] = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]
    assert Node(raw).ready
    raw["status"]["conditions"][1]["status"] = "Unknown"
    assert not Node(raw).ready


def test_gpu_facts_before_gfd_has_run() -> None:
    n = Node(node("gpu-node", None))
    assert n.gpu_present and n.gpus is None and n.replicas == 1
    assert Node(node("gpu-node", labels={"nvidia.com/gpu.count": "eight"})).gpus is None
    assert not Node(node("cpu-node", gpu=False)).gpu_present


@pytest.mark.parametrize(("mig", "enabled"), [("all-disabled", False), ("", False), ("all-1g.10gb", True),
                                              ("all-balanced", True)])
def test_mig(mig: str, enabled: bool) -> None:
    assert Node(node("gpu-node-mig", 4, mig=mig)).mig_enabled is enabled


def test_pool_membership_and_taint() -> None:
    member = Node(node("gpu-node", labels={"gpu-mode": "shared"}, taints=[POOL_TAINT]))
    assert member.in_pool(POOL) and member.pool_taint(POOL) == POOL.taint
    other = Node(node("gpu-node", labels={"gpu-mode": "dedicated"}))
    assert not other.in_pool(POOL) and other.pool_taint(POOL) is None


def test_the_pool_taint_is_any_taint_with_its_key_and_effect() -> None:
    own = {"key": "nvidia.com/gpu", "value": "dedicated", "effect": "NoSchedule"}
    assert Node(node("gpu-node", taints=[own])).pool_taint(POOL) == Taint("nvidia.com/gpu", "dedicated", "NoSchedule")
    no_execute = {"key": "nvidia.com/gpu", "value": "shared", "effect": "NoExecute"}
    assert Node(node("gpu-node", taints=[no_execute])).pool_taint(POOL) is None
    assert Node(node("gpu-node", taints=[POOL_TAINT])).pool_taint(Pool("gpu-mode", "shared", None)) is None


def test_the_fingerprint_ignores_what_changes_on_its_own() -> None:
    before = node("gpu-node-2", 8, labels={"gpu-mode": "shared"})
    after = copy.deepcopy(before)
    after["metadata"]["resourceVersion"] = "999"
    after["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1764580000"
    after["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm"] = "true"
    after["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = "30"
    after["status"]["allocatable"]["memory"] = "500Gi"
    after["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-01T10:00:00Z"}]
    assert Node(after).fingerprint(POOL) == Node(before).fingerprint(POOL)
    assert fingerprint_changes(Node(before).fingerprint(POOL), Node(after).fingerprint(POOL)) == []


def test_the_fingerprint_sees_what_sharing_changes() -> None:
    before = Node(node("gpu-node-2", 8)).fingerprint(POOL)
    after = Node(node("gpu-node-2", 8, replicas=2, labels={"gpu-mode": "shared"}, taints=[POOL_TAINT],
                      unschedulable=True)).fingerprint(POOL)
    assert fingerprint_changes(before, after) == [
        "capacity nvidia.com/gpu 8 -> 0",
        "capacity nvidia.com/gpu.shared 0 -> 16",
        "allocatable nvidia.com/gpu 8 -> 0",
        "allocatable nvidia.com/gpu.shared 0 -> 16",
        "labels gpu-mode (none) -> shared",
        "labels nvidia.com/gpu.replicas 1 -> 2",
        "labels nvidia.com/gpu.sharing-strategy none -> time-slicing",
        "taints [] -> ['nvidia.com/gpu=shared:NoSchedule']",
        "cordoned",
    ]
    assert fingerprint_changes(after, before)[-1] == "uncordoned"


def test_the_pool_label_counts_only_with_a_pool() -> None:
    before, after = Node(node("gpu-node-2", 8)), Node(node("gpu-node-2", 8, labels={"gpu-mode": "shared"}))
    assert fingerprint_changes(before.fingerprint(), after.fingerprint()) == []
    assert fingerprint_changes(before.fingerprint(POOL), after.fingerprint(POOL)) == [
        "labels gpu-mode (none) -> shared"]


def test_allocatable_left_out_while_the_operator_rolls_the_plugin() -> None:
    """While the plugin restarts, allocatable dips and recovers: compare it only when nothing rolls."""
    before = Node(node("gpu-node-2", 8)).fingerprint(POOL)
    rolling = node("gpu-node-2", 8)
    rolling["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    assert fingerprint_changes(before, Node(rolling).fingerprint(POOL), allocatable=False) == []
    assert fingerprint_changes(before, Node(rolling).fingerprint(POOL)) == ["allocatable nvidia.com/gpu 8 -> 0"]


def test_schedulability_left_out_while_the_driver_upgrade_cordons_the_nodes_in_turn() -> None:
    before = Node(node("gpu-node-2", 8)).fingerprint(POOL)
    upgrading = Node(node("gpu-node-2", 8, unschedulable=True)).fingerprint(POOL)
    assert fingerprint_changes(before, upgrading, schedulable=False) == []
    # kube-controller-manager adds the cordon's taint a moment later: it comes and goes with the cordon
    cordoned = node("gpu-node-2", 8, unschedulable=True)
    cordoned["spec"]["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    assert fingerprint_changes(before, Node(cordoned).fingerprint(POOL), schedulable=False) == []
    assert fingerprint_changes(before, Node(cordoned).fingerprint(POOL))[0].startswith("taints [] ->")
    assert fingerprint_changes(before, upgrading) == ["cordoned"]


def test_the_capacity_the_kubelet_keeps_for_a_stopped_plugin_is_not_a_change() -> None:
    served = Node(node("gpu-node", 1)).fingerprint(POOL)
    # after a rollback: nvidia.com/gpu.shared unhealthy for endpointStopGracePeriod, then 0
    grace, expired = node("gpu-node", 1), node("gpu-node", 1)
    grace["status"]["capacity"]["nvidia.com/gpu.shared"] = "2"
    grace["status"]["allocatable"]["nvidia.com/gpu.shared"] = "0"
    expired["status"]["capacity"]["nvidia.com/gpu.shared"] = expired["status"]["allocatable"]["nvidia.com/gpu.shared"] = "0"
    assert fingerprint_changes(served, Node(grace).fingerprint(POOL)) == []
    assert fingerprint_changes(Node(grace).fingerprint(POOL), Node(expired).fingerprint(POOL)) == []
    assert Node(expired).fingerprint(POOL) == served  # 0 is no capacity
    # a plugin restarting during a roll keeps the capacity it serves: compared without allocatable, unchanged
    restarting = node("gpu-node", 1)
    restarting["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    assert fingerprint_changes(served, Node(restarting).fingerprint(POOL), allocatable=False) == []
    # a resource that was served and is gone after the grace period is a change
    gone = node("gpu-node", 1)
    gone["status"]["capacity"]["nvidia.com/gpu"] = gone["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    assert fingerprint_changes(served, Node(gone).fingerprint(POOL), allocatable=False) == [
        "capacity nvidia.com/gpu 1 -> 0"]
