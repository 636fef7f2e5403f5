"""features/idempotency.feature: preview, enable, preview again, enable again."""

from pytest_bdd import scenarios

scenarios("idempotency.feature")
