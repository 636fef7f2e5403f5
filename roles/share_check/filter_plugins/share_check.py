"""Filters of the share_check role: the questions about a node and its pods that are awkward in
Jinja (which resource hands out shared replicas, how many are free, what each pod's status says,
which GPU each pod sees). The device-plugin config is read with the project's filter
device_plugin_sharing (filter_plugins/gpushare.py), the plugin's own parser."""

from __future__ import annotations

import re
from typing import Any

from gpushare.model.pods import pod_request

SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
TERMINAL_PHASES = ("Succeeded", "Failed")
UUID = re.compile(r"\(UUID:\s*(GPU-[0-9A-Za-z-]+)\)")


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def node_state(node: dict[str, Any], pool_key: str, pool_value: str) -> dict[str, Any]:
    """What an operator reads off a node to tell whether (and how) it shares its GPUs."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    spec = node.get("spec") or {}
    strategy = labels.get("nvidia.com/gpu.sharing-strategy", "none") or "none"
    shared_count = _int(allocatable.get(SHARED))
    gpu_count = _int(allocatable.get(GPU))
    if shared_count > 0:
        resource = SHARED
    elif strategy != "none" and gpu_count > 0:
        resource = GPU  # shared without renaming: the replicas are handed out as nvidia.com/gpu
    else:
        resource = ""
    taints = [t for t in spec.get("taints") or [] if t.get("key") == pool_key]
    return {
        "name": meta.get("name", ""),
        "hostname": labels.get("kubernetes.io/hostname", meta.get("name", "")),
        "shared": bool(resource),
        "resource": resource,
        "allocatable": _int(allocatable.get(resource)) if resource else 0,
        "allocatable_gpu": gpu_count,
        "allocatable_shared": shared_count,
        "physical_gpus": _int(labels.get("nvidia.com/gpu.count")),
        "replicas": _int(labels.get("nvidia.com/gpu.replicas")) or 1,
        "strategy": strategy,
        "product": labels.get("nvidia.com/gpu.product", ""),
        "config_label": labels.get(CONFIG_LABEL, ""),
        "timeslicing_annotation": annotations.get("gpushare.io/timeslicing", ""),
        "in_pool": labels.get(pool_key) == pool_value,
        "pool_label": f"{pool_key}={labels[pool_key]}" if pool_key in labels else "",
        "pool_taint": ", ".join(f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in taints),
        "pool_tainted": any(t.get("value", "") == pool_value and t.get("effect") == "NoSchedule" for t in taints),
        "schedulable": not spec.get("unschedulable", False),
    }


def pod_shares(pods: list[dict[str, Any]], resource: str, exclude_namespace: str = "",
               exclude_labels: dict[str, str] | None = None) -> int:
    """Units of `resource` the scheduler counts as taken by these pods (finished pods hold none;
    a pod needs the larger of its containers' sum and its largest init container). Pods in
    `exclude_namespace` that carry every label of `exclude_labels` are left out (a kept check
    that this run replaces)."""
    used = 0
    for pod in pods or []:
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (exclude_labels and meta.get("namespace") == exclude_namespace
                and all(labels.get(k) == v for k, v in exclude_labels.items())):
            continue
        used += pod_request(pod, resource)
    return used


def pod_summary(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Name, phase, node, reason and the scheduler's message of each pod, for reports."""
    summary = []
    for pod in pods or []:
        status = pod.get("status") or {}
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
        summary.append({
            "name": (pod.get("metadata") or {}).get("name", ""),
            "phase": status.get("phase", ""),
            "node": (pod.get("spec") or {}).get("nodeName", "") or "",
            "reason": status.get("reason", "") or scheduled.get("reason", "") or "",
            "message": status.get("message", "") or scheduled.get("message", "") or "",
            "scheduled": scheduled.get("status", ""),
            "terminating": bool((pod.get("metadata") or {}).get("deletionTimestamp")),
        })
    return summary


def gpu_uuids(stdout: str | None) -> list[str]:
    """GPU UUIDs listed by `nvidia-smi -L`."""
    return UUID.findall(stdout or "")


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "share_check_node_state": node_state,
            "share_check_pod_shares": pod_shares,
            "share_check_pod_summary": pod_summary,
            "share_check_gpu_uuids": gpu_uuids,
        }
