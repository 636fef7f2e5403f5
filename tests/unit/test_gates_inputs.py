"""Strict validation of the metrics file and the thresholds file, with messages that say what to fix."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpushare.gates.evaluate import evaluate
from gpushare.gates.inputs import load_metrics, parse_metrics
from gpushare.gates.model import GateInputError
from gpushare.gates.queries import DEFAULT_QUERIES
from gpushare.gates.thresholds import load_thresholds, parse_thresholds

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gates"
SIDE = {"throughput_per_gpu": 10, "p99_ms": [300, 320], "oom_kills": 0, "restarts": 1, "xid_errors": 0,
        "queue_time_s": 12.5}
METRICS = {"baseline": SIDE, "trial": {**SIDE, "correlated_failures": 0}}
REQUIRED_THRESHOLDS = {"throughput_min_gain": 0.1, "p99_slo_ms": 500, "p99_breach_windows": 3}


def metrics_with(path: str, value: object) -> dict:
    """METRICS with `side.key` set to value (or removed when value is ...)."""
    document = copy.deepcopy(METRICS)
    side, _, key = path.partition(".")
    target = document if not key else document[side]
    if value is ...:
        del target[key or side]
    else:
        target[key or side] = value
    return document


@pytest.mark.parametrize("verdict", ["continue", "rollback", "hold"])
def test_example_metrics_give_the_verdict_they_are_named_for(verdict) -> None:
    path = EXAMPLES / f"metrics-{verdict}.json"
    observations = load_metrics(path)
    assert observations.source == {"metrics": str(path)}
    assert evaluate(observations, load_thresholds(EXAMPLES / "thresholds.yaml")).verdict == verdict


def test_numbers_and_lists_become_windows() -> None:
    observations = parse_metrics(METRICS, source={})
    assert observations.baseline.p99_ms == (300.0, 320.0)
    assert observations.baseline.queue_time_s == (12.5,)
    assert observations.trial.correlated_failures == 0.0
    assert observations.baseline.correlated_failures is None


@pytest.mark.parametrize(
    ("path", "value", "gap"),
    [("trial.p99_ms", None, "null in the metrics file"), ("trial.queue_time_s", [], "empty list in the metrics file"),
     ("baseline.throughput_per_gpu", None, "null in the metrics file")],
)
def test_null_or_empty_records_a_gap(path, value, gap) -> None:
    observations = parse_metrics(metrics_with(path, value), source={})
    side, key = path.split(".")
    assert getattr(observations, side).gaps == {key: gap}


def test_null_in_a_list_is_a_window_without_data() -> None:
    observations = parse_metrics(metrics_with("trial.p99_ms", [300, None, 310]), source={})
    assert (observations.trial.p99_ms, observations.trial.gaps) == ((300.0, None, 310.0), {})
    nothing = parse_metrics(metrics_with("trial.queue_time_s", [None, None]), source={}).trial
    assert (nothing.queue_time_s, nothing.gaps) == ((), {"queue_time_s": "null in every window in the metrics file"})


def test_trial_memory_peak_is_read() -> None:
    assert parse_metrics(metrics_with("trial.fb_peak_pct", 81.5), source={}).trial.fb_peak_pct == 81.5


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        pytest.param("trial.restarts", ..., "missing key(s) trial.restarts; add them (use null", id="missing-key"),
        pytest.param("baseline", ..., "missing key baseline", id="missing-side"),
        pytest.param("trial", [1, 2], "trial must be an object", id="side-not-object"),
        pytest.param("extra", {}, "unknown top-level key(s) extra", id="unknown-top-level"),
        pytest.param("trial.p99", 300, "unknown key(s) trial.p99", id="unknown-key"),
        pytest.param("baseline.correlated_failures", 0, "unknown key(s) baseline.correlated_failures",
                     id="trial-only-key-in-baseline"),
        pytest.param("trial.oom_kills", -1, "trial.oom_kills is -1; it cannot be negative", id="negative-count"),
        pytest.param("baseline.xid_errors", -0.5, "cannot be negative", id="negative-fraction"),
        pytest.param("trial.restarts", "3", 'trial.restarts is "3"; expected a finite number (a count)',
                     id="string-number"),
        pytest.param("trial.restarts", True, "trial.restarts is true; expected a finite number", id="bool"),
        pytest.param("trial.throughput_per_gpu", float("nan"), "is NaN; expected a finite number", id="nan"),
        pytest.param("trial.throughput_per_gpu", {"v": 1}, "expected a finite number (work per second",
                     id="object"),
        pytest.param("trial.p99_ms", [300, "slow"], 'trial.p99_ms[1] is "slow"', id="bad-list-item"),
        pytest.param("trial.queue_time_s", [5, -1], "trial.queue_time_s[1] is -1; it cannot be negative",
                     id="negative-window"),
        pytest.param("baseline.fb_peak_pct", 50, "unknown key(s) baseline.fb_peak_pct", id="memory-peak-in-baseline"),
        pytest.param("trial.fb_peak_pct", "90%", 'trial.fb_peak_pct is "90%"; expected a finite number (percent of '
                     "the card's memory)", id="memory-peak-as-text"),
    ],
)
def test_bad_metrics(path, value, message) -> None:
    with pytest.raises(GateInputError) as err:
        parse_metrics(metrics_with(path, value), source={})
    assert message in str(err.value)


def test_metrics_not_an_object() -> None:
    with pytest.raises(GateInputError, match="expected an object"):
        parse_metrics([METRICS], source={})


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read the metrics file"), ("{not json", "is not JSON"), ("", "is not JSON")],
)
def test_unreadable_metrics_file(tmp_path, content, message) -> None:
    path = tmp_path / "m.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(GateInputError, match=message):
        load_metrics(path)


def test_example_thresholds_load() -> None:
    thresholds = load_thresholds(EXAMPLES / "thresholds.yaml")
    assert (thresholds.throughput_min_gain, thresholds.p99_slo_ms, thresholds.p99_breach_windows) == (0.1, 120, 3)
    assert (thresholds.max_new_xid, thresholds.latency_window_s) == (0, 300)
    assert (thresholds.jitter_max_headroom_used, thresholds.jitter_max_spread) == (0.75, 0.25)
    assert (thresholds.no_queue_s, thresholds.min_window_coverage, thresholds.fb_margin) == (0.01, 0.9, 0.2)
    assert thresholds.xid_required is True
    assert thresholds.queries == DEFAULT_QUERIES


def test_defaults_and_query_override() -> None:
    thresholds = parse_thresholds(
        {**REQUIRED_THRESHOLDS, "latency_window": "10m", "queries": {"p99_ms": "max(my_p99[$window]) * 1000"}}
    )
    assert (thresholds.max_extra_oom_kills, thresholds.jitter_max_headroom_used, thresholds.jitter_max_spread) == (
        0, 0.75, 0.25)
    assert thresholds.latency_window_s == 600
    assert (thresholds.no_queue_s, thresholds.min_window_coverage, thresholds.fb_margin, thresholds.xid_required) == (
        0.01, 0.9, 0.2, True)
    assert parse_thresholds({**REQUIRED_THRESHOLDS, "xid_required": False}).xid_required is False
    assert thresholds.queries["p99_ms"] == "max(my_p99[$window]) * 1000"
    assert thresholds.queries["restarts"] == DEFAULT_QUERIES["restarts"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"p99_slo_ms": ...}, "missing key(s) p99_slo_ms", id="missing-required"),
        pytest.param({"p99_slo": 500}, "unknown key(s) p99_slo", id="unknown-key"),
        pytest.param({"p99_slo_ms": "500ms"}, "p99_slo_ms is '500ms'; expected milliseconds", id="string"),
        pytest.param({"p99_slo_ms": 0}, "p99_slo_ms is 0; expected milliseconds, above 0", id="zero-slo"),
        pytest.param({"throughput_min_gain": -0.1}, "throughput_min_gain is -0.1", id="negative-margin"),
        pytest.param({"p99_breach_windows": 2.5}, "p99_breach_windows is 2.5; expected a whole number", id="float-int"),
        pytest.param({"p99_breach_windows": 0}, "at least 1", id="zero-windows"),
        pytest.param({"max_new_xid": True}, "max_new_xid is True", id="bool"),
        pytest.param({"max_extra_restarts": -1}, "max_extra_restarts is -1; expected a count", id="negative-count"),
        pytest.param({"queue_time_min_drop": 1.5}, "between 0 and 1", id="fraction-above-1"),
        pytest.param({"jitter_max_headroom_used": 1.2},
                     "jitter_max_headroom_used is 1.2; expected a fraction between 0 and 1 of the room",
                     id="used-above-1"),
        pytest.param({"jitter_max_spread": -0.1}, "jitter_max_spread is -0.1; expected a fraction between 0 and 1",
                     id="negative-spread"),
        pytest.param({"jitter_max_spread": "25%"}, "jitter_max_spread is '25%'", id="spread-as-text"),
        pytest.param({"queue_max_p99_increase": 0.1},
                     "queue_max_p99_increase is no longer used: run-time jitter is judged against the SLO headroom "
                     "now; set jitter_max_headroom_used and jitter_max_spread", id="retired-key"),
        pytest.param({"throughput_min_gain": float("inf")}, "throughput_min_gain is inf", id="infinite"),
        pytest.param({"latency_window": "5 minutes"}, "latency_window: '5 minutes' is not a duration", id="duration"),
        pytest.param({"xid_required": "no"}, "xid_required is 'no'; expected true or false", id="xid-required-text"),
        pytest.param({"fb_margin": 0.95}, "fb_margin is 0.95; expected a fraction between 0 and 0.9", id="fb-margin"),
        pytest.param({"min_window_coverage": 1.1}, "min_window_coverage is 1.1", id="coverage-above-1"),
        pytest.param({"no_queue_s": -0.01}, "no_queue_s is -0.01; expected seconds, 0 or more", id="negative-no-queue"),
        pytest.param({"queries": ["x"]}, "queries must map query keys", id="queries-not-mapping"),
        pytest.param({"queries": {"p95_ms": "x"}}, "unknown query key(s) p95_ms", id="unknown-query"),
        pytest.param({"queries": {"p99_ms": ""}}, "queries.p99_ms must be a non-empty PromQL string", id="empty-query"),
        pytest.param({"queries": {"restarts": "sum(x[$range])"}}, "queries.restarts uses an unknown placeholder",
                     id="unknown-placeholder"),
    ],
)
def test_bad_thresholds(change, message) -> None:
    document = {**REQUIRED_THRESHOLDS, **change}
    document = {key: value for key, value in document.items() if value is not ...}
    with pytest.raises(GateInputError) as err:
        parse_thresholds(document)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read the thresholds file"), ("p99_slo_ms: [", "is not YAML"), ("- 1\n", "expected a mapping"),
     ("", "expected a mapping")],
)
def test_unreadable_thresholds_file(tmp_path, content, message) -> None:
    path = tmp_path / "t.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(GateInputError, match=message):
        load_thresholds(path)
