"""Jinja2 filters for the gpushare runbooks.

The device-plugin filters wrap `gpushare.device_plugin_config`, so a runbook validates a rendered
config exactly as NVIDIA's device plugin would (its own error text) and also refuses the mistakes
the plugin silently ignores (for example `renameByDefault` under `flags`). The other filters keep
the arithmetic of leases and node checks out of Jinja expressions.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleFilterError

try:
    from gpushare import device_plugin_config
    from gpushare.table import render_table
except ImportError:  # run from a checkout whose package is not installed in this Python
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gpushare import device_plugin_config
    from gpushare.table import render_table

SHARED = "nvidia.com/gpu.shared"
WHOLE = "nvidia.com/gpu"
MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def _config_text(config: Any) -> str:
    if isinstance(config, str):
        return config
    if isinstance(config, dict):
        import yaml  # noqa: PLC0415 - only for configs given as mappings

        return yaml.safe_dump(config, default_flow_style=False, sort_keys=False)
    raise AnsibleFilterError(f"a device-plugin config must be YAML text or a mapping, got {type(config).__name__}")


def device_plugin_config_text(config: Any) -> str:
    """The config as the YAML text that goes into the ConfigMap (a mapping is dumped, text kept)."""
    return _config_text(config)


def device_plugin_config_problems(config: Any) -> list[str]:
    """Why the device plugin would refuse this config (its own error), or what it would silently ignore."""
    text = _config_text(config)
    try:
        device_plugin_config.parse(text)
    except device_plugin_config.ConfigError as err:
        return [str(err)]
    return device_plugin_config.lint(text)


def device_plugin_sharing(config: Any) -> dict[str, Any]:
    """What a node shows once the plugin has loaded this config: strategy, replicas, renaming."""
    try:
        parsed = device_plugin_config.parse(_config_text(config))
    except device_plugin_config.ConfigError as err:
        raise AnsibleFilterError(str(err)) from None
    sharing = parsed.sharing
    return {
        "strategy": sharing.strategy,
        "replicas": sharing.replicas,
        "rename_by_default": sharing.rename_by_default,
        "fail_requests_greater_than_one": sharing.fail_requests_greater_than_one,
        "resource": SHARED if sharing.rename_by_default else WHOLE,
    }


def _time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    for fmt in (MICROTIME, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return dt.datetime.strptime(value, fmt).replace(tzinfo=dt.timezone.utc)
        except ValueError:
            continue
    return None


def lease_status(lease: dict[str, Any] | None, now: str | None = None) -> dict[str, Any]:
    """Who holds a coordination.k8s.io Lease and until when; an expired or empty Lease is free."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    acquired = spec.get("acquireTime") or ""
    renewed = _time(spec.get("renewTime")) or _time(acquired)
    duration = int(spec.get("leaseDurationSeconds") or 0)
    current = _time(now) if now else dt.datetime.now(dt.timezone.utc)
    expires = renewed + dt.timedelta(seconds=duration) if renewed and duration else None
    expired = expires is not None and current is not None and current >= expires
    return {
        "exists": bool(lease),
        "held": bool(holder) and not expired,
        "holder": holder,
        "acquired": acquired,
        "expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ") if expires else "",
        "expired": expired,
        "resource_version": ((lease or {}).get("metadata") or {}).get("resourceVersion", ""),
    }


def node_fingerprint(node: dict[str, Any]) -> dict[str, Any]:
    """What 'exactly as before' means for a GPU node: labels, nvidia.com allocatable, taints."""
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    spec = node.get("spec") or {}
    return {
        "labels": dict(metadata.get("labels") or {}),
        "allocatable": {k: v for k, v in (status.get("allocatable") or {}).items() if k.startswith("nvidia.com/")},
        "taints": sorted(f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in spec.get("taints") or []),
        "unschedulable": bool(spec.get("unschedulable")),
    }


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return -1


def node_summaries(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Node name -> the facts a runbook plans and reports with (flat keys, easy to select on)."""
    summaries = {}
    for node in nodes:
        metadata = node.get("metadata") or {}
        labels = metadata.get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        count = labels.get("nvidia.com/gpu.count")
        summaries[metadata["name"]] = {
            "name": metadata["name"],
            "gpu_present": labels.get("nvidia.com/gpu.present") == "true",
            "gpus": int(count) if count and count.isdigit() else None,
            "replicas": labels.get("nvidia.com/gpu.replicas", ""),
            "strategy": labels.get("nvidia.com/gpu.sharing-strategy", ""),
            "config": labels.get("nvidia.com/device-plugin.config", ""),
            "mig_config": labels.get("nvidia.com/mig.config", ""),
            "labels": dict(labels),
            "annotation": (metadata.get("annotations") or {}).get("gpushare.io/timeslicing", ""),
            "shared": _quantity(allocatable.get(SHARED, 0)),
            "whole": _quantity(allocatable.get(WHOLE, 0)),
            "taints": list((node.get("spec") or {}).get("taints") or []),
            "fingerprint": node_fingerprint(node),
        }
    return summaries


def timeslicing_node_problems(nodes: list[dict[str, Any]], targets: list[str], before: dict[str, dict[str, Any]],
                              sharing: dict[str, Any], pool: dict[str, Any]) -> list[str]:
    """Differences between the GPU nodes as read now and what the enable runbook promised; empty when all is well.

    `targets`: nodes that must show the shares; `before`: node_summaries() taken in preflight (physical GPUs,
    and the fingerprint every GPU node not targeted must still have); `sharing`: device_plugin_sharing() of the
    config; `pool`: {key, value, taint (bool), nodes (the nodes put in the shared pool)}.
    """
    by_name = {n["metadata"]["name"]: n for n in nodes}
    replicas = int(sharing["replicas"])
    problems = []
    for name in sorted(targets):
        node = by_name.get(name)
        if node is None:
            problems.append(f"{name}: not a GPU node any more")
            continue
        labels = node["metadata"].get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        gpus = int(before[name]["gpus"])
        checks = [
            ("label nvidia.com/gpu.count", labels.get("nvidia.com/gpu.count"), str(gpus)),
            ("label nvidia.com/gpu.replicas", labels.get("nvidia.com/gpu.replicas"), str(replicas)),
            ("label nvidia.com/gpu.sharing-strategy", labels.get("nvidia.com/gpu.sharing-strategy"), "time-slicing"),
        ]
        if sharing["rename_by_default"]:
            checks += [(f"allocatable {SHARED}", _quantity(allocatable.get(SHARED, 0)), gpus * replicas),
                       (f"allocatable {WHOLE}", _quantity(allocatable.get(WHOLE, 0)), 0)]
        else:
            checks.append((f"allocatable {WHOLE}", _quantity(allocatable.get(WHOLE, 0)), gpus * replicas))
        if name in pool["nodes"]:
            checks.append((f"label {pool['key']}", labels.get(pool["key"]), pool["value"]))
            if pool["taint"]:
                taint = f"{pool['key']}={pool['value']}:NoSchedule"
                checks.append(("taint", taint if taint in node_fingerprint(node)["taints"] else "missing", taint))
        problems += [f"{name}: {what} is {got!r}, expected {wanted!r}" for what, got, wanted in checks if got != wanted]
    for name in sorted(set(before) - set(targets)):
        if not before[name]["gpu_present"]:
            continue
        node = by_name.get(name)
        if node is None:
            problems.append(f"{name} (not targeted): not a GPU node any more")
            continue
        was, now = before[name]["fingerprint"], node_fingerprint(node)
        for part in ("labels", "allocatable", "taints", "unschedulable"):
            if now[part] != was[part]:
                changed = sorted(k for k in set(was[part]) | set(now[part])
                                 if (was[part] or {}).get(k) != (now[part] or {}).get(k)) if isinstance(was[part], dict) else None
                detail = f" ({', '.join(changed)})" if changed else f": {json.dumps(was[part])} -> {json.dumps(now[part])}"
                problems.append(f"{name} (not targeted): {part} changed{detail}")
    return problems


def text_table(rows: list[list[Any]], headers: list[str]) -> str:
    """A plain-text table, as the gpushare commands print them."""
    return render_table(headers, rows)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "device_plugin_config_text": device_plugin_config_text,
            "device_plugin_config_problems": device_plugin_config_problems,
            "device_plugin_sharing": device_plugin_sharing,
            "lease_status": lease_status,
            "node_fingerprint": node_fingerprint,
            "node_summaries": node_summaries,
            "timeslicing_node_problems": timeslicing_node_problems,
            "text_table": text_table,
        }
