"""The release gates: pure decisions from observations and thresholds, one function per gate.

A gate answers `rollback` when the trial is worse than the table allows, `hold` when the data
cannot decide yet, and `continue` otherwise. Missing data is always `hold`, never `continue`.
"""

from __future__ import annotations

import math
from statistics import fmean

from gpushare.gates.model import SEVERITY, GateResult, Observations, Report, Side, Thresholds


def evaluate(observations: Observations, thresholds: Thresholds) -> Report:
    baseline, trial = observations.baseline, observations.trial
    gates = [
        throughput_gate(baseline, trial, thresholds),
        p99_gate(trial, thresholds),
        count_gate("oom_kills", "OOM kills", baseline, trial, thresholds.max_extra_oom_kills),
        count_gate("restarts", "restarts", baseline, trial, thresholds.max_extra_restarts),
        xid_gate(baseline, trial, thresholds),
        queue_gate(baseline, trial, thresholds),
    ]
    if trial.correlated_failures is not None or "correlated_failures" in trial.gaps:
        gates.insert(4, correlated_gate(trial, thresholds))
    verdict = next(status for status in SEVERITY if any(gate.status == status for gate in gates))
    return Report(verdict=verdict, gates=tuple(gates), source=observations.source)


def throughput_gate(baseline: Side, trial: Side, thresholds: Thresholds) -> GateResult:
    name, margin = "throughput_per_gpu", thresholds.throughput_min_gain
    threshold = f"trial >= baseline +{margin:.0%}"
    base, now = baseline.throughput_per_gpu, trial.throughput_per_gpu
    observed: dict[str, object] = {"baseline": base, "trial": now, **_prefixed("trial_", trial.context)}
    if base is None or now is None:
        return GateResult(name, "hold", observed, threshold, _no_data(baseline, trial, name))
    if base == 0:
        reason = "baseline throughput is 0: no whole-card baseline to compare with"
        return GateResult(name, "hold", observed, threshold, reason)
    gain = now / base - 1
    observed["gain"] = round(gain, 6)
    change = f"{_num(now)} vs whole-card {_num(base)} per GPU ({gain:+.1%})"
    if _close(gain, 0):
        return GateResult(name, "rollback", observed, threshold, f"no gain: {change}")
    if gain < 0:
        return GateResult(name, "rollback", observed, threshold, f"lower: {change}")
    if gain > margin or _close(gain, margin):
        return GateResult(name, "continue", observed, threshold, f"gain meets the {margin:.0%} margin: {change}")
    return GateResult(name, "hold", observed, threshold, f"gain below the {margin:.0%} margin yet: {change}")


def p99_gate(trial: Side, thresholds: Thresholds) -> GateResult:
    name, slo, needed = "p99_ms", thresholds.p99_slo_ms, thresholds.p99_breach_windows
    threshold = f"<= {_num(slo)} ms; rollback after {needed} consecutive windows above"
    windows = trial.p99_ms
    observed: dict[str, object] = {"trial_windows": list(windows)}
    if not windows:
        return GateResult(name, "hold", observed, threshold, _no_data(None, trial, name))
    breaches = [value > slo for value in windows]
    run = longest_run(breaches)
    observed |= {"max": max(windows), "consecutive_above": run}
    if run >= needed:
        reason = f"above the {_num(slo)} ms SLO for {run} consecutive windows"
        return GateResult(name, "rollback", observed, threshold, reason)
    if run:
        return GateResult(
            name, "hold", observed, threshold,
            f"above the SLO in {sum(breaches)} of {len(windows)} windows, at most {run} in a row "
            f"(rollback at {needed}): watch the next windows",
        )
    return GateResult(name, "continue", observed, threshold, f"within the SLO in all {len(windows)} windows")


def count_gate(name: str, label: str, baseline: Side, trial: Side, allowed: float) -> GateResult:
    base, now = getattr(baseline, name), getattr(trial, name)
    threshold = f"trial <= baseline + {_num(allowed)}"
    observed: dict[str, object] = {"baseline": base, "trial": now}
    if base is None or now is None:
        return GateResult(name, "hold", observed, threshold, _no_data(baseline, trial, name))
    extra = now - base
    if extra > allowed and not _close(extra, allowed):
        return GateResult(name, "rollback", observed, threshold, f"{label} above baseline: {_num(now)} vs {_num(base)}")
    return GateResult(name, "continue", observed, threshold, f"{label} not above baseline: {_num(now)} vs {_num(base)}")


def correlated_gate(trial: Side, thresholds: Thresholds) -> GateResult:
    name, allowed, now = "correlated_failures", thresholds.max_correlated_failures, trial.correlated_failures
    threshold = f"<= {allowed} cards with failures in 2+ shared pods"
    observed: dict[str, object] = {"trial": now}
    if now is None:
        return GateResult(name, "hold", observed, threshold, _no_data(None, trial, name))
    if now > allowed:
        return GateResult(name, "rollback", observed, threshold, f"failures correlated on the same card: {_num(now)}")
    return GateResult(name, "continue", observed, threshold, "no failures correlated on one card")


def xid_gate(baseline: Side, trial: Side, thresholds: Thresholds) -> GateResult:
    name, allowed, now = "xid_errors", thresholds.max_new_xid, trial.xid_errors
    threshold = f"<= {allowed} new"
    observed: dict[str, object] = {"baseline": baseline.xid_errors, "trial": now}
    if now is None:
        return GateResult(name, "hold", observed, threshold, _no_data(None, trial, name))
    if now > allowed:
        reason = f"{_num(now)} new Xid error(s) during the trial: check the GPU (nvidia-smi -q, kernel log)"
        return GateResult(name, "rollback", observed, threshold, reason)
    return GateResult(name, "continue", observed, threshold, f"{_num(now)} new Xid errors")


def queue_gate(baseline: Side, trial: Side, thresholds: Thresholds) -> GateResult:
    name = "queue_time_s"
    drop, jitter = thresholds.queue_time_min_drop, thresholds.queue_max_p99_increase
    threshold = f"trial mean falling{f' by >= {drop:.0%}' if drop else ''}; mean P99 rise <= {jitter:.0%}"
    observed: dict[str, object] = {"baseline": _mean(baseline.queue_time_s), "trial": _mean(trial.queue_time_s)}
    if not baseline.queue_time_s or not trial.queue_time_s:
        return GateResult(name, "hold", observed, threshold, _no_data(baseline, trial, name))
    base, now = fmean(baseline.queue_time_s), fmean(trial.queue_time_s)
    change = f"{_num(base)} s -> {_num(now)} s"
    limit = base * (1 - drop)
    if not (now < base and (now < limit or _close(now, limit))):
        return GateResult(name, "rollback", observed, threshold, f"queue time not falling: {change}")
    if not baseline.p99_ms or not trial.p99_ms:
        return GateResult(
            name, "hold", observed, threshold,
            f"queue time falling ({change}) but no P99 on both sides to rule out run-time jitter "
            f"({_no_data(baseline, trial, 'p99_ms')})",
        )
    base_p99, now_p99 = fmean(baseline.p99_ms), fmean(trial.p99_ms)
    observed |= {"baseline_p99_ms": base_p99, "trial_p99_ms": now_p99}
    allowed = base_p99 * (1 + jitter)
    if now_p99 > allowed and not _close(now_p99, allowed):
        return GateResult(
            name, "rollback", observed, threshold,
            f"queue time fell ({change}) but mean P99 rose {_num(base_p99)} -> {_num(now_p99)} ms: "
            "the wait only turned into run-time jitter",
        )
    return GateResult(name, "continue", observed, threshold, f"queue time falling: {change}")


def longest_run(flags: list[bool]) -> int:
    """The longest stretch of consecutive True values."""
    longest = current = 0
    for flag in flags:
        current = current + 1 if flag else 0
        longest = max(longest, current)
    return longest


def _no_data(baseline: Side | None, trial: Side, key: str) -> str:
    for label, side in (("baseline", baseline), ("trial", trial)):
        if side is not None and key in side.gaps:
            return f"no {label} data: {side.gaps[key]}"
    return "no data"


def _close(a: float, b: float) -> bool:
    """Equal up to floating-point noise, so values exactly at a boundary land on its documented side."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _mean(values: tuple[float, ...]) -> float | None:
    return fmean(values) if values else None


def _num(value: float) -> str:
    return f"{value:.4g}"


def _prefixed(prefix: str, values: dict[str, float]) -> dict[str, object]:
    return {prefix + key: value for key, value in values.items()}
