"""Does the description fit the cluster? Every flavor selects nodes, the nominal quotas fit what
those nodes offer, and shared GPUs are quoted only on nodes that share them. Read-only: it looks at
the Node objects the runbook fetched, and at the ResourceSlices of a resource that a DeviceClass
backs with DRA (spec.extendedResourceName): the scheduler serves such a resource from a node's
allocatable where the node has some, else from the devices of the class on the node (KEP-5004;
kube-scheduler v1.35 noderesources/fit.go shouldDelegateResourceToDRA, with its DRAExtendedResource
gate on, which the API server's keeping extendedResourceName in a DeviceClass suggests)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from gpushare.k8s.quantity import parse_quantity

from gpushare.kueue.description import Description, Flavor, canonical_quantity
from gpushare.model.node import SHARED, STRATEGY, Node
from gpushare.model.taints import tolerated

_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_DRIVER_IS = re.compile(r"""device\.driver\s*==\s*['"]([^'"]+)['"]""")
# resource -> node -> devices of the DeviceClass that backs it with DRA
DraDevices = Mapping[str, Mapping[str, int]]


def drivers(device_class: Mapping[str, Any]) -> set[str]:
    """The drivers a DeviceClass's CEL selectors name (device.driver == '...')."""
    return {driver for selector in (device_class.get("spec") or {}).get("selectors") or []
            for driver in _DRIVER_IS.findall(((selector or {}).get("cel") or {}).get("expression") or "")}


def devices_per_node(resource_slices: Iterable[Mapping[str, Any]], of_drivers: set[str]) -> dict[str, int]:
    """node -> devices the drivers publish for it, counting each pool's newest generation only (the
    scheduler ignores the slices of an older one)."""
    pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for item in resource_slices:
        spec = item.get("spec") or {}
        if spec.get("driver") in of_drivers and spec.get("nodeName"):
            pools.setdefault((spec["driver"], (spec.get("pool") or {}).get("name", "")), []).append(spec)
    counts: dict[str, int] = {}
    for specs in pools.values():
        newest = max(int((s.get("pool") or {}).get("generation") or 0) for s in specs)
        for spec in specs:
            if int((spec.get("pool") or {}).get("generation") or 0) == newest:
                counts[spec["nodeName"]] = counts.get(spec["nodeName"], 0) + len(spec.get("devices") or [])
    return counts


def allocatable(node: Node, resource: str, dra: DraDevices | None = None) -> Decimal:
    """The node's allocatable `resource`, any quantity (cpu 500m, memory 64Gi, GPUs); for a resource
    DRA backs, the devices of its class on a node that has none allocatable."""
    listed = parse_quantity(node.resources("allocatable").get(resource, "0"))
    if listed == 0 and dra and resource in dra:
        return Decimal(dra[resource].get(node.name, 0))
    return listed


def selects(flavor: Flavor, node: Node) -> bool:
    labels = node.labels
    return all(labels.get(key) == value for key, value in flavor.node_labels.items())


def why_unusable(flavor: Flavor, node: Node) -> str | None:
    """Why the flavor's pods cannot run on a node it selects (None: they can)."""
    if node.unschedulable:
        return "cordoned"
    for taint in node.taints:
        if taint.effect in _BLOCKING_EFFECTS and not tolerated(list(flavor.tolerations), taint):
            return f"taint {taint} not tolerated by the flavor"
    return None


def _amounts(nodes: Iterable[Node], resource: str, dra: DraDevices | None) -> str:
    def amount(node: Node) -> str:
        through_dra = (dra and resource in dra and parse_quantity(node.resources("allocatable").get(resource, "0")) == 0
                       and dra[resource].get(node.name))
        return f"{canonical_quantity(allocatable(node, resource, dra))}{' through DRA' if through_dra else ''}"
    return ", ".join(f"{n.name} {amount(n)}" for n in nodes) or "none"


def cluster_problems(description: Description, nodes: Iterable[dict[str, Any]], dra: DraDevices | None = None) -> list[str]:
    """Every way the description does not fit the cluster's nodes; empty when it fits. `dra`: the
    devices behind the resources a DeviceClass backs with DRA."""
    facts = sorted((Node(n) for n in nodes), key=lambda n: n.name)
    problems: list[str] = []
    selected = {f.name: [n for n in facts if selects(f, n)] for f in description.flavors}
    for flavor in description.flavors:
        if not selected[flavor.name]:
            labels = ", ".join(f"{k}={v}" for k, v in flavor.node_labels.items())
            problems.append(f"flavor {flavor.name} selects no node: no node of the cluster has the labels {labels}; "
                            "fix nodeLabels or label the pool's nodes first")
    if problems:
        return problems
    for flavor_name, resource in description.flavor_resources():
        flavor, quotas = description.flavor(flavor_name), description.quotas(flavor_name, resource)
        nodes_of = selected[flavor_name]
        if resource == SHARED:
            whole = [n for n in nodes_of if not n.labelled_shared]
            if whole:
                listed = ", ".join(f"{n.name} ({STRATEGY}={n.labels.get(STRATEGY, 'unset')})" for n in whole)
                problems.append(
                    f"{SHARED} is quoted on flavor {flavor_name} ({', '.join(quotas)}), but its nodes {listed} "
                    f"do not share their GPUs: quote {SHARED} only on a flavor of shared nodes (e.g. "
                    "nodeLabels gpu-mode: shared), after enabling time-slicing on them")
                continue
        usable = [n for n in nodes_of if why_unusable(flavor, n) is None]
        offered = sum((allocatable(n, resource, dra) for n in usable), Decimal(0))
        wanted = sum((q.nominal for q in quotas.values()), Decimal(0))
        if wanted > offered:
            skipped = [f"{n.name}: {why_unusable(flavor, n)}" for n in nodes_of if n not in usable]
            problems.append(
                f"nominal quotas for {resource} on flavor {flavor_name} add up to {canonical_quantity(wanted)} ("
                + ", ".join(f"{team} {q.text['nominalQuota']}" for team, q in quotas.items())
                + f") but its nodes offer {canonical_quantity(offered)} allocatable ({_amounts(usable, resource, dra)})"
                + (f"; not counted: {'; '.join(skipped)}" if skipped else "")
                + ": lower the quotas or add nodes to the pool")
    if not problems:
        problems += _overlaps(description, selected, dra)
    return problems


def _overlaps(description: Description, selected: dict[str, list[Node]], dra: DraDevices | None) -> list[str]:
    """Flavors that select the same nodes share their capacity: together they must fit it too."""
    problems = []
    for resource in dict.fromkeys(r for _, r in description.flavor_resources()):
        flavors = [f for f, r in description.flavor_resources() if r == resource]
        union = {n.name: n for f in flavors for n in selected[f] if why_unusable(description.flavor(f), n) is None}
        if sum(len(selected[f]) for f in flavors) == len({n.name for f in flavors for n in selected[f]}):
            continue  # no node is in two of these flavors
        offered = sum((allocatable(n, resource, dra) for n in union.values()), Decimal(0))
        wanted = sum((q.nominal for f in flavors for q in description.quotas(f, resource).values()), Decimal(0))
        if wanted > offered:
            problems.append(
                f"flavors {', '.join(flavors)} select some of the same nodes: together their nominal quotas for "
                f"{resource} add up to {canonical_quantity(wanted)} but those nodes offer {canonical_quantity(offered)} "
                f"({_amounts(sorted(union.values(), key=lambda n: n.name), resource, dra)}): lower the quotas or make the "
                "flavors select separate nodes")
    return problems
