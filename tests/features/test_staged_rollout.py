"""features/staged_rollout.feature against the cluster under test."""

from pytest_bdd import scenarios

scenarios("staged_rollout.feature")
