"""What the running Kueue does with the teams' jobs, read from its configuration ConfigMap with
Kueue's defaults of its release (apis/config/v1beta2/defaults.go, pkg/util/waitforpodsready at
v0.17.0 and v0.19.2): the plan's lines on WaitForPodsReady and on DRA-backed GPUs, and the refusal
of a DRA-backed resource Kueue charges to a quota no team has."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpushare.kueue import controller, filters

SOURCE = "kueue-system/kueue-manager-config"


def config_map(config: dict[str, Any] | None = None, version: str | None = "v0.19.2") -> dict[str, Any]:
    labels = {"app.kubernetes.io/version": version} if version else {}
    return {"metadata": {"name": "kueue-manager-config", "labels": labels},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(config or {"namespace": "kueue-system"})}}


def device_class(name: str, resource: str | None, created: str = "2026-12-01T08:00:00Z",
                 driver: str | None = "gpu.nvidia.com") -> dict[str, Any]:
    selectors = [{"cel": {"expression": f"device.driver == '{driver}'"}}] if driver else []
    return {"metadata": {"name": name, "creationTimestamp": created},
            "spec": {**({"extendedResourceName": resource} if resource else {}), "selectors": selectors}}


@pytest.mark.parametrize(("value", "seconds"), [("30m", 1800), ("5m0s", 300), ("1h30m", 5400), ("90s", 90),
                                                ("1.5s", 1.5), (None, 0), ("", 0)])
def test_go_durations(value: str | None, seconds: float) -> None:
    assert controller.duration_s(value) == seconds


@pytest.mark.parametrize("value", ["30", "5 m", "1d", "m"])
def test_a_duration_that_is_not_go_s_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        controller.duration_s(value)


def test_v0_19_turns_wait_for_pods_ready_on_with_its_defaults() -> None:
    setting = controller.read(config_map(), SOURCE).wait_for_pods_ready()
    assert setting == controller.WaitForPodsReady(timeout_s=1800, block_admission=False, recovery_timeout_s=1800,
                                                  backoff_base_s=60, backoff_max_s=3600, backoff_limit_count=None)
    line = controller.wait_line(controller.read(config_map(), SOURCE))
    assert line == ("WaitForPodsReady is on (Kueue v0.19.2, kueue-system/kueue-manager-config): a backfilled job "
                    "admitted whose pods are not all Ready within 30m is evicted (PodsReadyTimeout) and requeued after "
                    "60s, doubling up to 3600s (no limit).")


def test_v0_17_leaves_it_off_unless_configured() -> None:
    assert controller.read(config_map(version="v0.17.0"), SOURCE).wait_for_pods_ready() is None
    assert controller.wait_line(controller.read(config_map(version="v0.17.0"), SOURCE)).startswith(
        "WaitForPodsReady is off (Kueue v0.17.0, kueue-system/kueue-manager-config): an admitted job keeps its quota")
    configured = config_map({"waitForPodsReady": {"timeout": "5m"}}, version="v0.17.0")
    assert controller.read(configured, SOURCE).wait_for_pods_ready().timeout_s == 300


def test_the_configuration_s_values_and_the_gate_that_turns_it_off() -> None:
    configured = config_map({"waitForPodsReady": {
        "timeout": "10m", "blockAdmission": True, "recoveryTimeout": "0s",
        "requeuingStrategy": {"backoffBaseSeconds": 5, "backoffMaxSeconds": 50, "backoffLimitCount": 3}}})
    kueue = controller.read(configured, SOURCE)
    assert kueue.wait_for_pods_ready() == controller.WaitForPodsReady(600, True, 0, 5, 50, 3)
    line = controller.wait_line(kueue)
    assert "within 10m" in line and "after 5s, doubling up to 50s (at most 3 times, then deactivated)" in line
    assert "blockAdmission is true: the cluster admits nothing else" in line
    disabled = config_map({"featureGates": {"DisableWaitForPodsReady": True}})
    assert controller.read(disabled, SOURCE).wait_for_pods_ready() is None


@pytest.mark.parametrize(("found", "says"), [
    (None, "WaitForPodsReady: not read (no ConfigMap kueue-system/kueue-manager-config)."),
    ({"metadata": {}, "data": {}}, "not read (kueue-system/kueue-manager-config has no key controller_manager_config.yaml)"),
    ({"metadata": {}, "data": {"controller_manager_config.yaml": "waitForPodsReady: {timeout: 30}"}},
     "controller_manager_config.yaml does not parse: '30' is not a duration"),
    ({"metadata": {}, "data": {"controller_manager_config.yaml": "[1, 2"}}, "does not parse"),
    ({"metadata": {}, "data": {"controller_manager_config.yaml": "a: &x [1]\nb: *x"}}, "does not parse: it uses YAML aliases"),
    ({"metadata": {}, "data": {"controller_manager_config.yaml": "#" * 300_000}}, "does not parse: it is 300000 characters"),
    (config_map(version=None), "its version was not read (no label app.kubernetes.io/version on "
                               "kueue-system/kueue-manager-config): on with Kueue v0.19 or later (timeout 30m), off before"),
])
def test_what_was_not_read_is_said(found: dict[str, Any] | None, says: str) -> None:
    line = controller.wait_line(controller.read(found, SOURCE))
    assert says in line and "evicted (PodsReadyTimeout) and requeued" in line


def test_a_dra_backed_gpu_is_charged_to_its_own_quota_from_v0_19() -> None:
    classes = [device_class("gpu.nvidia.com", None), device_class("gpu-er.example.com", "nvidia.com/gpu")]
    lines, problems = controller.dra_lines_and_problems(controller.read(config_map(), SOURCE), ["nvidia.com/gpu"],
                                                        classes)
    assert lines == ["The quotas of nvidia.com/gpu are checked against the nodes' allocatable nvidia.com/gpu, or on a "
                     "node with none, its devices of driver gpu.nvidia.com (DeviceClass gpu-er.example.com's selectors)",
                     "nvidia.com/gpu is DRA-backed (DeviceClass gpu-er.example.com names it in extendedResourceName): "
                     "Kueue charges pods' nvidia.com/gpu requests to the quota of nvidia.com/gpu."]
    assert problems == []
    before = controller.read(config_map(version="v0.17.0"), SOURCE)
    assert "this Kueue leaves DRA out of its quota" in controller.dra_lines_and_problems(
        before, ["nvidia.com/gpu"], classes)[0][1]
    unknown = controller.read(config_map(version=None), SOURCE)
    assert controller.dra_lines_and_problems(unknown, ["nvidia.com/gpu"], classes)[0][1].endswith(
        "to the quota of nvidia.com/gpu with Kueue v0.19 or later (its version was not read).")
    no_driver = [device_class("gpu-er.example.com", "nvidia.com/gpu", driver=None)]
    lines = controller.dra_lines_and_problems(controller.read(config_map(), SOURCE), ["nvidia.com/gpu"], no_driver)[0]
    assert lines[0].endswith("selectors name none (device.driver == ...), so its devices are not counted")
    assert controller.dra_lines_and_problems(controller.read(config_map(), SOURCE), ["nvidia.com/gpu"],
                                             [device_class("gpu.nvidia.com", None)]) == ([], [])


def test_a_class_mapped_to_a_name_no_team_quotes_is_refused() -> None:
    config = {"resources": {"deviceClassMappings": [{"name": "example.com/gpus",
                                                     "deviceClassNames": ["gpu-er.example.com"]}]}}
    kueue = controller.read(config_map(config), SOURCE)
    classes = [device_class("gpu-er.example.com", "nvidia.com/gpu")]
    lines, problems = controller.dra_lines_and_problems(kueue, ["nvidia.com/gpu"], classes)
    assert lines[1].endswith("to the quota of example.com/gpus.")
    assert problems == ["Kueue's configuration (kueue-system/kueue-manager-config) maps DeviceClass gpu-er.example.com, "
                        "which backs nvidia.com/gpu, to example.com/gpus (resources.deviceClassMappings): jobs asking "
                        "for nvidia.com/gpu are charged to example.com/gpus, which no team has a quota of, and would "
                        "never be admitted. Quote example.com/gpus instead of nvidia.com/gpu"]
    assert controller.dra_lines_and_problems(kueue, ["nvidia.com/gpu", "example.com/gpus"], classes)[1] == []


def test_of_two_classes_naming_one_resource_the_newest_then_the_first_name_backs_it() -> None:
    older = device_class("a-old", "nvidia.com/gpu", "2026-12-01T08:00:00Z")
    newer_b = device_class("b-new", "nvidia.com/gpu", "2026-12-01T09:00:00Z")
    newer_c = device_class("c-new", "nvidia.com/gpu", "2026-12-01T09:00:00Z")
    assert controller.dra_backed(["nvidia.com/gpu"], [newer_c, older, newer_b]) == {"nvidia.com/gpu": "b-new"}
    assert controller.dra_backed(["nvidia.com/gpu"], None) == {}


def test_the_role_s_plan_has_the_lines_and_refusals() -> None:
    description = {"cohort": "gpu-teams", "priority_classes": [],
                   "flavors": [{"name": "pool", "nodeLabels": {"kubernetes.io/hostname": "gpu-node-2"}}],
                   "teams": [{"name": "team-a", "quotas": {"pool": {"nvidia.com/gpu": {"nominalQuota": 4}}}}]}
    planned = filters.plan(description, {"namespaces": [], "kueue_config": config_map()}, False, SOURCE)
    assert planned["lines"][0].startswith("To write: Namespace team-a, ")
    assert planned["lines"][1].startswith("WaitForPodsReady is on (Kueue v0.19.2")
    assert planned["refusals"] == []


def test_a_cluster_without_the_dra_api_still_has_kueue() -> None:
    lease = {"spec": {"holderIdentity": "kueue", "leaseDurationSeconds": 15, "renewTime": "2026-12-01T08:00:00Z"}}
    assert filters.kueue_problems(["device_classes", "resource_slices"], lease, "kueue-system/x",
                                  "2026-12-01T08:00:05+00:00") == []
    assert filters.kueue_problems(["ClusterQueue", "device_classes"], lease, "kueue-system/x",
                                  "2026-12-01T08:00:05+00:00")[0].startswith(
        "Kueue is not installed: this cluster serves no kueue.x-k8s.io/v1beta2 ClusterQueue.")
