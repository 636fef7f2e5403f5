"""Filters of the timeslicing_rollback role: the questions about pods, nodes and budgets that are
awkward in Jinja (which pods ask for the shared resource, which budget protects which pod, what
"exactly as before" compares)."""

from __future__ import annotations

import json
from typing import Any

from gpushare.pods import pod_request

SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"
NODE_ANNOTATION = "gpushare.io/timeslicing"
TERMINAL_PHASES = ("Succeeded", "Failed")
EVICT_LABEL = "gpushare.io/evict"
CORDON_ANNOTATION = "gpushare.io/cordoned-by"
CORDONED_BY = "rollback-timeslicing"
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def _requested(pod: dict[str, Any], resources: list[str]) -> dict[str, int]:
    """The shared resources a pod asks for, as the scheduler counts them (see gpushare.pods)."""
    asked = {name: pod_request(pod, name) for name in resources}
    return {name: amount for name, amount in asked.items() if amount > 0}


def _owner(pod: dict[str, Any]) -> dict[str, str]:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):  # absent means false, as in the API
            return {"kind": ref.get("kind", ""), "name": ref.get("name", "")}
    return {"kind": "", "name": ""}


def shared_pods(pods: list[dict[str, Any]], resources: list[str]) -> list[dict[str, Any]]:
    """Pods that hold one of `resources` now (not finished), with what an operator needs to know."""
    found = []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        asked = _requested(pod, resources)
        if not asked:
            continue
        owner = _owner(pod)
        found.append({
            "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""),
            "node": (pod.get("spec") or {}).get("nodeName", ""),
            "owner_kind": owner["kind"],
            "owner_name": owner["name"],
            "daemonset": owner["kind"] == "DaemonSet",
            "terminating": bool(meta.get("deletionTimestamp")),
            "requests": asked,
            "labels": dict(meta.get("labels") or {}),
            "marked": (meta.get("labels") or {}).get(EVICT_LABEL) == CORDONED_BY,
        })
    return found


def _selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False  # a nil selector selects nothing
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def blocking_budgets(budgets: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each PodDisruptionBudget that selects one of `pods` (as returned by shared_pods), with the
    pods it protects and the figures that explain why it refuses an eviction."""
    found = []
    for budget in budgets or []:
        meta = budget.get("metadata") or {}
        spec = budget.get("spec") or {}
        status = budget.get("status") or {}
        protected = [f"{p['namespace']}/{p['name']}" for p in pods or []
                     if p["namespace"] == meta.get("namespace") and _selector_matches(spec.get("selector"), p["labels"])]
        if not protected:
            continue
        rule = (f"minAvailable {spec['minAvailable']}" if "minAvailable" in spec
                else f"maxUnavailable {spec.get('maxUnavailable')}")
        found.append({
            "budget": f"{meta.get('namespace')}/{meta.get('name')}",
            "pods": protected,
            "rule": rule,
            "disruptions_allowed": status.get("disruptionsAllowed", 0),
            "current_healthy": status.get("currentHealthy", 0),
            "desired_healthy": status.get("desiredHealthy", 0),
            "text": (f"PodDisruptionBudget {meta.get('namespace')}/{meta.get('name')} ({rule}, "
                     f"{status.get('currentHealthy', 0)} healthy of {status.get('desiredHealthy', 0)} needed, "
                     f"disruptionsAllowed {status.get('disruptionsAllowed', 0)}) protects {', '.join(protected)}"),
        })
    return found


def fingerprint(node: dict[str, Any]) -> dict[str, Any]:
    """What 'exactly as before' compares on a node the run must not touch."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {
        "labels": dict(sorted((meta.get("labels") or {}).items())),
        "annotations": {k: v for k, v in sorted((meta.get("annotations") or {}).items()) if k.startswith("gpushare.io/")},
        "allocatable": {k: str(v) for k, v in sorted(allocatable.items()) if k.startswith("nvidia.com/")},
        "taints": sorted(f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for t in spec.get("taints") or []),
        "unschedulable": bool(spec.get("unschedulable")),
    }


def timeslicing_mark(node: dict[str, Any]) -> dict[str, Any]:
    """The gpushare.io/timeslicing annotation the enable runbook left, parsed ({} when absent or unreadable)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(NODE_ANNOTATION)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"unreadable": raw}
    return value if isinstance(value, dict) else {"unreadable": raw}


def workload_whereabouts(pods: list[dict[str, Any]], evicted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the workloads of the evicted pods are now: the pods of the same owner, running on which
    node, or Pending with the scheduler's message."""
    rows = []
    seen = set()
    for gone in evicted or []:
        key = (gone["namespace"], gone["owner_kind"], gone["owner_name"])
        if key in seen:
            continue
        seen.add(key)
        if not gone["owner_name"]:
            rows.append({"workload": f"{gone['namespace']}/{gone['name']}", "pod": "-", "where": "not recreated (no controller)"})
            continue
        mates = [p for p in pods or [] if (p.get("metadata") or {}).get("namespace") == gone["namespace"]
                 and _owner(p) == {"kind": gone["owner_kind"], "name": gone["owner_name"]}
                 and not (p.get("metadata") or {}).get("deletionTimestamp")]
        if not mates:
            rows.append({"workload": f"{gone['namespace']}/{gone['owner_kind']}/{gone['owner_name']}", "pod": "-",
                         "where": "no replacement pod"})
        for pod in mates:
            node = (pod.get("spec") or {}).get("nodeName")
            where = f"running on {node}" if node else "Pending"
            if not node:
                condition = next((c for c in (pod.get("status") or {}).get("conditions") or []
                                  if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
                where += f": {condition.get('reason')}: {condition.get('message')}" if condition else ": not yet tried by the scheduler"
            rows.append({"workload": f"{gone['namespace']}/{gone['owner_kind']}/{gone['owner_name']}",
                         "pod": (pod.get("metadata") or {}).get("name", ""), "where": where})
    return rows


def node_state(node: dict[str, Any], pool_key: str, pool_value: str, fallback_key: str) -> dict[str, Any]:
    """A node as the rollback sees it: what the enable runbook left on it and whether it shares."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    spec = node.get("spec") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    mark = timeslicing_mark(node)
    key = str(mark.get("key") or fallback_key)
    config_label = labels.get(CONFIG_LABEL, "")
    shared_allocatable = int(allocatable.get(SHARED, 0) or 0)
    strategy = labels.get("nvidia.com/gpu.sharing-strategy", "none")
    shared = bool(mark) or config_label == key or shared_allocatable > 0 or strategy not in ("", "none")
    cordoned_by_us = annotations.get(CORDON_ANNOTATION) == CORDONED_BY
    return {
        "name": meta.get("name", ""),
        "gpu": labels.get("nvidia.com/gpu.present") == "true",
        "mark": mark,
        "key": key,
        "configmap": str(mark.get("configmap") or ""),
        "scope": str(mark.get("scope") or ""),
        "config_label": config_label,
        "pool_label": labels.get(pool_key) == pool_value,
        "pool_taint": any(t.get("key") == pool_key and (t.get("value") or "") == pool_value and t.get("effect") == "NoSchedule"
                          for t in spec.get("taints") or []),
        "shared_allocatable": shared_allocatable,
        "gpu_allocatable": int(allocatable.get(GPU, 0) or 0),
        "gpu_count": labels.get("nvidia.com/gpu.count", ""),
        "replicas": labels.get("nvidia.com/gpu.replicas", ""),
        "strategy": strategy,
        "mig_strategy": labels.get("nvidia.com/mig.strategy", ""),
        "unschedulable": bool(spec.get("unschedulable")),
        "cordoned_by_us": cordoned_by_us,
        "shared": shared,
        "pending": shared or cordoned_by_us,
        "whole_cards": (shared_allocatable == 0 and labels.get("nvidia.com/gpu.replicas", "1") == "1"
                        and strategy in ("", "none")
                        and (labels.get("nvidia.com/mig.strategy") == "mixed"
                             or str(allocatable.get(GPU, "")) == labels.get("nvidia.com/gpu.count", ""))),
    }


def newest_backup(configmaps: list[dict[str, Any]]) -> dict[str, Any]:
    """The most recent ClusterPolicy backup ConfigMap ({} when there is none)."""
    def stamp(cm: dict[str, Any]) -> tuple[str, str, str]:
        meta = cm.get("metadata") or {}
        return ((meta.get("annotations") or {}).get("gpushare.io/created-at", ""),
                meta.get("creationTimestamp", ""), meta.get("name", ""))
    return max(configmaps or [], key=stamp, default={})


def spec_patch(current: dict[str, Any] | None, wanted: dict[str, Any] | None) -> list[dict[str, Any]]:
    """RFC 6902 operations that make `current` (a ClusterPolicy spec) equal to `wanted`, one per
    top-level field that differs: a field is replaced whole, so list entries (tolerations) that the
    enable runbook added go away too, which a merge patch cannot do."""
    current, wanted = current or {}, wanted or {}
    ops: list[dict[str, Any]] = []
    for field in sorted(set(current) | set(wanted)):
        path = "/spec/" + field.replace("~", "~0").replace("/", "~1")
        if field not in wanted:
            ops.append({"op": "remove", "path": path})
        elif field not in current:
            ops.append({"op": "add", "path": path, "value": wanted[field]})
        elif current[field] != wanted[field]:
            ops.append({"op": "replace", "path": path, "value": wanted[field]})
    return ops


def state_resources(state: dict[str, Any]) -> list[str]:
    """The resource names under which a node_state() node hands out shared replicas:
    nvidia.com/gpu.shared, and nvidia.com/gpu too while it shares without renaming."""
    sharing = state.get("strategy", "none") not in ("", "none")
    return [SHARED, GPU] if sharing and not state.get("shared_allocatable") else [SHARED]


def shared_pods_on_nodes(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The shared pods of every node, from a k8s_info task looped over node_state() dicts."""
    found = []
    for result in results or []:
        if result.get("skipped"):
            continue
        found.extend(shared_pods(result.get("resources") or [], state_resources(result["item"])))
    return found


def changed_nodes(recorded: dict[str, dict[str, Any]], nodes: list[dict[str, Any]]) -> list[str]:
    """Each node recorded in preflight that is no longer exactly as it was, with what changed."""
    now = {(n.get("metadata") or {}).get("name"): fingerprint(n) for n in nodes or []}
    changes = []
    for name, before in sorted((recorded or {}).items()):
        after = now.get(name)
        if after is None:
            changes.append(f"{name}: gone")
            continue
        diffs = []
        for field in ("labels", "annotations", "allocatable"):
            for key in sorted(set(before[field]) | set(after[field])):
                if before[field].get(key) != after[field].get(key):
                    diffs.append(f"{field} {key}: {before[field].get(key)!r} -> {after[field].get(key)!r}")
        if before["taints"] != after["taints"]:
            diffs.append(f"taints {before['taints']} -> {after['taints']}")
        if before["unschedulable"] != after["unschedulable"]:
            diffs.append(f"unschedulable {before['unschedulable']} -> {after['unschedulable']}")
        if diffs:
            changes.append(f"{name}: " + "; ".join(diffs))
    return changes


def not_rolled_back(states: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """What still differs from whole cards on each rolled-back node (node_state() dicts)."""
    problems = []
    for state in states or []:
        found = []
        if state["shared_allocatable"]:
            found.append(f"{SHARED} allocatable {state['shared_allocatable']}")
        if state["replicas"] not in ("", "1"):
            found.append(f"nvidia.com/gpu.replicas {state['replicas']}")
        if state["strategy"] not in ("", "none"):
            found.append(f"nvidia.com/gpu.sharing-strategy {state['strategy']}")
        if state["mig_strategy"] != "mixed" and str(state["gpu_allocatable"]) != state["gpu_count"]:
            found.append(f"{GPU} allocatable {state['gpu_allocatable']}, physical {state['gpu_count']}")
        if state["pool_label"]:
            found.append("shared-pool label")
        if state["pool_taint"]:
            found.append("shared-pool taint")
        if state["config_label"] in (keys or []):
            found.append(f"{CONFIG_LABEL}={state['config_label']}")
        if state["mark"]:
            found.append(f"{NODE_ANNOTATION} annotation")
        if found:
            problems.append(f"{state['name']}: " + ", ".join(found))
    return problems


def report_row(state: dict[str, Any], evicted: list[dict[str, Any]]) -> list[Any]:
    """The cells of the final table for a node_state() dict."""
    pool = "+".join(part for part, on in (("label", state["pool_label"]), ("taint", state["pool_taint"])) if on) or "none"
    if not state["unschedulable"]:
        scheduling = "schedulable"
    elif state["cordoned_by_us"]:
        scheduling = "cordoned (by this runbook)"
    else:
        scheduling = "cordoned (before the run: kept)"
    count = sum(1 for pod in evicted or [] if pod.get("node") == state["name"])
    return [state["name"], state["gpu_count"], state["replicas"], state["gpu_allocatable"], state["shared_allocatable"],
            pool, scheduling, count]


def whereabouts_lines(rows: list[dict[str, Any]]) -> list[str]:
    """workload_whereabouts() rows grouped: one line per workload and place."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for row in rows or []:
        grouped.setdefault((row["workload"], row["where"]), []).append(row["pod"])
    return [f"{workload}: {', '.join(pods)}: {where}" for (workload, where), pods in grouped.items()]


def host_nodes(hosts: list[str], hostvars: Any) -> list[str]:
    """The Kubernetes node name of each inventory host (host var timeslicing_node_name, as the
    enable runbook reads it; the inventory name otherwise)."""
    names = []
    for host in hosts or []:
        variables = hostvars[host]
        names.append(str(variables.get("timeslicing_node_name") or host) if hasattr(variables, "get") else host)
    return names


def evict_label_patches(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge patches that label shared_pods() entries for the drain's pod selector (one module call)."""
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": pod["name"], "namespace": pod["namespace"], "labels": {EVICT_LABEL: CORDONED_BY}}}
            for pod in pods or []]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "timeslicing_rollback_blocking_budgets": blocking_budgets,
            "timeslicing_rollback_fingerprint": fingerprint,
            "timeslicing_rollback_whereabouts": workload_whereabouts,
            "timeslicing_rollback_node_state": node_state,
            "timeslicing_rollback_newest_backup": newest_backup,
            "timeslicing_rollback_spec_patch": spec_patch,
            "timeslicing_rollback_shared_pods_on_nodes": shared_pods_on_nodes,
            "timeslicing_rollback_changed_nodes": changed_nodes,
            "timeslicing_rollback_not_rolled_back": not_rolled_back,
            "timeslicing_rollback_report_row": report_row,
            "timeslicing_rollback_host_nodes": host_nodes,
            "timeslicing_rollback_whereabouts_lines": whereabouts_lines,
            "timeslicing_rollback_evict_label_patches": evict_label_patches,
        }
