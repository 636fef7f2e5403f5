"""The metrics file: `{"baseline": {...}, "trial": {...}}`, validated strictly.

Every key must be present on both sides; `null` (or an empty list) records "not measured" and
makes the gates that need it hold; a `null` inside a list of windows is a window without data,
which counts against min_window_coverage. Counts cover the same length of time on both sides.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpushare.gates.model import GateInputError, Observations, Side
from gpushare.runbook.inputs import finite_number, read_document

COUNT_KEYS = ("oom_kills", "restarts", "xid_errors")
WINDOW_KEYS = ("p99_ms", "queue_time_s")
REQUIRED_KEYS = ("throughput_per_gpu", *WINDOW_KEYS, *COUNT_KEYS)
CONTEXT_KEYS = ("gpu_util_pct", "fb_used_mib")
TRIAL_ONLY_KEYS = ("correlated_failures", "fb_peak_pct")
_UNITS = {
    "throughput_per_gpu": "work per second per physical GPU",
    "p99_ms": "milliseconds, or a list of per-window values oldest first (null: no data in that window)",
    "queue_time_s": "seconds, or a list of per-window values oldest first (null: no data in that window)",
    "correlated_failures": "a count",
    "fb_peak_pct": "percent of the card's memory",
    "gpu_util_pct": "percent",
    "fb_used_mib": "MiB",
    **{key: "a count" for key in COUNT_KEYS},
}


def load_metrics(path: Path) -> Observations:
    document = read_document(path, "JSON", GateInputError,
                             unreadable="cannot read the metrics file {path}: {reason}; check the path",
                             malformed="metrics file {path} is not JSON ({error}); fix its syntax",
                             nested="metrics file {path} nests too deeply to be metrics; fix its syntax")
    return parse_metrics(document, source={"metrics": str(path)})


def parse_metrics(document: object, source: dict[str, object]) -> Observations:
    if not isinstance(document, dict):
        raise GateInputError('metrics: expected an object {"baseline": {...}, "trial": {...}}')
    unknown = sorted(set(document) - {"baseline", "trial"})
    if unknown:
        raise GateInputError(f"metrics: unknown top-level key(s) {', '.join(unknown)}; only baseline and trial")
    return Observations(
        baseline=_parse_side(document, "baseline"), trial=_parse_side(document, "trial"), source=source
    )


def _parse_side(document: dict[str, object], name: str) -> Side:
    if name not in document:
        raise GateInputError(f"metrics: missing key {name}; add the {name} measurements as an object")
    values = document[name]
    if not isinstance(values, dict):
        raise GateInputError(f"metrics: {name} must be an object of measurements, not {type(values).__name__}")
    allowed = set(REQUIRED_KEYS) | set(CONTEXT_KEYS) | (set(TRIAL_ONLY_KEYS) if name == "trial" else set())
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise GateInputError(
            f"metrics: unknown key(s) {', '.join(f'{name}.{k}' for k in unknown)}; "
            f"expected {', '.join(sorted(allowed))}"
        )
    missing = [key for key in REQUIRED_KEYS if key not in values]
    if missing:
        raise GateInputError(
            f"metrics: missing key(s) {', '.join(f'{name}.{k}' for k in missing)}; "
            "add them (use null for a value that was not measured)"
        )
    gaps = {key: "null in the metrics file" for key in values if values[key] is None}
    gaps.update({key: "empty list in the metrics file" for key in WINDOW_KEYS if values[key] == []})
    gaps.update({key: "null in every window in the metrics file" for key in WINDOW_KEYS
                 if isinstance(values[key], list) and values[key] and all(item is None for item in values[key])})
    return Side(
        throughput_per_gpu=_number(values, name, "throughput_per_gpu"),
        p99_ms=_windows(values, name, "p99_ms"),
        queue_time_s=_windows(values, name, "queue_time_s"),
        oom_kills=_number(values, name, "oom_kills"),
        restarts=_number(values, name, "restarts"),
        xid_errors=_number(values, name, "xid_errors"),
        correlated_failures=_number(values, name, "correlated_failures"),
        fb_peak_pct=_number(values, name, "fb_peak_pct"),
        context={key: v for key in CONTEXT_KEYS if (v := _number(values, name, key)) is not None},
        gaps=gaps,
    )


def _number(values: dict[str, object], side: str, key: str) -> float | None:
    value = values.get(key)
    return None if value is None else _check(value, f"{side}.{key}", key)


def _windows(values: dict[str, object], side: str, key: str) -> tuple[float | None, ...]:
    value = values[key]
    if value is None or (isinstance(value, list) and all(item is None for item in value)):
        return ()
    if isinstance(value, list):
        return tuple(None if item is None else _check(item, f"{side}.{key}[{i}]", key) for i, item in enumerate(value))
    return (_check(value, f"{side}.{key}", key),)


def _check(value: object, where: str, key: str) -> float:
    if not finite_number(value):
        raise GateInputError(f"metrics: {where} is {json.dumps(value)}; expected a finite number ({_UNITS[key]})")
    if value < 0:
        raise GateInputError(f"metrics: {where} is {value}; it cannot be negative ({_UNITS[key]})")
    return float(value)
