"""The GPU Operator's objects: the ClusterPolicy CRD and instance, and the device-plugin DaemonSet
rendered from the ClusterPolicy (re-applied only when the rendered spec's hash changes)."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

GROUP, VERSION, PLURAL = "nvidia.com", "v1", "clusterpolicies"
CLUSTER_POLICY = "cluster-policy"
DAEMONSET = "nvidia-device-plugin-daemonset"
APP_LABEL = {"app": DAEMONSET}
HASH_ANNOTATION = "nvidia.com/last-applied-hash"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"
DEPLOY_COMPONENTS = (
    "driver", "gpu-feature-discovery", "container-toolkit", "device-plugin",
    "dcgm", "dcgm-exporter", "node-status-exporter", "operator-validator",
)


def crd() -> dict[str, Any]:
    def obj(properties: dict[str, Any] | None = None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if properties:
            schema["properties"] = properties
        return schema

    string = {"type": "string"}
    spec = obj({
        "devicePlugin": obj({"enabled": {"type": "boolean"}, "config": obj({"name": string, "default": string})}),
        "mig": obj({"strategy": {"type": "string", "enum": ["single", "mixed"]}}),
        "migManager": obj({"enabled": {"type": "boolean"}}),
        "daemonsets": obj({"tolerations": {"type": "array", "items": obj()},
                           "rollingUpdate": obj({"maxUnavailable": {"type": "string"}})}),
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


def default_instance() -> dict[str, Any]:
    """The instance as the gpu-operator chart creates it (no device-plugin config, MIG single)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterPolicy",
        "metadata": {"name": CLUSTER_POLICY},
        "spec": {
            "operator": {"defaultRuntime": "containerd"},
            "daemonsets": {"updateStrategy": "RollingUpdate", "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            "driver": {"enabled": True},
            "toolkit": {"enabled": True},
            "devicePlugin": {"enabled": True, "config": {"name": "", "default": ""}},
            "gfd": {"enabled": True},
            "dcgmExporter": {"enabled": True},
            "mig": {"strategy": "single"},
            "migManager": {"enabled": True, "config": {"name": "default-mig-parted-config", "default": "all-disabled"}},
        },
    }


def render_daemonset(policy: dict[str, Any], namespace: str) -> dict[str, Any]:
    spec = policy.get("spec") or {}
    plugin = spec.get("devicePlugin") or {}
    config = plugin.get("config") or {}
    config_name, default_key = config.get("name") or "", config.get("default") or ""
    mig_strategy = (spec.get("mig") or {}).get("strategy") or "single"
    tolerations = copy.deepcopy((spec.get("daemonsets") or {}).get("tolerations") or [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    max_unavailable = str(((spec.get("daemonsets") or {}).get("rollingUpdate") or {}).get("maxUnavailable") or "1")
    env = [{"name": "MIG_STRATEGY", "value": mig_strategy}, {"name": "PASS_DEVICE_SPECS", "value": "true"}]
    env += [{"name": k, "value": str(v)} for e in plugin.get("env") or [] for k, v in [(e.get("name"), e.get("value"))]]
    containers = [{"name": "nvidia-device-plugin", "image": plugin.get("image") or PLUGIN_IMAGE, "env": env}]
    volumes = []
    if config_name:
        containers[0]["env"].append({"name": "CONFIG_FILE", "value": "/config/config.yaml"})
        containers.append({
            "name": "config-manager",
            "image": plugin.get("image") or PLUGIN_IMAGE,
            "command": ["config-manager"],
            "env": [
                {"name": "ONESHOT", "value": "false"},
                {"name": "NODE_LABEL", "value": CONFIG_LABEL},
                {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
                {"name": "CONFIG_FILE_DST", "value": "/config/config.yaml"},
                {"name": "DEFAULT_CONFIG", "value": default_key},
            ],
            "volumeMounts": [{"name": config_name, "mountPath": "/available-configs"}],
        })
        volumes.append({"name": config_name, "configMap": {"name": config_name}})
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DAEMONSET, "namespace": namespace, "labels": dict(APP_LABEL)},
        "spec": {
            "selector": {"matchLabels": dict(APP_LABEL)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxUnavailable": int(max_unavailable) if max_unavailable.isdigit() else max_unavailable}},
            "template": {
                "metadata": {"labels": dict(APP_LABEL)},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
                    "tolerations": tolerations,
                    "priorityClassName": "system-node-critical",
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    }
    digest = hashlib.sha256(json.dumps(daemonset["spec"], sort_keys=True).encode()).hexdigest()[:16]
    daemonset["metadata"]["annotations"] = {HASH_ANNOTATION: digest}
    return daemonset


def plugin_source(pod_spec: Any) -> tuple[str, str]:
    """(ConfigMap name, default key) a device-plugin pod was rendered with; ('', '') without config."""
    for container in pod_spec.containers or []:
        if container.name == "config-manager":
            env = {e.name: e.value or "" for e in container.env or []}
            volume = next((v for v in pod_spec.volumes or [] if v.config_map), None)
            return (volume.config_map.name if volume else "", env.get("DEFAULT_CONFIG", ""))
    return ("", "")
