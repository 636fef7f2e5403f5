"""features/bad_input.feature: every bad input refused in preflight, with nothing written."""

from pytest_bdd import scenarios

scenarios("bad_input.feature")
