"""features/enable_mps.feature: MPS through the enable runbook, its refusals, re-run and rollback."""

from pytest_bdd import scenarios

scenarios("enable_mps.feature")
