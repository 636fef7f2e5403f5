"""features/enable_timeslicing.feature: the enable runbook on the 1-GPU and the 8-GPU node."""

from pytest_bdd import scenarios

scenarios("enable_timeslicing.feature")
