"""The kubelet's part: extended resources from what the plugin registers (devicemanager), the status
of a config-managed pod as kubectl reads it, and the plugin's Allocate check for shared replicas."""

from __future__ import annotations

from gpushare.device_plugin_config import NO_SHARING, parse
from gpushare.simulator.config_manager import ManagedPod
from gpushare.simulator.kubelet import admission_rejection, managed_pod_status, node_resources

POD = {
    "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"initContainers": [{"name": "toolkit-validation"}, {"name": "config-manager-init"}],
             "containers": [{"name": "nvidia-device-plugin"}, {"name": "config-manager"}]},
}
SHARED_STRICT = parse("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    failRequestsGreaterThanOne: true\n"
                      "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n")


def test_a_running_plugin_sets_capacity_and_allocatable() -> None:
    assert node_resources({"nvidia.com/gpu": 8}, {"cpu": "64"}) == ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})


def test_a_stopped_plugin_zeroes_allocatable_and_keeps_capacity() -> None:
    capacity, allocatable = node_resources(None, {"cpu": "64", "nvidia.com/gpu": "8"})
    assert (capacity, allocatable) == ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "0"})


def test_a_resource_no_longer_registered_stays_at_zero() -> None:
    capacity, allocatable = node_resources({"nvidia.com/gpu.shared": 32}, {"nvidia.com/gpu": "8"})
    assert capacity == allocatable == {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "32"}


def statuses(state: ManagedPod[str]) -> dict:
    return managed_pod_status(POD, state, "nvidia-device-plugin", "2026-01-01T00:00:01Z")


def test_init_crash_loop_shape() -> None:
    state = ManagedPod("u", "cfg", "", mount={"whole": ""}, mounted_at=0, init_error="specified config x does not exist", init_restarts=2)
    status = statuses(state)
    assert status["phase"] == "Pending"
    init = status["initContainerStatuses"][1]
    assert init["state"]["waiting"] == {"reason": "CrashLoopBackOff", "message": "specified config x does not exist"}
    assert init["restartCount"] == 2 and init["lastState"]["terminated"]["exitCode"] == 1
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert [c["state"]["waiting"]["reason"] for c in status["containerStatuses"]] == ["PodInitializing"] * 2
    assert {c["type"]: c["status"] for c in status["conditions"]}["Initialized"] == "False"


def test_sidecar_crash_loop_keeps_the_plugin_running() -> None:
    state = ManagedPod("u", "cfg", "", mount={"whole": ""}, mounted_at=0, selected="whole", loaded="w",
                       sidecar_error="specified config x does not exist", sidecar_restarts=1)
    status = statuses(state)
    plugin, sidecar = status["containerStatuses"]
    assert plugin["ready"] and "running" in plugin["state"]
    assert sidecar["state"]["waiting"]["reason"] == "CrashLoopBackOff" and sidecar["restartCount"] == 1
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"
    assert status["phase"] == "Running"


def test_admission_rejects_more_than_one_shared_replica_per_container() -> None:
    pod = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu.shared": "2"}}}]}}
    message = admission_rejection(pod, SHARED_STRICT)
    assert 'invalid allocation request for "nvidia.com/gpu.shared": invalid request: maximum request size for shared resources is 1; found 2' in message
    two_containers = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}] * 2}}
    assert admission_rejection(two_containers, SHARED_STRICT) is None
    assert admission_rejection(pod, NO_SHARING) is None
