"""The release gates: pure decisions from observations and thresholds, one function per gate.

A gate answers `rollback` when the trial is worse than the table allows, `hold` when the data
cannot decide yet, and `continue` otherwise. Missing data is always `hold`, never `continue`.
"""

from __future__ import annotations

import math
from statistics import fmean, pstdev

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
    return Report(verdict=verdict, gates=tuple(gates), source=observations.source, error=observations.error)


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
    if _above(extra, allowed):
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
    """Queue time must fall, and not merely turn into run-time jitter: the trial's P99 must not use
    up most of the room between the baseline's P99 and the SLO, must stay steady across windows,
    and the wait saved must outweigh the latency added."""
    name, slo, drop = "queue_time_s", thresholds.p99_slo_ms, thresholds.queue_time_min_drop
    max_used, max_spread = thresholds.jitter_max_headroom_used, thresholds.jitter_max_spread
    threshold = (
        f"mean falling{f' by >= {drop:.0%}' if drop else ''}; P99 windows within the SLO: mean rise "
        f"<= {_pct(max_used)} and sd <= {_pct(max_spread)} of the baseline's headroom; wait + P99 falling"
    )
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
    headroom = slo - base_p99
    if headroom <= 0:
        return GateResult(
            name, "hold", observed, threshold,
            f"queue time falling ({change}) but the baseline's P99 {_num(base_p99)} ms is not below the "
            f"{_num(slo)} ms SLO: no headroom to judge run-time jitter against; check p99_slo_ms",
        )
    # Windows above the SLO are the p99_ms gate's to judge (hold, or rollback after
    # p99_breach_windows in a row); jitter is judged on the windows within it.
    within = [value for value in trial.p99_ms if not _above(value, slo)]
    above = len(trial.p99_ms) - len(within)
    if not within:
        return GateResult(
            name, "hold", observed, threshold,
            f"queue time falling ({change}) but every P99 window is above the SLO: the p99_ms gate decides",
        )
    level, sd = fmean(within), pstdev(within)
    used, spread = (level - base_p99) / headroom, sd / headroom
    observed |= {"headroom_used": round(used, 6), "p99_spread": round(spread, 6)}
    room = f"the {_num(headroom)} ms headroom to the {_num(slo)} ms SLO"
    left = f" ({above} window(s) above the SLO left to the p99_ms gate)" if above else ""
    problems = []
    if _above(spread, max_spread):
        problems.append(
            f"P99 swings {_num(min(within))}-{_num(max(within))} ms across windows, "
            f"sd {_num(sd)} ms = {_pct(spread)} of {room} (at most {_pct(max_spread)})"
        )
    if _above(used, max_used):
        problems.append(
            f"mean P99 rose {_num(base_p99)} -> {_num(level)} ms, {_pct(used)} of {room} (at most {_pct(max_used)})"
        )
    saved_ms, added_ms = (base - now) * 1000, now_p99 - base_p99
    if not _above(saved_ms, added_ms):
        problems.append(
            f"the wait fell {_num(saved_ms)} ms and mean P99 rose {_num(added_ms)} ms: wait + P99 did not fall"
        )
    if problems:
        return GateResult(
            name, "rollback", observed, threshold,
            f"queue time fell ({change}) but {'; '.join(problems)}: the wait only turned into run-time jitter{left}",
        )
    return GateResult(
        name, "continue", observed, threshold,
        f"queue time falling ({change}); mean P99 {_num(base_p99)} -> {_num(level)} ms uses {_pct(max(used, 0))} "
        f"of {room}, sd {_pct(spread)} of it{left}",
    )


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


def _above(value: float, limit: float) -> bool:
    """Above the limit beyond floating-point noise: a value at the limit is within it."""
    return value > limit and not _close(value, limit)


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def _mean(values: tuple[float, ...]) -> float | None:
    return fmean(values) if values else None


def _num(value: float) -> str:
    return f"{value:.4g}"


def _prefixed(prefix: str, values: dict[str, float]) -> dict[str, object]:
    return {prefix + key: value for key, value in values.items()}
