"""Gate observations from Prometheus instant queries (gpushare.prometheus).

The trial is `(trial_end - window, trial_end]`; the baseline is the `baseline_window` right
before it. P99 and queue time are read once per latency window over the trial (a window without
data stays in the list as None), and once over the whole baseline. Baseline counts are scaled to
the trial's length so both sides compare. A query that fails, returns no series or an answer of
the wrong shape leaves a gap, naming the query, that makes its gate hold; a Prometheus that does
not answer is asked once, and the report says so once (`Observations.error`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpushare.dcgm_labels import host_of
from gpushare.gates.inputs import COUNT_KEYS, CONTEXT_KEYS, WINDOW_KEYS
from gpushare.gates.model import GateInputError, Observations, Side, Thresholds
from gpushare.gates.queries import render
from gpushare.prometheus import client as prometheus
from gpushare.prometheus.answer import Series
from gpushare.prometheus.timespec import format_duration, format_time


# What an empty answer may mean, where the operator can act on it.
_NO_SERIES_HINTS = {
    "xid_errors": ": does the exporter collect DCGM_FI_DEV_XID_ERRORS? If it does not, set xid_required: false",
    "fb_peak_pct": ": does the exporter collect DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE?",
}


class QueryError(Exception):
    """A query that produced no usable value; the message is the gate's hold reason."""


class Unreachable(QueryError):
    """Prometheus did not answer at all; `client.unreachable` holds the URL and the error."""

    def __str__(self) -> str:
        return "Prometheus did not answer"


@dataclass(frozen=True)
class QueryPlan:
    url: str
    trial_end: float
    window_s: int
    baseline_window_s: int
    nodes: tuple[str, ...] = ()
    uuids: tuple[str, ...] = ()  # the cards whose DCGM series count (all without)
    timeout_s: float = 10.0

    @property
    def trial_start(self) -> float:
        return self.trial_end - self.window_s


class PrometheusClient:
    """Instant queries; after one connection failure it stops trying."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.prometheus = prometheus.Client(url, timeout_s)
        self.url = self.prometheus.url
        self.unreachable: str | None = None

    def value(self, query: str, at: float) -> float | None:
        """The single value of `query` at unix time `at`; None when it returns no series or NaN."""
        return single_value(*self._answer(query, at))

    def series(self, query: str, at: float) -> list[Series]:
        """Every series of the instant `query` at unix time `at`."""
        kind, found = self._answer(query, at)
        if kind != "vector":
            raise QueryError(f"returned a {kind}; write an instant vector query")
        return found

    def _answer(self, query: str, at: float) -> tuple[str, list[Series]]:
        if self.unreachable:
            raise Unreachable()
        try:
            return self.prometheus.instant(query, at)
        except prometheus.Unanswered as err:
            self.unreachable = (
                f"Prometheus at {self.url} did not answer ({err.reason}): check the URL and "
                "that Prometheus is running, then evaluate again; gates without data hold"
            )
            raise Unreachable() from None
        except prometheus.QueryFailure as err:
            raise query_error(err, self.url) from None


def query_error(failure: prometheus.QueryFailure, url: str) -> QueryError:
    """The gate's hold reason for a query that got no usable answer (but an answer)."""
    if isinstance(failure, prometheus.HttpFailure):
        return QueryError(f"Prometheus answered HTTP {failure.code}: {failure.detail}")
    if isinstance(failure, prometheus.NotJson):
        return QueryError(f"{url} did not answer with Prometheus JSON; check the URL")
    if isinstance(failure, prometheus.Reported):
        return QueryError(f"Prometheus reported an error: {failure}")
    return QueryError(f"the answer is not a Prometheus query result ({failure}); check that the URL is Prometheus")


def single_value(kind: str, found: list[Series]) -> float | None:
    """The one value of an instant query's answer; None when it has no series or NaN."""
    if kind not in ("vector", "scalar"):
        raise QueryError(f"returned a {kind}; write an instant (vector or scalar) query")
    if len(found) > 1:
        raise QueryError(f"returned {len(found)} series; aggregate it to one with sum(), avg() or max()")
    if not found:
        return None
    value = found[0][1][0][1]
    return None if math.isnan(value) else value


def collect(plan: QueryPlan, thresholds: Thresholds, client: PrometheusClient | None = None) -> Observations:
    client = client or PrometheusClient(plan.url, plan.timeout_s)
    latency_windows = plan.window_s // thresholds.latency_window_s
    if latency_windows < 1:
        raise GateInputError(
            f"--window {format_duration(plan.window_s)} is shorter than latency_window "
            f"{format_duration(thresholds.latency_window_s)}; lengthen the window or shorten latency_window"
        )
    reader = _Reader(client, thresholds.queries, plan.nodes, plan.uuids)
    trial_ends = [plan.trial_start + (k + 1) * thresholds.latency_window_s for k in range(latency_windows)]
    trial = reader.side(
        at=plan.trial_end, window_s=plan.window_s, window_ends=trial_ends,
        latency_s=thresholds.latency_window_s, trial=True,
    )
    # The baseline's P99 and queue time are one value each, over the whole baseline window.
    baseline = reader.side(
        at=plan.trial_start, window_s=plan.baseline_window_s, window_ends=[plan.trial_start],
        latency_s=plan.baseline_window_s,
    )
    for asked, key in ((plan.nodes, "dcgm_nodes"), (plan.uuids, "dcgm_uuids")):
        if asked:
            trial = replace(trial, **{key: reader.seen(key, plan.trial_end, plan.window_s, trial.gaps)})
            baseline = replace(baseline, **{key: reader.seen(key, plan.trial_start, plan.baseline_window_s, baseline.gaps)})
    baseline = _scale_counts(baseline, plan.window_s / plan.baseline_window_s)
    start, end = plan.trial_start, plan.trial_end
    source: dict[str, object] = {
        "prometheus": client.url,
        "trial": f"{format_time(start)}/{format_time(end)}",
        "baseline": f"{format_time(start - plan.baseline_window_s)}/{format_time(start)}",
    }
    if plan.nodes:
        source["nodes"] = list(plan.nodes)
    if plan.uuids:
        source["uuids"] = list(plan.uuids)
    return Observations(baseline=baseline, trial=trial, source=source, error=client.unreachable, nodes=plan.nodes,
                        uuids=plan.uuids)


class _Reader:
    def __init__(self, client: PrometheusClient, queries: dict[str, str], nodes: tuple[str, ...],
                 uuids: tuple[str, ...]) -> None:
        self.client, self.queries, self.nodes, self.uuids = client, queries, nodes, uuids

    def _render(self, key: str, window_s: int) -> str:
        return render(self.queries[key], format_duration(window_s), self.nodes, self.uuids)

    def side(self, at: float, window_s: int, window_ends: list[float], latency_s: int, trial: bool = False) -> Side:
        gaps: dict[str, str] = {}
        scalars = ["throughput_per_gpu", *COUNT_KEYS, *CONTEXT_KEYS]
        scalars += ["fb_peak_pct", "fb_no_reserved"] if trial else []
        values = {key: self._scalar(key, at, window_s, gaps) for key in scalars}
        windows = {key: self._windows(key, window_ends, latency_s, gaps) for key in WINDOW_KEYS}
        if trial:
            values |= self._correlated(at, window_s, gaps)
        return Side(
            **{key: value for key, value in values.items() if key not in CONTEXT_KEYS},
            **windows,
            context={key: values[key] for key in CONTEXT_KEYS if values[key] is not None},
            gaps={key: reason for key, reason in gaps.items() if key not in CONTEXT_KEYS},
        )

    def _correlated(self, at: float, window_s: int, gaps: dict[str, str]) -> dict[str, object]:
        """Per card where the exporter maps shares to cards (its series carry `vgpu`), else per node."""
        mapped = self._scalar("shares_mapped", at, window_s, gaps)
        if mapped is None:
            gaps["correlated_failures"] = gaps.pop("shares_mapped")
            return {"correlated_failures": None}
        scope, key = ("card", "correlated_failures_per_card") if mapped > 0 else ("node", "correlated_failures")
        value = self._scalar(key, at, window_s, gaps)
        if key in gaps:
            gaps["correlated_failures"] = gaps.pop(key)
        return {"correlated_failures": value, "correlated_scope": scope}

    def seen(self, key: str, at: float, window_s: int, gaps: dict[str, str]) -> tuple[str, ...] | None:
        """The nodes (dcgm_nodes, by either spelling of the node label) or the cards (dcgm_uuids, by their
        UUID label) with DCGM series in the window."""
        try:
            found = self.client.series(self._render(key, window_s), at)
        except QueryError as err:
            gaps[key] = _gap(key, err)
            return None
        name = host_of if key == "dcgm_nodes" else (lambda labels: labels.get("UUID", ""))
        return tuple(sorted({name(labels) for labels, _ in found} - {""}))

    def _scalar(self, key: str, at: float, window_s: int, gaps: dict[str, str]) -> float | None:
        try:
            value = self.client.value(self._render(key, window_s), at)
        except QueryError as err:
            gaps[key] = _gap(key, err)
            return None
        if value is None:
            gaps[key] = (f"queries.{key} returned no series for {format_duration(window_s)} up to {format_time(at)}"
                         f"{_NO_SERIES_HINTS.get(key, '')}")
        return value

    def _windows(self, key: str, ends: list[float], window_s: int, gaps: dict[str, str]) -> tuple[float | None, ...]:
        query = self._render(key, window_s)
        try:
            values = tuple(self.client.value(query, end) for end in ends)
        except QueryError as err:
            gaps[key] = _gap(key, err)
            return ()
        if all(value is None for value in values):
            gaps[key] = (
                f"queries.{key} returned no series in any of {len(ends)} window(s) up to {format_time(ends[-1])}"
            )
            return ()
        return values


def _gap(key: str, err: QueryError) -> str:
    return str(err) if isinstance(err, Unreachable) else f"queries.{key}: {err}"


def _scale_counts(side: Side, factor: float) -> Side:
    scaled = {key: None if (v := getattr(side, key)) is None else v * factor for key in COUNT_KEYS}
    return replace(side, **scaled)

