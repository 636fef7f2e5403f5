"""features/faults.feature against the cluster under test."""

from pytest_bdd import scenarios

scenarios("faults.feature")
