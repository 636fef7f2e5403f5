"""The cluster as one read gives it to the planners (gpushare.timeslicing.state)."""

from __future__ import annotations

from gpushare.timeslicing.state import ASSET_TOLERATIONS, ClusterState
from tests.unit.cluster_objects import (CONFIGMAP, clusterpolicy, configmap, enabled_read, managed_configmap, node,
                                        read, record)


def test_what_the_clusterpolicy_says() -> None:
    state = ClusterState.of(read(policy=clusterpolicy(CONFIGMAP, "default", auto_upgrade=True)))
    assert state.plugin_config == (CONFIGMAP, "default")
    assert state.driver_auto_upgrade
    assert ClusterState.of(read()).plugin_config == ("", "")
    assert not ClusterState.of(read()).driver_auto_upgrade
    disabled = clusterpolicy(auto_upgrade=True)
    disabled["spec"]["driver"]["enabled"] = False
    assert not ClusterState.of(read(policy=disabled)).driver_auto_upgrade


def test_operand_tolerations_are_the_clusterpolicys_else_the_assets() -> None:
    own = [{"operator": "Exists"}]
    assert ClusterState.of(read(policy=clusterpolicy(tolerations=own))).operand_tolerations == own
    assert ClusterState.of(read(policy=clusterpolicy(tolerations=[]))).operand_tolerations == ASSET_TOLERATIONS
    absent = clusterpolicy()
    del absent["spec"]["daemonsets"]["tolerations"]
    assert ClusterState.of(read(policy=absent)).operand_tolerations == ASSET_TOLERATIONS


def test_gpu_nodes_sorted_and_only_gpu_nodes() -> None:
    state = ClusterState.of(read([node("gpu-b", 2), node("cpu", gpu=False), node("gpu-a", 1)]))
    assert [n.name for n in state.gpu_nodes] == ["gpu-a", "gpu-b"]
    assert sorted(state.nodes) == ["cpu", "gpu-a", "gpu-b"]


def test_records_and_managed_keys() -> None:
    state = ClusterState.of(enabled_read(configmaps=[
        managed_configmap(), configmap("unrelated", {"a": "b"}),
        record("gpushare-run-rollback-20261201t093000z-0c0c", "rollback-timeslicing"),
        record("gpushare-run-enable-20261201t080000z-0a0a", "enable-timeslicing", state="complete")]))
    assert [r.name for r in state.records] == ["gpushare-run-enable-20261201t080000z-0a0a",
                                               "gpushare-run-rollback-20261201t093000z-0c0c"]
    assert [r.name for r in state.interrupted()] == ["gpushare-run-rollback-20261201t093000z-0c0c"]
    assert state.interrupted("enable-timeslicing") == []
    assert state.managed_keys(CONFIGMAP) == ["default", "shared"]
    assert state.managed_keys("unrelated") == [] and state.configmap_data("absent") == {}


def test_readers_and_pods() -> None:
    state = ClusterState.of(read())
    assert [o.name for o in state.config_readers()] == ["nvidia-device-plugin-daemonset", "gpu-feature-discovery"]
    assert [p.daemonset for p in state.operand_pods("gpu-node", "gpu-feature-discovery")] == ["gpu-feature-discovery"]
    assert state.device_plugin is not None
