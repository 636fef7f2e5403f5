"""The Kueue API this project speaks (kueue.x-k8s.io/v1beta2, the storage version of v0.17 to v0.19)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
# kind -> plural; the CRDs the runbook needs (and `gpushare queue status` reads).
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Workload": "workloads",
}
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The status condition of type `kind`, if the object has one."""
    for item in obj.get("status", {}).get("conditions") or []:
        if item.get("type") == kind:
            return item
    return None
