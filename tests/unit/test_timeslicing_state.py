"""The cluster as one read gives it to the planners (gpushare.runbook.state)."""

from __future__ import annotations

from typing import Any

from gpushare.runbook.state import ASSET_TOLERATIONS, ClusterState, active_clusterpolicy, operator_problems
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


def test_records_are_read_from_the_runbooks_namespace_only() -> None:
    enable = record("gpushare-run-enable-20261201t090000z-0a0a", "enable-timeslicing", state="complete")
    state = ClusterState.of(read(configmaps=[managed_configmap(), enable]))
    assert [r.name for r in state.records] == [enable["metadata"]["name"]] and state.stray_records == []
    assert operator_problems(state, "gpu-operator", "cluster-policy", "gpushare-system") == []


def test_records_an_earlier_gpushare_left_in_the_operator_namespace_are_refused_by_name() -> None:
    old = record("gpushare-run-enable-20261101t090000z-0b0b", "enable-timeslicing", state="complete")
    state = ClusterState.of(read(configmaps=[managed_configmap()], stray=[old]))
    assert state.records == [] and state.stray_records == [old["metadata"]["name"]]
    [problem] = operator_problems(state, "gpu-operator", "cluster-policy", "gpushare-system")
    assert problem.startswith("Run records of an earlier gpushare are in the operator namespace gpu-operator "
                              f"({old['metadata']['name']}); the runbooks now keep them in gpushare-system."), problem
    assert 'README.md "Run records"' in problem


def test_a_missing_runbooks_namespace_is_refused_with_the_fix() -> None:
    state = ClusterState.of(read(records_namespace=False))
    [problem] = operator_problems(state, "gpu-operator", "cluster-policy", "gpushare-system")
    assert problem.startswith("Namespace 'gpushare-system', where the runbooks keep their run records"), problem
    assert "deploy/rbac" in problem and "gpu_operator_records_namespace" in problem


def _problems(state: ClusterState) -> list[str]:
    return operator_problems(state, "gpu-operator", "cluster-policy", "gpushare-system")


def _policy(name: str, created: str) -> dict[str, Any]:
    policy = clusterpolicy()
    policy["metadata"].update(name=name, creationTimestamp=created)
    return policy


def test_a_clusterpolicy_the_operator_ignores_is_refused_naming_the_oldest() -> None:
    """gpu-operator v26.7 reconciles the oldest ClusterPolicy (lowest name among equals) and writes no
    status on the others: the runbooks tell which from the list, not from status.state."""
    mine = clusterpolicy()
    older = _policy("gpu-cluster-policy", "2026-11-01T00:00:00Z")
    [problem] = _problems(ClusterState.of({**read(policy=mine), "clusterpolicies": [mine, older]}))
    assert problem.startswith("ClusterPolicy 'cluster-policy' is not the one the GPU Operator reconciles"), problem
    assert "gpu_operator_clusterpolicy_name=gpu-cluster-policy" in problem
    newer = _policy("a-newer-one", "2026-12-05T00:00:00Z")
    assert _problems(ClusterState.of({**read(policy=mine), "clusterpolicies": [newer, mine]})) == []
    same_time = _policy("a-same-time", mine["metadata"]["creationTimestamp"])
    assert active_clusterpolicy([mine, same_time]) == "a-same-time"
    assert active_clusterpolicy([]) == ""


def test_a_gpucluster_beside_the_clusterpolicy_is_refused_without_restoring_anything() -> None:
    gpucluster = {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"}}
    [beside] = _problems(ClusterState.of({**read(), "gpuclusters": [gpucluster]}))
    assert beside.startswith("GPUCluster 'gpu-cluster' (the GPU Operator's DRA stack, nvidia.com/v1alpha1) exists "
                             "beside ClusterPolicy 'cluster-policy': the GPU Operator reconciles neither"), beside
    assert "delete the GPUCluster" in beside
    [alone] = _problems(ClusterState.of({**read(policy=None), "gpuclusters": [gpucluster]}))
    assert alone.startswith("This cluster's GPU Operator runs the DRA stack (GPUCluster 'gpu-cluster'"), alone
    for problem in (beside, alone):
        assert "restore" not in problem.lower()


def test_no_gpucluster_api_is_no_gpucluster() -> None:
    """Before v26.7 the kind is not served: gpushare_read gives None and names it in not_served."""
    state = ClusterState.of({**read(not_served=("gpuclusters",)), "gpuclusters": None})
    assert state.gpuclusters == []
    assert _problems(state) == []
