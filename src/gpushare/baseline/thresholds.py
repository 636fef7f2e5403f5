"""The thresholds file (YAML): the verdict's limits and query overrides, validated before any query."""

from __future__ import annotations

from pathlib import Path

from gpushare.baseline.model import BaselineInputError, Thresholds
from gpushare.baseline.queries import DEFAULT_QUERIES, PLACEHOLDERS, RETIRED
from gpushare.prometheus.thresholds import Bounds, numbers, query_overrides, xid_required
from gpushare.prometheus.timespec import parse_duration
from gpushare.runbook.inputs import read_document

_NUMBERS: dict[str, Bounds] = {
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
    values: dict[str, object] = numbers(document, _NUMBERS, BaselineInputError)
    for key, field_name in _DURATIONS.items():
        if key in document:
            values[field_name] = parse_duration(document[key], f"thresholds: {key}", BaselineInputError)
    if "xid_required" in document:
        values["xid_required"] = xid_required(document["xid_required"], BaselineInputError)
    return Thresholds(**values, queries=query_overrides(document.get("queries") or {}, DEFAULT_QUERIES, PLACEHOLDERS,
                                                        RETIRED, BaselineInputError))
