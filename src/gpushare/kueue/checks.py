"""What the queue-backfill runbook waits for, as a problem list (empty: done), polled by `gpushare_wait`."""

from __future__ import annotations

from typing import Any

from gpushare.k8s.session import Session
from gpushare.kueue import render
from gpushare.kueue.description import parse


def queues_ready(session: Session, description: dict[str, Any], label_selector: str) -> list[str]:
    """Every team's ClusterQueue Active and its LocalQueue bound (Active) to it."""
    return render.not_ready(parse(**description), session.list("ClusterQueue", label_selector=label_selector),
                            session.list("LocalQueue", label_selector=label_selector))


CHECKS = {"kueue_queues_ready": queues_ready}
