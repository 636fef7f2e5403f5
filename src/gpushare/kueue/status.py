"""What an operator checks during a change window: per ClusterQueue the admitted and pending
workloads, the quota it borrows from its cohort, and how long the oldest pending workload waits."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpushare.kueue.kinds import condition

HEADERS = ["cluster queue", "cohort", "admitted", "pending", "borrowed", "oldest pending", "waiting"]


@dataclass(frozen=True)
class QueueStatus:
    name: str
    cohort: str
    admitted: int
    pending: int
    borrowed: tuple[str, ...]  # "2 nvidia.com/gpu on whole-card"
    oldest_pending: str | None  # namespace/name of the workload
    waiting_s: float | None


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def queued_since(workload: Mapping[str, Any]) -> dt.datetime:
    """When a pending workload joined the queue: its creation, or its last eviction if it was evicted."""
    created = parse_time(workload["metadata"]["creationTimestamp"])
    reserved = condition(workload, "QuotaReserved")
    if condition(workload, "Evicted") and reserved and reserved.get("status") == "False":
        return max(created, parse_time(reserved["lastTransitionTime"]))
    return created


def is_pending(workload: Mapping[str, Any]) -> bool:
    if workload.get("spec", {}).get("active") is False:
        return False
    return not any((condition(workload, kind) or {}).get("status") == "True" for kind in ("QuotaReserved", "Finished"))


def borrowed(cluster_queue: Mapping[str, Any]) -> tuple[str, ...]:
    result = []
    for flavor in cluster_queue.get("status", {}).get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            amount = str(resource.get("borrowed", "0"))
            if amount not in ("0", ""):
                result.append(f"{amount} {resource['name']} on {flavor['name']}")
    return tuple(result)


def queue_statuses(
    cluster_queues: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    workloads: Iterable[Mapping[str, Any]],
    now: dt.datetime,
) -> list[QueueStatus]:
    """One status per ClusterQueue, sorted by name; pending workloads are found through their LocalQueue."""
    cluster_queue_of = {
        (lq["metadata"]["namespace"], lq["metadata"]["name"]): lq.get("spec", {}).get("clusterQueue")
        for lq in local_queues
    }
    oldest: dict[str, tuple[dt.datetime, str]] = {}
    for workload in workloads:
        if not is_pending(workload):
            continue
        meta = workload["metadata"]
        queue = cluster_queue_of.get((meta["namespace"], workload.get("spec", {}).get("queueName")))
        since = queued_since(workload)
        if queue and (queue not in oldest or since < oldest[queue][0]):
            oldest[queue] = (since, f"{meta['namespace']}/{meta['name']}")
    statuses = []
    for cq in sorted(cluster_queues, key=lambda q: q["metadata"]["name"]):
        name, status = cq["metadata"]["name"], cq.get("status", {})
        since, workload = oldest.get(name, (None, None))
        statuses.append(QueueStatus(
            name=name,
            cohort=cq.get("spec", {}).get("cohortName") or "-",
            admitted=int(status.get("admittedWorkloads", 0)),
            pending=int(status.get("pendingWorkloads", 0)),
            borrowed=borrowed(cq),
            oldest_pending=workload,
            waiting_s=(now - since).total_seconds() if since else None,
        ))
    return statuses


def format_wait(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def rows(statuses: Iterable[QueueStatus]) -> list[list[str]]:
    return [[s.name, s.cohort, str(s.admitted), str(s.pending), ", ".join(s.borrowed) or "-",
             s.oldest_pending or "-", format_wait(s.waiting_s)] for s in statuses]
