"""The fleet as an operator sees it: one row per node with its GPUs and allocatable resources."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from gpushare.kube import api_client, node_ready

HEADERS = ["node", "ready", "physical GPUs", "product", "replicas", "nvidia.com/gpu", "nvidia.com/gpu.shared"]


def fleet_rows(kubeconfig: Path) -> tuple[list[str], list[list[str]]]:
    nodes = client.CoreV1Api(api_client(kubeconfig)).list_node().items
    rows = []
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        labels = node.metadata.labels or {}
        allocatable = node.status.allocatable or {}
        rows.append([
            node.metadata.name,
            "yes" if node_ready(node) else "no",
            labels.get("nvidia.com/gpu.count", "0"),
            labels.get("nvidia.com/gpu.product", "-"),
            labels.get("nvidia.com/gpu.replicas", "-"),
            allocatable.get("nvidia.com/gpu", "0"),
            allocatable.get("nvidia.com/gpu.shared", "0"),
        ])
    return HEADERS, rows
