"""Does the description fit the cluster? Every flavor selects nodes, the nominal quotas fit what
those nodes offer, and shared GPUs are quoted only on nodes that share them. Read-only: it looks at
the Node objects the runbook fetched."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from gpushare.kueue.description import Description, Flavor, canonical_quantity

SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"
SHARED_STRATEGIES = ("time-slicing", "mps")
SHARED_RESOURCE = "nvidia.com/gpu.shared"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeFacts:
    name: str
    labels: dict[str, str]
    taints: tuple[dict[str, Any], ...]
    unschedulable: bool
    allocatable: dict[str, Decimal]

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> NodeFacts:
        spec, status = node.get("spec") or {}, node.get("status") or {}
        return cls(
            name=node["metadata"]["name"],
            labels=dict(node["metadata"].get("labels") or {}),
            taints=tuple(spec.get("taints") or ()),
            unschedulable=bool(spec.get("unschedulable")),
            allocatable={k: parse_quantity(v) for k, v in (status.get("allocatable") or {}).items()},
        )

    @property
    def shares_gpus(self) -> bool:
        return self.labels.get(SHARING_LABEL) in SHARED_STRATEGIES


def selects(flavor: Flavor, node: NodeFacts) -> bool:
    return all(node.labels.get(key) == value for key, value in flavor.node_labels.items())


def tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    """The scheduler's rule: a toleration matches a taint by key (empty key + Exists: any), value, effect."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator", "Equal") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def why_unusable(flavor: Flavor, node: NodeFacts) -> str | None:
    """Why the flavor's pods cannot run on a node it selects (None: they can)."""
    if node.unschedulable:
        return "cordoned"
    for taint in node.taints:
        if taint.get("effect") in _BLOCKING_EFFECTS and not tolerated(taint, flavor.tolerations):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint.get('key')}{value}:{taint.get('effect')} not tolerated by the flavor"
    return None


def _amounts(nodes: Iterable[NodeFacts], resource: str) -> str:
    return ", ".join(f"{n.name} {canonical_quantity(n.allocatable.get(resource, Decimal(0)))}" for n in nodes) or "none"


def cluster_problems(description: Description, nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every way the description does not fit the cluster's nodes; empty when it fits."""
    facts = sorted((NodeFacts.of(n) for n in nodes), key=lambda n: n.name)
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
        if resource == SHARED_RESOURCE:
            whole = [n for n in nodes_of if not n.shares_gpus]
            if whole:
                listed = ", ".join(f"{n.name} ({SHARING_LABEL}={n.labels.get(SHARING_LABEL, 'unset')})" for n in whole)
                problems.append(
                    f"{SHARED_RESOURCE} is quoted on flavor {flavor_name} ({', '.join(quotas)}), but its nodes {listed} "
                    f"do not share their GPUs: quote {SHARED_RESOURCE} only on a flavor of shared nodes (e.g. "
                    "nodeLabels gpu-mode: shared), after enabling time-slicing on them")
                continue
        usable = [n for n in nodes_of if why_unusable(flavor, n) is None]
        offered = sum((n.allocatable.get(resource, Decimal(0)) for n in usable), Decimal(0))
        wanted = sum((q.nominal for q in quotas.values()), Decimal(0))
        if wanted > offered:
            skipped = [f"{n.name}: {why_unusable(flavor, n)}" for n in nodes_of if n not in usable]
            problems.append(
                f"nominal quotas for {resource} on flavor {flavor_name} add up to {canonical_quantity(wanted)} ("
                + ", ".join(f"{team} {q.text['nominalQuota']}" for team, q in quotas.items())
                + f") but its nodes offer {canonical_quantity(offered)} allocatable ({_amounts(usable, resource)})"
                + (f"; not counted: {'; '.join(skipped)}" if skipped else "")
                + ": lower the quotas or add nodes to the pool")
    if not problems:
        problems += _overlaps(description, selected)
    return problems


def _overlaps(description: Description, selected: dict[str, list[NodeFacts]]) -> list[str]:
    """Flavors that select the same nodes share their capacity: together they must fit it too."""
    problems = []
    for resource in dict.fromkeys(r for _, r in description.flavor_resources()):
        flavors = [f for f, r in description.flavor_resources() if r == resource]
        union = {n.name: n for f in flavors for n in selected[f] if why_unusable(description.flavor(f), n) is None}
        if sum(len(selected[f]) for f in flavors) == len({n.name for f in flavors for n in selected[f]}):
            continue  # no node is in two of these flavors
        offered = sum((n.allocatable.get(resource, Decimal(0)) for n in union.values()), Decimal(0))
        wanted = sum((q.nominal for f in flavors for q in description.quotas(f, resource).values()), Decimal(0))
        if wanted > offered:
            problems.append(
                f"flavors {', '.join(flavors)} select some of the same nodes: together their nominal quotas for "
                f"{resource} add up to {canonical_quantity(wanted)} but those nodes offer {canonical_quantity(offered)} "
                f"({_amounts(sorted(union.values(), key=lambda n: n.name), resource)}): lower the quotas or make the "
                "flavors select separate nodes")
    return problems
