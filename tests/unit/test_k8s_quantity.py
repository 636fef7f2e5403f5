"""Resource quantities by apimachinery's grammar (gpushare.k8s.quantity)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpushare.k8s.quantity import parse_quantity


@pytest.mark.parametrize(("text", "value"), [
    ("4", 4), ("500m", Decimal("0.5")), ("1.5k", 1500), ("2Gi", 2 * 1024 ** 3), ("64Mi", 64 * 1024 ** 2),
    ("1e3", 1000), ("1E", 10 ** 18), ("1E3", 1000), ("2.5e-3", Decimal("0.0025")), ("-1", -1), (".5", Decimal("0.5")),
    ("100n", Decimal("1E-7")), (3, 3),
])
def test_quantities(text: object, value: object) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1ki", "1mi", "Gi", "1 Gi", "1.2.3", "1e"])
def test_what_is_not_a_quantity(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity(text)
