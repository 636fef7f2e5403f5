"""features/interrupted_enable.feature against the cluster under test."""

from pytest_bdd import scenarios

scenarios("interrupted_enable.feature")
