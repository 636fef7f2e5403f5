"""The release-gate table, row by row, on both sides of every boundary."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpushare.gates.evaluate import evaluate, longest_run
from gpushare.gates.model import Observations, Side, Thresholds

THRESHOLDS = Thresholds(throughput_min_gain=0.10, p99_slo_ms=500, p99_breach_windows=3)


def side(**values: object) -> Side:
    defaults: dict[str, object] = {
        "throughput_per_gpu": 10.0, "p99_ms": (400.0,), "oom_kills": 0.0, "restarts": 0.0,
        "xid_errors": 0.0, "queue_time_s": (30.0,),
    }
    return Side(**{**defaults, **values})


BASELINE = side()
TRIAL = side(throughput_per_gpu=12.0, p99_ms=(300.0, 310.0, 320.0), queue_time_s=(10.0,))


def gate(name: str, trial: dict[str, object], baseline: dict[str, object] | None = None, **thresholds: object):
    report = evaluate(
        Observations(replace(BASELINE, **(baseline or {})), replace(TRIAL, **trial), source={}),
        replace(THRESHOLDS, **thresholds),
    )
    return next(result for result in report.gates if result.name == name)


@pytest.mark.parametrize(
    ("baseline", "trial", "thresholds", "status", "reason"),
    [
        pytest.param(10.0, 12.0, {}, "continue", "meets the 10% margin", id="gain-above-margin"),
        pytest.param(10.0, 11.0, {}, "continue", "meets", id="gain-exactly-at-margin"),
        pytest.param(3.0, 3.3, {}, "continue", "meets", id="gain-at-margin-despite-float-noise"),
        pytest.param(10.0, 10.99, {}, "hold", "below the 10% margin", id="gain-just-below-margin"),
        pytest.param(10.0, 10.0, {}, "rollback", "no gain", id="no-gain"),
        pytest.param(10.0, 9.0, {}, "rollback", "lower", id="lower"),
        pytest.param(10.0, 10.0, {"throughput_min_gain": 0.0}, "rollback", "no gain", id="zero-margin-no-gain"),
        pytest.param(10.0, 10.01, {"throughput_min_gain": 0.0}, "continue", "meets", id="zero-margin-any-gain"),
        pytest.param(0.0, 5.0, {}, "hold", "baseline throughput is 0", id="zero-baseline"),
        pytest.param(None, 12.0, {}, "hold", "no baseline data", id="no-baseline"),
        pytest.param(10.0, None, {}, "hold", "no trial data", id="no-trial"),
    ],
)
def test_throughput_gate(baseline, trial, thresholds, status, reason) -> None:
    gaps = {"throughput_per_gpu": "not measured"}
    result = gate(
        "throughput_per_gpu",
        {"throughput_per_gpu": trial, "gaps": gaps if trial is None else {}},
        {"throughput_per_gpu": baseline, "gaps": gaps if baseline is None else {}},
        **thresholds,
    )
    assert (result.status, result.observed["baseline"], result.observed["trial"]) == (status, baseline, trial)
    assert reason in result.reason


@pytest.mark.parametrize(
    ("windows", "needed", "status", "reason"),
    [
        pytest.param((300.0, 420.0, 499.9), 3, "continue", "within the SLO in all 3", id="all-within"),
        pytest.param((500.0, 500.0, 500.0, 500.0), 3, "continue", "within", id="exactly-at-slo"),
        pytest.param((450.0,), 3, "continue", "within the SLO in all 1", id="one-number-within"),
        pytest.param((300.0, 500.1), 3, "hold", "1 of 2 windows, at most 1 in a row", id="single-breach"),
        pytest.param((300.0, 600.0, 600.0), 3, "hold", "at most 2 in a row (rollback at 3)", id="n-minus-1-in-a-row"),
        pytest.param((300.0, 600.0, 600.0, 600.0), 3, "rollback", "for 3 consecutive", id="n-in-a-row"),
        pytest.param((600.0, 600.0, 600.0, 300.0), 3, "rollback", "for 3 consecutive", id="n-in-a-row-then-recovered"),
        pytest.param((600.0, 300.0, 600.0, 300.0, 600.0), 3, "hold", "3 of 5 windows", id="n-breaches-not-in-a-row"),
        pytest.param((700.0,), 1, "rollback", "for 1 consecutive", id="one-window-needed"),
        pytest.param((), 3, "hold", "no trial data", id="no-windows"),
    ],
)
def test_p99_gate(windows, needed, status, reason) -> None:
    gaps = {} if windows else {"p99_ms": "empty list"}
    result = gate("p99_ms", {"p99_ms": windows, "gaps": gaps}, p99_breach_windows=needed)
    assert result.status == status
    assert reason in result.reason
    assert result.observed["trial_windows"] == list(windows)


@pytest.mark.parametrize(
    ("name", "allowance"), [("oom_kills", "max_extra_oom_kills"), ("restarts", "max_extra_restarts")]
)
@pytest.mark.parametrize(
    ("baseline", "trial", "allowed", "status"),
    [
        pytest.param(2.0, 2.0, 0, "continue", id="equal-to-baseline"),
        pytest.param(2.0, 1.0, 0, "continue", id="below-baseline"),
        pytest.param(0.0, 0.0, 0, "continue", id="none-either-side"),
        pytest.param(2.0, 3.0, 0, "rollback", id="one-above-baseline"),
        pytest.param(0.006, 1.0, 0, "rollback", id="above-a-scaled-baseline"),
        pytest.param(2.0, 3.0, 1, "continue", id="exactly-at-allowance"),
        pytest.param(2.0, 4.0, 1, "rollback", id="above-allowance"),
    ],
)
def test_failure_count_gates(name, allowance, baseline, trial, allowed, status) -> None:
    result = gate(name, {name: trial}, {name: baseline}, **{allowance: allowed})
    assert result.status == status
    assert ("above baseline" if status == "rollback" else "not above baseline") in result.reason


@pytest.mark.parametrize("name", ["oom_kills", "restarts"])
def test_failure_count_gates_hold_without_data(name) -> None:
    result = gate(name, {name: None, "gaps": {name: "queries.x returned no series"}})
    assert result.status == "hold"
    assert result.reason == "no trial data: queries.x returned no series"


@pytest.mark.parametrize(
    ("value", "allowed", "gaps", "status", "reason"),
    [
        pytest.param(0.0, 0, {}, "continue", "no failures correlated", id="none"),
        pytest.param(1.0, 0, {}, "rollback", "correlated on the same card: 1", id="one-card"),
        pytest.param(1.0, 1, {}, "continue", "no failures correlated", id="within-allowance"),
        pytest.param(None, 0, {"correlated_failures": "Prometheus down"}, "hold", "Prometheus down", id="no-data"),
    ],
)
def test_correlated_failures_gate(value, allowed, gaps, status, reason) -> None:
    result = gate("correlated_failures", {"correlated_failures": value, "gaps": gaps}, max_correlated_failures=allowed)
    assert (result.status, result.observed["trial"]) == (status, value)
    assert reason in result.reason


def test_correlated_failures_gate_only_when_measured() -> None:
    report = evaluate(Observations(BASELINE, TRIAL, source={}), THRESHOLDS)
    assert [result.name for result in report.gates] == [
        "throughput_per_gpu", "p99_ms", "oom_kills", "restarts", "xid_errors", "queue_time_s",
    ]


@pytest.mark.parametrize(
    ("baseline", "trial", "allowed", "status"),
    [
        pytest.param(0.0, 0.0, 0, "continue", id="zero-new"),
        pytest.param(3.0, 0.0, 0, "continue", id="old-errors-in-baseline-only"),
        pytest.param(0.0, 1.0, 0, "rollback", id="one-new"),
        pytest.param(0.0, 1.0, 1, "continue", id="at-max-new"),
        pytest.param(0.0, 2.0, 1, "rollback", id="above-max-new"),
        pytest.param(0.0, None, 0, "hold", id="no-data"),
    ],
)
def test_xid_gate(baseline, trial, allowed, status) -> None:
    result = gate("xid_errors", {"xid_errors": trial}, {"xid_errors": baseline}, max_new_xid=allowed)
    assert result.status == status
    if status == "rollback":
        assert f"{trial:g} new Xid error(s)" in result.reason


@pytest.mark.parametrize(
    ("baseline", "trial", "thresholds", "status", "reason"),
    [
        pytest.param({}, {}, {}, "continue", "falling: 30 s -> 10 s", id="falling"),
        pytest.param({"queue_time_s": (30.0, 40.0)}, {"queue_time_s": (50.0, 10.0, 10.0)}, {}, "continue",
                     "35 s -> 23.33 s", id="falling-on-window-means"),
        pytest.param({}, {"queue_time_s": (30.0,)}, {}, "rollback", "not falling: 30 s -> 30 s", id="flat"),
        pytest.param({}, {"queue_time_s": (45.0,)}, {}, "rollback", "not falling", id="rising"),
        pytest.param({}, {"queue_time_s": (24.0,)}, {"queue_time_min_drop": 0.2}, "continue", "falling",
                     id="drop-exactly-at-min"),
        pytest.param({}, {"queue_time_s": (24.3,)}, {"queue_time_min_drop": 0.2}, "rollback", "not falling",
                     id="drop-below-min"),
        pytest.param({"p99_ms": (400.0,)}, {"p99_ms": (450.0,)}, {}, "rollback", "only turned into run-time jitter",
                     id="falling-but-p99-rose"),
        pytest.param({"p99_ms": (400.0,)}, {"p99_ms": (440.0,)}, {}, "continue", "falling", id="p99-rise-at-limit"),
        pytest.param({"p99_ms": (400.0,)}, {"p99_ms": (450.0,)}, {"queue_max_p99_increase": 0.25}, "continue",
                     "falling", id="p99-rise-within-limit"),
        pytest.param({}, {"p99_ms": ()}, {}, "hold", "no P99 on both sides", id="falling-without-trial-p99"),
        pytest.param({"p99_ms": ()}, {}, {}, "hold", "no P99 on both sides", id="falling-without-baseline-p99"),
        pytest.param({}, {"queue_time_s": (), "gaps": {"queue_time_s": "null"}}, {}, "hold", "no trial data: null",
                     id="no-trial"),
        pytest.param({"queue_time_s": (), "gaps": {"queue_time_s": "null"}}, {}, {}, "hold", "no baseline data",
                     id="no-baseline"),
    ],
)
def test_queue_time_gate(baseline, trial, thresholds, status, reason) -> None:
    result = gate("queue_time_s", trial, baseline, **thresholds)
    assert result.status == status
    assert reason in result.reason


@pytest.mark.parametrize(
    ("trial", "verdict", "exit_code"),
    [
        pytest.param({}, "continue", 0, id="all-continue"),
        pytest.param({"throughput_per_gpu": 10.5}, "hold", 4, id="one-hold"),
        pytest.param({"throughput_per_gpu": 10.5, "xid_errors": 1.0}, "rollback", 3, id="rollback-beats-hold"),
        pytest.param({"throughput_per_gpu": None}, "hold", 4, id="missing-data-never-continues"),
    ],
)
def test_verdict(trial, verdict, exit_code) -> None:
    report = evaluate(Observations(BASELINE, replace(TRIAL, **trial), source={}), THRESHOLDS)
    assert (report.verdict, report.exit_code) == (verdict, exit_code)


def test_every_gate_reports_values_threshold_and_reason() -> None:
    trial = replace(TRIAL, correlated_failures=0.0, context={"gpu_util_pct": 85.0})
    report = evaluate(Observations(BASELINE, trial, source={"metrics": "m.json"}), THRESHOLDS)
    assert report.source == {"metrics": "m.json"}
    for result in report.gates:
        assert result.observed and result.threshold and result.reason, result
    assert report.gates[0].observed["trial_gpu_util_pct"] == 85.0


@pytest.mark.parametrize(
    ("flags", "run"),
    [([], 0), ([False, False], 0), ([True], 1), ([True, True, False, True], 2), ([False, True, True, True], 3)],
)
def test_longest_run(flags, run) -> None:
    assert longest_run(flags) == run
