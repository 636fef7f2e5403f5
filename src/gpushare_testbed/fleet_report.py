"""The fleet as an operator sees it: one row per node with its GPUs and allocatable resources."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from kubernetes import client

from gpushare.kube import api_client
from gpushare.model.node import COUNT, GPU, PRODUCT, REPLICAS, SHARED, Node

HEADERS = ["node", "ready", "physical GPUs", "product", "replicas", GPU, SHARED]


def fleet_rows(kubeconfig: Path) -> tuple[list[str], list[list[str]]]:
    listed = client.CoreV1Api(api_client(kubeconfig)).list_node(_preload_content=False)
    return HEADERS, rows(Node(raw) for raw in json.loads(listed.data)["items"])


def rows(nodes: Iterable[Node]) -> list[list[str]]:
    """One row per node, by name: labels and allocatable as the API server wrote them."""
    found = []
    for node in sorted(nodes, key=lambda n: n.name):
        labels, allocatable = node.labels, node.resources("allocatable")
        found.append([node.name, "yes" if node.ready else "no", labels.get(COUNT, "0"), labels.get(PRODUCT, "-"),
                      labels.get(REPLICAS, "-"), allocatable.get(GPU, "0"), allocatable.get(SHARED, "0")])
    return found
