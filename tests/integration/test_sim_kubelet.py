"""The kubelet's view of the device plugin and GFD pods, which are real pods of real DaemonSets:
allocatable drops to 0 at once when the plugin does not run, capacity keeps the devices for the
kubelet's endpointStopGracePeriod and then drops to 0 (never removed); a pod the DaemonSet
controller re-creates is a new start (it reads the ConfigMap as it is now; from device plugin
v0.18.2 it serves the default config until its config-manager is told the node label), and a key
added to the ConfigMap reaches a RUNNING pod only once the kubelet refreshes the mounted volume
(contract "GPU Operator", per-node config)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operands
from tests.integration.sim_support import (
    CHART_PLUGIN, GPU, OLD_PLUGIN, SHARED, TIMEOUT_S, advertised, apply_configmap, container_status, label_node,
    node_history, operand_pods, physical_counts, point_plugin_at, pod_ready, run_device_plugin, shows_replicas,
    simulated_gpus, wait_all_show,
)
from tests.support.cluster import Cluster
from tests.support.seed import seed_config

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]
STOP_GRACE = "sim.gpushare.io/endpoint-stop-grace-seconds"


def test_no_device_plugin_means_allocatable_zero_and_capacity_kept(clean_cluster: Cluster) -> None:
    cluster = clean_cluster
    physical = physical_counts(cluster)["gpu-node-2"]
    label_node(cluster, "gpu-node-2", "nvidia.com/gpu.deploy.device-plugin", "false")  # the DaemonSet leaves the node
    wait_for(lambda: "gpu-node-2" not in operand_pods(cluster, operands.DEVICE_PLUGIN), TIMEOUT_S, "the plugin pod to go")
    wait_for(lambda: advertised(cluster, "gpu-node-2")[0][GPU] == "0", TIMEOUT_S, "allocatable to drop to 0")
    assert cluster.node("gpu-node-2").status.capacity[GPU] == str(physical)
    label_node(cluster, "gpu-node-2", "nvidia.com/gpu.deploy.device-plugin", "true")
    wait_for(lambda: advertised(cluster, "gpu-node-2")[0][GPU] == str(physical), TIMEOUT_S, "the plugin to serve again")


def test_a_resource_no_plugin_serves_keeps_its_capacity_for_the_grace_period_then_0_never_removed(
        clean_cluster: Cluster) -> None:
    """devicemanager endpointStopGracePeriod (5 minutes; shortened here on one node by the
    simulator's knob): capacity kept with allocatable 0 while it lasts, then capacity 0."""
    cluster = clean_cluster
    physical = physical_counts(cluster)["gpu-node-2"]
    cluster.core.patch_node("gpu-node-2", {"metadata": {"annotations": {STOP_GRACE: "3"}}})
    before = cluster.node("gpu-node-2")
    label_node(cluster, "gpu-node-2", "nvidia.com/gpu.deploy.device-plugin", "false")

    def resources(node: Any) -> tuple[str | None, str | None]:
        return (node.status.capacity or {}).get(GPU), (node.status.allocatable or {}).get(GPU)

    history = node_history(cluster, "gpu-node-2", resources, before, lambda now: now[0] == "0")
    assert history == [(str(physical), "0"), ("0", "0")], "unhealthy for the grace period, then 0, and still listed"
    label_node(cluster, "gpu-node-2", "nvidia.com/gpu.deploy.device-plugin", "true")
    wait_for(lambda: resources(cluster.node("gpu-node-2")) == (str(physical), str(physical)), TIMEOUT_S,
             "the plugin to serve again")


@pytest.mark.parametrize(("version", "default_first"), [(OLD_PLUGIN, False), (CHART_PLUGIN, True)])
def test_a_restarted_plugin_on_a_labelled_node_serves_the_default_first_from_v0_18_2(
        clean_cluster: Cluster, tmp_path: Path, version: str, default_first: bool) -> None:
    """config-manager commit ab05acef5 (v0.18.2): config-manager-init applies DEFAULT_CONFIG before
    its informer has seen the node label; the plugin and GFD start on it, then the sidecar switches
    them to the labelled key by SIGHUP: the node briefly advertises whole cards and GFD labels
    replicas=1. Up to v0.18.1 init waits for the label."""
    cluster = clean_cluster
    run_device_plugin(cluster, version)
    physical = physical_counts(cluster)["gpu-node"]
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    point_plugin_at(cluster, "whole")
    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, "shared")
    wait_for(lambda: shows_replicas(cluster, "gpu-node", physical, 4), TIMEOUT_S, "gpu-node to share")
    before = cluster.node("gpu-node")
    stamp = int(before.metadata.labels["nvidia.com/gfd.timestamp"])
    wait_for(lambda: time.time() >= stamp + 1, 5, "a new second for GFD's Unix-seconds timestamp")
    cluster.kubectl("delete", "pod", "-n", cluster.operator_namespace, "--field-selector=spec.nodeName=gpu-node",
                    "-l", f"app in ({operands.DEVICE_PLUGIN},{operands.GFD})")

    def view(node: Any) -> tuple[str | None, str | None, str | None, bool]:
        labels, allocatable = node.metadata.labels or {}, node.status.allocatable or {}
        return (labels.get("nvidia.com/gpu.replicas"), allocatable.get(GPU), allocatable.get(SHARED),
                int(labels.get("nvidia.com/gfd.timestamp", "0")) > stamp)

    history = node_history(cluster, "gpu-node", view, before,
                           lambda now: now == ("4", "0", str(physical * 4), True))
    served_default = any(allocatable == str(physical) for _, allocatable, _, _ in history)
    labelled_default = any(replicas == "1" for replicas, *_ in history)
    assert (served_default, labelled_default) == (default_first, default_first), history
    for app in (operands.DEVICE_PLUGIN, operands.GFD):
        pod = operand_pods(cluster, app)["gpu-node"]
        assert pod_ready(pod) and container_status(pod, "config-manager").restart_count == 0, app


def test_a_recreated_gfd_pod_is_a_new_start(clean_cluster: Cluster) -> None:
    cluster = clean_cluster
    old = operand_pods(cluster, operands.GFD)["gpu-node"]
    stamp = int(advertised(cluster, "gpu-node")[1]["nvidia.com/gfd.timestamp"])
    wait_for(lambda: time.time() >= stamp + 1, 5, "a new second for the Unix-seconds timestamp")
    cluster.kubectl("delete", "pod", "-n", cluster.operator_namespace, old.metadata.name)
    new = wait_for(lambda: next((p for n, p in operand_pods(cluster, operands.GFD).items()
                                 if n == "gpu-node" and p.metadata.uid != old.metadata.uid and pod_ready(p)), None),
                   TIMEOUT_S, "the DaemonSet controller to re-create GFD on gpu-node")
    assert new.metadata.owner_references[0].kind == "DaemonSet"
    wait_for(lambda: int(advertised(cluster, "gpu-node")[1]["nvidia.com/gfd.timestamp"]) > stamp, TIMEOUT_S,
             "the new GFD pod to write its start time")


def test_a_key_added_right_before_the_label_reaches_a_running_pod_only_after_the_volume_refresh(
        clean_cluster: Cluster, tmp_path: Path) -> None:
    """The issue's runbook mistake: write a new key, label the node at once. The running
    config-managers cannot see the key yet: they crash-loop (the old config stays) until the kubelet
    refreshes the mounted ConfigMap, then reload in place."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1"})
    point_plugin_at(cluster, "whole")
    wait_all_show(cluster, counts, 1)
    pods = {app: operand_pods(cluster, app)["gpu-node"] for app in (operands.DEVICE_PLUGIN, operands.GFD)}

    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, "shared")
    wait_for(lambda: container_status(operand_pods(cluster, operands.DEVICE_PLUGIN)["gpu-node"], "config-manager").restart_count >= 1,
             TIMEOUT_S, "the plugin's config-manager to fail on the key it cannot see yet")
    assert shows_replicas(cluster, "gpu-node", counts["gpu-node"], 1), "the old config stays in effect meanwhile"
    wait_for(lambda: shows_replicas(cluster, "gpu-node", counts["gpu-node"], 4), TIMEOUT_S + 30,
             "gpu-node to serve the new key once the mounted volume is refreshed")
    for app, pod in pods.items():
        now = operand_pods(cluster, app)["gpu-node"]
        assert now.metadata.uid == pod.metadata.uid, f"{app} reloaded in place"
        assert container_status(now, "config-manager").restart_count >= 1, app


def test_a_new_pod_mounts_the_configmap_as_it_is_now(clean_cluster: Cluster, tmp_path: Path) -> None:
    """The safe order: after the ConfigMap write, re-create the node's plugin and GFD pods (they
    mount it afresh), then label: no config-manager restarts."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1"})
    point_plugin_at(cluster, "whole")
    wait_all_show(cluster, counts, 1)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    old = {app: operand_pods(cluster, app)["gpu-node"].metadata.uid for app in (operands.DEVICE_PLUGIN, operands.GFD)}
    cluster.kubectl("delete", "pod", "-n", cluster.operator_namespace, "--field-selector=spec.nodeName=gpu-node",
                    "-l", f"app in ({operands.DEVICE_PLUGIN},{operands.GFD})")
    wait_for(lambda: all((p := operand_pods(cluster, app).get("gpu-node")) is not None and p.metadata.uid != uid and pod_ready(p)
                         for app, uid in old.items()), TIMEOUT_S, "new plugin and GFD pods on gpu-node")
    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, "shared")
    wait_for(lambda: shows_replicas(cluster, "gpu-node", counts["gpu-node"], 4), TIMEOUT_S, "gpu-node to serve the new key")
    for app in old:
        assert container_status(operand_pods(cluster, app)["gpu-node"], "config-manager").restart_count == 0
