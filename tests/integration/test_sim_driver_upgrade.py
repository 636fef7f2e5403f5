"""`spec.daemonsets.*` reaches every operand, the driver's included, and with the chart's
`driver.upgradePolicy.autoUpgrade: true` the upgrade controller then walks every GPU node through
cordon, GPU-pod eviction and driver restart, one node at a time (contract "GPU Operator";
k8s-operator-libs pkg/upgrade). With autoUpgrade off nothing is disrupted."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import watch

from gpushare.kube import wait_for
from gpushare.simulator import operands
from gpushare.simulator import upgrade as u
from tests.integration.sim_support import (
    POLICY, TIMEOUT_S, UPGRADE_STATE, daemonset_hashes, node_events, operand_pods, patch_policy, physical_counts,
    simulated_gpus, stays, wait_ready,
)
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]
POOL_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "gpushare.io/pool", "operator": "Exists", "effect": "NoSchedule"}]
STEPS = [u.REQUIRED, u.CORDON, u.WAIT_JOBS, u.POD_DELETION, u.POD_RESTART, u.VALIDATION, u.UNCORDON, u.DONE]


class NodeRecorder:
    """Every (node, upgrade state, unschedulable) the GPU nodes go through, from a watch."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.seen: list[tuple[str, str, bool]] = []
        self.stop = threading.Event()
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        version = self.cluster.core.list_node().metadata.resource_version
        self.started.set()
        stream = watch.Watch()
        for event in stream.stream(self.cluster.core.list_node, resource_version=version, timeout_seconds=300):
            node = event["object"]
            self.seen.append((node.metadata.name, (node.metadata.labels or {}).get(UPGRADE_STATE, ""), bool(node.spec.unschedulable)))
            if self.stop.is_set():
                stream.stop()

    def most_cordoned_at_once(self) -> int:
        cordoned: dict[str, bool] = {}
        most = 0
        for name, _, unschedulable in self.seen:
            cordoned[name] = unschedulable
            most = max(most, sum(cordoned.values()))
        return most


@pytest.fixture
def recorder(clean_cluster: Cluster) -> Iterator[NodeRecorder]:
    recording = NodeRecorder(clean_cluster)
    recording.thread.start()
    recording.started.wait(10)
    yield recording
    recording.stop.set()


@pytest.fixture
def gpu_workload(clean_cluster: Cluster) -> Iterator[str]:
    """A running pod using a GPU of gpu-node-2 (the upgrade controller evicts it)."""
    name = "gpu-workload"
    clean_cluster.core.create_namespace({"metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: name}}})
    wait_for(lambda: clean_cluster.core.read_namespaced_service_account("default", name), 30, "the default ServiceAccount")
    clean_cluster.core.create_namespaced_pod(name, {"metadata": {"name": "trainer"}, "spec": {
        "nodeSelector": {"kubernetes.io/hostname": "gpu-node-2"}, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    wait_for(lambda: clean_cluster.core.read_namespaced_pod("trainer", name).status.phase == "Running", TIMEOUT_S,
             "the GPU workload to run")
    yield name


def driver_uids(cluster: Cluster) -> dict[str, str]:
    return {node: pod.metadata.uid for node, pod in operand_pods(cluster, operands.DRIVER).items()}


def states_of(recorder: NodeRecorder, node: str) -> list[str]:
    states = [s for n, s, _ in recorder.seen if n == node]
    return [s for i, s in enumerate(states) if s and (i == 0 or states[i - 1] != s)]


def test_a_daemonsets_toleration_change_upgrades_the_driver_on_every_gpu_node(
        clean_cluster: Cluster, recorder: NodeRecorder, gpu_workload: str) -> None:
    cluster = clean_cluster
    gpu_nodes = sorted(physical_counts(cluster))
    hashes, drivers = daemonset_hashes(cluster), driver_uids(cluster)
    patch_policy(cluster, {"daemonsets": {"tolerations": POOL_TOLERATIONS}})

    wait_for(lambda: all(hashes[name] != new for name, new in daemonset_hashes(cluster).items()), TIMEOUT_S,
             "the operator to re-render every operand DaemonSet, the driver's included")
    template = cluster.apps.read_namespaced_daemon_set(operands.DRIVER, cluster.operator_namespace).spec.template
    assert [t.key for t in template.spec.tolerations] == ["nvidia.com/gpu", "gpushare.io/pool"]

    def upgraded() -> bool:
        nodes = {n.metadata.name: n for n in cluster.core.list_node().items}
        current = driver_uids(cluster)
        return all(nodes[n].metadata.labels.get(UPGRADE_STATE) == u.DONE and not nodes[n].spec.unschedulable
                   and current.get(n) not in (None, drivers[n]) for n in gpu_nodes)

    wait_for(upgraded, 3 * TIMEOUT_S, "every GPU node to finish its driver upgrade")
    wait_ready(cluster)
    for node in gpu_nodes:
        assert states_of(recorder, node) == STEPS, node
        # each step is an Event on the node too (their order is the watch's: Events have 1 s resolution)
        assert {f"Successfully updated node state label to {s}" for s in STEPS} <= set(node_events(cluster, node, u.EVENT_REASON))
    assert recorder.most_cordoned_at_once() == 1, "maxParallelUpgrades 1: one node at a time"
    assert not cluster.core.list_namespaced_pod(gpu_workload).items, "its GPU pods were evicted"
    assert "Deleted workload pods on the node for the driver upgrade" in node_events(cluster, "gpu-node-2", u.EVENT_REASON)


def test_with_auto_upgrade_off_nothing_is_disrupted(clean_cluster: Cluster, recorder: NodeRecorder) -> None:
    cluster = clean_cluster
    drivers = driver_uids(cluster)
    before = cluster.apps.read_namespaced_daemon_set(operands.DRIVER, cluster.operator_namespace).metadata.generation
    patch_policy(cluster, {"driver": {"upgradePolicy": {"autoUpgrade": False}}, "daemonsets": {"tolerations": POOL_TOLERATIONS}})
    wait_for(lambda: cluster.apps.read_namespaced_daemon_set(operands.DRIVER, cluster.operator_namespace).metadata.generation > before,
             TIMEOUT_S, "the driver DaemonSet's template to change")
    wait_for(lambda: not any(UPGRADE_STATE in (n.metadata.labels or {}) for n in cluster.core.list_node().items), TIMEOUT_S,
             "the upgrade controller to remove its state labels")

    def undisturbed() -> bool:
        return driver_uids(cluster) == drivers and not any(n.spec.unschedulable for n in cluster.core.list_node().items)

    stays(undisturbed, 5, "the driver pods or the nodes' schedulability")
    assert cluster.kubectl("get", POLICY, "-o", "jsonpath={.status.state}").stdout == "notReady", \
        "the driver pods run an older template"
    assert recorder.most_cordoned_at_once() == 0
