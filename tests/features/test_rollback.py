"""features/rollback.feature: the rollback runbook against the cluster under test."""

from pytest_bdd import scenarios

scenarios("rollback.feature")
