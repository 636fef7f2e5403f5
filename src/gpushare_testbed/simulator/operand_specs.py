"""The pod specs of the GPU Operator's operands, one function per DaemonSet, with no I/O: what each
asset (gpu-operator v26.7.0 assets/*/0500_daemonset.yaml) declares — labels, service account, init
containers, containers, volumes — after its Transform* in controllers/object_controls.go (images,
`applyMIGConfiguration`, `handleDevicePluginConfig`, custom env). operands.render adds what is
common to all of them."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import plugin_version, upgrade

Builder = Callable[[dict[str, Any]], tuple[dict[str, str], dict[str, Any]]]  # spec -> (labels, pod spec)

DRIVER = "nvidia-driver-daemonset"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
GFD = "gpu-feature-discovery"
MIG_MANAGER = "nvidia-mig-manager"
VALIDATOR = "nvidia-operator-validator"
# The operator sets DRIVER_CONFIG_DIGEST on the driver pod from v26.3.0 (not in v25.10.1); its release is
# the validator's image tag, which the chart pins to the operator's own version.
DIGEST_SINCE = (26, 3, 0)
MPS_CONTROL_DAEMON = "nvidia-device-plugin-mps-control-daemon"


def _env(**values: str) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _field_env(**paths: str) -> list[dict[str, Any]]:
    return [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in paths.items()]


def _set_env(container: dict[str, Any], name: str, value: str) -> None:
    """setContainerEnv: replace the variable's value, or append it."""
    env = container.setdefault("env", [])
    for entry in env:
        if entry["name"] == name:
            entry.pop("valueFrom", None)
            entry["value"] = value
            return
    env.append({"name": name, "value": value})


def _host(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
    host: dict[str, Any] = {"path": path}
    if kind:
        host["type"] = kind
    return {"name": name, "hostPath": host}


def _config_map_volume(name: str, config_map: str, mode: int | None = None) -> dict[str, Any]:
    source: dict[str, Any] = {"name": config_map}
    if mode is not None:
        source["defaultMode"] = mode
    return {"name": name, "configMap": source}


def _mount(name: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "mountPath": path, **extra}


def _validation(name: str, image: str, volume: str, path: str, **env: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c"],
        "args": [f"until [ -f /run/nvidia/validations/{name.split('-')[0]}-ready ]; do sleep 5; done"],
        "securityContext": {"privileged": True},
        "volumeMounts": [_mount(volume, path, mountPropagation="HostToContainer")],
    }
    if env:
        container["env"] = _env(**env)
    return container


def _config_manager(name: str, image: str, oneshot: bool, signal_target: str) -> dict[str, Any]:
    return {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent", "command": ["config-manager"],
        "securityContext": {"privileged": True},
        "env": [
            *_env(ONESHOT=str(oneshot).lower(), KUBECONFIG=""),
            *_field_env(NODE_NAME="spec.nodeName"),
            *_env(NODE_LABEL=cp.CONFIG_LABEL, CONFIG_FILE_SRCDIR="/available-configs",
                  CONFIG_FILE_DST="/config/config.yaml", DEFAULT_CONFIG="",
                  SEND_SIGNAL=str(not oneshot).lower(), SIGNAL="" if oneshot else "1",
                  PROCESS_TO_SIGNAL="" if oneshot else signal_target),
        ],
    }


def _apply_mig_strategy(container: dict[str, Any], strategy: str) -> None:
    """applyMIGConfiguration: no MIG_STRATEGY when the ClusterPolicy has no strategy."""
    if strategy:
        _set_env(container, "MIG_STRATEGY", strategy)
    if strategy != "none":
        _set_env(container, "NVIDIA_MIG_MONITOR_DEVICES", "all")


def _handle_plugin_config(pod: dict[str, Any], spec: dict[str, Any], main: str) -> None:
    """handleDevicePluginConfig: without devicePlugin.config.name the config-manager containers go."""
    name, default = cp.plugin_config(spec)
    if not name:
        pod["initContainers"] = [c for c in pod["initContainers"] if c["name"] != "config-manager-init"]
        pod["containers"] = [c for c in pod["containers"] if c["name"] != "config-manager"]
        return
    shared = [_mount("config", "/config"), _mount(name, "/available-configs")]
    for container in pod["containers"]:
        if container["name"] == main:
            _set_env(container, "CONFIG_FILE", "/config/config.yaml")
            container.setdefault("volumeMounts", []).extend(copy.deepcopy(shared))
    if not pod.get("hostPID"):
        pod["shareProcessNamespace"] = True
    pod["volumes"] += [_config_map_volume(name, name), {"name": "config", "emptyDir": {}}]
    for container in [*pod["initContainers"], *pod["containers"]]:
        if container["name"] in ("config-manager-init", "config-manager"):
            _set_env(container, "DEFAULT_CONFIG", default)
            _set_env(container, "FALLBACK_STRATEGIES", "empty")
            container.setdefault("volumeMounts", []).extend(copy.deepcopy(shared))


def _custom_env(container: dict[str, Any], spec: dict[str, Any], key: str) -> None:
    for entry in cp.section(spec, key).get("env") or []:
        if isinstance(entry, dict) and entry.get("name"):
            _set_env(container, str(entry["name"]), str(entry.get("value", "")))


# ---- one function per operand: (spec) -> (labels, pod spec, DaemonSet annotations) ------------------
def driver(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    manager = cp.image({"manager": cp.section(cp.section(spec, "driver"), "manager")}, "manager")
    container = {
        "name": "nvidia-driver-ctr", "image": cp.image(spec, "driver"), "imagePullPolicy": "IfNotPresent",
        "command": ["nvidia-driver"], "args": ["init"], "securityContext": {"privileged": True},
        "env": _field_env(NODE_NAME="spec.nodeName", NODE_IP="status.hostIP"),
        "volumeMounts": [_mount("run-nvidia", "/run/nvidia", mountPropagation="Bidirectional"),
                         _mount("driver-startup-probe-script", "/usr/local/bin/startup-probe.sh", subPath="startup-probe.sh")],
    }
    _custom_env(container, spec, "driver")
    pod = {
        "hostPID": True,
        "serviceAccountName": "nvidia-driver",
        "initContainers": [{
            "name": "k8s-driver-manager", "image": manager, "imagePullPolicy": "IfNotPresent",
            "command": ["driver-manager"], "args": ["uninstall_driver"], "securityContext": {"privileged": True},
            "env": [*_field_env(NODE_NAME="spec.nodeName"),
                    *_env(NVIDIA_VISIBLE_DEVICES="void", ENABLE_GPU_POD_EVICTION="true", ENABLE_AUTO_DRAIN="false")],
        }],
        "containers": [container],
        "volumes": [_host("run-nvidia", "/run/nvidia", "DirectoryOrCreate"), _host("host-root", "/"),
                    _config_map_volume("driver-startup-probe-script", "nvidia-driver-startup-probe", 0o755)],
    }
    if plugin_version.at_least(cp.image(spec, "validator"), DIGEST_SINCE):
        digest = driver_config_digest(pod)
        for target in (pod["initContainers"][0], container):
            _set_env(target, upgrade.DIGEST_ENV, digest)
    return {"app": DRIVER, "nvidia.com/precompiled": "false", "app.kubernetes.io/component": "nvidia-driver"}, pod


def driver_config_digest(pod: dict[str, Any]) -> str:
    """A hash of what installs the driver (controllers/object_controls.go extractDriverInstallConfig:
    images, command and args, env with values, volumes and mounts), nothing of what
    applyCommonDaemonsetConfig adds later (tolerations, priority class, labels, annotations)."""
    def container(c: dict[str, Any]) -> dict[str, Any]:
        return {"image": c.get("image"), "command": c.get("command"), "args": c.get("args"),
                "env": sorted((e["name"], e.get("value", "")) for e in c.get("env") or [] if "valueFrom" not in e
                              and e["name"] != upgrade.DIGEST_ENV),
                "mounts": sorted((m["name"], m["mountPath"], m.get("subPath", "")) for m in c.get("volumeMounts") or [])}
    config = {"containers": [container(c) for c in [*pod.get("initContainers", []), *pod.get("containers", [])]],
              "volumes": sorted(json.dumps(v, sort_keys=True) for v in pod.get("volumes") or [])}
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def toolkit(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    container = {
        "name": "nvidia-container-toolkit-ctr", "image": cp.image(spec, "toolkit"), "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c"], "args": ["/bin/entrypoint.sh"], "securityContext": {"privileged": True},
        "env": _env(NVIDIA_VISIBLE_DEVICES="void"),
        "volumeMounts": [_mount("nvidia-container-toolkit-entrypoint", "/bin/entrypoint.sh", readOnly=True, subPath="entrypoint.sh"),
                         _mount("run-nvidia-validations", "/run/nvidia/validations")],
    }
    _custom_env(container, spec, "toolkit")
    pod = {
        "hostPID": True,
        "serviceAccountName": "nvidia-container-toolkit",
        "initContainers": [_validation("driver-validation", cp.image(spec, "validator"), "run-nvidia-validations",
                                       "/run/nvidia/validations", WITH_WAIT="true", COMPONENT="driver")],
        "containers": [container],
        "volumes": [_config_map_volume("nvidia-container-toolkit-entrypoint", "nvidia-container-toolkit-entrypoint", 0o700),
                    _host("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
                    _host("host-root", "/")],
    }
    return {"app": "nvidia-container-toolkit-daemonset"}, pod


def validator(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    image = cp.image(spec, "validator")
    inits = [
        _validation("driver-validation", image, "run-nvidia-validations", "/run/nvidia/validations", COMPONENT="driver"),
        _validation("toolkit-validation", image, "run-nvidia-validations", "/run/nvidia/validations", COMPONENT="toolkit"),
        _validation("cuda-validation", image, "run-nvidia-validations", "/run/nvidia/validations", COMPONENT="cuda",
                    VALIDATOR_IMAGE=image, VALIDATOR_IMAGE_PULL_POLICY="IfNotPresent"),
    ]
    if cp.enabled(spec, "devicePlugin"):
        inits.append(_validation("plugin-validation", image, "run-nvidia-validations", "/run/nvidia/validations",
                                 COMPONENT="plugin", MIG_STRATEGY=cp.mig_strategy(spec), VALIDATOR_IMAGE=image,
                                 VALIDATOR_IMAGE_PULL_POLICY="IfNotPresent"))
    pod = {
        "serviceAccountName": "nvidia-operator-validator",
        "initContainers": inits,
        "containers": [{"name": "nvidia-operator-validator", "image": image, "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c"], "args": ["echo all validations are successful; sleep infinity"],
                        "securityContext": {"privileged": True},
                        "volumeMounts": [_mount("run-nvidia-validations", "/run/nvidia/validations")]}],
        "volumes": [_host("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate")],
    }
    return {"app": VALIDATOR, "app.kubernetes.io/part-of": "gpu-operator"}, pod


def device_plugin(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    image = cp.image(spec, "devicePlugin")
    main = {
        "name": "nvidia-device-plugin", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"], "securityContext": {"privileged": True},
        "env": _env(PASS_DEVICE_SPECS="true", FAIL_ON_INIT_ERROR="true", DEVICE_LIST_STRATEGY="envvar",  # noqa: S106 - a setting
                    DEVICE_ID_STRATEGY="uuid", NVIDIA_VISIBLE_DEVICES="all", NVIDIA_DRIVER_CAPABILITIES="all",
                    MPS_ROOT="/run/nvidia/mps"),
        "volumeMounts": [
            _mount("nvidia-device-plugin-entrypoint", "/bin/entrypoint.sh", readOnly=True, subPath="entrypoint.sh"),
            _mount("device-plugin", "/var/lib/kubelet/device-plugins"),
            _mount("run-nvidia-validations", "/run/nvidia/validations"),
        ],
    }
    pod = {
        "serviceAccountName": "nvidia-device-plugin",
        "initContainers": [
            _validation("toolkit-validation", cp.image(spec, "validator"), "run-nvidia-validations", "/run/nvidia/validations"),
            _config_manager("config-manager-init", image, True, ""),
        ],
        "containers": [main, _config_manager("config-manager", image, False, "nvidia-device-plugin")],
        "volumes": [
            _config_map_volume("nvidia-device-plugin-entrypoint", "nvidia-device-plugin-entrypoint", 448),
            _host("device-plugin", "/var/lib/kubelet/device-plugins"),
            _host("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
            _host("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
        ],
    }
    _handle_plugin_config(pod, spec, "nvidia-device-plugin")
    _apply_mig_strategy(main, cp.mig_strategy(spec))
    _custom_env(main, spec, "devicePlugin")
    return {"app": DEVICE_PLUGIN}, pod


def gfd(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    main = {
        "name": "gpu-feature-discovery", "image": cp.image(spec, "gfd"), "imagePullPolicy": "IfNotPresent",
        "command": ["gpu-feature-discovery"], "securityContext": {"privileged": True},
        "env": [*_env(GFD_SLEEP_INTERVAL="60s", GFD_FAIL_ON_INIT_ERROR="true"),
                *_field_env(NAMESPACE="metadata.namespace", NODE_NAME="spec.nodeName", POD_NAME="metadata.name")],
        "volumeMounts": [_mount("output-dir", "/etc/kubernetes/node-feature-discovery/features.d"),
                         _mount("host-sys", "/sys", readOnly=True)],
    }
    plugin_image = cp.image(spec, "devicePlugin")
    _custom_env(main, spec, "gfd")
    pod = {
        "serviceAccountName": "nvidia-gpu-feature-discovery",
        "initContainers": [
            _validation("toolkit-validation", cp.image(spec, "validator"), "run-nvidia", "/run/nvidia"),
            _config_manager("config-manager-init", plugin_image, True, ""),
        ],
        "containers": [main, _config_manager("config-manager", plugin_image, False, "gpu-feature-discovery")],
        "volumes": [_host("output-dir", "/etc/kubernetes/node-feature-discovery/features.d"), _host("host-sys", "/sys"),
                    _host("run-nvidia", "/run/nvidia", "Directory")],
    }
    _handle_plugin_config(pod, spec, "gpu-feature-discovery")
    _apply_mig_strategy(main, cp.mig_strategy(spec))
    return {"app": GFD, "app.kubernetes.io/part-of": "nvidia-gpu"}, pod


def mps_control_daemon(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    image = cp.image(spec, "devicePlugin")
    main = {"name": "mps-control-daemon-ctr", "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["mps-control-daemon"], "securityContext": {"privileged": True},
            "env": [*_field_env(NODE_NAME="spec.nodeName"), *_env(NVIDIA_VISIBLE_DEVICES="all", NVIDIA_DRIVER_CAPABILITIES="compute,utility")],
            "volumeMounts": [_mount("mps-shm", "/dev/shm"), _mount("mps-root", "/mps")]}  # noqa: S108 - a mount path
    pod = {
        "hostPID": True,
        "serviceAccountName": "nvidia-device-plugin",
        "initContainers": [
            _validation("toolkit-validation", cp.image(spec, "validator"), "run-nvidia", "/run/nvidia"),
            {"name": "mps-control-daemon-mounts", "image": image, "imagePullPolicy": "IfNotPresent",
             "command": ["mps-control-daemon", "mount-shm"], "securityContext": {"privileged": True},
             "volumeMounts": [_mount("mps-root", "/mps", mountPropagation="Bidirectional")]},
            _config_manager("config-manager-init", image, True, ""),
        ],
        "containers": [main, _config_manager("config-manager", image, False, "/usr/bin/mps-control-daemon")],
        "volumes": [_host("run-nvidia", "/run/nvidia", "Directory"), _host("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
                    _host("mps-shm", "/run/nvidia/mps/shm")],
    }
    _handle_plugin_config(pod, spec, "mps-control-daemon-ctr")
    _apply_mig_strategy(main, cp.mig_strategy(spec))
    return {"app": MPS_CONTROL_DAEMON}, pod


def _simple(app: str, key: str, account: str, container_name: str, validation: bool,
            volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> Builder:
    def render(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
        container = {"name": container_name, "image": cp.image(spec, key), "imagePullPolicy": "IfNotPresent",
                     "volumeMounts": copy.deepcopy(mounts)}
        if app == "nvidia-dcgm-exporter" and cp.enabled(spec, "dcgm"):
            _set_env(container, "DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555")
        _custom_env(container, spec, key)
        pod = {"serviceAccountName": account, "initContainers": [], "containers": [container], "volumes": copy.deepcopy(volumes)}
        if validation:
            pod["initContainers"].append(_validation("toolkit-validation", cp.image(spec, "validator"), volumes[0]["name"],
                                                     volumes[0]["hostPath"]["path"]))
        return {"app": app}, pod
    return render


def mig_manager(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    config_map, custom = cp.mig_parted_config(spec)
    main = {
        "name": "nvidia-mig-manager", "image": cp.image(spec, "migManager"), "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"], "securityContext": {"privileged": True},
        "env": [*_field_env(NODE_NAME="spec.nodeName", POD_NAME="metadata.name", POD_NAMESPACE="metadata.namespace"),
                *_env(GPU_CLIENTS_FILE="/gpu-clients/clients.yaml")],
        "volumeMounts": [_mount("nvidia-mig-manager-entrypoint", "/bin/entrypoint.sh", readOnly=True, subPath="entrypoint.sh"),
                         _mount("gpu-clients", "/gpu-clients"), _mount("mig-parted-config", "/mig-parted-config")],
    }
    parted: dict[str, Any] = {"name": "mig-parted-config", "configMap": {"name": config_map}}
    if custom:
        _set_env(main, "CONFIG_FILE", "/mig-parted-config/config.yaml")
    else:
        parted["configMap"]["items"] = [{"key": "config.yaml", "path": "config-default.yaml"}]
        _set_env(main, "DEFAULT_CONFIG_FILE", "/mig-parted-config/config-default.yaml")
    if cp.section(spec, "cdi").get("enabled"):
        _set_env(main, "CDI_ENABLED", "true")
    _custom_env(main, spec, "migManager")
    clients = str(cp.section(cp.section(spec, "migManager"), "gpuClientsConfig").get("name") or "default-gpu-clients")
    pod = {
        "hostPID": True, "hostIPC": True,
        "serviceAccountName": "nvidia-mig-manager",
        "initContainers": [_validation("toolkit-validation", cp.image(spec, "validator"), "run-nvidia-validations",
                                       "/run/nvidia/validations")],
        "containers": [main],
        "volumes": [_config_map_volume("nvidia-mig-manager-entrypoint", "nvidia-mig-manager-entrypoint", 448),
                    _host("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
                    {"name": "gpu-clients", "configMap": {"name": clients}}, parted],
    }
    return {"app": MIG_MANAGER}, pod


dcgm = _simple("nvidia-dcgm", "dcgm", "nvidia-dcgm", "nvidia-dcgm-ctr", True, [_host("run-nvidia", "/run/nvidia", "Directory")], [])
dcgm_exporter = _simple(
    "nvidia-dcgm-exporter", "dcgmExporter", "nvidia-dcgm-exporter", "nvidia-dcgm-exporter", True,
    [_host("run-nvidia", "/run/nvidia", "Directory"), _host("pod-gpu-resources", "/var/lib/kubelet/pod-resources")],
    [_mount("pod-gpu-resources", "/var/lib/kubelet/pod-resources", readOnly=True)])
node_status_exporter = _simple(
    "nvidia-node-status-exporter", "nodeStatusExporter", "nvidia-node-status-exporter", "nvidia-node-status-exporter", False,
    [_host("run-nvidia", "/run/nvidia"), _host("host-root", "/")],
    [_mount("run-nvidia", "/run/nvidia", mountPropagation="HostToContainer")])
