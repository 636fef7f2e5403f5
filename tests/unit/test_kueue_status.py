"""`gpushare queue status`: admitted/pending per ClusterQueue, borrowed quota, the oldest pending wait."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gpushare.kueue.status import format_wait, queue_statuses, queued_since, rows

NOW = dt.datetime(2026, 12, 1, 8, 0, 0, tzinfo=dt.timezone.utc)


def ts(seconds_ago: int) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload(name: str, created_s_ago: int, *conditions: tuple[str, str, int], queue: str = "gpu",
             namespace: str = "team-a", active: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": queue, **({"active": active} if active is not None else {})}
    return {"metadata": {"name": name, "namespace": namespace, "creationTimestamp": ts(created_s_ago)}, "spec": spec,
            "status": {"conditions": [{"type": t, "status": s, "lastTransitionTime": ts(ago)} for t, s, ago in conditions]}}


CQS = [
    {"metadata": {"name": "team-b"}, "spec": {"cohortName": "gpu-teams"},
     "status": {"admittedWorkloads": 3, "pendingWorkloads": 0,
                "flavorsUsage": [{"name": "whole-card", "resources": [{"name": "nvidia.com/gpu", "total": "3", "borrowed": "1"}]}]}},
    {"metadata": {"name": "team-a"}, "spec": {"cohortName": "gpu-teams"},
     "status": {"admittedWorkloads": 1, "pendingWorkloads": 2,
                "flavorsUsage": [{"name": "whole-card", "resources": [{"name": "nvidia.com/gpu", "total": "4", "borrowed": "0"}]}]}},
]
LQS = [{"metadata": {"name": "gpu", "namespace": "team-a"}, "spec": {"clusterQueue": "team-a"}},
       {"metadata": {"name": "gpu", "namespace": "team-b"}, "spec": {"clusterQueue": "team-b"}}]


def test_per_queue_counts_borrowing_and_oldest_pending() -> None:
    workloads = [
        workload("running", 900, ("QuotaReserved", "True", 890), ("Admitted", "True", 890)),
        workload("big", 600, ("QuotaReserved", "False", 598)),
        workload("newer", 60),
        workload("done", 1200, ("QuotaReserved", "True", 1190), ("Finished", "True", 1000)),
        workload("b-1", 30, ("QuotaReserved", "True", 29), namespace="team-b"),
    ]
    statuses = queue_statuses(CQS, LQS, workloads, NOW)
    assert [s.name for s in statuses] == ["team-a", "team-b"]
    a, b = statuses
    assert (a.admitted, a.pending, a.borrowed, a.oldest_pending, a.waiting_s) == (1, 2, (), "team-a/big", 600)
    assert (b.borrowed, b.oldest_pending, b.waiting_s) == (("1 nvidia.com/gpu on whole-card",), None, None)
    assert rows(statuses) == [["team-a", "gpu-teams", "1", "2", "-", "team-a/big", "10m00s"],
                              ["team-b", "gpu-teams", "3", "0", "1 nvidia.com/gpu on whole-card", "-", "-"]]


def test_an_evicted_workload_waits_since_its_eviction() -> None:
    evicted = workload("borrower", 900, ("QuotaReserved", "False", 45), ("Evicted", "True", 45))
    assert queued_since(evicted) == NOW - dt.timedelta(seconds=45)
    assert queued_since(workload("never-admitted", 300, ("QuotaReserved", "False", 299))) == NOW - dt.timedelta(seconds=300)


def test_deactivated_and_unknown_queue_workloads_are_not_pending_anywhere() -> None:
    workloads = [workload("off", 500, active=False), workload("lost", 400, queue="nowhere")]
    assert all(s.oldest_pending is None for s in queue_statuses(CQS, LQS, workloads, NOW))


@pytest.mark.parametrize(("seconds", "text"), [(None, "-"), (-3, "0s"), (59, "59s"), (119, "119s"), (120, "2m00s"),
                                               (7199, "119m59s"), (7200, "2h00m"), (90061, "25h01m")])
def test_format_wait(seconds: float | None, text: str) -> None:
    assert format_wait(seconds) == text
