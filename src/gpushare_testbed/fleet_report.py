"""The fleet as an operator sees it: one row per node with its GPUs and allocatable resources."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kubernetes import client

from gpushare.kube import api_client
from gpushare_testbed.simulator.node_view import GPU, SHARED, node_ready

# GFD's labels (NVIDIA/k8s-device-plugin internal/lm/resource.go)
COUNT, PRODUCT, REPLICAS = "nvidia.com/gpu.count", "nvidia.com/gpu.product", "nvidia.com/gpu.replicas"
HEADERS = ["node", "ready", "physical GPUs", "product", "replicas", GPU, SHARED]


def fleet_rows(kubeconfig: Path) -> tuple[list[str], list[list[str]]]:
    listed = client.CoreV1Api(api_client(kubeconfig)).list_node(_preload_content=False)
    return HEADERS, rows(json.loads(listed.data)["items"])


def rows(nodes: Iterable[dict[str, Any]]) -> list[list[str]]:
    """One row per node, by name: labels and allocatable as the API server wrote them."""
    found = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        labels, allocatable = node["metadata"].get("labels") or {}, (node.get("status") or {}).get("allocatable") or {}
        found.append([node["metadata"]["name"], "yes" if node_ready(node) else "no", labels.get(COUNT, "0"),
                      labels.get(PRODUCT, "-"), labels.get(REPLICAS, "-"), allocatable.get(GPU, "0"), allocatable.get(SHARED, "0")])
    return found
