"""The thresholds file (YAML): the operator's SLOs, validated strictly before any gate runs."""

from __future__ import annotations

from pathlib import Path

from gpushare.gates.model import GateInputError, Thresholds
from gpushare.gates.queries import DEFAULT_QUERIES, PLACEHOLDERS
from gpushare.prometheus.thresholds import Bounds, numbers, query_overrides, xid_required
from gpushare.prometheus.timespec import parse_duration
from gpushare.runbook.inputs import read_document

_OF_HEADROOM = "a fraction between 0 and 1 of the room from the baseline's P99 to the SLO"
# Required keys have no default in Thresholds.
_FIELDS: dict[str, Bounds] = {
    "throughput_min_gain": (float, 0, None, "a fraction such as 0.10 for +10%"),
    "p99_slo_ms": (float, 0, None, "milliseconds, above 0"),
    "p99_breach_windows": (int, 1, None, "a whole number of windows, at least 1"),
    "max_new_xid": (int, 0, None, "a whole number, 0 or more"),
    "max_extra_oom_kills": (float, 0, None, "a count, 0 or more"),
    "max_extra_restarts": (float, 0, None, "a count, 0 or more"),
    "max_correlated_failures": (int, 0, None, "a whole number, 0 or more"),
    "fb_margin": (float, 0, 0.9, "a fraction between 0 and 0.9, the baseline's fb_margin"),
    "min_window_coverage": (float, 0, 1, "a fraction between 0 and 1 of the trial's latency windows"),
    "queue_time_min_drop": (float, 0, 1, "a fraction between 0 and 1"),
    "no_queue_s": (float, 0, None, "seconds, 0 or more"),
    "jitter_max_headroom_used": (float, 0, 1, _OF_HEADROOM),
    "jitter_max_spread": (float, 0, 1, _OF_HEADROOM),
}
# Keys older thresholds files may still carry, with what replaced them.
_RETIRED = {
    "queue_max_p99_increase": "run-time jitter is judged against the SLO headroom now; "
    "set jitter_max_headroom_used and jitter_max_spread instead (see examples/gates/thresholds.yaml)",
}
REQUIRED = ("throughput_min_gain", "p99_slo_ms", "p99_breach_windows")


def load_thresholds(path: Path) -> Thresholds:
    document = read_document(path, "YAML", GateInputError,
                             unreadable="cannot read the thresholds file {path}: {reason}; check the path",
                             malformed="thresholds file {path} is not YAML ({error}); fix its syntax",
                             nested="thresholds file {path} nests too deeply to be thresholds; fix its syntax")
    return parse_thresholds(document)


def parse_thresholds(document: object) -> Thresholds:
    if not isinstance(document, dict):
        raise GateInputError("thresholds: expected a mapping of keys such as p99_slo_ms: 500")
    retired = sorted(key for key in _RETIRED if key in document)
    if retired:
        raise GateInputError(f"thresholds: {retired[0]} is no longer used: {_RETIRED[retired[0]]}")
    known = {*_FIELDS, "xid_required", "latency_window", "queries"}
    unknown = sorted(str(key) for key in set(document) - known)
    if unknown:
        raise GateInputError(f"thresholds: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}")
    missing = [key for key in REQUIRED if key not in document]
    if missing:
        raise GateInputError(f"thresholds: missing key(s) {', '.join(missing)}; set the operator's SLO for each")
    values: dict[str, object] = numbers(document, _FIELDS, GateInputError)
    if values.get("p99_slo_ms") == 0:
        raise GateInputError(f"thresholds: p99_slo_ms is {document['p99_slo_ms']!r}; expected {_FIELDS['p99_slo_ms'][3]}")
    if "xid_required" in document:
        values["xid_required"] = xid_required(document["xid_required"], GateInputError)
    if "latency_window" in document:
        values["latency_window_s"] = parse_duration(document["latency_window"], "thresholds: latency_window", GateInputError)
    overrides = query_overrides(document.get("queries", {}), DEFAULT_QUERIES, PLACEHOLDERS, error=GateInputError)
    return Thresholds(**values, queries={**DEFAULT_QUERIES, **overrides})
