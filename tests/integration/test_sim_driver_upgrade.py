"""`spec.daemonsets.*` reaches every operand, the driver's included, and with the chart's
`driver.upgradePolicy.autoUpgrade: true` the upgrade controller then walks every GPU node through
cordon, GPU-pod eviction and driver restart, one node at a time (contract "GPU Operator";
k8s-operator-libs pkg/upgrade). Each new driver pod's init container, the driver manager, takes the
operands off its node and puts them back before the driver starts (k8s-driver-manager
evictAllGPUOperatorComponents). A GPU pod the upgrade cannot delete (no controller, an emptyDir, a
DaemonSet's) fails its node, still cordoned, and with maxParallelUpgrades 1 the fleet's upgrade
stops there (pod_manager.go, kubectl's drain filters). With autoUpgrade off nothing is disrupted.
From GPU Operator v26.7 a change that keeps the driver's DRIVER_CONFIG_DIGEST (the tolerations are
not in it) takes the restart-only path: cordon, driver pod restarted in place, nothing evicted
(internal/predicates/restart_only.go; k8s-operator-libs upgrade_inplace.go). The full flow is
therefore shown on a v26.3 operator (`full_flow`: its validator, which carries the operator's release)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import watch

from gpushare.polling import wait_for
from gpushare_testbed.simulator import driver_manager as dm
from gpushare_testbed.simulator import operands
from gpushare_testbed.simulator import upgrade as u
from tests.integration.sim_support import (
    POLICY, TIMEOUT_S, UPGRADE_STATE, daemonset_hashes, label_node, node_events, operand_pods, patch_policy,
    patch_policy_and_wait, physical_counts, simulated_gpus, stays, wait_ready,
)
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]
POOL_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "gpushare.io/pool", "operator": "Exists", "effect": "NoSchedule"}]
STEPS = [u.REQUIRED, u.CORDON, u.WAIT_JOBS, u.POD_DELETION, u.POD_RESTART, u.VALIDATION, u.UNCORDON, u.DONE]
RESTART_ONLY_STEPS = [u.REQUIRED, u.POD_RESTART, u.VALIDATION, u.UNCORDON, u.DONE]
FULL_FLOW_OPERATOR = "v26.3.3"  # the newest release without the restart-only predicate
PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"


class NodeRecorder:
    """Every (node, upgrade state, unschedulable, device-plugin deploy label) the GPU nodes go
    through, from a watch, and each node's upgrade state when it began (`initial`)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.seen: list[tuple[str, str, bool, str]] = []
        self.initial: dict[str, str] = {}
        self.stop = threading.Event()
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        nodes = self.cluster.core.list_node()
        self.initial = {n.metadata.name: (n.metadata.labels or {}).get(UPGRADE_STATE, "") for n in nodes.items}
        version = nodes.metadata.resource_version
        self.started.set()
        stream = watch.Watch()
        for event in stream.stream(self.cluster.core.list_node, resource_version=version, timeout_seconds=300):
            node = event["object"]
            labels = node.metadata.labels or {}
            self.seen.append((node.metadata.name, labels.get(UPGRADE_STATE, ""), bool(node.spec.unschedulable),
                              labels.get(PLUGIN_LABEL, "")))
            if self.stop.is_set():
                stream.stop()

    def most_cordoned_at_once(self) -> int:
        cordoned: dict[str, bool] = {}
        most = 0
        for name, _, unschedulable, _ in self.seen:
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
def full_flow(clean_cluster: Cluster) -> None:
    """The operator of v26.3 (its validator's image; the driver template and its digest stay as they
    are): a driver upgrade takes the full flow, evicting GPU pods. Named before `recorder`, so that
    what it re-renders is not recorded."""
    patch_policy_and_wait(clean_cluster, {"validator": {"version": FULL_FLOW_OPERATOR}})


def namespace(cluster: Cluster, name: str) -> str:
    cluster.core.create_namespace({"metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: name}}})
    wait_for(lambda: cluster.core.read_namespaced_service_account("default", name), 30, "the default ServiceAccount")
    return name


def gpu_pod_spec(node: str, volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0, "volumes": volumes or [],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}


def workload(cluster: Cluster, ns: str, name: str, node: str, kind: str = "Deployment",
             volumes: list[dict[str, Any]] | None = None) -> None:
    """A pod using a GPU of `node`: bare (`Pod`), or from a Deployment or a DaemonSet."""
    spec = gpu_pod_spec(node, volumes)
    labels = {"app": name}
    if kind == "Pod":
        cluster.core.create_namespaced_pod(ns, {"metadata": {"name": name, "labels": labels}, "spec": spec})
    else:
        body = {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": labels},
                                                     "template": {"metadata": {"labels": labels}, "spec": spec}}}
        create = cluster.apps.create_namespaced_deployment if kind == "Deployment" else cluster.apps.create_namespaced_daemon_set
        create(ns, body)
    wait_for(lambda: any(p.status.phase == "Running" for p in cluster.core.list_namespaced_pod(
        ns, label_selector=f"app={name}").items), TIMEOUT_S, f"{kind} {name} to run on {node}")


def pods_of(cluster: Cluster, ns: str, name: str) -> list[Any]:
    return cluster.core.list_namespaced_pod(ns, label_selector=f"app={name}").items


@pytest.fixture
def gpu_workload(clean_cluster: Cluster) -> Iterator[tuple[str, str]]:
    """A Deployment's pod using a GPU of gpu-node-2 (the upgrade controller evicts it): (namespace, its uid)."""
    ns = namespace(clean_cluster, "gpu-workload")
    workload(clean_cluster, ns, "trainer", "gpu-node-2")
    yield ns, pods_of(clean_cluster, ns, "trainer")[0].metadata.uid


def driver_uids(cluster: Cluster) -> dict[str, str]:
    return {node: pod.metadata.uid for node, pod in operand_pods(cluster, operands.DRIVER).items()}


def upgraded(cluster: Cluster, gpu_nodes: list[str], drivers: dict[str, str]) -> bool:
    """Every GPU node upgrade-done, schedulable, with a driver pod other than `drivers`' (node -> uid)."""
    nodes = {n.metadata.name: n for n in cluster.core.list_node().items}
    current = driver_uids(cluster)
    return all(nodes[n].metadata.labels.get(UPGRADE_STATE) == u.DONE and not nodes[n].spec.unschedulable
               and current.get(n) not in (None, drivers[n]) for n in gpu_nodes)


def states_of(recorder: NodeRecorder, node: str) -> list[str]:
    """The upgrade states `node` went through after the one it was in when the recording began (any
    other write to the node, a label or its status, is an event that repeats its current state)."""
    states = [recorder.initial.get(node, "")] + [s for n, s, _, _ in recorder.seen if n == node]
    return [s for before, s in zip(states, states[1:]) if s and s != before]


def test_a_daemonsets_toleration_change_upgrades_the_driver_on_every_gpu_node(
        clean_cluster: Cluster, full_flow: None, recorder: NodeRecorder, gpu_workload: tuple[str, str]) -> None:
    cluster = clean_cluster
    gpu_nodes = sorted(physical_counts(cluster))
    hashes, drivers = daemonset_hashes(cluster), driver_uids(cluster)
    patch_policy(cluster, {"daemonsets": {"tolerations": POOL_TOLERATIONS}})

    wait_for(lambda: all(hashes[name] != new for name, new in daemonset_hashes(cluster).items()), TIMEOUT_S,
             "the operator to re-render every operand DaemonSet, the driver's included")
    template = cluster.apps.read_namespaced_daemon_set(operands.DRIVER, cluster.operator_namespace).spec.template
    assert [t.key for t in template.spec.tolerations] == ["nvidia.com/gpu", "gpushare.io/pool"]

    wait_for(lambda: upgraded(cluster, gpu_nodes, drivers), 3 * TIMEOUT_S, "every GPU node to finish its driver upgrade")
    wait_ready(cluster)
    for node in gpu_nodes:
        assert states_of(recorder, node) == STEPS, node
        # each step is an Event on the node too (their order is the watch's: Events have 1 s resolution)
        assert {f"Successfully updated node state label to {s}" for s in STEPS} <= set(node_events(cluster, node, u.EVENT_REASON))
        # the new driver pod's driver manager took the operands off and put them back, before the
        # upgrade controller saw the driver ready (pod-restart-required -> validation-required)
        seen = [(s, plugin) for n, s, _, plugin in recorder.seen if n == node]
        paused = [i for i, (_, plugin) in enumerate(seen) if plugin == dm.PAUSED]
        assert paused and all(seen[i][0] == u.POD_RESTART for i in paused), (node, seen)
        validated = next(i for i, (s, _) in enumerate(seen) if s == u.VALIDATION)
        assert paused[-1] < validated and seen[validated][1] == "true", (node, seen)
    assert recorder.most_cordoned_at_once() == 1, "maxParallelUpgrades 1: one node at a time"
    ns, uid = gpu_workload
    assert uid not in {p.metadata.uid for p in pods_of(cluster, ns, "trainer")}, "its GPU pod was evicted"
    assert "Deleted workload pods on the node for the driver upgrade" in node_events(cluster, "gpu-node-2", u.EVENT_REASON)


def test_gpu_pods_the_upgrade_cannot_delete_fail_their_node_and_stop_the_fleet(
        clean_cluster: Cluster, full_flow: None, recorder: NodeRecorder) -> None:
    """Chart defaults (podDeletion force and deleteEmptyDir false, drain off, maxParallelUpgrades 1): a
    GPU pod without a controller, with an emptyDir, or of a DaemonSet, on every GPU node. The first
    node the upgrade takes goes upgrade-failed and stays cordoned with its pod running, and no other
    node starts. The way out for a node: the pod gone, its state label set back to upgrade-required."""
    cluster = clean_cluster
    ns = namespace(cluster, "blockers")
    blockers = {"gpu-node": "bare", "gpu-node-2": "scratch", "gpu-node-mig": "agent"}
    workload(cluster, ns, "bare", "gpu-node", kind="Pod")
    workload(cluster, ns, "scratch", "gpu-node-2", volumes=[{"name": "tmp", "emptyDir": {}}])
    workload(cluster, ns, "agent", "gpu-node-mig", kind="DaemonSet")
    patch_policy(cluster, {"daemonsets": {"tolerations": POOL_TOLERATIONS}})

    done: list[str] = []
    for _ in blockers:
        def one_failed() -> str | None:
            nodes = cluster.core.list_node(label_selector=f"{UPGRADE_STATE}={u.FAILED}").items
            return nodes[0].metadata.name if nodes else None

        failed = wait_for(one_failed, 2 * TIMEOUT_S, "a GPU node to fail its driver upgrade")
        assert cluster.node(failed).spec.unschedulable, f"{failed} stays cordoned"
        assert [p.status.phase for p in pods_of(cluster, ns, blockers[failed])] == ["Running"], "its pod kept running"

        def others_wait() -> bool:
            nodes = {n.metadata.name: (n.metadata.labels or {}).get(UPGRADE_STATE) for n in cluster.core.list_node().items}
            return all(nodes[n] == (u.DONE if n in done else u.REQUIRED) for n in blockers if n != failed)

        stays(others_wait, 3, "the other nodes' upgrade states (maxParallelUpgrades 1: the failed node holds the slot)")
        # the way out: the blocking pod gone, the node's upgrade asked for again
        if blockers[failed] == "agent":
            cluster.apps.delete_namespaced_daemon_set("agent", ns)
        elif blockers[failed] == "scratch":
            cluster.apps.delete_namespaced_deployment("scratch", ns)
        else:
            cluster.core.delete_namespaced_pod("bare", ns)
        wait_for(lambda: not pods_of(cluster, ns, blockers[failed]), TIMEOUT_S, "the blocking pod to go")
        label_node(cluster, failed, UPGRADE_STATE, u.REQUIRED)
        wait_for(lambda: (cluster.node(failed).metadata.labels or {}).get(UPGRADE_STATE) == u.DONE
                 and not cluster.node(failed).spec.unschedulable, 2 * TIMEOUT_S, f"{failed} to finish its upgrade")
        done.append(failed)
    assert sorted(done) == sorted(blockers)
    assert recorder.most_cordoned_at_once() == 1


def test_with_drain_enabled_a_daemonsets_gpu_pod_is_left_and_a_pod_without_controller_fails_the_drain(
        clean_cluster: Cluster, full_flow: None) -> None:
    """drain.enable: a failed GPU-pod deletion goes to drain-required; the drain leaves DaemonSet pods
    (IgnoreAllDaemonSets) but refuses a pod without a controller (drain.force false).
    maxParallelUpgrades 0: both nodes at once."""
    cluster = clean_cluster
    ns = namespace(cluster, "drain")
    workload(cluster, ns, "agent", "gpu-node", kind="DaemonSet")
    workload(cluster, ns, "web", "gpu-node-2", kind="Pod")
    patch_policy(cluster, {"daemonsets": {"tolerations": POOL_TOLERATIONS}, "driver": {"upgradePolicy": {
        "maxParallelUpgrades": 0, "maxUnavailable": "100%", "drain": {"enable": True, "timeoutSeconds": 60}}}})
    refused = "Failed to drain the node, cannot delete Pods that declare no controller (use --force to override): drain/web"
    # the state label and the event are two writes: wait for both
    wait_for(lambda: (cluster.node("gpu-node-2").metadata.labels or {}).get(UPGRADE_STATE) == u.FAILED
             and refused in node_events(cluster, "gpu-node-2", u.EVENT_REASON), 2 * TIMEOUT_S,
             "gpu-node-2's drain to fail, refusing drain/web")
    wait_for(lambda: (cluster.node("gpu-node").metadata.labels or {}).get(UPGRADE_STATE) == u.DONE, 2 * TIMEOUT_S,
             "gpu-node to finish its upgrade")
    events = node_events(cluster, "gpu-node", u.EVENT_REASON)
    assert "Pod deletion failed but drain is enabled in spec. Will attempt a node drain" in events
    assert "Successfully updated node state label to drain-required" in events
    assert [p.status.phase for p in pods_of(cluster, ns, "agent")] == ["Running"], "the DaemonSet's GPU pod stayed"


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


def test_on_v26_7_a_toleration_change_restarts_each_driver_in_place_and_evicts_nothing(
        clean_cluster: Cluster, recorder: NodeRecorder) -> None:
    """The chart's v26.7 operator: the tolerations are not in DRIVER_CONFIG_DIGEST, so each node is
    cordoned and its driver pod restarted in place, one node at a time, with no GPU-pod deletion: a GPU
    pod the full flow could not delete (no controller) keeps running, and no node fails."""
    cluster = clean_cluster
    ns = namespace(cluster, "in-place")
    workload(cluster, ns, "bare", "gpu-node-2", kind="Pod")
    bare = pods_of(cluster, ns, "bare")[0].metadata.uid
    gpu_nodes = sorted(physical_counts(cluster))
    drivers = driver_uids(cluster)
    digest = u.config_digest(cluster.apps.api_client.sanitize_for_serialization(
        cluster.apps.read_namespaced_daemon_set(operands.DRIVER, cluster.operator_namespace).spec.template.spec))
    assert digest, "the v26.7 operator sets DRIVER_CONFIG_DIGEST on the driver"
    patch_policy(cluster, {"daemonsets": {"tolerations": POOL_TOLERATIONS}})

    wait_for(lambda: upgraded(cluster, gpu_nodes, drivers), 3 * TIMEOUT_S,
             "every GPU node to restart its driver in place")
    template = cluster.apps.read_namespaced_daemon_set(operands.DRIVER, cluster.operator_namespace).spec.template
    assert [t.key for t in template.spec.tolerations] == ["nvidia.com/gpu", "gpushare.io/pool"]
    assert u.config_digest(cluster.apps.api_client.sanitize_for_serialization(template.spec)) == digest
    for node in gpu_nodes:
        assert states_of(recorder, node) == RESTART_ONLY_STEPS, node
        assert any(n == node and unschedulable for n, s, unschedulable, _ in recorder.seen if s == u.POD_RESTART), \
            f"{node} was cordoned for its restart"
    assert recorder.most_cordoned_at_once() == 1, "maxParallelUpgrades 1: one node at a time"
    assert [(p.metadata.uid, p.status.phase) for p in pods_of(cluster, ns, "bare")] == [(bare, "Running")], \
        "the GPU pod without a controller was not evicted"
