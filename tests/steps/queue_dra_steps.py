"""Steps about queue backfill of GPUs that DRA serves under their extended-resource name (KEP-5004): a
node whose device plugin is off and whose GPUs the DRA driver publishes, a DeviceClass naming
nvidia.com/gpu in spec.extendedResourceName, and what Kueue charged and the scheduler allocated for a
Job asking nvidia.com/gpu. The node and the class are left as they are: the scenario's cluster is one
started for it (an embedded cluster with the DRAExtendedResource gate on) and stopped after it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then

from gpushare.polling import wait_for
from gpushare.runbook.records import DRA_PLUGIN_LABEL
from tests.steps.dra_steps import gated_cluster
from tests.steps.queue_steps import WAIT_S, QueueScenario, job_admitted, workload
from tests.support.cluster import Cluster

DEVICE_PLUGIN_DEPLOY = "nvidia.com/gpu.deploy.device-plugin"
DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver for GPUs
RESOURCE = "resource.k8s.io"


def _slices_of(kube: Cluster, node: str) -> list[dict[str, Any]]:
    return [s for s in kube.custom.list_cluster_custom_object(RESOURCE, "v1", "resourceslices")["items"]
            if s["spec"].get("nodeName") == node and s["spec"].get("driver") == DRIVER]


@given(parsers.re(r"an embedded cluster with Kueue whose (?P<gate>\w+) gate is on in every component$"),
       target_fixture="queue_scenario")
def gated_with_kueue(cluster: Cluster, gate: str, tmp_path_factory: pytest.TempPathFactory,
                     request: pytest.FixtureRequest) -> QueueScenario:
    """The scenario's queues on an embedded cluster started for it with the gate on and Kueue running."""
    return QueueScenario(gated_cluster(cluster, gate, "every component", tmp_path_factory, request, kueue=True))


@given(parsers.parse('node "{node}" serves {count:d} GPUs through the DRA driver as "{resource}" of DeviceClass '
                     '"{device_class}", its device plugin off'))
def node_served_by_dra(queue_scenario: QueueScenario, node: str, count: int, resource: str, device_class: str) -> None:
    """The device plugin switched off on the node (the GPU Operator's deploy label), the DRA driver's
    kubelet plugin scheduled there (its chart's node label), and a DeviceClass of the driver's
    devices that names the extended resource."""
    kube = queue_scenario.kube
    kube.core.patch_node(node, {"metadata": {"labels": {DEVICE_PLUGIN_DEPLOY: "false", DRA_PLUGIN_LABEL: "true"}}})
    try:
        kube.custom.create_cluster_custom_object(RESOURCE, "v1", "deviceclasses", {
            "apiVersion": f"{RESOURCE}/v1", "kind": "DeviceClass", "metadata": {"name": device_class},
            "spec": {"extendedResourceName": resource,
                     "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
    except ApiException as err:
        if err.status != 409:
            raise
    kept = kube.custom.get_cluster_custom_object(RESOURCE, "v1", "deviceclasses", device_class)["spec"]
    assert kept.get("extendedResourceName") == resource, f"the API server dropped extendedResourceName: {kept}"

    def switched() -> bool:
        allocatable = kube.core.read_node(node).status.allocatable or {}
        devices = sum(len(s["spec"].get("devices") or []) for s in _slices_of(kube, node))
        return allocatable.get(resource, "0") == "0" and devices == count

    wait_for(switched, WAIT_S, f"{node} to advertise no {resource} and publish {count} devices of {DRIVER}")


@then(parsers.parse('Kueue charged job "{job}" of team "{team}" {amount} "{resource}" on flavor "{flavor}", '
                    'as its ClusterQueue\'s usage shows'))
def kueue_charged(queue_scenario: QueueScenario, job: str, team: str, amount: str, resource: str, flavor: str) -> None:
    """The Workload's admission (flavor and usage of the resource) and the ClusterQueue's flavorsUsage."""
    job_admitted(queue_scenario, job, team)
    assignments = workload(queue_scenario, team, job)["status"]["admission"]["podSetAssignments"]
    assert [(a["flavors"].get(resource), a["resourceUsage"].get(resource)) for a in assignments] == [(flavor, amount)], \
        assignments

    def used() -> dict[str, Any] | None:
        queue = queue_scenario.kube.custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", team)
        usage = {(f["name"], r["name"]): r.get("total") for f in (queue.get("status") or {}).get("flavorsUsage") or []
                 for r in f.get("resources") or []}
        return usage if usage.get((flavor, resource)) == amount else None

    wait_for(used, WAIT_S, f"ClusterQueue {team} to show {amount} {resource} used on {flavor}")


@then(parsers.parse('the pod of job "{job}" of team "{team}" runs on node "{node}" with the scheduler\'s claim of '
                    '{count:d} devices of its pool'))
def pod_runs_with_scheduler_claim(queue_scenario: QueueScenario, job: str, team: str, node: str, count: int) -> None:
    """kube-scheduler served the request from DRA: it placed the pod on the node, created the special
    claim recorded in the pod's status.extendedResourceClaimStatus, allocated it from the node's pool,
    and the kubelet prepared it, so the pod runs."""
    pods = client.CoreV1Api(queue_scenario.kube.api)
    namespace = queue_scenario.team(team)["namespace"]

    def running() -> client.V1Pod | None:
        found = pods.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
        return next((p for p in found if p.status.phase == "Running"), None)

    pod = wait_for(running, WAIT_S, f"the pod of job {job} to run")
    assert pod.spec.node_name == node, f"the pod runs on {pod.spec.node_name}"
    special = pod.status.extended_resource_claim_status
    assert special is not None, "the pod has no status.extendedResourceClaimStatus: the scheduler did not use DRA"
    claim = queue_scenario.kube.custom.get_namespaced_custom_object(
        RESOURCE, "v1", namespace, "resourceclaims", special.resource_claim_name)
    assert (claim["metadata"].get("annotations") or {}).get("resource.kubernetes.io/extended-resource-claim") == "true"
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"]) for r in results] == [(DRIVER, node)] * count, results
    assert [r["uid"] for r in claim["status"].get("reservedFor") or []] == [pod.metadata.uid]


@given(parsers.parse('DeviceClass "{device_class}" carries the DRA driver\'s GpuConfig with the sharing strategy '
                     '"{strategy}"'))
def class_carries_gpu_config(queue_scenario: QueueScenario, device_class: str, strategy: str) -> None:
    """The class's opaque config, which the scheduler copies into each claim it allocates from the class."""
    config = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": strategy}}
    queue_scenario.kube.custom.patch_cluster_custom_object(RESOURCE, "v1", "deviceclasses", device_class, {
        "spec": {"config": [{"opaque": {"driver": DRIVER, "parameters": config}}]}})


@then(parsers.parse('the pod of job "{job}" of team "{team}" waits on node "{node}": the kubelet cannot prepare the '
                    'scheduler\'s claim, saying "{text}"'))
def pod_waits_on_prepare(queue_scenario: QueueScenario, job: str, team: str, node: str, text: str) -> None:
    """The kubelet prepares the scheduler's claim before it starts the pod: the driver's refusal of the
    claim's config keeps the pod Pending, with the kubelet's FailedPrepareDynamicResources event."""
    core = client.CoreV1Api(queue_scenario.kube.api)
    namespace = queue_scenario.team(team)["namespace"]

    def refused() -> client.V1Pod | None:
        found = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
        pod = next((p for p in found if p.spec.node_name and p.status.extended_resource_claim_status), None)
        if pod is None:
            return None
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.uid={pod.metadata.uid}").items
        said = [e.message or "" for e in events if e.reason == "FailedPrepareDynamicResources"]
        claim = pod.status.extended_resource_claim_status.resource_claim_name
        return pod if any(claim in m and text in m for m in said) else None

    pod = wait_for(refused, WAIT_S, f"the kubelet to fail to prepare the claim of job {job}'s pod, saying {text!r}")
    assert pod.spec.node_name == node, f"the pod was placed on {pod.spec.node_name}"
    assert core.read_namespaced_pod(pod.metadata.name, namespace).status.phase == "Pending"
