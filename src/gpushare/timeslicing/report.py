"""The end-of-run report of both time-slicing runbooks: one table layout, nodes sorted."""

from __future__ import annotations

import json

from typing import Any

from gpushare.model.node import GPU, SHARED, Node, Pool
from gpushare.table import render_table

COLUMNS = ["node", "physical GPUs", "replicas", "nvidia.com/gpu.shared", "nvidia.com/gpu (whole cards)",
           "pool label", "pool taint", "schedulable"]


def node_rows(nodes: list[dict[str, Any]], names: list[str], pool: Pool) -> list[list[Any]]:
    by_name = {n["metadata"]["name"]: Node(n) for n in nodes}
    rows = []
    for name in sorted(set(names)):
        node = by_name.get(name)
        if node is None:
            rows.append([name] + ["?"] * (len(COLUMNS) - 1))
            continue
        taint = node.pool_taint(pool)
        rows.append([name, node.gpus if node.gpus is not None else "?", node.replicas, node.allocatable(SHARED),
                     node.allocatable(GPU), node.labels.get(pool.label_key, "-"), str(taint) if taint else "-",
                     "no (cordoned)" if node.unschedulable else "yes"])
    return rows


def node_table(nodes: list[dict[str, Any]], names: list[str], pool: dict[str, Any]) -> str:
    return render_table(COLUMNS, node_rows(nodes, names, Pool.of(pool)))


def enable_report(nodes: list[dict[str, Any]], daemonsets: list[dict[str, Any]], plan: dict[str, Any],
                  check_mode: bool, hosts: list[str]) -> list[str]:
    """The summary an enable (or prepare) run ends with."""
    from gpushare.model.operands import CONFIG_READERS, Operand  # noqa: PLC0415

    expected = plan.get("expected") or {}
    targets = sorted((expected.get("targets") or {}).keys())
    pool = expected.get("pool") or {}
    if check_mode:
        lines = ["CHECK MODE: nothing was changed; the nodes as they are now:"]
    elif not plan.get("writes"):
        lines = []  # the plan said there is nothing to change
    else:
        mechanism = "MPS" if expected.get("strategy") == "mps" else "time-slicing"
        lines = [f"Done: {mechanism} with {expected.get('replicas')} replicas per GPU on {', '.join(targets)}."
                 if targets else "Done: the cluster is prepared for time-slicing trials."]
    if targets and pool:
        lines += node_table(nodes, targets, pool).splitlines()
    if plan.get("rolls_fleet"):
        for raw in daemonsets:
            operand = Operand(raw)
            if operand.name in CONFIG_READERS:
                updated, desired = operand.rollout()
                if not desired:  # no pod of it anywhere (the MPS daemon without MPS nodes)
                    continue
                lines.append(f"The operator's roll of {operand.name}: {updated} of {desired} GPU nodes done "
                             "(it goes on by itself, one node at a time).")
    if plan.get("writes") and not check_mode:
        lines.append(f"Run record and ClusterPolicy backup: ConfigMap {plan.get('record')}.")
    if targets and hosts and not check_mode:  # -l takes inventory host names
        limit = ",".join(sorted(hosts))
        lines.append(f"Next: ansible-playbook playbooks/verify-sharing.yml -l {limit}   "
                     f"(rollback: playbooks/rollback-timeslicing.yml -l {limit})")
    return lines


def _restored_field(path: str, value: Any) -> str:
    """`/spec/devicePlugin/config` and its saved value as `devicePlugin.config: removed`."""
    field = path.removeprefix("/spec/").replace("/", ".")
    return f"{field}: removed (unset before the trial)" if value is None else f"{field}: {json.dumps(value)}"


def rollback_report(nodes: list[dict[str, Any]], plan: dict[str, Any], whereabouts: list[str],
                    check_mode: bool) -> list[str]:
    expected = plan.get("expected") or {}
    rolled = sorted((expected.get("targets") or {}).keys())
    if not plan.get("writes"):
        return list(plan.get("lines") or [])
    lines = (["CHECK MODE: nothing was changed; the nodes as they are now:"] if check_mode else
             [f"Done: {', '.join(rolled)} back to whole cards." if rolled else "Done: the cluster-level changes are undone."])
    if rolled:
        lines += node_table(nodes, rolled, expected["pool"]).splitlines()
    if whereabouts:
        lines.append("Where the evicted workloads went:")
        lines += [f"  {w}" for w in whereabouts]
    restored = expected.get("clusterpolicy") or {}
    if restored:
        lines.append(("ClusterPolicy would be restored: " if check_mode else "ClusterPolicy restored: ")
                     + ", ".join(_restored_field(p, v) for p, v in sorted(restored.items())))
    else:
        lines.append("ClusterPolicy: unchanged by this run.")
    for change in (plan.get("changes") or {}).get("configmap") or []:
        lines.append(f"ConfigMap {change['name']}: {change['why']}.")
    if not check_mode:
        lines.append(f"Record: ConfigMap {plan.get('record')}. Backups and run records are kept.")
    return lines
