"""The simulated fleet: which nodes the embedded cluster has and what GPUs each one holds."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from gpushare.gpu_catalog import product as lookup_product

# The simulated hardware of a node, read by the GPU Operator simulator (the real plugin asks NVML).
HARDWARE_ANNOTATION = "sim.gpushare.io/gpus"
# What node-feature-discovery labels on a node with an NVIDIA PCI device (the operator's trigger).
NFD_NVIDIA_LABEL = "feature.node.kubernetes.io/pci-10de.present"
NODE_KEYS = {"name", "count", "gpus", "product", "cpu", "memory", "pods", "labels"}
MAX_NODES = 10_000  # more than one embedded control plane on a laptop serves; a typo in `count` otherwise
# A node name the API server accepts: a DNS-1123 subdomain (apimachinery validation IsDNS1123Subdomain).
NODE_NAME = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


class FleetError(ValueError):
    """A fleet file that cannot describe a cluster; the message says what to fix."""


@dataclass(frozen=True)
class FleetNode:
    name: str
    gpus: int
    product: str | None
    cpu: str = "64"
    memory: str = "512Gi"
    pods: str = "110"
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def is_gpu_node(self) -> bool:
        return self.gpus > 0

    def manifest(self) -> dict[str, Any]:
        """The Node object as a kubelet registers it: GPU resources and `nvidia.com/*` labels come
        later, from the device plugin and GFD the GPU Operator deploys; NFD has labelled the PCI device."""
        resources_ = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        annotations = {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
        nfd = {}
        if self.is_gpu_node:
            annotations[HARDWARE_ANNOTATION] = json.dumps({"count": self.gpus, "product": self.product})
            nfd[NFD_NVIDIA_LABEL] = "true"
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            # the kubelet still sets the deprecated beta labels (else the node lifecycle controller adds them)
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "type": "kwok",
            **nfd,
            **self.labels,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "status": {"capacity": dict(resources_), "allocatable": dict(resources_)},
        }


@dataclass(frozen=True)
class Fleet:
    nodes: tuple[FleetNode, ...]

    @property
    def gpu_nodes(self) -> tuple[FleetNode, ...]:
        return tuple(n for n in self.nodes if n.is_gpu_node)

    def node(self, name: str) -> FleetNode:
        for candidate in self.nodes:
            if candidate.name == name:
                return candidate
        raise KeyError(name)


def default_fleet_path() -> Path:
    return Path(str(resources.files("gpushare_testbed") / "data" / "fleet-default.yaml"))


def load_fleet(path: Path | None = None) -> Fleet:
    path = path or default_fleet_path()
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise FleetError(f"cannot read fleet file {path}: {err.strerror}") from None
    except (UnicodeDecodeError, yaml.YAMLError, ValueError) as err:
        raise FleetError(f"fleet file {path} is not valid YAML: {err}") from None
    except RecursionError:
        raise FleetError(f"fleet file {path} nests too deeply to be a fleet") from None
    return parse_fleet(document, source=str(path))


def parse_fleet(document: Any, source: str = "fleet") -> Fleet:
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise FleetError(f"{source}: expected a mapping with a `nodes:` list")
    nodes: list[FleetNode] = []
    for position, entry in enumerate(document["nodes"], start=1):
        nodes.extend(_expand(entry, f"{source}: nodes[{position}]", MAX_NODES - len(nodes)))
    if not nodes:
        raise FleetError(f"{source}: the fleet has no nodes")
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise FleetError(f"{source}: node name {node.name!r} appears twice; names must be unique")
        seen.add(node.name)
    return Fleet(tuple(nodes))


def _expand(entry: Any, where: str, room: int) -> list[FleetNode]:
    if not isinstance(entry, dict):
        raise FleetError(f"{where}: expected a mapping with at least `name`")
    unknown = set(entry) - NODE_KEYS
    if unknown:
        raise FleetError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(NODE_KEYS)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise FleetError(f"{where}: `name` is required and must be a string")
    count = _non_negative_int(entry.get("count", 1), f"{where}: count")
    if count != 1 and "{index}" not in name:
        raise FleetError(f"{where}: a group with count {count} needs `{{index}}` in its name")
    if count > room:
        raise FleetError(f"{where}: count {count} takes the fleet over {MAX_NODES} nodes; use a smaller count")
    gpus = _non_negative_int(entry.get("gpus", 0), f"{where}: gpus")
    product_name = entry.get("product")
    if gpus and not product_name:
        raise FleetError(f"{where}: a node with GPUs needs `product`")
    if product_name is not None and not isinstance(product_name, str):
        raise FleetError(f"{where}: `product` must be a GPU product name, got {product_name!r}")
    if product_name:
        try:
            lookup_product(product_name)
        except ValueError as err:
            raise FleetError(f"{where}: {err}") from None
    labels = entry.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise FleetError(f"{where}: `labels` must map label keys to string values")
    extra = {k: str(entry[k]) for k in ("cpu", "memory", "pods") if k in entry}
    width = len(str(count))
    expanded = []
    for index in range(1, count + 1):
        node_name = name.replace("{index}", str(index).zfill(width))
        if not NODE_NAME.match(node_name):
            raise FleetError(f"{where}: {node_name!r} is not a valid node name (a DNS-1123 subdomain: lowercase "
                             "letters, digits, '-' and '.', at most 253 characters)")
        expanded.append(FleetNode(node_name, gpus, product_name if gpus else None, labels=dict(labels), **extra))
    return expanded


def _non_negative_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FleetError(f"{what} must be a whole number >= 0, got {value!r}")
    return value
