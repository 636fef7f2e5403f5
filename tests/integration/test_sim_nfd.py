"""GFD's labels by device-plugin version: from v0.19 GFD publishes them in an NFD NodeFeature object
(`nvidia-features-for-<node>` in its namespace, labelled nfd.node.kubernetes.io/node-name, owned by
its DaemonSet and pod: k8s-device-plugin internal/lm/output.go) and nfd-master writes them to the
node, naming them in nfd.node.kubernetes.io/feature-labels (node-feature-discovery
pkg/nfd-master/nfd-master.go); before v0.19 the simulator's GFD labels the node itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import nfd, operands
from gpushare_testbed.simulator.node_view import gfd_owns
from tests.integration.sim_support import (
    OLD_PLUGIN, TIMEOUT_S, advertised, apply_configmap, label_node, operand_pods, physical_counts, point_plugin_at,
    run_device_plugin, shows_replicas, simulated_gpus,
)
from tests.support.cluster import Cluster
from tests.support.seed import seed_config

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]


def node_feature(cluster: Cluster, node: str) -> dict[str, Any] | None:
    try:
        return cluster.custom.get_namespaced_custom_object(nfd.GROUP, nfd.VERSION, cluster.operator_namespace,
                                                           nfd.PLURAL, f"nvidia-features-for-{node}")
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def gfd_labels(cluster: Cluster, node: str) -> dict[str, str]:
    return {k: v for k, v in advertised(cluster, node)[1].items() if gfd_owns(k)}


def test_gfd_publishes_a_node_feature_that_nfd_master_copies_to_the_node(clean_cluster: Cluster, tmp_path: Path) -> None:
    cluster = clean_cluster
    physical = physical_counts(cluster)["gpu-node"]
    obj = wait_for(lambda: node_feature(cluster, "gpu-node"), TIMEOUT_S, "GFD's NodeFeature for gpu-node")
    assert obj["metadata"]["labels"] == {nfd.NODE_NAME_LABEL: "gpu-node"}
    gfd = operand_pods(cluster, operands.GFD)["gpu-node"]
    owners = {(o["kind"], o["name"], o.get("controller", False)) for o in obj["metadata"]["ownerReferences"]}
    assert owners == {("DaemonSet", operands.GFD, True), ("Pod", gfd.metadata.name, False)}
    labels = obj["spec"]["labels"]
    assert labels["nvidia.com/gpu.count"] == str(physical) and labels["nvidia.com/gpu.replicas"] == "1"
    node = cluster.node("gpu-node")
    assert {k: node.metadata.labels.get(k) for k in labels} == labels, "nfd-master wrote every label to the node"
    assert set(node.metadata.annotations[nfd.FEATURE_LABELS_ANNOTATION].split(",")) == set(labels)

    # a change of config reaches the object first, then the node
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    point_plugin_at(cluster, "whole")
    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, "shared")
    wait_for(lambda: (node_feature(cluster, "gpu-node") or {})["spec"]["labels"].get("nvidia.com/gpu.replicas") == "4",
             TIMEOUT_S, "GFD to publish 4 replicas")
    wait_for(lambda: shows_replicas(cluster, "gpu-node", physical, 4), TIMEOUT_S, "nfd-master to label the node")


def test_nfd_master_removes_the_labels_of_a_node_feature_that_is_gone(clean_cluster: Cluster) -> None:
    """GFD disabled on the node keeps its NodeFeature (its DaemonSet still owns it); deleting the
    object makes nfd-master remove every label it wrote from it."""
    cluster = clean_cluster
    wait_for(lambda: node_feature(cluster, "gpu-node-2"), TIMEOUT_S, "GFD's NodeFeature for gpu-node-2")
    label_node(cluster, "gpu-node-2", "nvidia.com/gpu.deploy.gpu-feature-discovery", "false")
    wait_for(lambda: "gpu-node-2" not in operand_pods(cluster, operands.GFD), TIMEOUT_S, "GFD to leave gpu-node-2")
    published = node_feature(cluster, "gpu-node-2")
    assert published is not None, "the object outlives the pod (its DaemonSet owns it too)"
    cluster.custom.delete_namespaced_custom_object(nfd.GROUP, nfd.VERSION, cluster.operator_namespace, nfd.PLURAL,
                                                   "nvidia-features-for-gpu-node-2")
    wait_for(lambda: not gfd_labels(cluster, "gpu-node-2"), TIMEOUT_S, "nfd-master to remove GFD's labels")
    assert nfd.FEATURE_LABELS_ANNOTATION not in (cluster.node("gpu-node-2").metadata.annotations or {})
    label_node(cluster, "gpu-node-2", "nvidia.com/gpu.deploy.gpu-feature-discovery", "true")
    wait_for(lambda: gfd_labels(cluster, "gpu-node-2").get("nvidia.com/gpu.replicas") == "1", TIMEOUT_S,
             "GFD to publish again")


def test_before_v0_19_gfd_labels_the_node_itself(clean_cluster: Cluster, tmp_path: Path) -> None:
    cluster = clean_cluster
    physical = physical_counts(cluster)["gpu-node"]
    run_device_plugin(cluster, OLD_PLUGIN)
    published = wait_for(lambda: node_feature(cluster, "gpu-node"), TIMEOUT_S, "the NodeFeature the chart's GFD wrote")
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    point_plugin_at(cluster, "whole")
    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, "shared")
    wait_for(lambda: shows_replicas(cluster, "gpu-node", physical, 4), TIMEOUT_S, "GFD to label 4 replicas")
    assert node_feature(cluster, "gpu-node")["spec"]["labels"] == published["spec"]["labels"], "not through NFD"
