"""features/resource_separation.feature against the cluster under test."""

from pytest_bdd import scenarios

scenarios("resource_separation.feature")
