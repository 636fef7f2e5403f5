"""Steps about the cluster and its nodes: what a node advertises and carries."""

from __future__ import annotations

from pytest_bdd import given, parsers, then

from gpushare.kube import wait_for
from tests.support.cluster import Cluster


@given("a cluster with the GPU Operator", target_fixture="kube")
def kube(clean_cluster: Cluster) -> Cluster:
    return clean_cluster


@given("the state of every GPU node is recorded", target_fixture="nodes_before")
def nodes_before(kube: Cluster) -> dict[str, dict]:
    return {name: node_fingerprint(kube, name) for name in kube.gpu_nodes()}


def node_fingerprint(kube: Cluster, name: str) -> dict:
    """What an operator compares to say a node is 'exactly as before'."""
    node = kube.node(name)
    return {
        "labels": dict(node.metadata.labels or {}),
        "allocatable": {k: v for k, v in (node.status.allocatable or {}).items() if k.startswith("nvidia.com/")},
        "taints": sorted((t.key, t.value or "", t.effect) for t in node.spec.taints or []),
        "unschedulable": bool(node.spec.unschedulable),
    }


@then(parsers.parse('node "{node}" advertises {count:d} "{resource}"'))
def node_advertises(kube: Cluster, node: str, count: int, resource: str) -> None:
    wait_for(lambda: int((kube.node(node).status.allocatable or {}).get(resource, "0")) == count, 10,
             f"{node} to advertise {count} {resource} (now {(kube.node(node).status.allocatable or {}).get(resource, '0')})")


@then(parsers.parse('node "{node}" has label "{key}" set to "{value}"'))
def node_has_label(kube: Cluster, node: str, key: str, value: str) -> None:
    wait_for(lambda: (kube.node(node).metadata.labels or {}).get(key) == value, 10,
             f"{node} label {key}={value} (now {(kube.node(node).metadata.labels or {}).get(key)!r})")


@then(parsers.parse('node "{node}" has no label "{key}"'))
def node_lacks_label(kube: Cluster, node: str, key: str) -> None:
    assert key not in (kube.node(node).metadata.labels or {}), f"{node} still carries {key}"


@then("every GPU node not targeted is exactly as before")
def others_unchanged(kube: Cluster, nodes_before: dict[str, dict], targeted: list[str]) -> None:
    for name, before in nodes_before.items():
        if name not in targeted:
            assert node_fingerprint(kube, name) == before, f"{name} changed although it was not targeted"
