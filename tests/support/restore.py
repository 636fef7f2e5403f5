"""Leaving any cluster as a scenario found it (a kind cluster, staging with real GPUs, the
"external" target): what a scenario may change is recorded before it and put back after it, on
failure too, so the acceptance suite runs in any order. The embedded cluster has its own, stricter
reset (tests/support/cluster.py: back to the chart's state)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from gpushare_testbed.cluster_bootstrap import in_flight, rollout_problems
from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator.rest import Rest
from tests.support.cluster import (
    RESET_TIMEOUT_S,
    SCENARIO_ANNOTATION_PREFIXES,
    SCENARIO_LABEL_KEYS,
    TEST_NAMESPACE_LABEL,
    Cluster,
    delete_dra_pilot_objects,
)
from tests.support.namespaces import delete_test_namespaces

GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
NODE_LABEL_KEYS = (*SCENARIO_LABEL_KEYS, "nvidia.com/mig.config", "nvidia.com/gpu.deploy.device-plugin")


@dataclass(frozen=True)
class NodeMarks:
    """What a scenario may change on a node, and the GPU resources it advertised."""
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[dict[str, Any]]
    unschedulable: bool
    allocatable: dict[str, str]

    @classmethod
    def of(cls, node: client.V1Node) -> NodeMarks:
        labels, annotations = node.metadata.labels or {}, node.metadata.annotations or {}
        return cls(
            labels={k: v for k, v in labels.items() if k in NODE_LABEL_KEYS},
            annotations={k: v for k, v in annotations.items() if k.startswith(SCENARIO_ANNOTATION_PREFIXES)},
            taints=[t.to_dict() for t in node.spec.taints or [] if not t.key.startswith("node.kubernetes.io/")],
            unschedulable=bool(node.spec.unschedulable),
            # the kubelet keeps a resource a plugin stopped advertising, at 0: the same as absent
            allocatable={k: v for k, v in (node.status.allocatable or {}).items() if k in GPU_RESOURCES and v != "0"},
        )

    def patch_from(self, now: NodeMarks, node: client.V1Node) -> dict[str, Any] | None:
        """The patch that puts `now` back to these marks (None when nothing differs)."""
        meta: dict[str, Any] = {}
        for field, before, after in (("labels", self.labels, now.labels),
                                     ("annotations", self.annotations, now.annotations)):
            changes = {k: before.get(k) for k in {*before, *after} if before.get(k) != after.get(k)}
            if changes:
                meta[field] = changes
        patch: dict[str, Any] = {"metadata": meta} if meta else {}
        if self.taints != now.taints or self.unschedulable != now.unschedulable:
            kept = [t.to_dict() for t in node.spec.taints or [] if t.key.startswith("node.kubernetes.io/")
                    and t.key != "node.kubernetes.io/unschedulable"]
            patch["spec"] = {"unschedulable": self.unschedulable or None, "taints": [*kept, *self.taints] or None}
        return patch or None


@dataclass(frozen=True)
class Snapshot:
    policy_spec: dict[str, Any] | None
    nodes: dict[str, NodeMarks]
    configmaps: dict[tuple[str, str], dict[str, str]]  # (namespace, name) -> data
    leases: frozenset[tuple[str, str]]


def _policy(cluster: Cluster) -> dict[str, Any] | None:
    try:
        return cluster.custom.get_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY)
    except client.exceptions.ApiException as err:
        if err.status == 404:
            return None
        raise


def _gpu_nodes(cluster: Cluster) -> dict[str, client.V1Node]:
    return {n.metadata.name: n for n in cluster.core.list_node(label_selector="nvidia.com/gpu.present=true").items}


# How long a snapshot waits for the operator's operands to settle (a roll a scenario before started,
# a device plugin re-registering) so that it does not record a node between two states. Unpinning an
# operator release rolls the device plugin over every GPU node: under make test's load (the external
# target beside the main suite) that took over 60 s, and a snapshot taken mid-roll recorded a node
# with no allocatable, which the scenario's restore then waited for in vain.
SETTLE_S = 150


def unsettled(cluster: Cluster) -> list[str]:
    """What still moves: the ClusterPolicy not ready, operands rolling out, GPU nodes in a driver
    upgrade or a MIG reconfiguration, and GPU nodes whose device plugin advertises nothing now (a
    plugin restarts after the driver: its DaemonSet can be rolled out while its node is empty)."""
    policy = _policy(cluster)
    problems = [] if policy is None or (policy.get("status") or {}).get("state") == "ready" else ["ClusterPolicy ready"]
    for name, node in _gpu_nodes(cluster).items():
        change = in_flight(node.metadata.labels or {})
        if change:
            problems.append(f"{name}: {change}")
        if not any(k.startswith("nvidia.com/") and v != "0" for k, v in (node.status.allocatable or {}).items()):
            problems.append(f"{name} advertises no GPU")
    return problems + rollout_problems(Rest(cluster.api), cluster.operator_namespace)


def take(cluster: Cluster) -> Snapshot:
    try:
        wait_for(lambda: not unsettled(cluster), SETTLE_S, "the operator's operands to settle", interval_s=1.0)
    except TimeoutError:
        pass  # a node that stays so (a broken GPU) is recorded as it is, and restored to that
    policy = _policy(cluster)
    coordination = client.CoordinationV1Api(cluster.api)
    return Snapshot(
        policy_spec=copy.deepcopy(policy["spec"]) if policy else None,
        nodes={name: NodeMarks.of(node) for name, node in _gpu_nodes(cluster).items()},
        configmaps={(ns, cm.metadata.name): dict(cm.data or {}) for ns in _namespaces(cluster)
                    for cm in cluster.core.list_namespaced_config_map(ns).items},
        leases=frozenset((ns, lease.metadata.name) for ns in _namespaces(cluster)
                         for lease in coordination.list_namespaced_lease(ns).items),
    )


def _namespaces(cluster: Cluster) -> tuple[str, str]:
    """Where the runbooks write ConfigMaps and Leases: the operator's and their own."""
    return cluster.operator_namespace, cluster.records_namespace


def restore(cluster: Cluster, before: Snapshot) -> None:
    """Put back what the scenario changed, then wait (bounded) until every GPU node advertises what
    it did before; the error names the nodes that still differ."""
    core = cluster.core
    delete_test_namespaces(cluster, TEST_NAMESPACE_LABEL)
    delete_dra_pilot_objects(cluster)
    coordination = client.CoordinationV1Api(cluster.api)
    for ns in _namespaces(cluster):
        for cm in core.list_namespaced_config_map(ns).items:
            name = cm.metadata.name
            if (ns, name) not in before.configmaps:
                core.delete_namespaced_config_map(name, ns)
            elif dict(cm.data or {}) != before.configmaps[(ns, name)]:
                core.patch_namespaced_config_map(name, ns, {"data": {**{k: None for k in cm.data or {}},
                                                                     **before.configmaps[(ns, name)]}})
        for lease in coordination.list_namespaced_lease(ns).items:
            if (ns, lease.metadata.name) not in before.leases:
                coordination.delete_namespaced_lease(lease.metadata.name, ns)
    policy = _policy(cluster)
    if before.policy_spec is not None and policy is not None and policy["spec"] != before.policy_spec:
        cluster.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY,
                                                   [{"op": "replace", "path": "/spec", "value": before.policy_spec}],
                                                   _content_type="application/json-patch+json")
    for name, node in _gpu_nodes(cluster).items():
        if name in before.nodes:
            patch = before.nodes[name].patch_from(NodeMarks.of(node), node)
            if patch:
                core.patch_node(name, patch)

    rest = Rest(cluster.api)

    def differing() -> list[str]:
        """What is not back yet: nodes (with what differs), operands rolling out, test namespaces."""
        now = {name: NodeMarks.of(node) for name, node in _gpu_nodes(cluster).items()}
        nodes = [f"{name} ({marks} now {now.get(name)})" for name, marks in sorted(before.nodes.items())
                 if now.get(name) != marks]
        namespaces = [n.metadata.name for n in core.list_namespace(label_selector=TEST_NAMESPACE_LABEL).items]
        return nodes + rollout_problems(rest, cluster.operator_namespace) + [f"namespace {n} to go" for n in namespaces]

    try:
        wait_for(lambda: not differing(), RESET_TIMEOUT_S, "the cluster to be as the scenario found it", interval_s=1.0)
    except TimeoutError as err:
        raise TimeoutError(f"{err}; still different: {'; '.join(differing())}") from None
