"""features/mig.feature: the MIG runbooks against the cluster under test."""

from pytest_bdd import scenarios

scenarios("mig.feature")
