"""The thresholds file (YAML): the verdict's limits and query overrides, validated before any query."""

from __future__ import annotations

from pathlib import Path
from string import Template

from gpushare.baseline.model import BaselineInputError, Thresholds
from gpushare.baseline.queries import DEFAULT_QUERIES, PLACEHOLDERS, RETIRED
from gpushare.gates.model import GateInputError
from gpushare.gates.thresholds import xid_required
from gpushare.gates.timespec import parse_duration
from gpushare.runbook.inputs import bounded_number, read_document

# key -> (kind, lower bound, upper bound or None, what is expected)
_NUMBERS: dict[str, tuple[type, float, float | None, str]] = {
    "min_coverage": (float, 0, 1, "a fraction between 0 and 1"),
    "gap_util_pct": (float, 0, 100, "a percentage between 0 and 100"),
    "min_idle_share": (float, 0, 1, "a fraction between 0 and 1"),
    "target_util_pct": (float, 1, 100, "a percentage between 1 and 100"),
    "fb_margin": (float, 0, 0.9, "a fraction between 0 and 0.9"),
    "max_replicas": (int, 2, 64, "a whole number between 2 (the device plugin's minimum) and 64"),
}
_DURATIONS = {"min_history": "min_history_s", "max_gap": "max_gap_s"}


def load_thresholds(path: Path | None) -> Thresholds:
    if path is None:
        return Thresholds()
    document = read_document(path, "YAML", BaselineInputError,
                             unreadable="cannot read the thresholds file {path}: {reason}; check the path",
                             malformed="thresholds file {path} is not YAML ({error}); fix its syntax")
    return parse_thresholds({} if document is None else document)


def parse_thresholds(document: object) -> Thresholds:
    if not isinstance(document, dict):
        raise BaselineInputError("thresholds: expected a mapping of keys such as fb_margin: 0.2")
    known = {*_NUMBERS, *_DURATIONS, "xid_required", "queries"}
    unknown = sorted(str(key) for key in set(document) - known)
    if unknown:
        raise BaselineInputError(
            f"thresholds: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}")
    values: dict[str, object] = {key: _number(key, document[key]) for key in _NUMBERS if key in document}
    try:
        for key, field_name in _DURATIONS.items():
            if key in document:
                values[field_name] = parse_duration(document[key], f"thresholds: {key}")
        if "xid_required" in document:
            values["xid_required"] = xid_required(document["xid_required"])
    except GateInputError as err:
        raise BaselineInputError(str(err)) from None
    return Thresholds(**values, queries=_queries(document.get("queries") or {}))


def _number(key: str, value: object) -> float | int:
    kind, low, high, expected = _NUMBERS[key]
    if not bounded_number(value, kind, low, high):
        raise BaselineInputError(f"thresholds: {key} is {value!r}; expected {expected}")
    return kind(value)


def _queries(overrides: object) -> dict[str, str]:
    if not isinstance(overrides, dict):
        raise BaselineInputError("thresholds: queries must map query keys to PromQL strings")
    retired = sorted(str(key) for key in overrides if key in RETIRED)
    if retired:
        raise BaselineInputError(f"thresholds: queries.{retired[0]} is no longer used: {RETIRED[retired[0]]}")
    unknown = sorted(str(key) for key in set(overrides) - set(DEFAULT_QUERIES))
    if unknown:
        raise BaselineInputError(
            f"thresholds: unknown query key(s) {', '.join(unknown)}; expected {', '.join(DEFAULT_QUERIES)}")
    for name, text in overrides.items():
        if not isinstance(text, str) or not text.strip():
            raise BaselineInputError(f"thresholds: queries.{name} must be a non-empty PromQL string")
        try:
            Template(text).substitute({key: "" for key in PLACEHOLDERS})
        except (KeyError, ValueError) as err:
            raise BaselineInputError(
                f"thresholds: queries.{name} uses an unknown placeholder ({err}); "
                f"available: {', '.join('$' + p for p in PLACEHOLDERS)} (write $$ for a literal $)") from None
    return dict(overrides)
