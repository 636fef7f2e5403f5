"""features/baseline.feature: playbooks/baseline.yml on the cluster under test (steps in tests/steps)."""

from pytest_bdd import scenarios

scenarios("baseline.feature")
