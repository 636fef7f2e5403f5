"""features/queue_backfill_dra.feature: queue backfill of DRA-served nvidia.com/gpu, with the real Kueue and scheduler."""

from pytest_bdd import scenarios

scenarios("queue_backfill_dra.feature")
