"""The time-slicing runbooks' wait checks against the cluster under test, read-only: the targets
are read by name, and the rest of the fleet only once the targets are as wanted."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gpushare_testbed.controlplane import StateDir
from gpushare.k8s.session import Session
from gpushare.model.node import Node, Pool
from gpushare.model.pods import UNSCHEDULABLE
from gpushare.polling import wait_for
from gpushare_testbed.processes import recorded_pid
from gpushare.runbook import checks as runbook_checks
from gpushare.runbook.checks import NAMED_READS_MAX, gpu_nodes, uncordoned
from gpushare.timeslicing import checks
from gpushare.timeslicing_rollback.checks import timeslicing_disabled, whole_cards
from tests.integration.k8s_fixtures import forget_watch_history, scratch_node, session  # noqa: F401 - fixtures
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
POOL = {"label_key": "gpu-mode", "label_value": "shared", "taint": None}


@contextmanager
def paused(cluster: Cluster, component: str) -> Iterator[None]:
    """The embedded cluster's `component` stopped (SIGSTOP) for the block: a controller lagging behind."""
    pid = recorded_pid(StateDir(cluster.state_dir).pid_file(component))
    assert pid, f"{component} is not running"
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def whole_gpu_nodes(session: Session) -> dict[str, Node]:
    return {name: node for name, node in gpu_nodes(session).items() if node.allocatable("nvidia.com/gpu")
            and not node.allocatable("nvidia.com/gpu.shared")}


def expected(target: Node, bystanders: dict[str, dict], gpus: int | None = None) -> dict:
    return {"targets": {target.name: {"gpus": gpus if gpus is not None else target.allocatable("nvidia.com/gpu")}},
            "keys": [], "pool": POOL, "bystanders": bystanders, "compare_allocatable": True,
            "compare_schedulable": True}


def test_named_nodes_are_read_by_name_and_many_as_the_fleet(clean_cluster: Cluster, session: Session) -> None:
    fleet = gpu_nodes(session)
    first = sorted(fleet)[0]
    assert set(gpu_nodes(session, [first])) == {first}
    assert gpu_nodes(session, ["no-such-node"]) == {}
    many = [first] + [f"absent-{i}" for i in range(NAMED_READS_MAX)]
    assert set(gpu_nodes(session, many)) == set(fleet)  # one list: a superset


def test_the_fleet_is_compared_once_the_targets_are_done(clean_cluster: Cluster, session: Session) -> None:
    nodes = whole_gpu_nodes(session)
    if len(nodes) < 2:
        pytest.skip("needs two GPU nodes with whole cards")
    target, bystander = (nodes[name] for name in sorted(nodes)[:2])
    assert whole_cards(session, expected(target, {})["targets"]) == []
    changed = {**bystander.fingerprint(Pool.of(POOL)), "unschedulable": True}
    namespace = clean_cluster.operator_namespace
    done = expected(target, {bystander.name: changed})
    assert timeslicing_disabled(session, namespace, done, "cluster-policy") == [
        f"{bystander.name} (not targeted): uncordoned"]
    # while a target is not as wanted, only the targets are reported (and the fleet is not read)
    pending = expected(target, {bystander.name: changed}, gpus=target.allocatable("nvidia.com/gpu") + 1)
    problems = timeslicing_disabled(session, namespace, pending, "cluster-policy")
    assert problems and all(p.startswith(f"{target.name}:") for p in problems), problems


def test_an_uncordoned_node_is_waited_for_until_the_controller_removes_its_cordon_taint(
        cluster: Cluster, session: Session, scratch_node: str) -> None:
    if not cluster.embedded:
        pytest.skip("pauses the embedded cluster's kube-controller-manager")

    def tainted() -> bool:
        return UNSCHEDULABLE in Node(session.get("Node", scratch_node) or {}).taints

    session.patch("Node", scratch_node, {"spec": {"unschedulable": True}})
    wait_for(tainted, 30, f"the node lifecycle controller's taint on cordoned {scratch_node}", interval_s=0.1)
    assert uncordoned(session, [scratch_node, "no-such-node"]) == []  # cordoned again (or gone): not waited for
    with paused(cluster, "kube-controller-manager"):
        session.patch("Node", scratch_node, {"spec": {"unschedulable": None}})
        problems = uncordoned(session, [scratch_node])
    assert problems == [f"{scratch_node}: uncordoned, but still tainted {UNSCHEDULABLE} (the node lifecycle controller "
                        "of kube-controller-manager removes it; until then no pod is scheduled there)"]
    wait_for(lambda: not tainted(), 30, "the controller, running again, removing the taint", interval_s=0.1)
    assert uncordoned(session, [scratch_node]) == []


def test_a_bystander_written_since_the_plans_read_is_found_without_reading_the_fleet(
        clean_cluster: Cluster, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = whole_gpu_nodes(session)
    if len(nodes) < 2:
        pytest.skip("needs two GPU nodes with whole cards")
    target, bystander = sorted(nodes)[:2]
    fleet, since = session.listing("Node", label_selector="nvidia.com/gpu.present=true")
    read = {n["metadata"]["name"]: Node(n) for n in fleet}
    pool = Pool.of(POOL)
    plan = {**expected(read[target], {n: node.fingerprint(pool) for n, node in read.items() if n != target}),
            "since": since, "versions": {target: read[target].resource_version}}
    fleet_reads = []
    original = runbook_checks.gpu_nodes
    monkeypatch.setattr(runbook_checks, "gpu_nodes", lambda s, names=None: fleet_reads.append(names) or original(s, names))
    mark = "gpushare.io/watch-test"
    try:
        # what a run does after its read: it writes to its target; someone else changes a bystander
        session.patch("Node", bystander, {"metadata": {"labels": {POOL["label_key"]: POOL["label_value"]}}})
        session.patch("Node", target, {"metadata": {"annotations": {mark: "written"}}})
        namespace = clean_cluster.operator_namespace
        assert timeslicing_disabled(session, namespace, plan, "cluster-policy") == [
            f"{bystander} (not targeted): labels {POOL['label_key']} (none) -> {POOL['label_value']}"]
        assert None not in fleet_reads, "the fleet was read again"
        # the read's version beyond the API server's watch history: the fleet is read, with the same verdict
        if clean_cluster.embedded:
            forget_watch_history(clean_cluster)
        fleet_reads.clear()
        assert timeslicing_disabled(session, namespace, {**plan, "since": "1"}, "cluster-policy") == [
            f"{bystander} (not targeted): labels {POOL['label_key']} (none) -> {POOL['label_value']}"]
        assert None in fleet_reads
    finally:
        session.patch("Node", bystander, {"metadata": {"labels": {POOL["label_key"]: None}}})
        session.patch("Node", target, {"metadata": {"annotations": {mark: None}}})


def test_an_mps_target_needs_mps_capable_and_a_ready_mps_daemon(clean_cluster: Cluster, session: Session) -> None:
    """The enable's verify with sharing strategy MPS, on a node that still has whole cards: it names
    GFD's mps.capable and the missing MPS control daemon besides the shares."""
    nodes = whole_gpu_nodes(session)
    target = nodes[sorted(nodes)[0]]
    want = {**expected(target, {}), "replicas": 2, "rename": True, "scope": "node", "strategy": "mps", "key": "shared"}
    want["targets"][target.name]["pool"] = False
    problems = checks.timeslicing_enabled(session, clean_cluster.operator_namespace, want)
    assert f"{target.name}: label nvidia.com/mps.capable is 'false', expected 'true'" in problems
    assert f"{target.name}: label nvidia.com/gpu.sharing-strategy is 'none', expected 'mps'" in problems
    assert f"{target.name}: no nvidia-device-plugin-mps-control-daemon pod" in problems
    time_sliced = {**want, "strategy": "time-slicing"}
    assert not [p for p in checks.timeslicing_enabled(session, clean_cluster.operator_namespace, time_sliced)
                if "mps" in p], "time-slicing does not ask for the MPS daemon"
