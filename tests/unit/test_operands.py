"""The operand DaemonSets rendered from a ClusterPolicy (gpu-operator v26.7.0 assets/*/0500_daemonset.yaml
and controllers/object_controls.go) and what a ClusterPolicy change re-renders (the last-applied
hash of each DaemonSet); contract "GPU Operator"."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operands
from gpushare_testbed.simulator.operator import node_labels
from gpushare_testbed.simulator.operator_objects import config_maps

NS = "gpu-operator"
DEFAULT_OPERANDS = {operands.DRIVER, "nvidia-container-toolkit-daemonset", operands.VALIDATOR, operands.DEVICE_PLUGIN,
                    operands.MPS_CONTROL_DAEMON, "nvidia-dcgm-exporter", operands.GFD, operands.MIG_MANAGER}


def policy(**changes: Any) -> dict[str, Any]:
    instance = cp.default_instance()
    instance["metadata"]["uid"] = "policy-uid"
    for path, value in changes.items():
        target = instance["spec"]
        *parents, leaf = path.split("__")
        for key in parents:
            target = target.setdefault(key, {})
        if value is None:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    return instance


def pod_spec(rendered: dict[str, Any], name: str) -> dict[str, Any]:
    return rendered[name]["spec"]["template"]["spec"]


def names(containers: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in containers]


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    old, new = operands.expected_hashes(before, NS), operands.expected_hashes(after, NS)
    return {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}


def test_chart_defaults_render_every_enabled_operand() -> None:
    rendered = operands.render(policy(), NS)
    # dcgm and nodeStatusExporter are disabled in values.yaml; the MPS control daemon comes with the plugin
    assert set(rendered) == DEFAULT_OPERANDS
    for name, ds in rendered.items():
        assert ds["metadata"]["ownerReferences"][0]["kind"] == "ClusterPolicy"
        assert ds["metadata"]["annotations"][operands.HASH_ANNOTATION]
        template = ds["spec"]["template"]
        assert template["metadata"]["labels"]["app"] == name
        assert ds["spec"]["selector"]["matchLabels"]["app"] == name
        assert template["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert template["spec"]["priorityClassName"] == "system-node-critical"
    assert rendered[operands.DRIVER]["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert rendered[operands.DEVICE_PLUGIN]["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    assert pod_spec(rendered, operands.MIG_MANAGER)["nodeSelector"] == {"nvidia.com/gpu.deploy.mig-manager": "true"}
    assert pod_spec(rendered, operands.MPS_CONTROL_DAEMON)["nodeSelector"] == {
        "nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/mps.capable": "true"}


@pytest.mark.parametrize(
    ("name", "inits", "containers"),
    [
        (operands.DRIVER, ["k8s-driver-manager"], ["nvidia-driver-ctr"]),
        ("nvidia-container-toolkit-daemonset", ["driver-validation"], ["nvidia-container-toolkit-ctr"]),
        (operands.VALIDATOR, ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"], ["nvidia-operator-validator"]),
        (operands.DEVICE_PLUGIN, ["toolkit-validation", "config-manager-init"], ["nvidia-device-plugin", "config-manager"]),
        (operands.GFD, ["toolkit-validation", "config-manager-init"], ["gpu-feature-discovery", "config-manager"]),
        ("nvidia-dcgm-exporter", ["toolkit-validation"], ["nvidia-dcgm-exporter"]),
        (operands.MIG_MANAGER, ["toolkit-validation"], ["nvidia-mig-manager"]),
        (operands.MPS_CONTROL_DAEMON, ["toolkit-validation", "mps-control-daemon-mounts", "config-manager-init"],
         ["mps-control-daemon-ctr", "config-manager"]),
    ],
)
def test_containers_as_the_assets_with_a_plugin_config(name: str, inits: list[str], containers: list[str]) -> None:
    spec = pod_spec(operands.render(policy(devicePlugin__config={"name": "ts", "default": "whole"}), NS), name)
    assert names(spec["initContainers"]) == inits
    assert names(spec["containers"]) == containers


def test_device_plugin_config_wiring() -> None:
    plain = pod_spec(operands.render(policy(), NS), operands.DEVICE_PLUGIN)
    # without devicePlugin.config.name the config-manager containers go; the entrypoint is always mounted
    assert names(plain["initContainers"]) == ["toolkit-validation"]
    assert names(plain["containers"]) == ["nvidia-device-plugin"]
    config_maps_mounted = [v["configMap"]["name"] for v in plain["volumes"] if "configMap" in v]
    assert config_maps_mounted == ["nvidia-device-plugin-entrypoint"]
    spec = pod_spec(operands.render(policy(devicePlugin__config={"name": "ts", "default": "whole"}), NS), operands.DEVICE_PLUGIN)
    assert [v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v] == ["nvidia-device-plugin-entrypoint", "ts"]
    init, main, sidecar = spec["initContainers"][1], spec["containers"][0], spec["containers"][1]
    assert env(init)["DEFAULT_CONFIG"] == env(sidecar)["DEFAULT_CONFIG"] == "whole"
    assert (env(init)["ONESHOT"], env(sidecar)["ONESHOT"]) == ("true", "false")
    assert env(sidecar)["PROCESS_TO_SIGNAL"] == "nvidia-device-plugin"
    assert env(main)["CONFIG_FILE"] == "/config/config.yaml"
    assert {"name": "ts", "mountPath": "/available-configs"} in init["volumeMounts"]


def test_mig_strategy_env() -> None:
    main = pod_spec(operands.render(policy(), NS), operands.DEVICE_PLUGIN)["containers"][0]
    assert env(main)["MIG_STRATEGY"] == "single"
    # applyMIGConfiguration: no mig.strategy, no MIG_STRATEGY (the plugin's own default applies)
    unset = operands.render(policy(mig=None), NS)
    for name, container in ((operands.DEVICE_PLUGIN, "nvidia-device-plugin"), (operands.GFD, "gpu-feature-discovery")):
        found = next(c for c in pod_spec(unset, name)["containers"] if c["name"] == container)
        assert "MIG_STRATEGY" not in env(found)
        assert env(found)["NVIDIA_MIG_MONITOR_DEVICES"] == "all"


@pytest.mark.parametrize(
    ("change", "rolled"),
    [
        # "spec.devicePlugin.config is rendered into the device-plugin DaemonSet AND gpu-feature-discovery (and MPS)"
        pytest.param({"devicePlugin__config": {"name": "ts", "default": "whole"}},
                     {operands.DEVICE_PLUGIN, operands.GFD, operands.MPS_CONTROL_DAEMON}, id="devicePlugin.config"),
        # "spec.daemonsets.* is applied to ALL operand DaemonSets ..., the driver's included"
        pytest.param({"daemonsets__tolerations": [{"key": "pool", "operator": "Exists", "effect": "NoSchedule"}]},
                     DEFAULT_OPERANDS, id="daemonsets.tolerations"),
        pytest.param({"daemonsets__priorityClassName": "gpu-critical"}, DEFAULT_OPERANDS, id="daemonsets.priorityClassName"),
        pytest.param({"daemonsets__labels": {"team": "ml"}}, DEFAULT_OPERANDS, id="daemonsets.labels"),
        # the driver stays OnDelete: an update strategy change leaves it alone
        pytest.param({"daemonsets__rollingUpdate": {"maxUnavailable": "25%"}}, DEFAULT_OPERANDS - {operands.DRIVER},
                     id="daemonsets.rollingUpdate"),
        pytest.param({"mig__strategy": "mixed"}, {operands.DEVICE_PLUGIN, operands.GFD, operands.MPS_CONTROL_DAEMON, operands.VALIDATOR},
                     id="mig.strategy"),
        pytest.param({"driver__upgradePolicy": {"autoUpgrade": False}}, set(), id="driver.upgradePolicy"),
        pytest.param({"dcgm__enabled": True}, {"nvidia-dcgm", "nvidia-dcgm-exporter"}, id="dcgm.enabled"),
    ],
)
def test_what_a_clusterpolicy_change_rolls(change: dict[str, Any], rolled: set[str]) -> None:
    assert changed(policy(), policy(**change)) == rolled


def test_empty_tolerations_keep_the_asset_default() -> None:
    # applyCommonDaemonsetConfig replaces the asset's tolerations only when the list is non-empty
    assert changed(policy(), policy(daemonsets__tolerations=[])) == set()


def test_rendering_does_not_touch_the_policy() -> None:
    instance = policy(devicePlugin__config={"name": "ts", "default": "whole"})
    before = copy.deepcopy(instance)
    operands.render(instance, NS)
    assert instance == before


def test_operator_config_maps_for_the_mounted_volumes() -> None:
    default = config_maps(policy(), NS)
    assert set(default) == {"nvidia-driver-startup-probe", "nvidia-container-toolkit-entrypoint",
                            "nvidia-device-plugin-entrypoint", "nvidia-mig-manager-entrypoint",
                            "default-mig-parted-config", "default-gpu-clients"}
    assert "all-balanced:" in default["default-mig-parted-config"]["data"]["config.yaml"]
    # a custom mig-parted ConfigMap: the operator does not create the default one
    custom = config_maps(policy(migManager__config={"name": "my-mig", "default": "all-disabled"}), NS)
    assert "default-mig-parted-config" not in custom
    volume = next(v for v in pod_spec(operands.render(policy(migManager__config={"name": "my-mig"}), NS), operands.MIG_MANAGER)["volumes"]
                  if v["name"] == "mig-parted-config")
    assert volume["configMap"] == {"name": "my-mig"}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        # NFD's PCI label makes it a GPU node: gpu.present and the container-workload deploy labels
        pytest.param({"feature.node.kubernetes.io/pci-10de.present": "true"}, {
            "nvidia.com/gpu.present": "true", **{f"nvidia.com/gpu.deploy.{c}": "true" for c in (
                "driver", "gpu-feature-discovery", "container-toolkit", "device-plugin", "dcgm", "dcgm-exporter",
                "node-status-exporter", "operator-validator", "client")}}, id="new-gpu-node"),
        pytest.param({"kubernetes.io/os": "linux"}, {}, id="cpu-node"),
    ],
)
def test_operator_node_labels(labels: dict[str, str], expected: dict[str, str]) -> None:
    assert node_labels(labels, policy()["spec"]) == expected


def test_operator_honours_set_deploy_labels_and_adds_mig_labels_on_mig_capable_nodes() -> None:
    labeled = {"nvidia.com/gpu.present": "true", "nvidia.com/mig.capable": "true",
               **{f"nvidia.com/gpu.deploy.{c}": "true" for c in (
                   "driver", "gpu-feature-discovery", "container-toolkit", "dcgm", "dcgm-exporter",
                   "node-status-exporter", "operator-validator", "client")},
               "nvidia.com/gpu.deploy.device-plugin": "false"}
    assert node_labels(labeled, policy()["spec"]) == {
        "nvidia.com/gpu.deploy.mig-manager": "true", "nvidia.com/mig.config": "all-disabled"}
    assert node_labels({**labeled, "nvidia.com/mig.capable": "false"}, policy()["spec"]) == {}
