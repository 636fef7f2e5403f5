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
        pytest.param({}, {}, {}, "continue", "falling (30 s -> 10 s); mean P99 400 -> 310 ms uses 0% of", id="falling"),
        pytest.param({"queue_time_s": (30.0, 40.0)}, {"queue_time_s": (50.0, 10.0, 10.0)}, {}, "continue",
                     "35 s -> 23.33 s", id="falling-on-window-means"),
        pytest.param({}, {"queue_time_s": (30.0,)}, {}, "rollback", "not falling: 30 s -> 30 s", id="flat"),
        pytest.param({}, {"queue_time_s": (45.0,)}, {}, "rollback", "not falling", id="rising"),
        pytest.param({}, {"queue_time_s": (24.0,)}, {"queue_time_min_drop": 0.2}, "continue", "falling",
                     id="drop-exactly-at-min"),
        pytest.param({}, {"queue_time_s": (24.3,)}, {"queue_time_min_drop": 0.2}, "rollback", "not falling",
                     id="drop-below-min"),
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


# The trial of issue 17: baseline P99 80 ms, SLO 120 ms (40 ms of headroom), queue time 305 s -> 180 s,
# throughput +35%, no OOM kill, restart or Xid; only the trial's P99 windows (and queue time) vary.
STORY_BASELINE = side(throughput_per_gpu=40.0, p99_ms=(80.0,), queue_time_s=(305.0,))
STORY_TRIAL = side(throughput_per_gpu=54.0, p99_ms=(90.0, 92.0, 95.0, 93.0, 91.0, 94.0), queue_time_s=(180.0,),
                   correlated_failures=0.0)
STORY_THRESHOLDS = replace(THRESHOLDS, p99_slo_ms=120)


@pytest.mark.parametrize(
    ("windows", "queue", "verdict", "reason"),
    [
        pytest.param((90, 92, 95, 93, 91, 94), 180, "continue", "80 -> 92.5 ms uses 31.2% of the 40 ms headroom to the "
                     "120 ms SLO, sd 4.27% of it", id="rise-well-inside-the-slo"),
        pytest.param((82, 119, 85, 117, 83, 119), 180, "rollback", "P99 swings 82-119 ms across windows, sd 17.53 ms = "
                     "43.8% of the 40 ms headroom to the 120 ms SLO (at most 25%)", id="swinging-82-to-119"),
        pytest.param((112, 114, 115, 113, 112, 114), 180, "rollback", "mean P99 rose 80 -> 113.3 ms, 83.3% of the "
                     "40 ms headroom to the 120 ms SLO (at most 75%)", id="most-of-the-headroom"),
        pytest.param((109.6,), 180, "continue", "74% of the 40 ms headroom", id="rise-just-below-limit"),
        pytest.param((110,), 180, "continue", "75% of the 40 ms headroom", id="rise-at-limit"),
        pytest.param((110.4,), 180, "rollback", "rose 80 -> 110.4 ms, 76% of the 40 ms", id="rise-just-above-limit"),
        pytest.param((85.2, 104.8), 180, "continue", "sd 24.5% of it", id="spread-just-below-limit"),
        pytest.param((85, 105), 180, "continue", "sd 25% of it", id="spread-at-limit"),
        pytest.param((84.8, 105.2), 180, "rollback", "sd 10.2 ms = 25.5% of the 40 ms", id="spread-just-above-limit"),
        pytest.param((95,), 304.98, "continue", "falling (305 s -> 305 s)", id="wait-saved-just-above-p99-added"),
        pytest.param((95,), 304.985, "rollback", "the wait fell 15 ms and mean P99 rose 15 ms: wait + P99 did not fall",
                     id="wait-saved-equal-to-p99-added"),
        pytest.param((95,), 304.99, "rollback", "the wait fell 10 ms and mean P99 rose 15 ms", id="p99-added-more"),
    ],
)
def test_jitter_is_judged_against_the_slo_headroom(windows, queue, verdict, reason) -> None:
    trial = replace(STORY_TRIAL, p99_ms=tuple(map(float, windows)), queue_time_s=(queue,))
    report = evaluate(Observations(STORY_BASELINE, trial, source={}), STORY_THRESHOLDS)
    queue_gate = report.gates[-1]
    assert (queue_gate.name, queue_gate.status, report.verdict) == ("queue_time_s", verdict, verdict)
    assert reason in queue_gate.reason
    assert ("only turned into run-time jitter" in queue_gate.reason) == (verdict == "rollback")
    assert {gate.status for gate in report.gates[:-1]} == {"continue"}


def test_every_jitter_reason_is_given() -> None:
    trial = replace(STORY_TRIAL, p99_ms=(88.0, 119.0, 119.0, 120.0), queue_time_s=(304.99,))
    result = evaluate(Observations(STORY_BASELINE, trial, source={}), STORY_THRESHOLDS).gates[-1]
    assert result.reason == (
        "queue time fell (305 s -> 305 s) but P99 swings 88-120 ms across windows, sd 13.57 ms = 33.9% of the 40 ms "
        "headroom to the 120 ms SLO (at most 25%); mean P99 rose 80 -> 111.5 ms, 78.8% of the 40 ms headroom to the "
        "120 ms SLO (at most 75%); the wait fell 10 ms and mean P99 rose 31.5 ms: wait + P99 did not fall: the wait "
        "only turned into run-time jitter"
    )


@pytest.mark.parametrize(
    ("windows", "status", "reason"),
    [
        pytest.param((90, 90, 90, 90, 125, 126), "continue", "80 -> 90 ms uses 25% of the 40 ms headroom to the 120 ms "
                     "SLO, sd 0% of it (2 window(s) above the SLO left to the p99_ms gate)", id="blip-above-the-slo"),
        pytest.param((82, 119, 125), "rollback", "P99 swings 82-119 ms", id="swinging-and-one-above"),
        pytest.param((121, 125), "hold", "every P99 window is above the SLO: the p99_ms gate decides", id="all-above"),
    ],
)
def test_windows_above_the_slo_are_left_to_the_p99_gate(windows, status, reason) -> None:
    trial = replace(STORY_TRIAL, p99_ms=tuple(map(float, windows)))
    result = evaluate(Observations(STORY_BASELINE, trial, source={}), STORY_THRESHOLDS).gates[-1]
    assert result.status == status
    assert reason in result.reason


def test_no_headroom_holds() -> None:
    baseline = replace(STORY_BASELINE, p99_ms=(120.0,))
    result = evaluate(Observations(baseline, STORY_TRIAL, source={}), STORY_THRESHOLDS).gates[-1]
    assert result.status == "hold"
    assert "the baseline's P99 120 ms is not below the 120 ms SLO: no headroom" in result.reason


@pytest.mark.parametrize(
    ("thresholds", "status"),
    [
        pytest.param({"jitter_max_headroom_used": 0.3}, "rollback", id="tighter-headroom"),
        pytest.param({"jitter_max_spread": 0.04}, "rollback", id="tighter-spread"),
        pytest.param({"jitter_max_headroom_used": 0.32, "jitter_max_spread": 0.05}, "continue", id="just-loose-enough"),
    ],
)
def test_jitter_thresholds_are_the_operators(thresholds, status) -> None:
    result = evaluate(Observations(STORY_BASELINE, STORY_TRIAL, source={}), replace(STORY_THRESHOLDS, **thresholds))
    assert result.gates[-1].status == status


def test_jitter_observations() -> None:
    result = evaluate(Observations(STORY_BASELINE, STORY_TRIAL, source={}), STORY_THRESHOLDS).gates[-1]
    assert result.observed == {"baseline": 305.0, "trial": 180.0, "baseline_p99_ms": 80.0, "trial_p99_ms": 92.5,
                               "headroom_used": 0.3125, "p99_spread": pytest.approx(0.0427, abs=1e-4)}


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


# Issue 31: data shaped as real clusters produce it.
def test_no_queue_before_or_during_is_nothing_to_shorten() -> None:
    """Twice the work per GPU, P99 85 ms of a 120 ms SLO, no failure, and no queue at all (0 s on
    both sides, as most services are not queue-bound): the trial continues."""
    baseline = side(throughput_per_gpu=20.0, p99_ms=(80.0,), queue_time_s=(0.0,))
    trial = side(throughput_per_gpu=40.0, p99_ms=(85.0,) * 12, queue_time_s=(0.0,) * 12, correlated_failures=0.0)
    report = evaluate(Observations(baseline, trial, source={}), STORY_THRESHOLDS)
    queue = report.gates[-1]
    assert (report.verdict, report.exit_code, queue.status) == ("continue", 0, "continue")
    assert queue.reason == "no queue to shorten: 0 s -> 0 s, at most 0.01 s on both sides (latency is the p99_ms gate's)"


@pytest.mark.parametrize(
    ("base", "now", "status", "reason"),
    [
        pytest.param(0.01, 0.01, "continue", "no queue to shorten", id="both-exactly-at-the-threshold"),
        pytest.param(0.0, 2.0, "rollback", "queue time not falling: 0 s -> 2 s", id="a-queue-appears"),
        pytest.param(0.0, 0.011, "rollback", "not falling", id="a-queue-just-above-the-threshold"),
        pytest.param(2.0, 0.0, "continue", "queue time falling (2 s -> 0 s); mean P99", id="the-queue-goes"),
        pytest.param(30.0, 30.0, "rollback", "not falling: 30 s -> 30 s", id="a-queue-that-stays"),
    ],
)
def test_no_queue_threshold(base, now, status, reason) -> None:
    result = gate("queue_time_s", {"queue_time_s": (now,)}, {"queue_time_s": (base,)})
    assert (result.status, result.reason.startswith(reason) or reason in result.reason) == (status, True), result.reason


def test_jitter_still_applies_when_there_is_a_queue() -> None:
    trial = replace(STORY_TRIAL, p99_ms=(82.0, 119.0, 85.0, 117.0, 83.0, 119.0))
    result = evaluate(Observations(STORY_BASELINE, trial, source={}), replace(STORY_THRESHOLDS, no_queue_s=1.0))
    assert (result.gates[-1].status, "P99 swings 82-119 ms" in result.gates[-1].reason) == ("rollback", True)


@pytest.mark.parametrize(
    ("windows", "status", "reason"),
    [
        pytest.param((None,) * 9 + (300.0,) * 3, "hold",
                     "P99 has data in only 3 of 12 windows (25%, min_window_coverage 90%): the trial's latency is not "
                     "covered", id="three-of-twelve"),
        pytest.param((None,) + (300.0,) * 9, "continue", "within the SLO in all 9 windows with data (1 of 10 windows "
                     "without data)", id="exactly-at-the-coverage"),
        pytest.param((None, None) + (300.0,) * 9, "hold", "9 of 11 windows (81.8%", id="just-below-the-coverage"),
        pytest.param((600.0, None, 600.0, None, None, 600.0), "rollback", "for 3 consecutive windows (3 of 6 windows "
                     "without data)", id="breaches-across-gaps-still-roll-back"),
        pytest.param((None, None, None), "hold", "no trial data", id="no-window-with-data"),
    ],
)
def test_p99_windows_without_data_count_against_coverage(windows, status, reason) -> None:
    gaps = {"p99_ms": "no series"} if all(value is None for value in windows) else {}
    result = gate("p99_ms", {"p99_ms": windows if gaps == {} else (), "gaps": gaps})
    assert result.status == status
    assert reason in result.reason


def test_queue_windows_without_data_count_against_coverage() -> None:
    result = gate("queue_time_s", {"queue_time_s": (10.0, None, None)})
    assert result.status == "hold"
    assert result.reason.startswith("queue time has data in only 1 of 3 windows (33.3%")


@pytest.mark.parametrize(("required", "status", "reason"), [
    (True, "hold", "no trial data: queries.xid_errors returned no series"),
    (False, "continue", "not judged: the thresholds say Xid errors are not collected (xid_required: false); no trial "
                        "data: queries.xid_errors returned no series"),
])
def test_no_xid_series_is_not_no_xid(required, status, reason) -> None:
    result = gate("xid_errors", {"xid_errors": None, "gaps": {"xid_errors": "queries.xid_errors returned no series"}},
                  xid_required=required)
    assert (result.status, result.reason) == (status, reason)


def test_xid_required_false_still_judges_xid_errors_it_gets() -> None:
    assert gate("xid_errors", {"xid_errors": 1.0}, xid_required=False).status == "rollback"


@pytest.mark.parametrize(
    ("peak", "margin", "status", "reason"),
    [
        pytest.param(61.0, 0.2, "continue", "every card's memory peak within 80% (highest 61%)", id="within"),
        pytest.param(80.0, 0.2, "continue", "within 80%", id="exactly-at-the-ceiling"),
        pytest.param(80.01, 0.2, "rollback", "a card's memory peaked at 80.01% during the trial, above the 80% "
                     "ceiling: no room left for model loads and burst batches, roll back before OOM kills start",
                     id="just-above-the-ceiling"),
        pytest.param(75.0, 0.3, "rollback", "above the 70% ceiling", id="the-baseline-margin"),
        pytest.param(None, 0.2, "hold", "no trial data: queries.fb_peak_pct returned no series", id="no-data"),
    ],
)
def test_memory_headroom_gate(peak, margin, status, reason) -> None:
    gaps = {"fb_peak_pct": "queries.fb_peak_pct returned no series"} if peak is None else {}
    result = gate("memory_headroom", {"fb_peak_pct": peak, "gaps": gaps}, fb_margin=margin)
    assert (result.status, result.observed["trial_peak_pct"]) == (status, peak)
    assert reason in result.reason


def test_memory_headroom_says_when_reserved_was_not_exported() -> None:
    result = gate("memory_headroom", {"fb_peak_pct": 50.0, "fb_no_reserved": 2.0})
    assert result.reason.endswith("; memory of 2 card(s) counted as used + free: the exporter does not export "
                                  "DCGM_FI_DEV_FB_RESERVED")
    assert result.observed["cards_without_reserved"] == 2.0


@pytest.mark.parametrize(
    ("scope", "reason"),
    [
        ("card", "failures correlated on the same card: 1"),
        ("node", "failures correlated on the same node: 1 (the exporter does not map shared pods to cards, so pods "
                 "on one node count together; KUBERNETES_VIRTUAL_GPUS=true on dcgm-exporter maps them per card)"),
        (None, "failures correlated on the same card: 1"),
    ],
)
def test_correlated_failures_say_what_they_share(scope, reason) -> None:
    result = gate("correlated_failures", {"correlated_failures": 1.0, "correlated_scope": scope})
    assert (result.status, result.reason, result.observed["scope"]) == ("rollback", reason, scope or "metrics file")


def nodes_report(trial_nodes, baseline_nodes, gaps=None):
    observations = Observations(replace(BASELINE, dcgm_nodes=baseline_nodes, gaps=gaps or {}),
                                replace(TRIAL, dcgm_nodes=trial_nodes, gaps=gaps or {}), source={}, nodes=("a", "b"))
    return evaluate(observations, THRESHOLDS)


def test_every_node_asked_needs_dcgm_series() -> None:
    report = nodes_report(("a",), ("a", "b"))
    first = report.gates[0]
    assert (first.name, first.status, report.verdict, report.exit_code) == ("dcgm_nodes", "hold", "hold", 4)
    assert first.reason.startswith("no DCGM series for b (in the trial) (Hostname / hostname label)")
    both = nodes_report((), ()).gates[0].reason
    assert both.startswith("no DCGM series for a (in the trial and the baseline), b (in the trial and the baseline)")
    assert nodes_report(("a", "b"), ("a", "b")).gates[0].status == "continue"
    unread = nodes_report(None, ("a", "b"), {"dcgm_nodes": "queries.dcgm_nodes: Prometheus answered HTTP 400"})
    assert unread.gates[0].reason == "no trial data: queries.dcgm_nodes: Prometheus answered HTTP 400"


PILOT = "GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51"
OTHER = "GPU-00000000-3f4a-7c3e-2a1f-0c6ad2a11e51"


def uuids_report(trial_uuids, baseline_uuids, asked=(PILOT,)):
    observations = Observations(replace(BASELINE, dcgm_uuids=baseline_uuids), replace(TRIAL, dcgm_uuids=trial_uuids),
                                source={}, uuids=asked)
    return evaluate(observations, THRESHOLDS)


def test_a_card_asked_for_without_dcgm_series_holds_and_is_named() -> None:
    """--uuid of a well-formed UUID that has no series: the gates hold, naming the card and what to check."""
    report = uuids_report((), (OTHER,))
    first = report.gates[0]
    assert (first.name, first.status, report.verdict, report.exit_code) == ("dcgm_uuids", "hold", "hold", 4)
    assert first.reason.startswith(f"no DCGM series for {PILOT} (in the trial and the baseline) (UUID label): is the "
                                   "DCGM exporter running and scraped on the node of that card, and is it the UUID of "
                                   "the card the claim got"), first.reason
    two = uuids_report((PILOT,), (PILOT,), asked=(PILOT, OTHER)).gates[0]
    assert two.reason.startswith(f"no DCGM series for {OTHER} (in the trial and the baseline)"), two.reason
    assert PILOT not in two.reason.split("(UUID label)")[0]
    assert uuids_report((PILOT,), (PILOT,)).gates[0].reason == f"DCGM series for every card asked: {PILOT}"
    assert "dcgm_uuids" not in [g.name for g in evaluate(Observations(BASELINE, TRIAL, source={}), THRESHOLDS).gates]


def test_gates_that_are_measured_appear_in_order() -> None:
    trial = replace(TRIAL, correlated_failures=0.0, correlated_scope="card", fb_peak_pct=50.0, dcgm_nodes=("a", "b"))
    report = evaluate(Observations(replace(BASELINE, dcgm_nodes=("a", "b")), trial, source={}, nodes=("a", "b")),
                      THRESHOLDS)
    assert [result.name for result in report.gates] == [
        "dcgm_nodes", "throughput_per_gpu", "p99_ms", "oom_kills", "restarts", "correlated_failures",
        "memory_headroom", "xid_errors", "queue_time_s"]
    assert report.verdict == "continue"
