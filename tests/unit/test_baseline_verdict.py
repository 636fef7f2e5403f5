"""The baseline's verdict rules, at their boundaries: compute gap, memory headroom, Xid, coverage,
workload facts, and the recommended replica count."""

from __future__ import annotations

import pytest

from gpushare.baseline.model import GpuKey, GpuSeries, Thresholds, Workload, WorkloadFacts
from gpushare.baseline.verdict import absent, daily_peaks, judge

END = 1704672000  # 2024-01-08T00:00:00Z
WEEK = 7 * 86400
HOURS = [END - k * 3600 for k in range(167, -1, -1)]
DAYS = [END - k * 86400 for k in range(6, -1, -1)]
TOTAL, RESERVED = 81559, 571
FACTS = [WorkloadFacts(retryable=True, checkpointed=True, latency_critical=False, owner="team", namespace="ml")]
POD = Workload("ml", "job-1")


def series(util: float | list[float] = 10.0, fb_peak: float = 8000.0, total: float | None = TOTAL, xid: int | None = 0,
           hours: list[int] = HOURS, workloads: list[Workload] | None = None, mem_copy: float = 5.0,
           reserved: float | None = RESERVED, fb_hours: list[int] | None = None) -> GpuSeries:
    """One GPU's week: `total` = used + free + reserved (reserved None: not exported); the memory
    read in `fb_hours` (default: the utilisation's hours)."""
    values = util if isinstance(util, list) else [util] * len(hours)
    return GpuSeries(
        GpuKey("node-a", "0", "GPU-a"), model="NVIDIA H100 80GB HBM3", util_1h=dict(zip(hours, values)),
        mem_copy_1h={t: mem_copy for t in hours}, fb_used_1h={t: fb_peak for t in (hours if fb_hours is None else fb_hours)},
        fb_used_free_mib=None if total is None else total - (reserved or 0), fb_reserved_mib=reserved,
        xid=xid, workloads=[POD] if workloads is None else workloads,
    )


def verdict_of(s: GpuSeries, thresholds: Thresholds = Thresholds(), facts=FACTS, pods_mapped: bool = True):
    return judge(s, thresholds, facts, END, WEEK, pods_mapped)


def test_steady_idle_small_memory_is_a_candidate_capped_by_max_replicas() -> None:
    v = verdict_of(series(util=10.0, fb_peak=8000.0))
    assert (v.verdict, v.recommended_replicas) == ("candidate", 4)
    assert (v.replicas_by_memory, v.replicas_by_compute) == (8, 8)  # 0.8 * 81559 / 8000; 80 / 10
    assert v.reasons[0].startswith("stable compute gap: 100% of hours at or below 30%")
    assert v.reasons[-1] == "4 replicas: memory allows 8, the compute gap allows 8, max_replicas allows 4"


@pytest.mark.parametrize(("fb_peak", "verdict", "replicas"), [
    (0.8 * TOTAL, "not-candidate", 1),  # exactly the ceiling: one copy fits, not two
    (0.8 * TOTAL / 2, "candidate", 2),  # two copies exactly at the ceiling
    (0.8 * TOTAL / 2 + 1, "not-candidate", 1),
    (0.8 * TOTAL / 3, "candidate", 3),
])
def test_memory_copies_at_the_ceiling(fb_peak, verdict, replicas) -> None:
    v = verdict_of(series(util=5.0, fb_peak=fb_peak))
    assert (v.verdict, v.recommended_replicas) == (verdict, replicas), v.reasons


def test_memory_peak_above_the_ceiling_leaves_no_headroom() -> None:
    v = verdict_of(series(util=5.0, fb_peak=0.8 * TOTAL + 1))
    assert v.verdict == "not-candidate"
    assert v.reasons[0].startswith("memory peak leaves no headroom: 65248 of 81559 MiB (80%)")


def test_memory_peak_over_a_short_history_is_already_decisive() -> None:
    """More data can only raise a peak: a card full during checkpoints is not a candidate, even early."""
    v = verdict_of(series(util=5.0, fb_peak=0.97 * TOTAL, hours=HOURS[-72:]))
    assert v.verdict == "not-candidate"
    assert v.reasons[0].startswith("memory peak leaves no headroom")


@pytest.mark.parametrize(("busy_hours", "verdict"), [(16, "candidate"), (17, "not-candidate")])
def test_idle_share_boundary(busy_hours, verdict) -> None:
    """90% of 168 hours idle is 151.2: 16 busy hours keep 152 idle (90.5%), 17 leave 151 (89.9%).
    The busy hours at 35% leave room for two copies (80 / 35), so only the idle share decides."""
    util = [35.0] * busy_hours + [30.0] * (168 - busy_hours)  # 30% is still idle enough (at or below)
    v = verdict_of(series(util=util, fb_peak=4000.0))
    assert v.verdict == verdict, v.reasons
    if verdict == "not-candidate":
        assert v.reasons == ["no stable compute gap: 10% of hours above 30% (at most 10% allowed; 1 h p50 30%, "
                             "p95 35%)"]


def test_compute_cap_from_the_1h_p95() -> None:
    v = verdict_of(series(util=27.0, fb_peak=4000.0))
    assert (v.replicas_by_compute, v.recommended_replicas) == (2, 2)  # floor(80 / 27)
    v = verdict_of(series(util=26.0, fb_peak=4000.0))
    assert (v.replicas_by_compute, v.recommended_replicas) == (3, 3)


def test_compute_gap_with_no_room_for_a_second_copy() -> None:
    """p95 of 41% is below no idle threshold of 45% but 80 / 41 < 2."""
    v = verdict_of(series(util=41.0, fb_peak=4000.0), Thresholds(gap_util_pct=45))
    assert v.verdict == "not-candidate"
    assert v.reasons == ["the compute gap leaves no room for a second copy: 1 h p95 41% against the 80% target"]


def test_memory_copy_peaks_are_context_not_load() -> None:
    v = verdict_of(series(util=10.0, fb_peak=4000.0, mem_copy=60.0))
    assert (v.replicas_by_compute, v.mem_copy_1h_p95) == (8, 60.0)
    assert "memory-copy 1 h peaks p95 60%" in v.reasons[0]


def test_daily_peak_is_named() -> None:
    """Busy four hours a day (1:00-5:00 UTC): 17% of hours busy, no stable gap; the peak is named."""
    util = [90.0 if 1 <= ((t - 1800) % 86400) // 3600 < 5 else 5.0 for t in HOURS]
    v = verdict_of(series(util=util))
    assert v.verdict == "not-candidate"
    assert "busy daily 01:00-05:00 UTC" in v.reasons[0], v.reasons


def test_an_xid_error_rules_the_card_out() -> None:
    v = verdict_of(series(xid=79))
    assert (v.verdict, v.recommended_replicas) == ("not-candidate", 1)
    assert v.reasons[0].startswith("GPU Xid error 79 reported in the window")


@pytest.mark.parametrize(("hours", "message"), [
    (HOURS[-72:], "only 3.0 days of data (since 2024-01-05T01:00:00Z)"),
    (HOURS[:-7], "no data for the last 7 h"),
    (HOURS[:80] + HOURS[87:], "a 7 h gap in the data from"),
])
def test_history_longer_than_max_gap_is_insufficient(hours, message) -> None:
    v = verdict_of(series(hours=hours))
    assert (v.verdict, v.recommended_replicas) == ("insufficient-data", None)
    assert any(message in reason for reason in v.reasons), v.reasons


@pytest.mark.parametrize("hours", [HOURS[6:], HOURS[:-6], HOURS[:80] + HOURS[86:]], ids=["lead", "trail", "inside"])
def test_a_gap_of_exactly_max_gap_is_still_covered(hours) -> None:
    assert verdict_of(series(hours=hours)).verdict == "candidate"


def test_min_coverage() -> None:
    sparse = [t for i, t in enumerate(HOURS) if i % 20]  # 159 of 168 hours (94.6%), gaps of one hour
    assert verdict_of(series(hours=sparse)).verdict == "candidate"
    v = verdict_of(series(hours=sparse), Thresholds(min_coverage=0.95))
    assert v.verdict == "insufficient-data"
    assert v.reasons == ["samples in only 94.6% of the hours (min_coverage 95%)"]


@pytest.mark.parametrize(("facts", "verdict", "reason"), [
    ([], "insufficient-data", "no workload facts for ml/job-1"),
    ([WorkloadFacts(False, True, False, namespace="ml")], "not-candidate", "ml/job-1: not retryable"),
    ([WorkloadFacts(True, False, False, namespace="ml")], "not-candidate", "ml/job-1: no checkpoints"),
    ([WorkloadFacts(True, True, True, namespace="ml")], "not-candidate", "ml/job-1: latency-critical"),
])
def test_workload_facts_feed_the_verdict(facts, verdict, reason) -> None:
    v = verdict_of(series(), facts=facts)
    assert v.verdict == verdict
    assert any(r.startswith(reason) for r in v.reasons), v.reasons


def test_facts_rule_out_even_with_short_history() -> None:
    v = verdict_of(series(hours=HOURS[-48:]), facts=[WorkloadFacts(True, True, True, namespace="ml")])
    assert v.verdict == "not-candidate"


def test_every_workload_on_the_card_must_qualify() -> None:
    pods = [POD, Workload("serving", "api-1")]
    facts = FACTS + [WorkloadFacts(False, True, True, owner="web", namespace="serving")]
    v = verdict_of(series(workloads=pods), facts=facts)
    assert v.verdict == "not-candidate"
    assert v.owners == ["team", "web"]


def test_no_workload_at_all_is_not_a_sharing_problem() -> None:
    v = verdict_of(series(workloads=[]))
    assert v.verdict == "not-candidate"
    assert v.reasons[0].startswith("no workload ran on it in the window")


def test_no_pod_mapping_anywhere_is_insufficient() -> None:
    v = verdict_of(series(workloads=[]), pods_mapped=False)
    assert v.verdict == "insufficient-data"
    assert v.reasons[0].startswith("cannot correlate pod and GPU")


def test_unknown_memory_size_is_insufficient() -> None:
    v = verdict_of(series(total=None))
    assert v.verdict == "insufficient-data"
    assert v.reasons == ["no DCGM_FI_DEV_FB_FREE series in the window: the card's memory size is unknown (it is read "
                         "as used + free, + reserved where exported)"]


def test_without_fb_reserved_the_card_is_sized_by_used_plus_free() -> None:
    """An exporter before 4.3.1-4.4.0 (or a custom counters file) has no DCGM_FI_DEV_FB_RESERVED:
    the card is used + free, and the report says so."""
    v = verdict_of(series(fb_peak=8000.0, total=TOTAL - RESERVED, reserved=None))
    assert (v.verdict, v.recommended_replicas, v.series.fb_total_mib) == ("candidate", 4, TOTAL - RESERVED)
    assert ("memory peak 8000 of 80988 MiB (used + free: the exporter does not export DCGM_FI_DEV_FB_RESERVED) (10%) "
            "leaves room for 8 copies within 80%") in v.reasons
    full = verdict_of(series(fb_peak=0.9 * TOTAL, total=TOTAL - RESERVED, reserved=None))
    assert full.reasons[0].startswith("memory peak leaves no headroom: 73403 of 80988 MiB (used + free: the exporter "
                                      "does not export DCGM_FI_DEV_FB_RESERVED) (91%)")


@pytest.mark.parametrize(("required", "verdict", "reason"), [
    (True, "insufficient-data", "no DCGM_FI_DEV_XID_ERRORS series in the window: Xid errors are unknown, not absent "
                                "(if the exporter does not collect them, say so with xid_required: false)"),
    (False, "candidate", "Xid errors not judged: the thresholds say the exporter does not collect them "
                         "(xid_required: false)"),
])
def test_no_xid_series_is_not_no_xid(required, verdict, reason) -> None:
    v = verdict_of(series(xid=None), Thresholds(xid_required=required))
    assert v.verdict == verdict
    assert reason in v.reasons


@pytest.mark.parametrize(("fb_hours", "message"), [
    (HOURS[-24:], "only 1.0 days of memory data (DCGM_FI_DEV_FB_USED) (since 2024-01-07T01:00:00Z): the seed asks for "
                  "at least 7d"),
    (HOURS[:-12], "no memory data (DCGM_FI_DEV_FB_USED) for the last 12 h"),
    (HOURS[:40] + HOURS[60:], "a 20 h gap in the memory data (DCGM_FI_DEV_FB_USED) from"),
    ([t for i, t in enumerate(HOURS) if i % 6], "memory samples (DCGM_FI_DEV_FB_USED) in only 83.3% of the hours "
                                                "(min_coverage 90%)"),
])
def test_memory_coverage_is_judged_like_utilisation(fb_hours, message) -> None:
    """A week of utilisation with one day of memory data is not a week of data."""
    v = verdict_of(series(fb_hours=fb_hours))
    assert (v.verdict, v.recommended_replicas) == ("insufficient-data", None)
    assert any(reason.startswith(message) for reason in v.reasons), v.reasons


def test_memory_covered_in_other_hours_than_utilisation_says_so() -> None:
    v = verdict_of(series(fb_hours=HOURS[2:]))
    assert v.verdict == "candidate"
    assert "166 of 168 hours of memory data (DCGM_FI_DEV_FB_USED) covered" in v.reasons


def test_daily_peaks_from_hourly_peaks() -> None:
    hourly = {END - 3600 * k: float(k) for k in range(48)}
    assert daily_peaks(hourly, END) == {END: 23.0, END - 86400: 47.0}
    assert daily_peaks({}, END) == {}


def test_a_gpu_asked_for_without_series_is_a_row_of_its_own() -> None:
    v = absent(GpuKey("node-b", "3", ""), "no DCGM series for GPU 3 of node node-b", END, WEEK)
    assert (v.verdict, v.recommended_replicas, v.absent, v.reasons) == (
        "insufficient-data", None, True, ["no DCGM series for GPU 3 of node node-b"])
    assert (v.coverage.hours, v.coverage.expected_hours) == (0, 168)


def test_no_utilisation_series_is_insufficient() -> None:
    v = verdict_of(series(hours=[]))
    assert (v.verdict, v.util_1h_p50) == ("insufficient-data", None)
    assert v.reasons[0].startswith("no utilisation series in the window")


def test_statistics() -> None:
    util = [float(i % 100) for i in range(168)]
    v = verdict_of(series(util=util))
    assert v.util_1h_p50 == pytest.approx(sorted(util)[83] + 0.5 * (sorted(util)[84] - sorted(util)[83]), abs=0.05)
    assert v.idle_share == pytest.approx(sum(u <= 30 for u in util) / 168, abs=0.001)


def test_a_candidate_carries_a_recommended_mode_and_others_none() -> None:
    v = verdict_of(series(util=10.0, fb_peak=8000.0))
    assert v.mode == "mps"
    assert v.mode_reason.startswith("its memory peak of 8000 MiB fits MPS's per-share limit of 20389 MiB at 4 replicas")
    assert verdict_of(series(util=95.0)).mode is None  # no compute gap: not a candidate, no mode
