"""The drain against the embedded cluster's real ReplicaSet controller: it is not done while the
controller lags behind the evictions (the evicted pods gone, their replacements not yet created), so
a workload pinned to the node is seen coming back; and the rollback's confirmation that the pods
moved fails on one that came back."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from gpushare.k8s.session import Session
from gpushare.model.pods import Pod
from gpushare.polling import DeadEnd, wait_for
from gpushare.runbook.checks import gpu_nodes
from gpushare.runbook.drain import DrainResult, drain
from gpushare.timeslicing_rollback.checks import scheduler_tried
from tests.integration.k8s_fixtures import namespace, session  # noqa: F401 - fixtures
from tests.integration.test_timeslicing_checks import paused
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
RESOURCE = "nvidia.com/gpu"


def pinned_deployment(name: str, node: str, replicas: int) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": [{"operator": "Exists"}],
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "busybox",
                                         "resources": {"limits": {RESOURCE: "1"}}}]}}}}


@pytest.fixture
def pinned(cluster: Cluster, session: Session, namespace: str) -> Iterator[tuple[str, str]]:
    """Two pods of a Deployment pinned to a GPU node (tolerating every taint), running; scaled to 0 after."""
    node = sorted(n for n, gpu in gpu_nodes(session).items() if gpu.allocatable(RESOURCE) >= 2)[-1]
    session.create({**pinned_deployment("pinned", node, 2), "metadata": {"name": "pinned", "namespace": namespace}})

    def running() -> bool:
        pods = session.list("Pod", namespace)
        return len(pods) == 2 and all(p.get("status", {}).get("phase") == "Running" for p in pods)

    wait_for(running, 60, "the pinned Deployment's 2 pods Running", interval_s=0.2)
    yield namespace, node
    session.patch("Deployment", "pinned", {"spec": {"replicas": 0}}, namespace)
    wait_for(lambda: not session.list("Pod", namespace), 60, "the pinned pods gone", interval_s=0.2)


def test_a_lagging_replicaset_controller_does_not_let_the_drain_miss_a_comeback(
        cluster: Cluster, session: Session, pinned: tuple[str, str]) -> None:
    if not cluster.embedded:
        pytest.skip("stops the embedded cluster's controller-manager")
    namespace, node = pinned
    outcome: list[DrainResult] = []
    draining = threading.Thread(target=lambda: outcome.append(
        drain(session, [node], timeout_s=30, retry_s=0.2, grace_period_s=0, check_mode=False, resources=(RESOURCE,))))
    with paused(cluster, "kube-controller-manager"):
        draining.start()
        wait_for(lambda: not session.list("Pod", namespace), 30, "the evicted pods gone", interval_s=0.1)
        draining.join(timeout=2)
        assert draining.is_alive(), f"the drain finished before the ReplicaSet re-created its pods: {outcome}"
    draining.join(timeout=60)
    assert outcome, "the drain did not finish"
    assert f"re-created {namespace}/pinned-" in outcome[0].problem, outcome[0].problem
    assert len(outcome[0].evicted) == 2


def test_the_rollback_confirmation_fails_on_replacements_placed_back_on_the_drained_node(
        session: Session, pinned: tuple[str, str]) -> None:
    """However the drain ended (say, its last pass listed the node before the scheduler bound the
    replacements), the confirmation that the pods moved ends at once on a replacement back on the node."""
    namespace, node = pinned
    evicted = []
    for raw in session.list("Pod", namespace):
        pod = Pod(raw)
        session.evict(pod.name, namespace, dry_run=False, grace_period_seconds=0, uid=pod.uid)
        evicted.append({"pod": pod.ref, "namespace": namespace, "workload": pod.workload,
                        "controller_uid": pod.controller["uid"]})
    gone = {e["pod"] for e in evicted}

    def replaced() -> bool:
        live = [Pod(p) for p in session.list("Pod", namespace)]
        return sum(p.node == node and p.ref not in gone and not p.terminating for p in live) == 2

    wait_for(replaced, 60, "the pinned Deployment's replacements placed back on the node", interval_s=0.2)
    with pytest.raises(DeadEnd) as ended:
        scheduler_tried(session, evicted, [node])
    assert f"Deployment {namespace}/pinned re-created {namespace}/pinned-" in str(ended.value)
    assert f"on {node} right after its eviction" in str(ended.value)
    assert scheduler_tried(session, evicted, [n for n in gpu_nodes(session) if n != node]) == []


def test_the_rollback_confirmation_sees_a_statefulset_pod_back_under_its_old_name(
        session: Session, namespace: str) -> None:
    """A StatefulSet re-creates an evicted pod under the same name: the confirmation tells the
    replacement from the evicted pod by what it is now (placed, not terminating), not by its name."""
    node = sorted(n for n, gpu in gpu_nodes(session).items() if gpu.allocatable(RESOURCE) >= 1)[-1]
    spec = pinned_deployment("pinned-set", node, 1)["spec"]
    session.create({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "pinned-set", "namespace": namespace},
                    "spec": {**spec, "serviceName": "pinned-set", "podManagementPolicy": "Parallel"}})

    def pod() -> Pod | None:
        raw = session.get("Pod", "pinned-set-0", namespace)
        found = Pod(raw) if raw else None
        return found if found and found.phase == "Running" and not found.terminating else None

    first = wait_for(pod, 60, "the StatefulSet's pod Running", interval_s=0.2)
    try:
        session.evict(first.name, namespace, dry_run=False, grace_period_seconds=0, uid=first.uid)
        evicted = [{"pod": first.ref, "namespace": namespace, "workload": first.workload,
                    "controller_uid": first.controller["uid"]}]
        again = wait_for(lambda: (p := pod()) and p.uid != first.uid and p, 60, "pinned-set-0 re-created")
        assert again.node == node
        with pytest.raises(DeadEnd) as ended:
            scheduler_tried(session, evicted, [node])
        assert f"StatefulSet {namespace}/pinned-set re-created {namespace}/pinned-set-0 on {node}" in str(ended.value)
    finally:
        session.patch("StatefulSet", "pinned-set", {"spec": {"replicas": 0}}, namespace)
        wait_for(lambda: not session.list("Pod", namespace), 60, "the StatefulSet's pod gone", interval_s=0.2)
