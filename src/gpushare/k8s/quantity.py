"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as exact decimals, by the grammar of
k8s.io/apimachinery/pkg/api/resource: a signed decimal number, then a binary-SI suffix (Ki..Ei), a
decimal-SI suffix (n, u, m, k, M..E) or a decimal exponent (e or E and a signed integer)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
GRAMMAR = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))((?:[KMGTPE]i)|[numkMGTPE]?|[eE][+-]?\d+)")


def parse_quantity(value: Any) -> Decimal:
    """The quantity's value; ValueError when `value` is not a quantity."""
    if isinstance(value, (int, Decimal)):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(str(value))
    text = str(value).strip()
    match = GRAMMAR.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (a number and a suffix such as m, k, Mi or Gi)")
    number, suffix = Decimal(match.group(1)), match.group(2)
    if suffix in BINARY:
        return number * 1024 ** BINARY[suffix]
    exponent = DECIMAL[suffix] if suffix in DECIMAL else int(suffix[1:])
    return number.scaleb(exponent)
