"""features/share_check.feature: verify-sharing.yml on the embedded cluster (steps in tests/steps)."""

from pytest_bdd import scenarios

scenarios("share_check.feature")
