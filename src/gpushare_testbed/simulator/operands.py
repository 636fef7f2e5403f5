"""The operand DaemonSets the GPU Operator renders from a ClusterPolicy, with no I/O.

Each follows its asset (gpu-operator v26.7.0 assets/*/0500_daemonset.yaml: name, labels,
nodeSelector `nvidia.com/gpu.deploy.<component>`, init containers, containers, volumes, service
account), transformed as controllers/object_controls.go does: `applyCommonDaemonsetConfig`
(daemonsets.updateStrategy / rollingUpdate — never on the driver, which stays OnDelete —,
priorityClassName, tolerations replacing the asset's only when non-empty), the per-operand
Transform* (images, `applyMIGConfiguration`, `handleDevicePluginConfig` for the device plugin, GFD
and the MPS control daemon), `applyCommonDaemonsetMetadata` (daemonsets.labels/annotations), the
ClusterPolicy as controller owner, and `nvidia.com/last-applied-hash` over the rendered object."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator.operand_specs import (
    DEVICE_PLUGIN, Builder, DRIVER, GFD, MIG_MANAGER, MPS_CONTROL_DAEMON, VALIDATOR, dcgm, dcgm_exporter, device_plugin, driver,
    gfd, mig_manager, mps_control_daemon, node_status_exporter, toolkit, validator,
)

HASH_ANNOTATION = "nvidia.com/last-applied-hash"
ASSET_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
Manifest = dict[str, Any]


# (DaemonSet, component of its gpu.deploy label, ClusterPolicy key deciding it, renderer) in the
# operator's state order (controllers/state_manager.go addState calls).
OPERANDS: tuple[tuple[str, str, str | None, Builder], ...] = (
    (DRIVER, "driver", "driver", driver),
    ("nvidia-container-toolkit-daemonset", "container-toolkit", "toolkit", toolkit),
    (VALIDATOR, "operator-validator", None, validator),
    (DEVICE_PLUGIN, "device-plugin", "devicePlugin", device_plugin),
    (MPS_CONTROL_DAEMON, "device-plugin", "devicePlugin", mps_control_daemon),
    ("nvidia-dcgm", "dcgm", "dcgm", dcgm),
    ("nvidia-dcgm-exporter", "dcgm-exporter", "dcgmExporter", dcgm_exporter),
    (GFD, "gpu-feature-discovery", "gfd", gfd),
    (MIG_MANAGER, "mig-manager", "migManager", mig_manager),
    ("nvidia-node-status-exporter", "node-status-exporter", "nodeStatusExporter", node_status_exporter),
)


def _update_strategy(name: str, daemonsets: dict[str, Any]) -> dict[str, Any] | None:
    """applyUpdateStrategyConfig; None keeps the asset's (the API default RollingUpdate)."""
    if name == DRIVER:
        return {"type": "OnDelete"}
    if daemonsets.get("updateStrategy") == "OnDelete":
        return {"type": "OnDelete"}
    max_unavailable = str(cp.section(daemonsets, "rollingUpdate").get("maxUnavailable") or "")
    if not max_unavailable:
        return None
    value: int | str = max_unavailable if max_unavailable.endswith("%") else int(max_unavailable)
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": value}}


def _hash(obj: Manifest) -> str:
    """utils.GetObjectHash: a digest of the whole rendered object."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:20]


def render(policy: Manifest, namespace: str) -> dict[str, Manifest]:
    """Every DaemonSet the ClusterPolicy enables, by name, each with its last-applied hash."""
    spec = policy.get("spec") or {}
    daemonsets = cp.section(spec, "daemonsets")
    extra_labels = {k: str(v) for k, v in cp.section(daemonsets, "labels").items()}
    extra_annotations = {k: str(v) for k, v in cp.section(daemonsets, "annotations").items()}
    rendered = {}
    for name, component, key, build in OPERANDS:
        if key is not None and not cp.enabled(spec, key):
            continue
        labels, pod = build(spec)
        selector = {k: v for k, v in labels.items() if k in ("app", "app.kubernetes.io/part-of")}
        node_selector = {f"nvidia.com/gpu.deploy.{component}": "true"}
        if name == MPS_CONTROL_DAEMON:
            node_selector["nvidia.com/mps.capable"] = "true"
        pod = {
            "nodeSelector": node_selector,
            "tolerations": copy.deepcopy(daemonsets.get("tolerations") or ASSET_TOLERATIONS),
            "priorityClassName": daemonsets.get("priorityClassName") or "system-node-critical",
            **pod,
        }
        template_labels = dict(labels)
        template_labels.update({k: v for k, v in extra_labels.items() if k not in ("app", "app.kubernetes.io/part-of")})
        template_meta: dict[str, Any] = {"labels": template_labels}
        if extra_annotations:
            template_meta["annotations"] = dict(extra_annotations)
        ds_spec: dict[str, Any] = {"selector": {"matchLabels": selector}, "template": {"metadata": template_meta, "spec": pod}}
        strategy = _update_strategy(name, daemonsets)
        if strategy:
            ds_spec["updateStrategy"] = strategy
        manifest = {
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {
                "name": name, "namespace": namespace, "labels": {**labels, **extra_labels},
                "annotations": dict(extra_annotations),
                "ownerReferences": [{
                    "apiVersion": f"{cp.GROUP}/{cp.VERSION}", "kind": "ClusterPolicy",
                    "name": policy["metadata"]["name"], "uid": policy["metadata"].get("uid", ""),
                    "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": ds_spec,
        }
        manifest["metadata"]["annotations"][HASH_ANNOTATION] = _hash(manifest)
        rendered[name] = manifest
    return rendered


def expected_hashes(policy: Manifest, namespace: str) -> dict[str, str]:
    """The last-applied hash the operator will write on each DaemonSet for this ClusterPolicy."""
    return {name: ds["metadata"]["annotations"][HASH_ANNOTATION] for name, ds in render(policy, namespace).items()}


def owned_by(objs: list[Manifest], owner: Manifest) -> list[Manifest]:
    return [o for o in objs if any(r.get("uid") == owner["metadata"]["uid"] for r in o["metadata"].get("ownerReferences") or [])]


def current_revision(revisions: list[Manifest], daemonset: Manifest) -> str | None:
    """The hash of the DaemonSet's newest ControllerRevision: what its pods' controller-revision-hash
    label says once they run the current template (getDaemonsetControllerRevisionHash)."""
    owned = owned_by(revisions, daemonset)
    if not owned:
        return None
    latest = max(owned, key=lambda r: int(r.get("revision", 0)))
    return latest["metadata"]["name"].removeprefix(f"{daemonset['metadata']['name']}-")
