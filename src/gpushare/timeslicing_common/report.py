"""The node table both time-slicing runbooks' end-of-run reports show: one layout, nodes sorted."""

from __future__ import annotations

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
