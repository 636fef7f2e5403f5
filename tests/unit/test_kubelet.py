"""The kubelet's part: extended resources from what the plugin registers (devicemanager), the status
of a config-managed pod as kubectl reads it, and the plugin's Allocate check for shared replicas."""

from __future__ import annotations

import json
from importlib import resources

import yaml

from gpushare_testbed.simulator.config_manager import ManagedPod
from gpushare_testbed.simulator.kubelet import ENDPOINT_STOP_GRACE_S, admission_rejection, managed_pod_status, node_resources
from gpushare_testbed.simulator.node_agent import CONFIG_MANAGED_APPS, PluginLoad, unhealthy_devices
from gpushare_testbed.simulator.nvidia_judge import NO_SHARING, PluginConfig, Sharing

POD = {
    "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"initContainers": [{"name": "toolkit-validation"}, {"name": "config-manager-init"}],
             "containers": [{"name": "nvidia-device-plugin"}, {"name": "config-manager"}]},
}
SHARED_STRICT = PluginConfig("none", Sharing("time-slicing", rename_by_default=True, fail_requests_greater_than_one=True, replicas=4))


GRACE = ENDPOINT_STOP_GRACE_S


def test_a_running_plugin_sets_capacity_and_allocatable() -> None:
    stopped: dict[str, float] = {}
    assert node_resources({"nvidia.com/gpu": 8}, {"cpu": "64"}, stopped, 0, GRACE) == (
        {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}, None)


def test_a_stopped_plugin_keeps_capacity_with_allocatable_0_for_the_grace_period_then_capacity_0() -> None:
    stopped: dict[str, float] = {}
    node = {"cpu": "64", "nvidia.com/gpu": "8"}
    assert node_resources(None, node, stopped, 100, GRACE) == ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "0"}, 100 + GRACE)
    assert node_resources(None, node, stopped, 100 + GRACE - 1, GRACE)[:2] == ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "0"})
    # never removed from the node: 0 from then on
    assert node_resources(None, node, stopped, 100 + GRACE, GRACE) == ({"nvidia.com/gpu": "0"}, {"nvidia.com/gpu": "0"}, None)


def test_a_resource_the_restarted_plugin_no_longer_serves_is_unhealthy_for_the_grace_period() -> None:
    stopped: dict[str, float] = {}
    node = {"nvidia.com/gpu": "8"}
    capacity, allocatable, due = node_resources({"nvidia.com/gpu.shared": 32}, node, stopped, 0, GRACE)
    assert (capacity, allocatable, due) == ({"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "32"},
                                            {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "32"}, GRACE)
    capacity, allocatable, due = node_resources({"nvidia.com/gpu.shared": 32}, capacity, stopped, GRACE, GRACE)
    assert capacity == allocatable == {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "32"} and due is None


def test_a_plugin_serving_a_resource_again_ends_its_grace_period() -> None:
    stopped = {"nvidia.com/gpu": 0.0}
    assert node_resources({"nvidia.com/gpu": 8}, {"nvidia.com/gpu": "8"}, stopped, 10, GRACE)[:2] == (
        {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})
    assert stopped == {}
    # stopping again starts a new grace period
    assert node_resources(None, {"nvidia.com/gpu": "8"}, stopped, 20, GRACE)[2] == 20 + GRACE


def test_devices_the_plugin_reports_unhealthy_stay_in_capacity_not_in_allocatable() -> None:
    assert node_resources({"nvidia.com/gpu.shared": 8}, {}, {}, 0, GRACE, {"nvidia.com/gpu.shared": 2}) == (
        {"nvidia.com/gpu.shared": "8"}, {"nvidia.com/gpu.shared": "6"}, None)


def test_an_xid_makes_the_running_plugin_report_the_cards_shares_unhealthy_until_it_reloads() -> None:
    """k8s-device-plugin keeps device health in its process: a plugin started (or reloaded by its
    config-manager) after the Xid reports every device healthy again."""
    plugin: ManagedPod[PluginLoad] = ManagedPod("uid", "time-slicing-config", "", started_at=100.0)
    plugin.loaded = (SHARED_STRICT, {"nvidia.com/gpu.shared": 16})
    xid = json.dumps({"gpus": [1], "at": 150.0})
    assert unhealthy_devices(xid, plugin) == {"nvidia.com/gpu.shared": 4}
    assert unhealthy_devices(None, plugin) == {}
    plugin.started_at = 151.0
    assert unhealthy_devices(xid, plugin) == {}
    whole: ManagedPod[PluginLoad] = ManagedPod("uid", None, "", started_at=100.0)
    whole.loaded = (NO_SHARING, {"nvidia.com/gpu": 4})
    assert unhealthy_devices(json.dumps({"gpus": [0, 3], "at": 150.0}), whole) == {"nvidia.com/gpu": 2}


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


def test_kwoks_pod_stages_leave_every_config_managed_operand_pod_to_the_simulator() -> None:
    """KWOK marking the MPS daemon Ready raced the simulator's CrashLoopBackOff status (make test in CI)."""
    text = (resources.files("gpushare_testbed") / "data" / "kwok-stages.yaml").read_text()
    stages = {s["metadata"]["name"]: s for s in yaml.safe_load_all(text) if s and s.get("kind") == "Stage"}
    for name in ("pod-ready", "pod-ready-again"):
        excluded = next(e["values"] for e in stages[name]["spec"]["selector"]["matchExpressions"]
                        if e["key"] == ".metadata.labels.app" and e["operator"] == "NotIn")
        assert set(excluded) == set(CONFIG_MANAGED_APPS), name
