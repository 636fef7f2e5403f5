"""The queue_backfill filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file: the
queue-backfill functions of gpushare.kueue.runbook."""

from __future__ import annotations

from typing import Any

from gpushare.kueue import runbook


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "queue_backfill_description_problems": runbook.description_problems,
            "queue_backfill_kueue_problems": runbook.kueue_problems,
            "queue_backfill_cluster_problems": runbook.cluster_problems,
            "queue_backfill_plan": runbook.plan,
            "queue_backfill_report": runbook.report,
            "queue_backfill_writes": runbook.writes,
        }
