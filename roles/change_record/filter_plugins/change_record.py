"""Filters of the change_record role: a node as the change record shows it, before and after."""

from __future__ import annotations

from typing import Any


def node_row(node: dict[str, Any] | None, pool_key: str, pool_value: str) -> dict[str, Any]:
    """The facts of a node that a change ticket compares before and after a run."""
    if not node:
        return {"exists": False}
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    spec = node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if t.get("key") == pool_key]
    return {
        "exists": True,
        "physical_gpus": labels.get("nvidia.com/gpu.count", "-"),
        "product": labels.get("nvidia.com/gpu.product", "-"),
        "replicas": labels.get("nvidia.com/gpu.replicas", "-"),
        "strategy": labels.get("nvidia.com/gpu.sharing-strategy", "-"),
        "gpu": allocatable.get("nvidia.com/gpu", "0"),
        "shared": allocatable.get("nvidia.com/gpu.shared", "0"),
        "config": labels.get("nvidia.com/device-plugin.config", "") or "(cluster default)",
        "pool_label": labels.get(pool_key, "") == pool_value,
        "pool_taint": ", ".join(f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in taints) or "none",
        "schedulable": not spec.get("unschedulable", False),
        "annotation": (meta.get("annotations") or {}).get("gpushare.io/timeslicing", "") or "none",
    }


def md_cell(value: Any) -> str:
    """A value made safe for one Markdown table cell."""
    text = str(value if value is not None else "")
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


def observed(values: dict[str, Any] | None) -> str:
    """A gate's observed values on one line: key=value, lists in brackets, numbers trimmed."""
    def fmt(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        if isinstance(value, list):
            return "[" + ", ".join(fmt(v) for v in value) + "]"
        return "n/a" if value is None else str(value)

    return " ".join(f"{key}={fmt(value)}" for key, value in (values or {}).items())


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "change_record_node_row": node_row,
            "change_record_md_cell": md_cell,
            "change_record_observed": observed,
        }
