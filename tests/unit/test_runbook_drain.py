"""The drain's decisions (gpushare.runbook.drain.DrainProgress), pass by pass, on a node whose
pods a small model of a Deployment and its PodDisruptionBudget replaces: it tells a workload whose
replacements come straight back from a budget that refuses evictions, and from one that lets them
through one at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpushare.model.pods import Pod
from gpushare.runbook.drain import DrainProgress, replacement_standing
from gpushare.model.node import Node
from tests.unit.cluster_objects import node, workload_pod

OWNER = "trainer-5d4f7b9c8"
ALL = [{"operator": "Exists"}]
REFUSAL = ("PodDisruptionBudget team-a/trainer-budget: Cannot evict pod as it would violate the pod's disruption "
           "budget.")
COMES_BACK = "right after its eviction"
UNSCHEDULABLE = "0/4 nodes are available: 1 Insufficient nvidia.com/gpu.shared"
DRAINED = {"gpu-node": Node(node("gpu-node", replicas=4, unschedulable=True, taints=[
    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]))}


@dataclass
class Deployment:
    """4 replicas on gpu-node; an evicted pod terminates by the next pass, and its replacement runs
    `where`: on gpu-node, on another node, or nowhere (Pending). `max_unavailable` is the budget's."""

    where: str
    max_unavailable: int
    tolerations: list[dict[str, Any]] | None = None
    node_selector: dict[str, str] | None = None
    replicas: int = 4
    on_node: list[dict[str, Any]] = field(default_factory=list)
    running_elsewhere: int = 0
    created: int = 0

    def __post_init__(self) -> None:
        self.on_node = [self.pod() for _ in range(self.replicas)]

    def pod(self) -> dict[str, Any]:
        self.created += 1
        return workload_pod(f"{OWNER}-{self.created:05d}", "gpu-node", tolerations=self.tolerations,
                            node_selector=self.node_selector, owner_name=OWNER)

    def healthy(self) -> int:
        return self.running_elsewhere + sum(not Pod(p).terminating for p in self.on_node)

    def evict(self, pod: Pod) -> bool:
        """The eviction API: refused (429) when the budget allows no disruption now."""
        if self.healthy() <= self.replicas - self.max_unavailable:
            return False
        next(p for p in self.on_node if p["metadata"]["uid"] == pod.uid)["metadata"]["deletionTimestamp"] = "now"
        return True

    def settle(self) -> None:
        """Between passes: the evicted pods are gone, the ReplicaSet has re-created them `where`."""
        gone = [p for p in self.on_node if Pod(p).terminating]
        self.on_node = [p for p in self.on_node if not Pod(p).terminating]
        for _ in gone:
            if self.where == "gpu-node":
                self.on_node.append(self.pod())
            elif self.where == "elsewhere":
                self.running_elsewhere += 1


def drain(deployment: Deployment, passes: int = 20) -> str:
    """The drain's loop without the API server: list, evict, until done, stopped, or out of time."""
    progress = DrainProgress()
    for _ in range(passes):
        pods = [Pod(p) for p in deployment.on_node]
        for pod in progress.to_evict(pods):
            if deployment.evict(pod):
                progress.evicted_pod(pod)
            else:
                progress.refused_pod(pod, REFUSAL)
        if progress.result.problem or not pods:
            return progress.result.problem
        deployment.settle()
    progress.timed_out([Pod(p) for p in deployment.on_node], 20, "a shared replica")
    return progress.result.problem


def test_replacements_that_come_straight_back_stop_the_drain_naming_the_workload() -> None:
    problem = drain(Deployment("gpu-node", max_unavailable=4, tolerations=ALL,
                               node_selector={"kubernetes.io/hostname": "gpu-node"}))
    assert problem.startswith(f"Deployment team-a/trainer re-created team-a/{OWNER}-00005 on gpu-node right after "
                              'its eviction: it tolerates the cordon ({"operator": "Exists"}) and its nodeSelector '
                              '{"kubernetes.io/hostname": "gpu-node"} admits gpu-node')
    assert "Scale the workload down" in problem
    assert "disruption" not in problem


def test_a_replacement_the_scheduler_could_not_have_placed_was_named_onto_the_node() -> None:
    problem = drain(Deployment("gpu-node", max_unavailable=4))  # no cordon toleration: spec.nodeName did it
    assert "right after its eviction: its template names the node (spec.nodeName: gpu-node)" in problem


def test_a_budget_refusing_every_eviction_gets_the_budget_message() -> None:
    problem = drain(Deployment("elsewhere", max_unavailable=0))
    assert problem.startswith(f"A PodDisruptionBudget refused the eviction of team-a/{OWNER}-00001, ")
    assert f"team-a/{OWNER}-00004 for 20 s: {REFUSAL} Wait until the budget allows a disruption" in problem


@pytest.mark.parametrize(("where", "problem"), [
    pytest.param("elsewhere", "", id="replacements-run-elsewhere-the-drain-finishes"),
    pytest.param("nowhere", "A PodDisruptionBudget refused the eviction of ", id="replacements-pending-the-budget-waits"),
])
def test_a_budget_allowing_one_eviction_at_a_time_is_not_a_comeback(where: str, problem: str) -> None:
    deployment = Deployment(where, max_unavailable=1, tolerations=ALL)
    result = drain(deployment)
    assert COMES_BACK not in result
    assert result.startswith(problem) and bool(result) is bool(problem)
    assert deployment.running_elsewhere == (4 if where == "elsewhere" else 0)


def test_a_pod_terminating_or_already_evicted_is_not_evicted_again() -> None:
    deployment = Deployment("nowhere", max_unavailable=4)
    progress = DrainProgress()
    pods = [Pod(p) for p in deployment.on_node]
    for pod in progress.to_evict(pods):
        progress.evicted_pod(pod)
    assert progress.to_evict(pods) == []
    assert [e["workload"] for e in progress.result.evicted] == ["Deployment team-a/trainer"] * 4


def test_a_replacement_the_scheduler_has_not_tried_keeps_the_drain_going() -> None:
    """Under load the evicted pods can be gone before the scheduler has placed their replacements;
    the drain is done only once each replacement is placed or Pending with the scheduler's reason
    (a replacement pinned to the node then shows up on it as a comeback)."""
    deployment = Deployment("nowhere", max_unavailable=4)
    progress = DrainProgress()
    for pod in progress.to_evict([Pod(p) for p in deployment.on_node]):
        progress.evicted_pod(pod)
    evicted = deployment.on_node[0]
    unbound = workload_pod(f"{OWNER}-99999", "", owner_name=OWNER)
    other = workload_pod("batch-7c9d8e6f5-00001", "", owner_name="batch-7c9d8e6f5")
    assert [p.name for p in progress.unsettled([Pod(evicted), Pod(unbound), Pod(other)], DRAINED)] == [
        f"{OWNER}-99999"]
    pending(unbound)
    placed = workload_pod(f"{OWNER}-99998", "gpu-node-2", owner_name=OWNER)
    assert progress.unsettled([Pod(unbound), Pod(placed)], DRAINED) == []


def pending(raw: dict[str, Any]) -> dict[str, Any]:
    raw["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": UNSCHEDULABLE}]
    return raw


def test_a_replacement_pending_since_before_the_evicted_pods_went_keeps_the_drain_going_if_the_node_admits_it() -> None:
    """The scheduler tried the replacement while the evicted pods still held the node's shares
    (terminating): its Unschedulable reason is stale, and once they are gone it is placed back on the
    node if it tolerates the cordon and its selection admits the node; otherwise it is placed nowhere."""
    deployment = Deployment("nowhere", max_unavailable=4)
    progress = DrainProgress()
    for pod in progress.to_evict([Pod(p) for p in deployment.on_node]):
        progress.evicted_pod(pod)
    pinned = Pod(pending(workload_pod(f"{OWNER}-99999", "", owner_name=OWNER, tolerations=ALL,
                                      node_selector={"kubernetes.io/hostname": "gpu-node"})))
    elsewhere = Pod(pending(workload_pod(f"{OWNER}-99998", "", owner_name=OWNER, tolerations=ALL,
                                         node_selector={"kubernetes.io/hostname": "gpu-node-2"})))
    kept_off = Pod(pending(workload_pod(f"{OWNER}-99997", "", owner_name=OWNER)))  # no cordon toleration
    assert [replacement_standing(p, DRAINED) for p in (pinned, elsewhere, kept_off)] == ["admitted", "", ""]
    assert progress.unsettled([pinned, elsewhere, kept_off], DRAINED) == [pinned]


def test_a_replacement_bound_to_the_node_after_the_pass_listed_it_keeps_the_drain_going() -> None:
    """The pass lists the node's pods (the evicted ones gone, the replacements not yet bound) and then
    the namespace's: a replacement the scheduler bound to the drained node in between is placed, but
    the drain is not done; the next pass lists it on the node and stops on it as a comeback."""
    deployment = Deployment("nowhere", max_unavailable=4)
    progress = DrainProgress()
    for pod in progress.to_evict([Pod(p) for p in deployment.on_node]):
        progress.evicted_pod(pod)
    back = Pod(workload_pod(f"{OWNER}-99999", "gpu-node", owner_name=OWNER))
    assert progress.unsettled([back], DRAINED) == [back]
    assert progress.to_evict([]) == []
    assert progress.to_evict([back]) == [] and COMES_BACK in progress.result.problem


def test_a_replicaset_that_has_not_re_created_the_evicted_pods_keeps_the_drain_going() -> None:
    """Under load the evicted pods can be gone before their ReplicaSet has created the replacements:
    no pod is unplaced yet, but the drain is not done until the live pods reach spec.replicas (a
    replacement pinned to the node then shows up on it as a comeback)."""
    deployment = Deployment("nowhere", max_unavailable=4)
    progress = DrainProgress()
    for pod in progress.to_evict([Pod(p) for p in deployment.on_node]):
        assert deployment.evict(pod)
        progress.evicted_pod(pod)
    uid = Pod(deployment.on_node[0]).controller["uid"]
    assert progress.replacing == {uid: ("ReplicaSet", "team-a", OWNER)}
    assert progress.unsettled([], DRAINED) == []
    assert progress.uncreated([], {uid: 4}) == [uid]
    created = [workload_pod(f"{OWNER}-9999{i}", "", owner_name=OWNER) for i in range(3)]
    assert progress.uncreated([Pod(p) for p in [*created, *deployment.on_node]], {uid: 4}) == [uid]  # 3 live, 4 terminating
    created.append(workload_pod(f"{OWNER}-99993", "gpu-node-2", owner_name=OWNER))
    assert progress.uncreated([Pod(p) for p in created], {uid: 4}) == []
    assert progress.uncreated([], {uid: 0}) == []  # scaled down meanwhile
