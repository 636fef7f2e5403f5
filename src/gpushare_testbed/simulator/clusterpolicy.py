"""The ClusterPolicy: its CRD (the fields the simulator reads, the rest preserved) and the instance
the gpu-operator chart creates (deployments/gpu-operator/values.yaml rendered through
templates/clusterpolicy.yaml, v26.7.0; for an older release, with that release's operand images:
RELEASES), with accessors that apply the operator's defaults (api/nvidia/v1/clusterpolicy_types.go:
`IsEnabled` of each component)."""

from __future__ import annotations

import copy
from typing import Any

GROUP, VERSION, PLURAL = "nvidia.com", "v1", "clusterpolicies"
# v26.7's DRA stack (api/nvidia/v1alpha1/gpucluster_types.go): a cluster-scoped singleton the chart's CRDs define
GPUCLUSTER_VERSION, GPUCLUSTER_PLURAL = "v1alpha1", "gpuclusters"
CLUSTER_POLICY = "cluster-policy"
CHART_VERSION = "v26.7.0"
CONFIG_LABEL = "nvidia.com/device-plugin.config"

# component key -> enabled when the ClusterPolicy does not say (IsEnabled in clusterpolicy_types.go)
ENABLED_BY_DEFAULT = {
    "driver": True, "toolkit": True, "devicePlugin": True, "dcgm": True, "dcgmExporter": True, "gfd": True,
    "migManager": True, "nodeStatusExporter": False,
}


def crd() -> dict[str, Any]:
    def obj(properties: dict[str, Any] | None = None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if properties:
            schema["properties"] = properties
        return schema

    string = {"type": "string"}
    boolean = {"type": "boolean"}
    spec = obj({
        "devicePlugin": obj({"enabled": boolean, "config": obj({"name": string, "default": string})}),
        "mig": obj({"strategy": {"type": "string", "enum": ["none", "single", "mixed"]}}),
        "migManager": obj({"enabled": boolean, "config": obj({"name": string, "default": {**string, "default": "all-disabled"}})}),
        "daemonsets": obj({
            "tolerations": {"type": "array", "items": obj()},
            "priorityClassName": string,
            "updateStrategy": {"type": "string", "enum": ["RollingUpdate", "OnDelete"], "default": "RollingUpdate"},
            "rollingUpdate": obj({"maxUnavailable": string}),
        }),
        "driver": obj({"enabled": boolean, "upgradePolicy": obj({
            "autoUpgrade": boolean, "maxParallelUpgrades": {"type": "integer", "minimum": 0},
            "maxUnavailable": {"x-kubernetes-int-or-string": True}})}),
    })
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"plural": PLURAL, "singular": "clusterpolicy", "kind": "ClusterPolicy", "listKind": "ClusterPolicyList"},
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": obj({"spec": spec, "status": obj({"state": string})})},
                "additionalPrinterColumns": [{"name": "Status", "type": "string", "jsonPath": ".status.state"}],
            }],
        },
    }


def gpucluster_crd() -> dict[str, Any]:
    """The GPUCluster CRD as the v26.7 chart ships it (crds/nvidia.com_gpuclusters.yaml): its names,
    scope, status subresource and printer column; the spec preserved unchecked."""
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{GPUCLUSTER_PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Cluster",
            "names": {"plural": GPUCLUSTER_PLURAL, "singular": "gpucluster", "kind": "GPUCluster",
                      "listKind": "GPUClusterList", "shortNames": ["gc"]},
            "versions": [{"name": GPUCLUSTER_VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": schema},
                          "additionalPrinterColumns": [{"name": "Status", "type": "string", "jsonPath": ".status.state"}]}],
        },
    }


def gpucluster_conflict(name: str) -> str:
    """The ClusterPolicy's Error condition while a GPUCluster exists (clusterpolicy_controller.go)."""
    return f"conflicting GPUCluster resource \"{name}\" detected; ClusterPolicy and GPUCluster cannot co-exist"


def _image(repository: str, image: str, version: str) -> dict[str, str]:
    return {"repository": repository, "image": image, "version": version, "imagePullPolicy": "IfNotPresent"}


_DEFAULT_SPEC: dict[str, Any] = {
    "hostPaths": {"rootFS": "/", "driverInstallDir": "/run/nvidia/driver"},
    "operator": {"runtimeClass": "nvidia"},
    "daemonsets": {
        "labels": {"helm.sh/chart": f"gpu-operator-{CHART_VERSION}", "app.kubernetes.io/managed-by": "gpu-operator"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-node-critical",
        "updateStrategy": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "1"},
    },
    "validator": {**_image("nvcr.io/nvidia", "gpu-operator", CHART_VERSION), "plugin": {"env": []}},
    "mig": {"strategy": "single"},
    "psa": {"enabled": False},
    "cdi": {"enabled": True},
    "driver": {
        "enabled": True, "useNvidiaDriverCRD": False, "kernelModuleType": "auto", "usePrecompiled": False,
        **_image("nvcr.io/nvidia", "driver", "595.91.07"),
        "startupProbe": {"initialDelaySeconds": 60, "periodSeconds": 10, "timeoutSeconds": 60, "failureThreshold": 120},
        "rdma": {"enabled": False, "useHostMofed": False},
        "manager": _image("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0"),
        "repoConfig": {"configMapName": ""},
        "certConfig": {"name": ""},
        "licensingConfig": {"secretName": "", "nlsEnabled": True},
        "virtualTopology": {"config": ""},
        "kernelModuleConfig": {"name": ""},
        "upgradePolicy": {
            "autoUpgrade": True,
            "maxParallelUpgrades": 1,
            "maxUnavailable": "25%",
            "waitForCompletion": {"timeoutSeconds": 0},
            "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
            "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
        },
    },
    "vgpuManager": {"enabled": False, "image": "vgpu-manager", "version": "", "imagePullPolicy": "IfNotPresent"},
    "kataManager": {"enabled": False},
    "vfioManager": {"enabled": True, **_image("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0")},
    "vgpuDeviceManager": {"enabled": True, **_image("nvcr.io/nvidia/cloud-native", "vgpu-device-manager", "v0.5.0"),
                          "config": {"name": "", "default": "default"}},
    "ccManager": {"enabled": True, "defaultMode": "on", **_image("nvcr.io/nvidia/cloud-native", "k8s-cc-manager", "v0.4.3")},
    "toolkit": {"enabled": True, **_image("nvcr.io/nvidia/k8s", "container-toolkit", "v1.20.0"),
                "installDir": "/usr/local/nvidia"},
    "devicePlugin": {"enabled": True, **_image("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0"),
                     "mps": {"root": "/run/nvidia/mps"}},
    "dcgm": {"enabled": False, **_image("nvcr.io/nvidia/cloud-native", "dcgm", "4.6.0-1-ubuntu24.04")},
    "dcgmExporter": {
        "enabled": True, **_image("nvcr.io/nvidia/k8s", "dcgm-exporter", "4.6.0-4.8.3-distroless"),
        "serviceMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "10s", "honorLabels": False,
                           "additionalLabels": {}, "relabelings": []},
        "service": {"internalTrafficPolicy": "Cluster"},
    },
    "gfd": {"enabled": True, **_image("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0")},
    "migManager": {"enabled": True, **_image("nvcr.io/nvidia/cloud-native", "k8s-mig-manager", "v0.15.0"),
                   "config": {"default": "all-disabled"}, "gpuClientsConfig": {"name": ""}},
    "nodeStatusExporter": {"enabled": False, **_image("nvcr.io/nvidia", "gpu-operator", CHART_VERSION)},
    "gds": {"enabled": False, **_image("nvcr.io/nvidia/cloud-native", "nvidia-fs", "2.29.4")},
    "gdrcopy": {"enabled": False, **_image("nvcr.io/nvidia/cloud-native", "gdrdrv", "v2.6")},
    "sandboxWorkloads": {"enabled": False, "defaultWorkload": "container", "mode": "kubevirt"},
    "sandboxDevicePlugin": {"enabled": True, **_image("nvcr.io/nvidia", "kubevirt-gpu-device-plugin", "v1.6.0")},
    "kataSandboxDevicePlugin": {"enabled": True,
                                **_image("nvcr.io/nvidia/cloud-native", "nvidia-sandbox-device-plugin", "v0.0.5")},
}


# Each release's operand image versions where they differ from v26.7.0's: the newest patch of the
# release, read from deployments/gpu-operator/values.yaml at its tag (v25.10.1, v26.3.3). A path names a
# ClusterPolicy section (`driver.manager`: driver's manager); None drops an operand the release lacks.
RELEASES: dict[str, tuple[str, dict[str, str | None]]] = {
    "v26.7": (CHART_VERSION, {}),
    "v26.3": ("v26.3.3", {
        "driver": "580.126.20", "driver.manager": "v0.11.0", "vfioManager": "v0.11.0", "toolkit": "v1.19.1",
        "devicePlugin": "v0.19.3", "gfd": "v0.19.3", "dcgm": "4.5.2-1-ubuntu22.04", "dcgmExporter": "4.5.3-4.8.2-distroless",
        "migManager": "v0.14.2", "vgpuDeviceManager": "v0.4.2", "ccManager": "v0.4.0", "gds": "2.27.3", "gdrcopy": "v2.5.2",
        "sandboxDevicePlugin": "v1.5.0", "kataSandboxDevicePlugin": "v0.0.3"}),
    "v25.10": ("v25.10.1", {
        "driver": "580.105.08", "driver.manager": "v0.9.1", "vfioManager": "13.0.1-base-ubi9", "toolkit": "v1.18.1",
        "devicePlugin": "v0.18.1", "gfd": "v0.18.1", "dcgm": "4.4.2-1-ubuntu22.04", "dcgmExporter": "4.4.2-4.7.0-distroless",
        "migManager": "v0.13.1", "vgpuDeviceManager": "v0.4.1", "ccManager": "v0.1.1", "gds": "2.26.6", "gdrcopy": "v2.5.1",
        "sandboxDevicePlugin": "v1.4.0", "kataSandboxDevicePlugin": None}),
}
# An operand whose image itself differed: (release, section) -> (repository, image)
RELEASE_IMAGES = {("v25.10", "vfioManager"): ("nvcr.io/nvidia", "cuda")}
NEWEST_RELEASE = "v26.7"
# The releases whose chart installs the GPUCluster CRD (the DRA stack, api/nvidia/v1alpha1, new in v26.7).
GPUCLUSTER_RELEASES = ("v26.7",)


def default_instance(release: str = NEWEST_RELEASE) -> dict[str, Any]:
    """The `cluster-policy` instance as the chart of `release` (a key of RELEASES) creates it with its
    default values."""
    chart, versions = RELEASES[release]
    spec = copy.deepcopy(_DEFAULT_SPEC)
    spec["daemonsets"]["labels"]["helm.sh/chart"] = f"gpu-operator-{chart}"
    for key in ("validator", "nodeStatusExporter"):
        spec[key]["version"] = chart
    for path, version in versions.items():
        *parents, key = path.split(".")
        holder = spec
        for parent in parents:
            holder = holder[parent]
        if version is None:
            del holder[key]
            continue
        holder[key]["version"] = version
        if (release, path) in RELEASE_IMAGES:
            holder[key]["repository"], holder[key]["image"] = RELEASE_IMAGES[(release, path)]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterPolicy",
        "metadata": {"name": CLUSTER_POLICY, "labels": {"app.kubernetes.io/component": "gpu-operator"}},
        "spec": spec,
    }


def section(spec: dict[str, Any], key: str) -> dict[str, Any]:
    value = spec.get(key)
    return value if isinstance(value, dict) else {}


def enabled(spec: dict[str, Any], key: str) -> bool:
    value = section(spec, key).get("enabled")
    return ENABLED_BY_DEFAULT[key] if value is None else bool(value)


def image(spec: dict[str, Any], key: str) -> str:
    """gpuv1.ImagePath: repository/image:version (a digest joins with @)."""
    part = section(spec, key)
    name = part.get("image", "")
    if part.get("repository"):
        name = f"{part['repository']}/{name}"
    version = str(part.get("version", ""))
    if version:
        name += ("@" if version.startswith("sha256:") else ":") + version
    return name


def plugin_config(spec: dict[str, Any]) -> tuple[str, str]:
    """(ConfigMap name, default key) of `devicePlugin.config`; ('', '') when unset."""
    config = section(section(spec, "devicePlugin"), "config")
    return str(config.get("name") or ""), str(config.get("default") or "")


def mig_strategy(spec: dict[str, Any]) -> str:
    """`mig.strategy`, '' when the ClusterPolicy has none (the operator then sets no MIG_STRATEGY)."""
    return str(section(spec, "mig").get("strategy") or "")


def mig_parted_config(spec: dict[str, Any]) -> tuple[str, bool]:
    """(ConfigMap the MIG manager mounts, whether it is a custom one)."""
    name = str(section(section(spec, "migManager"), "config").get("name") or "")
    return (name, True) if name else ("default-mig-parted-config", False)
