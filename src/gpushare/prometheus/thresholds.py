"""What the baseline's and the gates' thresholds files share, checked before any query is sent:
bounded numbers, `xid_required`, and PromQL overrides of the default queries. Each raises the
caller's own kind of InputError."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from string import Template

from gpushare.prometheus import InputError
from gpushare.runbook.inputs import bounded_number

# key -> (kind, lower bound, upper bound or None, what is expected)
Bounds = tuple[type, float, float | None, str]


def numbers(document: Mapping[str, object], fields: Mapping[str, Bounds],
            error: type[InputError] = InputError) -> dict[str, float | int]:
    """The document's values of `fields`, each of its kind and within its bounds (else `error`)."""
    values: dict[str, float | int] = {}
    for key, (kind, low, high, expected) in fields.items():
        if key in document:
            value = document[key]
            if not bounded_number(value, kind, low, high):
                raise error(f"thresholds: {key} is {value!r}; expected {expected}")
            values[key] = kind(value)
    return values


def xid_required(value: object, error: type[InputError] = InputError) -> bool:
    """`xid_required`: false says the exporter does not collect DCGM_FI_DEV_XID_ERRORS, so no Xid
    series is not a reason to wait."""
    if not isinstance(value, bool):
        raise error(f"thresholds: xid_required is {value!r}; expected true or false "
                         "(false only when the exporter does not collect DCGM_FI_DEV_XID_ERRORS)")
    return value


def query_overrides(overrides: object, defaults: Iterable[str], placeholders: Iterable[str],
                    retired: Mapping[str, str] | None = None, error: type[InputError] = InputError) -> dict[str, str]:
    """`queries:` of a thresholds file: each key one of `defaults`, each value PromQL that uses no
    placeholder but `placeholders`; a `retired` key is refused with what replaced it."""
    if not isinstance(overrides, dict):
        raise error("thresholds: queries must map query keys to PromQL strings")
    gone = sorted(str(key) for key in overrides if key in (retired or {}))
    if gone:
        raise error(f"thresholds: queries.{gone[0]} is no longer used: {(retired or {})[gone[0]]}")
    known = list(defaults)
    unknown = sorted(str(key) for key in set(overrides) - set(known))
    if unknown:
        raise error(f"thresholds: unknown query key(s) {', '.join(unknown)}; expected {', '.join(known)}")
    names = list(placeholders)
    for name, text in overrides.items():
        if not isinstance(text, str) or not text.strip():
            raise error(f"thresholds: queries.{name} must be a non-empty PromQL string")
        try:
            Template(text).substitute({key: "" for key in names})
        except (KeyError, ValueError) as err:
            raise error(
                f"thresholds: queries.{name} uses an unknown placeholder ({err}); "
                f"available: {', '.join('$' + p for p in names)} (write $$ for a literal $)") from None
    return dict(overrides)
