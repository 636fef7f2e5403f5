"""Go's text for values: strconv's FormatFloat and Quote, fmt's %#v, encoding/json's strings."""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


def json_quote(text: str) -> str:
    """encoding/json's string: HTML characters and U+2028/U+2029 escaped too."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
    return '"' + "".join(
        escapes.get(char) or (f"\\u{ord(char):04x}" if ord(char) < 0x20 or char in "<>&\u2028\u2029" else char)
        for char in text
    ) + '"'


def format_float(value: float, fmt: str, bits: int) -> str:
    """strconv.FormatFloat(value, fmt, -1, bits) for fmt e, f and g."""
    if bits == 32:
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            value = math.copysign(math.inf, value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1, value) < 0 else ""
    digits, point = _shortest_digits(abs(value), bits)
    if fmt == "g":
        fmt = "e" if not -4 <= point - 1 < 6 else "f"
    if fmt == "e":
        exponent = point - 1 if digits != "0" else 0
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}" if digits != "0" else f"{sign}0"
    whole = (digits + "0" * point)[:point]
    fraction = digits[point:]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


def _shortest_digits(value: float, bits: int) -> tuple[str, int]:
    """The fewest digits d1d2... that read back as value (a float32 when bits is 32): value = 0.d1d2... x 10**point."""
    if value == 0:
        return "0", 1
    if bits == 64:
        text = repr(value)
    else:
        text = next(
            candidate
            for candidate in (f"{value:.{precision}e}" for precision in range(9))
            if struct.unpack("<f", struct.pack("<f", float(candidate)))[0] == value
        )
    _, digits, exponent = Decimal(text).normalize().as_tuple()
    assert isinstance(exponent, int)  # noqa: S101 - narrows the type: a finite Decimal's exponent
    return "".join(map(str, digits)), len(digits) + exponent


def go_syntax(value: Any) -> str:
    """fmt's %#v of a value go-yaml decoded (for its error texts)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return hex(value) if value > INT64_MAX else str(value)
    if isinstance(value, float):
        return format_float(value, "g", 64)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_element(item) for item in value) + "}"
    items = sorted(value.items(), key=lambda item: (item[0][0], _sortable(item[0][1])))
    return "map[interface {}]interface {}{" + ", ".join(
        f"{_go_element(key)}:{_go_element(item)}" for (_, key), item in items
    ) + "}"


def _sortable(key: Any) -> Any:
    return -math.inf if isinstance(key, float) and math.isnan(key) else key


def _go_element(value: Any) -> str:
    return "interface {}(nil)" if value is None else go_syntax(value)


def go_quote(text: str) -> str:
    """strconv.Quote."""
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
    escapes.update({"\t": "\\t", "\v": "\\v"})
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif "\udc80" <= char <= "\udcff":
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
