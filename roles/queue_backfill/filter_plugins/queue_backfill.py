"""Filters of the queue_backfill role: the project's queue-backfill functions (gpushare.kueue.runbook)."""

from __future__ import annotations

from typing import Any

from gpushare.kueue import render, runbook


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "queue_backfill_description_problems": runbook.description_problems,
            "queue_backfill_kueue_problems": runbook.kueue_problems,
            "queue_backfill_cluster_problems": runbook.cluster_problems,
            "queue_backfill_changes": runbook.kueue_changes,
            "queue_backfill_missing_namespaces": runbook.missing_namespaces,
            "queue_backfill_namespace_objects": render.namespace_objects,
            "queue_backfill_not_ready": runbook.not_ready,
            "queue_backfill_report": runbook.report,
            "queue_backfill_writes": render.writes,
        }
