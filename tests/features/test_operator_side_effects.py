"""features/operator_side_effects.feature against the cluster under test."""

from pytest_bdd import scenarios

scenarios("operator_side_effects.feature")
