"""The seed's readings before any sharing, as rows for the report: Pending pods with the
scheduler's reasons, the last events by time, each GPU node's capacity / allocatable / GPU labels,
and nvidia-smi per node. Inputs are the objects kubernetes.core's k8s_info returns (dicts)."""

from __future__ import annotations

import csv
import io
from typing import Any

from gpushare.model.node import DEPLOY_PREFIX, Node

Table = dict[str, Any]
_GPU_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/mig", "nvidia.com/device-plugin.config", "gpu-mode")
NVIDIA_SMI_QUERY = "index,uuid,utilization.gpu,memory.used,memory.total,power.draw"


def pending_pods(pods: list[dict[str, Any]]) -> Table:
    """`kubectl get pods -A --field-selector=status.phase=Pending`, with why the scheduler waits."""
    rows = []
    for pod in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
        status = pod.get("status") or {}
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
        if scheduled.get("status") == "False":
            why = f"{scheduled.get('reason', '')}: {scheduled.get('message', '')}".strip(": ")
        else:
            waiting = [s["state"]["waiting"] for s in status.get("containerStatuses") or []
                       if (s.get("state") or {}).get("waiting")]
            why = "; ".join(f"{w.get('reason', '')}: {w.get('message', '')}".strip(": ") for w in waiting) or \
                "scheduled, containers not started yet"
        rows.append([pod["metadata"]["namespace"], pod["metadata"]["name"],
                     pod["metadata"].get("creationTimestamp", ""), why])
    return {"headers": ["namespace", "pod", "created", "why it waits"], "rows": rows}


def _event_time(event: dict[str, Any]) -> str:
    return (event.get("lastTimestamp") or event.get("eventTime") or (event.get("series") or {}).get("lastObservedTime")
            or event.get("firstTimestamp") or event["metadata"].get("creationTimestamp") or "")


def recent_events(events: list[dict[str, Any]], limit: int = 100) -> Table:
    """`kubectl get events -A --sort-by=.lastTimestamp | tail -n 100`, oldest first."""
    newest = sorted(events, key=lambda e: _event_time(e)[:19])[-limit:] if limit else []
    rows = [[_event_time(e)[:19] + "Z" if _event_time(e) else "", e.get("type", ""),
             e["metadata"].get("namespace", ""),
             f"{(e.get('involvedObject') or {}).get('kind', '')}/{(e.get('involvedObject') or {}).get('name', '')}",
             e.get("reason", ""), (e.get("message") or "").strip(), e.get("count") or 1] for e in newest]
    return {"headers": ["last seen", "type", "namespace", "object", "reason", "message", "count"], "rows": rows}


def _resources(values: dict[str, str]) -> str:
    wanted = [k for k in ("cpu", "memory", "pods") if k in values] + sorted(k for k in values if k.startswith("nvidia.com/"))
    return ", ".join(f"{key} {values[key]}" for key in wanted)


def gpu_nodes(nodes: list[dict[str, Any]], names: list[str]) -> Table:
    """`kubectl describe node` from Capacity to Allocatable, and the node's GPU labels."""
    rows = []
    for node in sorted((Node(raw) for raw in nodes), key=lambda n: n.name):
        if node.name not in names:
            continue
        gpu_labels = ", ".join(f"{k}={v}" for k, v in sorted(node.labels.items())
                               if k.startswith(_GPU_LABEL_PREFIXES) and not k.startswith(DEPLOY_PREFIX))
        rows.append([node.name, _resources(node.resources("capacity")), _resources(node.resources("allocatable")),
                     gpu_labels])
    missing = sorted(set(names) - {row[0] for row in rows})
    return {"headers": ["node", "capacity", "allocatable", "GPU labels"], "rows": rows, "missing": missing}


def nvidia_smi(results: list[dict[str, Any]]) -> Table:
    """Rows of `nvidia-smi --query-gpu=NVIDIA_SMI_QUERY --format=csv` per node: results are
    {node, pod, stdout} or {node, error}."""
    rows = []
    for result in results:
        if result.get("error"):
            rows.append([result["node"], result.get("pod", ""), "-", "-", "-", "-", "-", "-", result["error"]])
            continue
        table = list(csv.reader(io.StringIO(result.get("stdout", ""))))
        for values in table[1:]:
            if len(values) == 6:
                rows.append([result["node"], result.get("pod", ""), *(v.strip() for v in values), ""])
    headers = ["node", "pod", "index", "uuid", "utilization.gpu", "memory.used", "memory.total", "power.draw", "error"]
    return {"headers": headers, "rows": rows}
