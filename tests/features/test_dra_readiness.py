"""features/dra_readiness.feature: dra-readiness.yml on the embedded cluster (steps in tests/steps)."""

from pytest_bdd import scenarios

scenarios("dra_readiness.feature")
