"""The verdict per GPU, in the seed's terms.

A sharing candidate needs, at once: a stable compute gap (sustained 1 h averages, not a sample),
a memory peak that leaves headroom for model loads and burst batches, retryable work, tolerance
for tail-latency jitter, and pods that can be tied to the GPU. Core online inference, long
training and jobs without checkpoints are not first candidates; neither is a card with Xid errors.

Order of the rules:
1. What more data cannot change - an Xid seen, a memory peak over the ceiling, workload facts
   that rule sharing out - makes the GPU `not-candidate` at once.
2. Otherwise data that cannot decide (a short or gappy history of utilisation or of memory, unknown
   memory size, no Xid series, pods without facts, no pod mapping) makes it `insufficient-data`.
   Missing data is never read as zero: no DCGM_FI_DEV_XID_ERRORS series is not "no Xid" unless the
   thresholds say the exporter does not collect it (xid_required: false).
3. Otherwise no stable compute gap, no room for a second copy, or no workload at all makes it
   `not-candidate`; else it is a `candidate`.
Recommended replicas: copies of the observed memory peak that fit under the ceiling, capped by the
compute gap (target_util_pct / 1 h p95) and by max_replicas; 1 (whole card) for not-candidate, none for
insufficient-data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpushare.baseline.coverage import busy_hours_of_day, coverage, quantile
from gpushare.baseline.model import (
    CANDIDATE, INSUFFICIENT, MIN_REPLICAS, NOT_CANDIDATE, Coverage, GpuKey, GpuSeries, GpuVerdict, Thresholds,
    WorkloadFacts, duration,
)
from gpushare.baseline.mode import recommend
from gpushare.baseline.workloads import match
from gpushare.prometheus.timespec import format_time


@dataclass
class _Findings:
    definitive: list[str] = field(default_factory=list)
    insufficient: list[str] = field(default_factory=list)
    blocking: list[str] = field(default_factory=list)
    support: list[str] = field(default_factory=list)


def judge(series: GpuSeries, thresholds: Thresholds, facts: list[WorkloadFacts], end: int, window_s: int,
          pods_mapped: bool) -> GpuVerdict:
    """The verdict of one GPU. `pods_mapped`: some series of the fleet carry pod labels."""
    found = _Findings()
    cov = coverage(series.util_1h, end, window_s)
    utils = list(series.util_1h.values())
    p50 = quantile(utils, 0.5) if utils else None
    p95 = quantile(utils, 0.95) if utils else None
    idle = sum(v <= thresholds.gap_util_pct for v in utils) / len(utils) if utils else None
    copies = list(series.mem_copy_1h.values())
    copy_p95 = quantile(copies, 0.95) if copies else None
    fb_peak = max(series.fb_used_1h.values()) if series.fb_used_1h else None

    _xid(series, thresholds, found)
    by_compute = _compute(series, utils, p50, p95, idle, copy_p95, thresholds, found)
    _coverage(cov, utils, thresholds, found)
    if series.fb_used_1h and set(series.fb_used_1h) != set(series.util_1h):
        # Memory read in other hours than utilisation: its own coverage, by the same rules.
        _coverage(coverage(series.fb_used_1h, end, window_s), list(series.fb_used_1h.values()), thresholds, found,
                  _MEMORY_DATA)
    by_memory = _memory(series, fb_peak, end, thresholds, found)
    owners = _workloads(series, facts, pods_mapped, found)
    if found.definitive:
        verdict, reasons = NOT_CANDIDATE, found.definitive + ([] if found.insufficient else found.blocking)
    elif found.insufficient:
        verdict, reasons = INSUFFICIENT, found.insufficient
    elif found.blocking:
        verdict, reasons = NOT_CANDIDATE, found.blocking
    else:
        verdict, reasons = CANDIDATE, found.support
    replicas: int | None = {NOT_CANDIDATE: 1, INSUFFICIENT: None}.get(verdict)
    mode = None
    if verdict == CANDIDATE:
        limits = {"memory": by_memory, "the compute gap": by_compute, "max_replicas": thresholds.max_replicas}
        replicas = min(v for v in limits.values() if v is not None)
        reasons.append(f"{replicas} replicas: " + ", ".join(
            f"{name} allows {'any' if value is None else value}" for name, value in limits.items()))
        mode = recommend(replicas, fb_peak, series.fb_total_mib, len(owners), series.model)
    return GpuVerdict(
        series=series, coverage=cov, util_1h_p50=_round(p50), util_1h_p95=_round(p95),
        idle_share=_round(idle, 3), mem_copy_1h_p95=_round(copy_p95),
        mem_copy_peak_pct=_round(max(copies)) if copies else None, fb_peak_mib=fb_peak,
        replicas_by_memory=by_memory, replicas_by_compute=by_compute, verdict=verdict, reasons=reasons,
        recommended_replicas=replicas, owners=owners,
        mode=mode.mode if mode else None, mode_reason=mode.reason if mode else "",
    )


def absent(key: GpuKey, reason: str, end: int, window_s: int) -> GpuVerdict:
    """A GPU (or a whole node) that was asked for but has no series in the window."""
    return GpuVerdict(
        series=GpuSeries(key), coverage=coverage({}, end, window_s), util_1h_p50=None, util_1h_p95=None,
        idle_share=None, mem_copy_1h_p95=None, mem_copy_peak_pct=None, fb_peak_mib=None, replicas_by_memory=None,
        replicas_by_compute=None, verdict=INSUFFICIENT, reasons=[reason], recommended_replicas=None, owners=[],
        absent=True,
    )


def daily_peaks(hourly: dict[int, float], end: int) -> dict[int, float]:
    """The peak of each 24 h ending at end, end - 1 d, ... (the seed's max_over_time(...[24h])), from
    hourly peaks named by their hour's end; days without data are left out."""
    days: dict[int, float] = {}
    for stamp, value in hourly.items():
        day = end - (end - stamp) // 86400 * 86400
        days[day] = max(days.get(day, value), value)
    return days


def _xid(series: GpuSeries, thresholds: Thresholds, found: _Findings) -> None:
    if series.xid:
        found.definitive.append(f"GPU Xid error {series.xid} reported in the window: check the card "
                                "(nvidia-smi -q, kernel log) before sharing its fault domain")
    elif series.xid is None and thresholds.xid_required:
        found.insufficient.append(
            "no DCGM_FI_DEV_XID_ERRORS series in the window: Xid errors are unknown, not absent (if the exporter "
            "does not collect them, say so with xid_required: false)")
    elif series.xid is None:
        found.support.append("Xid errors not judged: the thresholds say the exporter does not collect them "
                             "(xid_required: false)")


def _memory(series: GpuSeries, fb_peak: float | None, end: int, thresholds: Thresholds,
            found: _Findings) -> int | None:
    """Copies of the memory peak that fit under the ceiling (None: any number, nothing is used)."""
    total = series.fb_total_mib
    if fb_peak is None:
        found.insufficient.append("no DCGM_FI_DEV_FB_USED series in the window: the memory peak is unknown")
        return None
    if not total:
        found.insufficient.append("no DCGM_FI_DEV_FB_FREE series in the window: the card's memory size is unknown "
                                  "(it is read as used + free, + reserved where exported)")
        return None
    ceiling = total * (1 - thresholds.fb_margin)
    keep = f"{100 * (1 - thresholds.fb_margin):.0f}%"
    of_card = f"of {total:.0f} MiB" + ("" if series.fb_reserved_mib is not None else
                                       " (used + free: the exporter does not export DCGM_FI_DEV_FB_RESERVED)")
    daily = daily_peaks(series.fb_used_1h, end)
    peak_day = max(daily, key=daily.get)
    if fb_peak > ceiling:
        found.definitive.append(
            f"memory peak leaves no headroom: {fb_peak:.0f} {of_card} ({100 * fb_peak / total:.0f}%) "
            f"in the 24 h to {format_time(peak_day)}, above the {keep} that keeps room for model loads and burst batches")
        return 1
    copies = math.floor(ceiling / fb_peak) if fb_peak > 0 else None
    if copies is not None and copies < MIN_REPLICAS:
        found.definitive.append(
            f"memory peak leaves no headroom for a second copy: 2 x {fb_peak:.0f} MiB > {ceiling:.0f} MiB "
            f"({keep} {of_card})")
    else:
        room = "any number of copies" if copies is None else f"{copies} copies"
        found.support.append(
            f"memory peak {fb_peak:.0f} {of_card} ({100 * fb_peak / total:.0f}%) leaves room for {room} "
            f"within {keep}")
    return copies


def _workloads(series: GpuSeries, facts: list[WorkloadFacts], pods_mapped: bool, found: _Findings) -> list[str]:
    if not pods_mapped:
        found.insufficient.append("cannot correlate pod and GPU: no DCGM series carries pod labels "
                                  "(turn on the exporter's Kubernetes mapping)")
        return []
    if not series.workloads:
        found.blocking.append("no workload ran on it in the window: the waste is in allocation, not in sharing "
                              "- fix requests and queueing first")
        return []
    owners, fine = set(), []
    for workload in series.workloads:
        fact = match(facts, workload)
        where = f"{workload.namespace}/{workload.pod}"
        if fact is None:
            found.insufficient.append(
                f"no workload facts for {where}: record in baseline_workloads whether it is retryable, "
                "checkpointed and latency-critical")
            continue
        if fact.owner:
            owners.add(fact.owner)
        if not fact.retryable:
            found.definitive.append(f"{where}: not retryable - a single failure could corrupt data")
        if fact.latency_critical:
            found.definitive.append(f"{where}: latency-critical (core online inference) - cannot take tail-latency jitter")
        if not fact.checkpointed:
            found.definitive.append(f"{where}: no checkpoints - long training without checkpoints is not a first candidate")
        if fact.retryable and fact.checkpointed and not fact.latency_critical:
            fine.append(where + (f" (owner {fact.owner})" if fact.owner else ""))
    if fine:
        found.support.append("retryable, checkpointed, not latency-critical, pods tied to the GPU: " + ", ".join(fine))
    return sorted(owners)


@dataclass(frozen=True)
class _Data:
    """How the coverage reasons name the data they judge."""

    data: str
    samples: str
    covered: str


_UTIL_DATA = _Data("data", "samples", "hours covered")
_MEMORY_DATA = _Data("memory data (DCGM_FI_DEV_FB_USED)", "memory samples (DCGM_FI_DEV_FB_USED)",
                     "hours of memory data (DCGM_FI_DEV_FB_USED) covered")


def _coverage(cov: Coverage, values: list[float], thresholds: Thresholds, found: _Findings,
              named: _Data = _UTIL_DATA) -> None:
    if not values:
        found.insufficient.append("no utilisation series in the window (DCGM_FI_DEV_GPU_UTIL; "
                                  "DCGM_FI_PROF_GR_ENGINE_ACTIVE on MIG instances)")
        return
    need, before = duration(thresholds.min_history_s), len(found.insufficient)
    if cov.leading_h * 3600 > thresholds.max_gap_s:
        days = (cov.last - cov.first + 3600) / 86400
        found.insufficient.append(
            f"only {days:.1f} days of {named.data} (since {format_time(cov.first)}): the seed asks for at least "
            f"{need} that cover releases, traffic peaks and training checkpoints")
    if cov.trailing_h * 3600 > thresholds.max_gap_s:
        found.insufficient.append(f"no {named.data} for the last {cov.trailing_h} h (since {format_time(cov.last)}): "
                                  "is the exporter still scraped?")
    if cov.longest_gap_h * 3600 > thresholds.max_gap_s:
        found.insufficient.append(
            f"a {cov.longest_gap_h} h gap in the {named.data} from {format_time(cov.gap_start)} "
            f"(longer than max_gap {duration(thresholds.max_gap_s)}): the window is not covered")
    if cov.share < thresholds.min_coverage and len(found.insufficient) == before:
        found.insufficient.append(f"{named.samples} in only {100 * cov.share:.1f}% of the hours "
                                  f"(min_coverage {100 * thresholds.min_coverage:.0f}%)")
    if len(found.insufficient) == before:
        found.support.append(f"{cov.hours} of {cov.expected_hours} {named.covered}")


def _compute(series: GpuSeries, utils: list[float], p50: float | None, p95: float | None, idle: float | None,
             copy_peak: float | None, thresholds: Thresholds, found: _Findings) -> int | None:
    if not utils or p95 is None or idle is None:
        return None
    gap = f"{thresholds.gap_util_pct:g}%"
    daily = busy_hours_of_day(series.util_1h, thresholds.gap_util_pct)
    # A daily peak worth naming: busy hours that recur, on at most half of the day.
    peak = f"; busy daily {_hours(daily)} UTC, a peak to plan around" if 0 < len(daily) <= 12 else ""
    if idle < thresholds.min_idle_share:
        found.blocking.append(
            f"no stable compute gap: {100 * (1 - idle):.0f}% of hours above {gap} (at most "
            f"{100 * (1 - thresholds.min_idle_share):.0f}% allowed; 1 h p50 {p50:.0f}%, p95 {p95:.0f}%){peak}")
    copies = math.floor(thresholds.target_util_pct / max(p95, 1.0))
    if copies < MIN_REPLICAS and idle >= thresholds.min_idle_share:
        found.blocking.append(
            f"the compute gap leaves no room for a second copy: 1 h p95 {p95:.0f}% against the "
            f"{thresholds.target_util_pct:g}% target")
    if idle >= thresholds.min_idle_share and copies >= MIN_REPLICAS:
        # Memory-copy peaks are context (a one-minute burst peaks an hour), not a sustained load.
        bandwidth = f"; memory-copy 1 h peaks p95 {copy_peak:.0f}%" if copy_peak is not None else ""
        found.support.append(f"stable compute gap: {100 * idle:.0f}% of hours at or below {gap} "
                             f"(1 h p50 {p50:.0f}%, p95 {p95:.0f}%){bandwidth}{peak}")
    return copies


def _hours(hours: list[int]) -> str:
    """[1, 2, 3, 4, 9] -> '01:00-05:00, 09:00-10:00'."""
    spans, start = [], hours[0]
    for before, after in zip(hours, hours[1:] + [None]):
        if after != before + 1:
            spans.append(f"{start:02d}:00-{(before + 1) % 24:02d}:00")
            start = after
    return ", ".join(spans)


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)
