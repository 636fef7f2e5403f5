"""Fixtures of the gpushare.k8s integration tests: a Session on the cluster under test, a scratch
namespace, a node whose taints a test may change (restored afterwards), and the audit log read
only once it has caught up."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gpushare_testbed.controlplane import StateDir, compact_history, restart
from gpushare.k8s.session import Session
from gpushare.polling import wait_for
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster


@pytest.fixture
def session(cluster: Cluster) -> Session:
    return Session(cluster.kubeconfig)


@pytest.fixture
def namespace(cluster: Cluster, session: Session) -> Iterator[str]:
    name = f"t-k8s-{uuid.uuid4().hex[:8]}"
    session.create({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: "k8s"}}})
    yield name
    session.delete("Namespace", name)


@pytest.fixture
def scratch_node(cluster: Cluster, session: Session) -> Iterator[str]:
    """A node for taint and cordon tests (one without GPUs when there is one), put back afterwards."""
    nodes = sorted(session.list("Node"), key=lambda n: ("nvidia.com/gpu.present" in n["metadata"].get("labels", {}),
                                                          n["metadata"]["name"]))
    name = nodes[0]["metadata"]["name"]
    spec = nodes[0].get("spec") or {}
    taints, unschedulable = spec.get("taints"), spec.get("unschedulable")
    yield name
    session.patch("Node", name, {"spec": {"unschedulable": unschedulable, "taints": taints}})

    def restored() -> bool:
        # the node lifecycle controller may still be adding its cordon taint after the patch above
        if ((session.get("Node", name) or {}).get("spec") or {}).get("taints") == taints:
            return True
        session.patch("Node", name, {"spec": {"taints": taints}})
        return False

    wait_for(restored, 30, f"node {name} back to its own taints", interval_s=0.5)


def settled_writes(cluster: Cluster, session: Session, mark: int, namespace: str) -> list[dict[str, Any]]:
    """Every mutating request (dry runs included) since `mark`, read once a fence write made after
    them has reached the audit log (the log is written as responses complete)."""
    fence = f"fence-{uuid.uuid4().hex[:8]}"
    session.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": fence, "namespace": namespace}})

    def caught_up() -> list[dict[str, Any]] | None:
        writes = cluster.audit_writes(mark, dry_runs=True)
        return writes if any((e.get("objectRef") or {}).get("name") == fence for e in writes) else None

    writes = wait_for(caught_up, 30, "the fence write in the audit log")
    return [e for e in writes if (e.get("objectRef") or {}).get("name") != fence]


def needs_audit_log(cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("reads the API server's audit log, which only the embedded cluster exposes")


def forget_watch_history(cluster: Cluster) -> None:
    """Make every resourceVersion read so far older than the API server's watch history, as it is on
    a cluster that has run a while: a young one still replays a watch from "1" (the API server's watch
    cache began near it, and it compacts etcd only every 5 minutes). Compacts etcd, then restarts the
    API server so that its watch cache begins now. Embedded cluster only."""
    if not cluster.embedded:
        pytest.skip("forgetting the watch history needs the embedded cluster's etcd and API server")
    state = StateDir(cluster.state_dir)
    compact_history(state)
    restart(state, "kube-apiserver")
