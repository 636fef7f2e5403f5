"""The GPU Operator simulator on the embedded cluster, driven with the seed's own commands
(`kubectl apply -f` of its ConfigMap, `kubectl patch` of the ClusterPolicy, `kubectl rollout
restart`, `kubectl label node`). Each test traces to shared/reference/gpu-operator-contract.md.

The same tests run against kind with `gpushare sim gpu-operator` (see tests/conftest.py); the
nodes' physical GPU counts are read from the simulated hardware, not assumed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operands
from tests.integration.sim_support import (
    CHART_PLUGIN, CONFIGMAP, GPU, OLD_PLUGIN, POLICY, SHARED, TIMEOUT_S, UPGRADE_STATE, advertised, apply_configmap,
    container_status, daemonset_hashes, kubectl_status, label_node, operand_pods, physical_counts, pod_ready, pod_uids,
    point_plugin_at, rollout_restart, run_device_plugin, sharing_view, shows_replicas, simulated_gpus, stays,
    wait_all_show,
)
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster
from tests.support.seed import seed_config

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]
CHART_OPERANDS = {
    operands.DRIVER: "driver", "nvidia-container-toolkit-daemonset": "container-toolkit",
    operands.VALIDATOR: "operator-validator", operands.DEVICE_PLUGIN: "device-plugin",
    operands.MPS_CONTROL_DAEMON: "device-plugin", "nvidia-dcgm-exporter": "dcgm-exporter",
    operands.GFD: "gpu-feature-discovery", operands.MIG_MANAGER: "mig-manager",
}


@pytest.fixture
def workload_namespace(clean_cluster: Cluster) -> Iterator[str]:
    """A scenario namespace (the reset deletes it); its pods are deleted first, which halves the
    namespace controller's work at the reset."""
    name = "gpu-admission"
    clean_cluster.kubectl("create", "namespace", name)
    clean_cluster.kubectl("label", "namespace", name, f"{TEST_NAMESPACE_LABEL}={name}")
    yield name
    clean_cluster.kubectl("delete", "pods", "--all", "-n", name, "--wait=false", check=False)


def gpu_pod(name: str, namespace: str, node: str, *requests: int) -> dict:
    containers = [{"name": f"check-{i}", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                   "resources": {"limits": {SHARED: str(count)}}} for i, count in enumerate(requests)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                     "containers": containers}}


def test_operator_objects_as_the_chart_creates_them(clean_cluster: Cluster) -> None:
    """Contract ("GPU Operator"): the chart's cluster-scoped `cluster-policy` (values.yaml defaults),
    every enabled operand as its own DaemonSet owned by it, pods on every GPU node, the operator's
    node labels, GFD's labels and the upgrade controller's state."""
    cluster = clean_cluster
    crd = json.loads(cluster.kubectl("get", "crd", f"{cp.PLURAL}.{cp.GROUP}", "-o", "json").stdout)
    assert crd["spec"]["scope"] == "Cluster"
    spec = json.loads(cluster.kubectl("get", POLICY, "-o", "json").stdout)["spec"]
    assert spec["daemonsets"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert (spec["daemonsets"]["priorityClassName"], spec["daemonsets"]["updateStrategy"],
            spec["daemonsets"]["rollingUpdate"]) == ("system-node-critical", "RollingUpdate", {"maxUnavailable": "1"})
    assert (spec["driver"]["upgradePolicy"]["autoUpgrade"], spec["driver"]["upgradePolicy"]["maxParallelUpgrades"]) == (True, 1)
    assert (spec["dcgm"]["enabled"], spec["nodeStatusExporter"]["enabled"]) == (False, False)
    assert (spec["migManager"]["config"]["default"], spec["mig"]["strategy"]) == ("all-disabled", "single")
    assert "config" not in spec["devicePlugin"]  # the chart renders devicePlugin.config only with a name
    assert cluster.kubectl("get", POLICY, "-o", "jsonpath={.status.state}").stdout == "ready"

    gpu_nodes = sorted(physical_counts(cluster))
    daemonsets = {d.metadata.name: d for d in cluster.apps.list_namespaced_daemon_set(cluster.operator_namespace).items}
    assert set(daemonsets) == set(CHART_OPERANDS)
    for name, component in CHART_OPERANDS.items():
        ds = daemonsets[name]
        assert ds.metadata.owner_references[0].kind == "ClusterPolicy"
        assert ds.metadata.annotations[operands.HASH_ANNOTATION]
        assert ds.spec.template.spec.node_selector[f"nvidia.com/gpu.deploy.{component}"] == "true"
        assert ds.spec.update_strategy.type == ("OnDelete" if name == operands.DRIVER else "RollingUpdate")
        expected = [] if name == operands.MPS_CONTROL_DAEMON else gpu_nodes  # no node is mps.capable
        assert sorted(operand_pods(cluster, name)) == expected, name
    plugin = daemonsets[operands.DEVICE_PLUGIN].spec.template.spec
    assert [v.config_map.name for v in plugin.volumes if v.config_map] == ["nvidia-device-plugin-entrypoint"]
    config_maps = {c.metadata.name for c in cluster.core.list_namespaced_config_map(cluster.operator_namespace).items}
    assert {"nvidia-device-plugin-entrypoint", "default-mig-parted-config", "nvidia-mig-manager-entrypoint"} <= config_maps

    for node in gpu_nodes:
        labels = advertised(cluster, node)[1]
        assert labels["nvidia.com/gpu.present"] == "true"
        assert all(labels[f"nvidia.com/gpu.deploy.{c}"] == "true" for c in set(CHART_OPERANDS.values())), labels
        assert labels["nvidia.com/mig.strategy"] == "single"
        assert labels["nvidia.com/mig.config"] == "all-disabled"  # H100 and A100 are MIG capable
        assert labels["nvidia.com/mig.config.state"] == "success"
        assert labels[UPGRADE_STATE] == "upgrade-done"
        assert int(labels["nvidia.com/gfd.timestamp"]) > 1_600_000_000
    assert advertised(cluster, "cpu-node") == ({}, {})


def test_policy_patch_rolls_the_plugin_and_gfd_only_and_shares_every_gpu_node(clean_cluster: Cluster, tmp_path: Path) -> None:
    """Contract: patching `spec.devicePlugin.config` re-renders the device-plugin and GFD DaemonSets
    (and the MPS control daemon's) and, because it sets `default`, changes EVERY GPU node; every
    other operand pod stays, no driver upgrade starts; a resource the plugin stops registering keeps
    its capacity with allocatable 0 (the kubelet's endpointStopGracePeriod)."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    before_uids = pod_uids(cluster)
    timestamps = {n: advertised(cluster, n)[1]["nvidia.com/gfd.timestamp"] for n in counts}
    apply_configmap(cluster, tmp_path, {"shared": seed_config(4)})
    rolled = point_plugin_at(cluster, "shared")
    wait_all_show(cluster, counts, 4)

    assert rolled == {operands.DEVICE_PLUGIN, operands.GFD, operands.MPS_CONTROL_DAEMON}
    after_uids = pod_uids(cluster)
    replaced = {key.split("/")[0] for key in before_uids if after_uids.get(key) != before_uids[key]}
    assert replaced == {operands.DEVICE_PLUGIN, operands.GFD}, "only the pods that read the config restart"
    for node, physical in counts.items():
        allocatable, labels = advertised(cluster, node)
        assert allocatable[SHARED] == str(physical * 4)
        assert allocatable[GPU] == "0" and cluster.node(node).status.capacity[GPU] == str(physical)  # unhealthy, 5 min
        assert labels["nvidia.com/gpu.count"] == str(physical)  # physical, not replicas
        assert (labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.sharing-strategy"]) == ("4", "time-slicing")
        assert not labels["nvidia.com/gpu.product"].endswith("-SHARED")  # renamed: no suffix
        assert labels[UPGRADE_STATE] == "upgrade-done" and not cluster.node(node).spec.unschedulable
        assert int(labels["nvidia.com/gfd.timestamp"]) >= int(timestamps[node])  # GFD restarted: rewritten
    assert not advertised(cluster, "cpu-node")[0], "a node without GPUs advertises none"


def test_configmap_edit_changes_nothing_until_the_pods_that_read_it_restart(clean_cluster: Cluster, tmp_path: Path) -> None:
    """Contract: the operator does not watch ConfigMaps; after a replicas 4 -> 2 edit, restarting only
    the device plugin changes allocatable while GFD's `nvidia.com/gpu.replicas` stays 4 until GFD
    restarts too."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"shared": seed_config(4)})
    point_plugin_at(cluster, "shared")
    wait_all_show(cluster, counts, 4)
    uids, hashes = pod_uids(cluster), daemonset_hashes(cluster)

    apply_configmap(cluster, tmp_path, {"shared": seed_config(2)})
    # Nothing is supposed to happen, so there is no condition to wait for: watch for a bounded
    # window several times the simulator's reaction time and require that no look in it sees a change.
    stays(lambda: pod_uids(cluster) == uids and all(shows_replicas(cluster, n, c, 4) for n, c in counts.items()), 3,
          "the operand pods or the nodes' resources and labels")
    assert daemonset_hashes(cluster) == hashes

    rollout_restart(cluster, operands.DEVICE_PLUGIN)
    wait_for(lambda: all(advertised(cluster, n)[0].get(SHARED) == str(c * 2) for n, c in counts.items()), TIMEOUT_S,
             "allocatable to show 2 replicas per GPU")
    assert all(advertised(cluster, n)[1]["nvidia.com/gpu.replicas"] == "4" for n in counts), "GFD has not reloaded"
    rollout_restart(cluster, operands.GFD)
    wait_all_show(cluster, counts, 2)
    assert daemonset_hashes(cluster) == hashes, "a restart is not a spec change: the operator leaves it alone"


def test_node_label_reloads_that_node_in_place(clean_cluster: Cluster, tmp_path: Path) -> None:
    """Contract: `nvidia.com/device-plugin.config=<key>` makes that node use that key; the
    config-managers reload the plugin and GFD in place (same pods); other nodes keep `default`."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    point_plugin_at(cluster, "whole")
    wait_all_show(cluster, counts, 1)
    uids = pod_uids(cluster)
    others = {n: sharing_view(cluster, n) for n in counts if n != "gpu-node"}
    for key, replicas in (("shared", 4), ("whole", 1), ("shared", 4)):
        label_node(cluster, "gpu-node", cp.CONFIG_LABEL, key)
        wait_for(lambda r=replicas: shows_replicas(cluster, "gpu-node", counts["gpu-node"], r), TIMEOUT_S,
                 f"gpu-node to advertise {replicas} replica(s) per GPU")
    assert {n: sharing_view(cluster, n) for n in others} == others, "other GPU nodes are untouched"
    assert pod_uids(cluster) == uids, "the config-managers reload in place; no pod restarts"
    for app in (operands.DEVICE_PLUGIN, operands.GFD):
        assert container_status(operand_pods(cluster, app)["gpu-node"], "config-manager").restart_count == 0


@pytest.mark.parametrize("version", [OLD_PLUGIN, CHART_PLUGIN])
def test_missing_key_fails_the_sidecar_keeps_the_config_and_a_new_pod_fails_by_version(
        clean_cluster: Cluster, tmp_path: Path, version: str) -> None:
    """Contract: a key that does not exist makes the config-manager exit with `specified config <key>
    does not exist`: the running sidecar crash-loops while the loaded config stays in effect. A new
    pod: up to v0.18.1 it stays in `Init:CrashLoopBackOff` and the node's allocatable goes to 0
    (capacity kept); from v0.18.2 (commit ab05acef5) init applies DEFAULT_CONFIG, the plugin serves
    it, and the sidecar crash-loops."""
    cluster = clean_cluster
    run_device_plugin(cluster, version)
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    point_plugin_at(cluster, "shared")
    wait_all_show(cluster, counts, 4)
    plugin = operand_pods(cluster, operands.DEVICE_PLUGIN)["gpu-node"]

    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, "no-such-key")
    message = "specified config no-such-key does not exist"

    def sidecar_failed(pod: Any) -> bool:
        state = container_status(pod, "config-manager").state
        return bool(state.waiting and state.waiting.reason == "CrashLoopBackOff" and state.waiting.message == message)

    wait_for(lambda: sidecar_failed(operand_pods(cluster, operands.DEVICE_PLUGIN)["gpu-node"]), TIMEOUT_S,
             "the device plugin's config-manager on gpu-node to crash-loop")
    running = operand_pods(cluster, operands.DEVICE_PLUGIN)["gpu-node"]
    assert running.metadata.uid == plugin.metadata.uid and not pod_ready(running)
    assert container_status(running, "config-manager").restart_count >= 1
    assert shows_replicas(cluster, "gpu-node", counts["gpu-node"], 4), "the loaded config stays in effect"
    wait_for(lambda: container_status(operand_pods(cluster, operands.GFD)["gpu-node"], "config-manager").state.waiting,
             TIMEOUT_S, "GFD's config-manager on gpu-node to fail too")

    cluster.kubectl("delete", "pod", "-n", cluster.operator_namespace, running.metadata.name, "--wait=false")
    status = "Init:CrashLoopBackOff" if version == OLD_PLUGIN else "CrashLoopBackOff"
    new = wait_for(lambda: next((p for n, p in operand_pods(cluster, operands.DEVICE_PLUGIN).items()
                                 if n == "gpu-node" and p.metadata.uid != plugin.metadata.uid
                                 and kubectl_status(cluster, p) == status), None),
                   TIMEOUT_S, f"the new device-plugin pod on gpu-node to show {status}")
    new = cluster.core.read_namespaced_pod(new.metadata.name, cluster.operator_namespace)  # as kubectl saw it
    init = container_status(new, "config-manager-init")
    assert not pod_ready(new)
    if version == OLD_PLUGIN:
        assert (init.state.waiting.reason, init.state.waiting.message) == ("CrashLoopBackOff", message)
        wait_for(lambda: advertised(cluster, "gpu-node")[0][SHARED] == "0", TIMEOUT_S, "gpu-node's allocatable to drop to 0")
        assert cluster.node("gpu-node").status.capacity[SHARED] == str(counts["gpu-node"] * 4), "capacity keeps them"
    else:
        assert init.state.terminated.reason == "Completed" and init.restart_count == 0
        assert container_status(new, "nvidia-device-plugin").state.running, "the plugin runs its default config"
        assert sidecar_failed(new)
        wait_for(lambda: shows_replicas(cluster, "gpu-node", counts["gpu-node"], 4), TIMEOUT_S,
                 "gpu-node to serve the default config (shared, 4 replicas)")

    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, None)  # the way back: `default` again
    wait_for(lambda: shows_replicas(cluster, "gpu-node", counts["gpu-node"], 4) and pod_ready(
        operand_pods(cluster, operands.DEVICE_PLUGIN)["gpu-node"]), TIMEOUT_S, "gpu-node to serve again, Ready")


def test_a_config_the_plugin_refuses_fails_its_container(clean_cluster: Cluster, tmp_path: Path) -> None:
    """Contract: a bad config makes the `nvidia-device-plugin` container exit with `error starting
    plugins: unable to load config`; the pod is not Ready and the node's resources go to 0."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "broken": seed_config(1)})
    point_plugin_at(cluster, "whole")
    wait_all_show(cluster, counts, 1)

    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, "broken")

    def plugin_failed() -> str | None:
        state = container_status(operand_pods(cluster, operands.DEVICE_PLUGIN)["gpu-node"], "nvidia-device-plugin").state
        return state.waiting.message if state.waiting and state.waiting.reason == "CrashLoopBackOff" else None

    message = wait_for(plugin_failed, TIMEOUT_S, "the nvidia-device-plugin container on gpu-node to crash-loop")
    assert message.startswith("error starting plugins: unable to load config: ")
    assert "number of replicas must be >= 2" in message
    assert not pod_ready(operand_pods(cluster, operands.DEVICE_PLUGIN)["gpu-node"])
    wait_for(lambda: advertised(cluster, "gpu-node")[0][GPU] == "0", TIMEOUT_S, "gpu-node's allocatable to drop to 0")
    assert cluster.node("gpu-node").status.capacity[GPU] == str(counts["gpu-node"])
    assert all(shows_replicas(cluster, n, c, 1) for n, c in counts.items() if n != "gpu-node")

    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, None)
    wait_for(lambda: shows_replicas(cluster, "gpu-node", counts["gpu-node"], 1), TIMEOUT_S, "gpu-node to serve again")


def test_request_for_two_shared_replicas_fails_admission(clean_cluster: Cluster, workload_namespace: str, tmp_path: Path) -> None:
    """Contract: with `failRequestsGreaterThanOne`, a container asking for 2 shared replicas ends
    Failed / UnexpectedAdmissionError with the plugin's message; 1 per container runs, even when a
    pod's containers together need 2 (the plugin validates each container's Allocate)."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"shared": seed_config(4)})
    point_plugin_at(cluster, "shared")
    wait_all_show(cluster, counts, 4)
    namespace = workload_namespace
    pods = [gpu_pod("asks-two", namespace, "gpu-node", 2), gpu_pod("asks-one", namespace, "gpu-node", 1),
            gpu_pod("two-containers-one-each", namespace, "gpu-node", 1, 1)]
    cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(p) for p in pods))

    def phase(name: str) -> str | None:
        return cluster.core.read_namespaced_pod(name, namespace).status.phase

    wait_for(lambda: phase("asks-two") == "Failed", TIMEOUT_S, "the 2-replica pod to fail admission")
    status = cluster.core.read_namespaced_pod("asks-two", namespace).status
    assert status.reason == "UnexpectedAdmissionError"
    assert (f'invalid allocation request for "{SHARED}": invalid request: maximum request size for shared '
            "resources is 1; found 2") in status.message
    wait_for(lambda: phase("asks-one") == "Running" and phase("two-containers-one-each") == "Running", TIMEOUT_S,
             "the 1-replica pods to run")
    stays(lambda: phase("asks-two") == "Failed" and phase("asks-one") == "Running", 1, "the pods' phases")


def test_configmap_that_does_not_exist_keeps_new_pods_from_starting(clean_cluster: Cluster) -> None:
    """A ClusterPolicy naming a ConfigMap that does not exist: the new device-plugin pods cannot mount
    it (not Ready, FailedMount) and the nodes' resources go to 0 until it is created."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    cluster.kubectl("patch", POLICY, "--type", "merge", "-p",
                    json.dumps({"spec": {"devicePlugin": {"config": {"name": CONFIGMAP, "default": "whole"}}}}))
    stuck = wait_for(lambda: next((n for n, p in operand_pods(cluster, operands.DEVICE_PLUGIN).items()
                                   if not pod_ready(p) and advertised(cluster, n)[0].get(GPU) == "0"), None), TIMEOUT_S,
                     "a node whose new plugin pod cannot mount the ConfigMap to drop its allocatable to 0")
    pod = operand_pods(cluster, operands.DEVICE_PLUGIN)[stuck]
    assert cluster.node(stuck).status.capacity[GPU] == str(counts[stuck])
    # the allocatable drops once the old plugin pod is gone, maybe before the new one has failed to mount
    events = wait_for(lambda: cluster.core.list_namespaced_event(
        cluster.operator_namespace, field_selector=f"involvedObject.name={pod.metadata.name},reason=FailedMount").items,
        TIMEOUT_S, f"the FailedMount event of {pod.metadata.name}")
    assert f'configmap "{CONFIGMAP}" not found' in events[0].message
    assert kubectl_status(cluster, pod).startswith("Init:")
    cluster.kubectl("create", "configmap", CONFIGMAP, "-n", cluster.operator_namespace, "--from-literal=whole=version: v1")
    wait_all_show(cluster, counts, 1)


def test_deleting_the_clusterpolicy_removes_every_operand_and_a_new_one_brings_them_back(clean_cluster: Cluster) -> None:
    """The operands are owned by the ClusterPolicy: deleting it garbage-collects them (and the
    GPU resources go with the plugin); the chart's instance created again brings them all back."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    cluster.kubectl("delete", POLICY, "--wait=true")
    wait_for(lambda: not daemonset_hashes(cluster), TIMEOUT_S, "the operand DaemonSets to be garbage-collected")
    wait_for(lambda: all(advertised(cluster, n)[0].get(GPU) == "0" for n in counts), TIMEOUT_S, "allocatable to drop to 0")
    cluster.custom.create_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.default_instance())
    wait_for(lambda: set(daemonset_hashes(cluster)) == set(CHART_OPERANDS), TIMEOUT_S, "the operands to come back")
    wait_all_show(cluster, counts, 1)


def _policy_status(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.custom.get_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, name).get("status") or {}


def test_a_second_clusterpolicy_is_ignored_and_changes_nothing(clean_cluster: Cluster) -> None:
    """The operator reconciles the oldest ClusterPolicy and leaves the others alone: no status
    written on them (v26.7 getSingletonClusterPolicy; its `ignored` state stays in memory), and a
    change to one renders nothing."""
    cluster = clean_cluster
    hashes = daemonset_hashes(cluster)
    second = {**cp.default_instance(), "metadata": {"name": "gpu-cluster-policy"}}
    second["spec"]["devicePlugin"] = {**second["spec"].get("devicePlugin", {}), "config": {"name": "no-such-map"}}
    cluster.custom.create_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, second)
    try:
        stays(lambda: daemonset_hashes(cluster) == hashes and not _policy_status(cluster, "gpu-cluster-policy"), 3,
              "the operand DaemonSets or the newer ClusterPolicy's status")
        assert _policy_status(cluster, cp.CLUSTER_POLICY).get("state") == "ready"
    finally:
        cluster.custom.delete_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, "gpu-cluster-policy")


def test_a_gpucluster_beside_the_clusterpolicy_stops_its_reconciliation(clean_cluster: Cluster) -> None:
    """GPU Operator v26.7: with a GPUCluster present the ClusterPolicy is notReady with the conflict
    as its Error condition and a change to it renders nothing; once the GPUCluster is gone the
    operator reconciles it again (ready, its conditions cleared)."""
    cluster = clean_cluster
    hashes = daemonset_hashes(cluster)
    cluster.custom.create_cluster_custom_object(cp.GROUP, cp.GPUCLUSTER_VERSION, cp.GPUCLUSTER_PLURAL, {
        "apiVersion": f"{cp.GROUP}/{cp.GPUCLUSTER_VERSION}", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"}})
    try:
        def error() -> str:
            status = _policy_status(cluster, cp.CLUSTER_POLICY)
            return next((c["message"] for c in status.get("conditions") or [] if c["type"] == "Error"
                         and c["status"] == "True" and status.get("state") == "notReady"), "")

        assert wait_for(error, TIMEOUT_S, "the ClusterPolicy notReady") == cp.gpucluster_conflict("gpu-cluster")
        cluster.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY, {
            "spec": {"toolkit": {"env": [{"name": "GPUSHARE_TEST", "value": "1"}]}}})
        stays(lambda: daemonset_hashes(cluster) == hashes, 3, "the operand DaemonSets")
    finally:
        cluster.custom.delete_cluster_custom_object(cp.GROUP, cp.GPUCLUSTER_VERSION, cp.GPUCLUSTER_PLURAL, "gpu-cluster")
        cluster.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY, {
            "spec": {"toolkit": {"env": None}}})
    wait_for(lambda: daemonset_hashes(cluster) == hashes and _policy_status(cluster, cp.CLUSTER_POLICY).get(
        "state") == "ready", TIMEOUT_S, "the operands as before and the ClusterPolicy ready once the GPUCluster is gone")


def test_operand_marked_not_ready_by_the_node_lifecycle_controller_is_ready_again(clean_cluster: Cluster) -> None:
    """A node whose lease lapsed (a loaded control plane) has its pods marked not Ready by the node
    lifecycle controller (MarkPodsNotReady: the Ready condition set False, an UpdateStatus). The
    device plugin and GFD run on; while the node is Ready their kubelet reports them Ready again,
    the same pods."""
    cluster = clean_cluster
    namespace = cluster.operator_namespace
    marked = {}
    for app in (operands.DEVICE_PLUGIN, operands.GFD):
        pod = operand_pods(cluster, app)["gpu-node"]
        assert pod_ready(pod), f"{app} on gpu-node is Ready to begin with"
        for condition in pod.status.conditions:
            if condition.type == "Ready":
                condition.status = "False"
        marked[app] = cluster.core.replace_namespaced_pod_status(pod.metadata.name, namespace, pod).metadata.uid
    wait_for(lambda: all(pod_ready(operand_pods(cluster, app)["gpu-node"]) for app in marked), TIMEOUT_S,
             "the device plugin and GFD on gpu-node to be Ready again")
    assert {app: operand_pods(cluster, app)["gpu-node"].metadata.uid for app in marked} == marked, "the same pods"
