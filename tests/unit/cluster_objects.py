"""Small API objects for the planners' unit tests, shaped like what the embedded cluster serves
(dumped from it through gpushare.k8s.session.Session: GPU nodes as GFD and the simulated
operator label them, the ClusterPolicy as the chart creates it, operand DaemonSets and pods)."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pytest

from gpushare.k8s.patch import PatchConflict, json_patch, merge_patch
from gpushare.runbook.records import RECORDS_NAMESPACE, FieldChange, Intent, Record, new_record
from gpushare.timeslicing.settings import Settings

NAMESPACE = "gpu-operator"
CLUSTERPOLICY = "cluster-policy"
CONFIGMAP = "time-slicing-config"
BOOT = "2026-12-01T08:45:11Z"  # when the nodes, DaemonSets and their pods were created
NOW = dt.datetime(2026, 12, 1, 10, 0, 0, tzinfo=dt.timezone.utc)
ASSET_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
POOL_TAINT = {"key": "nvidia.com/gpu", "value": "shared", "effect": "NoSchedule"}
SHARED_CONFIG_2 = ("version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n"
                   "    renameByDefault: true\n    failRequestsGreaterThanOne: true\n    resources:\n"
                   "    - name: nvidia.com/gpu\n      replicas: 2\n")


def node(name: str, gpus: int | None = 1, *, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, replicas: int = 1, renamed: bool = True, mig: str = "all-disabled",
         product: str = "NVIDIA-H100-80GB-HBM3", gpu: bool = True) -> dict[str, Any]:
    """A node; `replicas` > 1 makes it advertise time-sliced shares as the device plugin does."""
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"}
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpu:
        all_labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product + ("-SHARED" if replicas > 1 and not renamed else ""),  # as GFD labels it
            "nvidia.com/gpu.replicas": str(replicas),
            "nvidia.com/gpu.sharing-strategy": "time-slicing" if replicas > 1 else "none",
            "nvidia.com/mig.config": mig, "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/gfd.timestamp": "1764578711",
        })
        if gpus is not None:
            all_labels["nvidia.com/gpu.count"] = str(gpus)
            if replicas > 1 and renamed:
                capacity.update({"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": str(gpus * replicas)})
            else:
                capacity["nvidia.com/gpu"] = str(gpus * replicas)
    all_labels.update(labels or {})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "305", "creationTimestamp": BOOT,
                     "labels": all_labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0",
                                     **(annotations or {})}},
        "spec": spec,
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def mark(configmap: str = CONFIGMAP, key: str = "shared", replicas: int = 2, scope: str = "node",
         run: str = "gpushare-run-enable-20261201t090000z-0a0a", taint_added: bool = True) -> dict[str, str]:
    """The enable runbook's annotation, as it writes it."""
    return {"gpushare.io/timeslicing": json.dumps({"configmap": configmap, "key": key, "replicas": replicas,
                                                   "scope": scope, "run": run, "taint_added": taint_added},
                                                  sort_keys=True)}


def clusterpolicy(config_name: str = "", config_default: str = "", *,
                  tolerations: list[dict[str, Any]] | None = None, auto_upgrade: bool = False) -> dict[str, Any]:
    """The ClusterPolicy as the gpu-operator chart creates it (the simulator's default instance)."""
    daemonsets: dict[str, Any] = {"updateStrategy": "RollingUpdate"}
    daemonsets["tolerations"] = [ASSET_TOLERATION] if tolerations is None else tolerations
    driver: dict[str, Any] = {"enabled": True}
    if auto_upgrade:
        driver["upgradePolicy"] = {"autoUpgrade": True}
    return {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": CLUSTERPOLICY, "uid": "uid-cp", "resourceVersion": "314", "generation": 1,
                     "creationTimestamp": "2026-12-01T08:45:19Z"},
        "spec": {"operator": {"defaultRuntime": "containerd"}, "daemonsets": daemonsets, "driver": driver,
                 "toolkit": {"enabled": True},
                 "devicePlugin": {"enabled": True, "config": {"name": config_name, "default": config_default}},
                 "gfd": {"enabled": True}, "mig": {"strategy": "single"},
                 "migManager": {"enabled": True, "config": {"name": "default-mig-parted-config",
                                                            "default": "all-disabled"}}},
        "status": {"state": "ready"},
    }


def configmap(name: str, data: dict[str, str], *, annotations: dict[str, str] | None = None,
              labels: dict[str, str] | None = None, written: str = "2026-12-01T09:00:00Z",
              uid: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid or f"uid-{name}", "resourceVersion": "465",
                     "creationTimestamp": written, "labels": labels or {}, "annotations": annotations or {},
                     "managedFields": [{"manager": "gpushare", "operation": "Update", "apiVersion": "v1",
                                        "time": written, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]},
        "data": data,
    }


def managed_configmap(data: dict[str, str] | None = None, *, created: bool = True,
                      written: str = "2026-12-01T09:00:00Z") -> dict[str, Any]:
    """The time-slicing ConfigMap as an enable run leaves it."""
    data = {"default": "version: v1\n", "shared": SHARED_CONFIG_2} if data is None else data
    annotations = {"gpushare.io/managed-keys": ",".join(sorted(data))}
    if created:
        annotations["gpushare.io/created-by"] = "enable-timeslicing"
    return configmap(CONFIGMAP, data, annotations=annotations, labels={"app.kubernetes.io/managed-by": "gpushare"},
                     written=written)


def daemonset(name: str, *, generation: int = 1, template_generation: int | None = None,
              tolerations: list[dict[str, Any]] | None = None, configmap_name: str = "",
              updated: int = 3, desired: int = 3) -> dict[str, Any]:
    volumes = [{"name": "config", "configMap": {"name": configmap_name}}] if configmap_name else []
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": generation,
                     "labels": {"app": name},
                     "annotations": {"deprecated.daemonset.template.generation":
                                     str(generation if template_generation is None else template_generation),
                                     "nvidia.com/last-applied-hash": "f19659b980ac7459"}},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"tolerations": [ASSET_TOLERATION] if tolerations is None else tolerations,
                                       "volumes": volumes,
                                       "containers": [{"name": name, "image": "nvcr.io/nvidia/k8s-device-plugin"}]}}},
        "status": {"currentNumberScheduled": desired, "desiredNumberScheduled": desired, "numberReady": desired,
                   "observedGeneration": generation, "updatedNumberScheduled": updated},
    }


def operand_pod(daemonset_name: str, node_name: str, *, generation: int = 1, created: str = BOOT,
                ready: bool = True, terminating: bool = False, waiting: dict[str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"},
                       {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": daemonset_name, "ready": ready, "restartCount": 0,
                               "state": {"waiting": waiting} if waiting else {"running": {"startedAt": created}}}],
    }
    metadata: dict[str, Any] = {
        "name": f"{daemonset_name}-{node_name}", "namespace": NAMESPACE, "uid": f"uid-{daemonset_name}-{node_name}",
        "creationTimestamp": created,
        "labels": {"app": daemonset_name, "controller-revision-hash": "d5d6696d9",
                   "pod-template-generation": str(generation)},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset_name,
                             "uid": f"uid-{daemonset_name}", "controller": True, "blockOwnerDeletion": True}],
    }
    if terminating:
        metadata["deletionTimestamp"] = "2026-12-01T09:59:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": node_name}, "status": status}


def workload_pod(name: str, node_name: str, *, namespace: str = "team-a", amount: int = 1,
                 resource: str = "nvidia.com/gpu.shared", owner: str | None = "ReplicaSet",
                 owner_name: str = "trainer-5d4f7b9c8", tolerations: list[dict[str, Any]] | None = None,
                 node_selector: dict[str, str] | None = None, affinity: dict[str, Any] | None = None,
                 volumes: list[dict[str, Any]] | None = None, phase: str = "Running") -> dict[str, Any]:
    labels = {"app": owner_name.rsplit("-", 1)[0]}
    owners = []
    if owner:
        owners = [{"apiVersion": "apps/v1", "kind": owner, "name": owner_name, "uid": f"uid-{owner_name}",
                   "controller": True, "blockOwnerDeletion": True}]
        if owner == "ReplicaSet":
            labels["pod-template-hash"] = owner_name.rsplit("-", 1)[1]
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"limits": {resource: str(amount)}, "requests": {resource: str(amount)}}}],
        "tolerations": tolerations if tolerations is not None else [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels,
                         "ownerReferences": owners, "creationTimestamp": "2026-12-01T09:10:00Z"},
            "spec": spec, "status": {"phase": phase}}


def record(name: str, runbook: str, *, state: str = "in-progress", nodes: list[str] | None = None,
           fields: list[FieldChange] | None = None, configmap_name: str = CONFIGMAP, created: bool = False,
           keys_added: list[str] | None = None, backup: dict[str, Any] | None = None,
           finished: str = "", backup_file: str = "") -> dict[str, Any]:
    """A run record ConfigMap as the runbooks write it (gpushare.runbook.records.new_record)."""
    intent = Intent(runbook, nodes or [], fields or [], configmap_name, created, keys_added or [])
    body = new_record(name, RECORDS_NAMESPACE, intent, backup, NOW - dt.timedelta(hours=1),
                      {"command": "ansible-playbook playbooks/x.yml", "operator": "alice"}, backup_file)
    body["metadata"]["annotations"]["gpushare.io/state"] = state
    if finished:
        body["metadata"]["annotations"]["gpushare.io/finished-at"] = finished
    body["metadata"].update(uid=f"uid-{name}", resourceVersion="700")
    return body


def fleet(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    """The embedded cluster's nodes: gpu-node (1 H100), gpu-node-2 (8 H100), gpu-node-mig (4 A100), cpu-node."""
    return [node("gpu-node", 1), node("gpu-node-2", 8), node("gpu-node-mig", 4, product="NVIDIA-A100-SXM4-40GB"),
            node("cpu-node", gpu=False), *extra]


def read(nodes: list[dict[str, Any]] | None = None, *, policy: dict[str, Any] | None | bool = True,
         configmaps: list[dict[str, Any]] = (), daemonsets: list[dict[str, Any]] | None = None,
         pods: list[dict[str, Any]] | None = None, namespace: bool = True, not_served: tuple[str, ...] = (),
         lease: dict[str, Any] | None = None, plugin_anywhere: list[dict[str, Any]] = (),
         records_namespace: bool = True, stray: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """What one gpushare_read of the enable/rollback preflight returns (its `resources`, plus `not_served`).
    The run records among `configmaps` are read from the runbooks' namespace; `stray` ones from the
    operator's (where an earlier gpushare wrote them)."""
    nodes = fleet() if nodes is None else nodes
    readers = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")
    if daemonsets is None:
        daemonsets = [daemonset(name) for name in readers]
    if pods is None:
        gpu_nodes = [n["metadata"]["name"] for n in nodes if "nvidia.com/gpu.present" in n["metadata"]["labels"]]
        pods = [operand_pod(d["metadata"]["name"], n) for d in daemonsets for n in gpu_nodes]
    return {
        "namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}} if namespace else None,
        "clusterpolicy": clusterpolicy() if policy is True else (policy or None),
        "nodes": nodes, "configmaps": [c for c in configmaps if not Record.is_record(c)] + list(stray),
        "records_namespace": {"metadata": {"name": RECORDS_NAMESPACE}} if records_namespace else None,
        "records": [c for c in configmaps if Record.is_record(c)],
        "daemonsets": daemonsets, "pods": pods, "lease": lease,
        "plugin_anywhere": list(plugin_anywhere), "not_served": list(not_served),
    }


INPUTS: dict[str, Any] = {
    # the role's defaults (roles/timeslicing/defaults/main.yml), as preflight.yml passes them
    "replicas": 2, "max_replicas": 16, "rename_by_default": True, "fail_requests_greater_than_one": True,
    "scope": "node", "confirm_cluster_scope": False, "configmap_name": CONFIGMAP, "config_key": "shared",
    "config_override": "", "pool_label_key": "gpu-mode", "pool_label_value": "shared", "pool_taint": True,
    "pool_taint_key": "nvidia.com/gpu", "pool_taint_value": "shared", "confirm_fleet_roll": False,
    "fleet_roll_confirm_above": 10, "confirm_operand_roll": False, "namespace": NAMESPACE,
    "clusterpolicy_name": CLUSTERPOLICY,
}


def settings(**overrides: Any) -> Settings:
    return Settings.of({**INPUTS, **overrides})


def shared_node(name: str, gpus: int, *, replicas: int = 2, key: str = "shared", own_taint: bool = False,
                **kwargs: Any) -> dict[str, Any]:
    """A node as a complete enable run leaves it: labelled, in the pool, tainted, marked."""
    return node(name, gpus, replicas=replicas, labels={"nvidia.com/device-plugin.config": key, "gpu-mode": "shared",
                                                        **kwargs.pop("labels", {})},
                taints=[POOL_TAINT], annotations={**mark(key=key, replicas=replicas, taint_added=not own_taint),
                                                  **kwargs.pop("annotations", {})}, **kwargs)


def enabled_read(shared: tuple[str, ...] = ("gpu-node",), **kwargs: Any) -> dict[str, Any]:
    """The cluster after a complete node-scope enable of `shared` (2 replicas): the ConfigMap it
    created, the ClusterPolicy pointing at it, its record, and readers started after the write."""
    gpus = {"gpu-node": 1, "gpu-node-2": 8, "gpu-node-mig": 4}
    nodes = [shared_node(n, gpus[n]) if n in shared else node(n, gpus[n]) for n in gpus]
    nodes.append(node("cpu-node", gpu=False))
    readers = [daemonset(name) for name in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")]
    pods = [operand_pod(d["metadata"]["name"], n, created="2026-12-01T09:05:00Z") for d in readers for n in gpus]
    enable = record("gpushare-run-enable-20261201t090000z-0a0a", "enable-timeslicing", state="complete",
                    nodes=list(shared), created=True, keys_added=["default", "shared"], backup=clusterpolicy(),
                    fields=[FieldChange("/spec/devicePlugin/config/name", "", CONFIGMAP),
                            FieldChange("/spec/devicePlugin/config/default", "", "default")],
                    finished="2026-12-01T09:06:00Z")
    defaults: dict[str, Any] = {"nodes": nodes, "policy": clusterpolicy(CONFIGMAP, "default"),
                                "configmaps": [managed_configmap(), enable], "daemonsets": readers, "pods": pods}
    return read(**{**defaults, **kwargs})


def assert_guarded(clusterpolicy: dict[str, Any], changes: dict[str, list[dict[str, Any]]],
                   edit: Callable[[dict[str, Any]], Any]) -> None:
    """The plan's ClusterPolicy patch is refused once someone else has made `edit` to its spec since the read."""
    moved = copy.deepcopy(clusterpolicy)
    edit(moved["spec"])
    with pytest.raises(PatchConflict):
        json_patch(moved, changes["clusterpolicy"][0].body)


def applied(obj: dict[str, Any], changes: list[dict[str, Any]]) -> dict[str, Any]:
    """The object as the API server leaves it after a plan's changes of it."""
    for change in changes:
        if change.action == "merge":
            obj = merge_patch(obj, change.body)
        elif change.action == "json":
            obj = json_patch(obj, change.body)
        elif change.action == "taint":
            obj = merge_patch(obj, {"spec": {"taints": [*obj["spec"].get("taints", []), change.body]}})
        elif change.action == "untaint":
            obj = merge_patch(obj, {"spec": {"taints": [t for t in obj["spec"].get("taints", [])
                                                        if t != change.body] or None}})
    return obj
