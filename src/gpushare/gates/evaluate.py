"""The release gates: pure decisions from observations and thresholds, one function per gate.

A gate answers `rollback` when the trial is worse than the table allows, `hold` when the data
cannot decide yet, and `continue` otherwise. Missing data is always `hold`, never `continue`:
a window without data counts against min_window_coverage, a --node without DCGM series holds,
and Xid errors that are not collected continue only where the thresholds say so (xid_required).
"""

from __future__ import annotations

import math
from statistics import fmean, pstdev

from gpushare.gates.model import SEVERITY, GateResult, Observations, Report, Side, Thresholds


_PER_NODE = (" (the exporter does not map shared pods to cards, so pods on one node count together; "
             "KUBERNETES_VIRTUAL_GPUS=true on dcgm-exporter maps them per card)")


def evaluate(observations: Observations, thresholds: Thresholds) -> Report:
    baseline, trial = observations.baseline, observations.trial
    measured = {key for key in ("correlated_failures", "fb_peak_pct")
                if getattr(trial, key) is not None or key in trial.gaps}
    gates = [
        *([nodes_gate(observations)] if observations.nodes else []),
        *([uuids_gate(observations)] if observations.uuids else []),
        throughput_gate(baseline, trial, thresholds),
        p99_gate(trial, thresholds),
        count_gate("oom_kills", "OOM kills", baseline, trial, thresholds.max_extra_oom_kills),
        count_gate("restarts", "restarts", baseline, trial, thresholds.max_extra_restarts),
        *([correlated_gate(trial, thresholds)] if "correlated_failures" in measured else []),
        *([memory_gate(trial, thresholds)] if "fb_peak_pct" in measured else []),
        xid_gate(baseline, trial, thresholds),
        queue_gate(baseline, trial, thresholds),
    ]
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
    threshold = (
        f"<= {_num(slo)} ms; rollback after {needed} consecutive windows above; "
        f"data in >= {_pct(thresholds.min_window_coverage)} of the windows"
    )
    windows = trial.p99_ms
    present = _present(windows)
    observed: dict[str, object] = {"trial_windows": list(windows)}
    if not present:
        return GateResult(name, "hold", observed, threshold, _no_data(None, trial, name))
    # A window without data neither breaks a run of breaches nor extends it.
    breaches = [value > slo for value in present]
    run = longest_run(breaches)
    observed |= {"max": max(present), "consecutive_above": run}
    if run >= needed:
        reason = f"above the {_num(slo)} ms SLO for {run} consecutive windows{_skipped(windows)}"
        return GateResult(name, "rollback", observed, threshold, reason)
    short = _short_coverage(windows, thresholds)
    if short:
        return GateResult(name, "hold", observed, threshold, f"P99 {short}: the trial's latency is not covered")
    if run:
        return GateResult(
            name, "hold", observed, threshold,
            f"above the SLO in {sum(breaches)} of {len(present)} windows, at most {run} in a row "
            f"(rollback at {needed}): watch the next windows",
        )
    within = f"{len(windows)} windows" if len(present) == len(windows) else f"{len(present)} windows with data"
    return GateResult(name, "continue", observed, threshold, f"within the SLO in all {within}{_skipped(windows)}")


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
    per_node = trial.correlated_scope == "node"
    unit, why = ("node", _PER_NODE) if per_node else ("card", "")
    threshold = f"<= {allowed} {unit}s with failures in 2+ {'pods' if per_node else 'shared pods'}"
    observed: dict[str, object] = {"trial": now, "scope": trial.correlated_scope or "metrics file"}
    if now is None:
        return GateResult(name, "hold", observed, threshold, _no_data(None, trial, name))
    if now > allowed:
        return GateResult(name, "rollback", observed, threshold, f"failures correlated on the same {unit}: {_num(now)}{why}")
    return GateResult(name, "continue", observed, threshold, f"no failures correlated on one {unit}{why}")


def memory_gate(trial: Side, thresholds: Thresholds) -> GateResult:
    """The card's FB peak against the ceiling the baseline sized the shares for: roll back before
    the shares' memory together leaves no room and OOM kills start."""
    name, peak = "memory_headroom", trial.fb_peak_pct
    ceiling = 100 * (1 - thresholds.fb_margin)
    threshold = (f"every card's FB peak <= {ceiling:.3g}% of its memory "
                 f"(fb_margin {thresholds.fb_margin:g}, as the baseline's)")
    observed: dict[str, object] = {"trial_peak_pct": peak, "ceiling_pct": round(ceiling, 6)}
    note = ""
    if trial.fb_no_reserved:
        observed["cards_without_reserved"] = trial.fb_no_reserved
        note = (f"; memory of {_num(trial.fb_no_reserved)} card(s) counted as used + free: the exporter does not "
                "export DCGM_FI_DEV_FB_RESERVED")
    if peak is None:
        return GateResult(name, "hold", observed, threshold, _no_data(None, trial, "fb_peak_pct"))
    if _above(peak, ceiling):
        return GateResult(
            name, "rollback", observed, threshold,
            f"a card's memory peaked at {_num(peak)}% during the trial, above the {ceiling:.3g}% ceiling: "
            f"no room left for model loads and burst batches, roll back before OOM kills start{note}",
        )
    return GateResult(name, "continue", observed, threshold,
                      f"every card's memory peak within {ceiling:.3g}% (highest {_num(peak)}%){note}")


def xid_gate(baseline: Side, trial: Side, thresholds: Thresholds) -> GateResult:
    name, allowed, now = "xid_errors", thresholds.max_new_xid, trial.xid_errors
    threshold = f"<= {allowed} new" + ("" if thresholds.xid_required else " (xid_required: false)")
    observed: dict[str, object] = {"baseline": baseline.xid_errors, "trial": now}
    if now is None:
        if not thresholds.xid_required:
            return GateResult(
                name, "continue", observed, threshold,
                f"not judged: the thresholds say Xid errors are not collected (xid_required: false); "
                f"{_no_data(None, trial, name)}",
            )
        return GateResult(name, "hold", observed, threshold, _no_data(None, trial, name))
    if now > allowed:
        reason = f"{_num(now)} new Xid error(s) during the trial: check the GPU (nvidia-smi -q, kernel log)"
        return GateResult(name, "rollback", observed, threshold, reason)
    return GateResult(name, "continue", observed, threshold, f"{_num(now)} new Xid errors")


def nodes_gate(observations: Observations) -> GateResult:
    """Every --node must have DCGM series on both sides: a node without them would silently drop
    out of every other gate's sums."""
    return _series_gate(observations, "dcgm_nodes", "node", observations.nodes,
                        "(Hostname / hostname label): is dcgm-exporter running and scraped there? The other gates "
                        "count only the nodes with data")


def uuids_gate(observations: Observations) -> GateResult:
    """Every --uuid must have DCGM series on both sides: the gates would otherwise judge the other
    cards asked for, or nothing, and a mistyped UUID would pass unnoticed."""
    return _series_gate(observations, "dcgm_uuids", "card", observations.uuids,
                        "(UUID label): is the DCGM exporter running and scraped on the node of that card, and is it "
                        "the UUID of the card the claim got (the uuid attribute of the claim's device in the node's "
                        "ResourceSlice, kubectl get resourceslices -o yaml)? The other gates count only the cards with data")


def _series_gate(observations: Observations, name: str, what: str, asked: tuple[str, ...], advice: str) -> GateResult:
    threshold = f"DCGM series for every --{'node' if what == 'node' else 'uuid'} in the trial and in the baseline"
    sides = (("trial", observations.trial), ("baseline", observations.baseline))
    observed: dict[str, object] = {"asked": list(asked)}
    seen = {label: getattr(side, name) for label, side in sides}
    observed |= {label: None if found is None else list(found) for label, found in seen.items()}
    for label, side in sides:
        if seen[label] is None:
            return GateResult(name, "hold", observed, threshold, f"no {label} data: {side.gaps.get(name, 'not read')}")
    missing = [f"{one} (in the {' and the '.join(label for label, _ in sides if one not in seen[label])})"
               for one in asked if any(one not in found for found in seen.values())]
    if missing:
        return GateResult(name, "hold", observed, threshold, f"no DCGM series for {', '.join(missing)} {advice}")
    return GateResult(name, "continue", observed, threshold, f"DCGM series for every {what} asked: {', '.join(asked)}")


def queue_gate(baseline: Side, trial: Side, thresholds: Thresholds) -> GateResult:
    """Queue time must fall, and not merely turn into run-time jitter: the trial's P99 must not use
    up most of the room between the baseline's P99 and the SLO, must stay steady across windows,
    and the wait saved must outweigh the latency added. With no queue on either side (both means
    at most no_queue_s) there is nothing to shorten: the P99 gate alone guards latency."""
    name, slo, drop = "queue_time_s", thresholds.p99_slo_ms, thresholds.queue_time_min_drop
    max_used, max_spread = thresholds.jitter_max_headroom_used, thresholds.jitter_max_spread
    none_s = thresholds.no_queue_s
    threshold = (
        f"no queue (both means <= {_num(none_s)} s), or: mean falling{f' by >= {drop:.0%}' if drop else ''}; "
        f"P99 windows within the SLO: mean rise <= {_pct(max_used)} and sd <= {_pct(max_spread)} of the "
        f"baseline's headroom; wait + P99 falling"
    )
    base_w, now_w = _present(baseline.queue_time_s), _present(trial.queue_time_s)
    observed: dict[str, object] = {"baseline": _mean(base_w), "trial": _mean(now_w)}
    if not base_w or not now_w:
        return GateResult(name, "hold", observed, threshold, _no_data(baseline, trial, name))
    short = _short_coverage(trial.queue_time_s, thresholds)
    if short:
        return GateResult(name, "hold", observed, threshold, f"queue time {short}: the trial's wait is not covered")
    base, now = fmean(base_w), fmean(now_w)
    change = f"{_num(base)} s -> {_num(now)} s"
    if not _above(base, none_s) and not _above(now, none_s):
        return GateResult(
            name, "continue", observed, threshold,
            f"no queue to shorten: {change}, at most {_num(none_s)} s on both sides (latency is the p99_ms gate's)",
        )
    limit = base * (1 - drop)
    if not (now < base and (now < limit or _close(now, limit))):
        return GateResult(name, "rollback", observed, threshold, f"queue time not falling: {change}")
    base_p99s, now_p99s = _present(baseline.p99_ms), _present(trial.p99_ms)
    if not base_p99s or not now_p99s:
        return GateResult(
            name, "hold", observed, threshold,
            f"queue time falling ({change}) but no P99 on both sides to rule out run-time jitter "
            f"({_no_data(baseline, trial, 'p99_ms')})",
        )
    base_p99, now_p99 = fmean(base_p99s), fmean(now_p99s)
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
    within = [value for value in now_p99s if not _above(value, slo)]
    above = len(now_p99s) - len(within)
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


def _present(windows: tuple[float | None, ...]) -> list[float]:
    return [value for value in windows if value is not None]


def _short_coverage(windows: tuple[float | None, ...], thresholds: Thresholds) -> str | None:
    """Why too few windows have data for min_window_coverage, or None when enough do."""
    present, least = len(_present(windows)), thresholds.min_window_coverage
    share = present / len(windows)
    if share < least and not _close(share, least):
        return f"has data in only {present} of {len(windows)} windows ({_pct(share)}, min_window_coverage {_pct(least)})"
    return None


def _skipped(windows: tuple[float | None, ...]) -> str:
    missing = sum(value is None for value in windows)
    return f" ({missing} of {len(windows)} windows without data)" if missing else ""


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


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _num(value: float) -> str:
    return f"{value:.4g}"


def _prefixed(prefix: str, values: dict[str, float]) -> dict[str, object]:
    return {prefix + key: value for key, value in values.items()}
