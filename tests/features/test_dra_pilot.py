"""features/dra_pilot.feature: enable-dra-pilot.yml and verify-dra-pilot.yml on the embedded cluster (steps in tests/steps)."""

from pytest_bdd import scenarios

scenarios("dra_pilot.feature")
