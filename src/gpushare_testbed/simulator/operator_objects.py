"""The objects the GPU Operator creates next to its DaemonSets so their pods can start, with no I/O:
the ServiceAccounts they run as and the ConfigMaps they mount (each state's 0100_service_account.yaml
and 04x0_configmap.yaml in gpu-operator v26.7.0 assets/; `createConfigMap` in
controllers/object_controls.go skips default-mig-parted-config / default-gpu-clients when the
ClusterPolicy names custom ones). Script bodies are the simulator's own stand-ins."""

from __future__ import annotations

from typing import Any

from gpushare.gpu_catalog import PRODUCTS
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operands
from gpushare_testbed.simulator.mig import default_config

Manifest = dict[str, Any]
# ServiceAccount of each DaemonSet, from its asset
SERVICE_ACCOUNT = {
    operands.DRIVER: "nvidia-driver",
    "nvidia-container-toolkit-daemonset": "nvidia-container-toolkit",
    operands.VALIDATOR: "nvidia-operator-validator",
    operands.DEVICE_PLUGIN: "nvidia-device-plugin",
    operands.MPS_CONTROL_DAEMON: "nvidia-device-plugin",
    "nvidia-dcgm": "nvidia-dcgm",
    "nvidia-dcgm-exporter": "nvidia-dcgm-exporter",
    operands.GFD: "nvidia-gpu-feature-discovery",
    operands.MIG_MANAGER: "nvidia-mig-manager",
    "nvidia-node-status-exporter": "nvidia-node-status-exporter",
}


DEFAULT_MIG_PARTED_CONFIG = default_config(PRODUCTS.values())


def _script(command: str) -> str:
    return ("#!/bin/sh\n# simulated: waits for the driver validation, then starts the operand\n"
            f"until [ -f /run/nvidia/validations/driver-ready ]; do sleep 5; done\nexec {command}\n")


def _config_maps(spec: dict[str, Any]) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """ConfigMap name -> (labels, data) for the enabled states."""
    wanted: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    if cp.enabled(spec, "driver"):
        wanted["nvidia-driver-startup-probe"] = (
            {"app": operands.DRIVER, "app.kubernetes.io/component": "nvidia-driver"},
            {"startup-probe.sh": "#!/bin/sh\n# simulated: the driver is ready once nvidia-smi answers\nnvidia-smi\n"})
    if cp.enabled(spec, "toolkit"):
        wanted["nvidia-container-toolkit-entrypoint"] = (
            {"app": "nvidia-container-toolkit-daemonset"}, {"entrypoint.sh": _script("nvidia-toolkit")})
    if cp.enabled(spec, "devicePlugin"):
        wanted["nvidia-device-plugin-entrypoint"] = (
            {"app": operands.DEVICE_PLUGIN}, {"entrypoint.sh": _script("nvidia-device-plugin")})
    if cp.enabled(spec, "migManager"):
        wanted["nvidia-mig-manager-entrypoint"] = ({"app": operands.MIG_MANAGER}, {"entrypoint.sh": _script("nvidia-mig-manager")})
        if not cp.mig_parted_config(spec)[1]:
            wanted["default-mig-parted-config"] = ({}, {"config.yaml": DEFAULT_MIG_PARTED_CONFIG})
        if not cp.section(cp.section(spec, "migManager"), "gpuClientsConfig").get("name"):
            wanted["default-gpu-clients"] = ({}, {"clients.yaml": "version: v1\nsystemd-services:\n  - nvsm.service\n  - dcgm.service\n"})
    return wanted


def _owner(policy: Manifest) -> list[dict[str, Any]]:
    return [{"apiVersion": f"{cp.GROUP}/{cp.VERSION}", "kind": "ClusterPolicy", "name": policy["metadata"]["name"],
             "uid": policy["metadata"].get("uid", ""), "controller": True, "blockOwnerDeletion": True}]


def config_maps(policy: Manifest, namespace: str) -> dict[str, Manifest]:
    return {
        name: {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": _owner(policy)},
               "data": data}
        for name, (labels, data) in _config_maps(policy.get("spec") or {}).items()
    }


def managed_config_map_names() -> set[str]:
    """Every ConfigMap name the operator may create (to tell them from the user's)."""
    everything = {key: {"enabled": True} for key in ("driver", "toolkit", "devicePlugin", "migManager")}
    return set(_config_maps(everything))


def service_accounts(policy: Manifest, namespace: str) -> dict[str, Manifest]:
    return {
        name: {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": namespace, "ownerReferences": _owner(policy)}}
        for name in sorted(set(SERVICE_ACCOUNT.values()))
    }
