"""features/queue_backfill.feature: Kueue queue backfill set up by the runbook, run by the real Kueue."""

from pytest_bdd import scenarios

scenarios("queue_backfill.feature")
