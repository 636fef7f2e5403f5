"""What the gates read and what they return: one side of the comparison, thresholds, verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpushare.prometheus import InputError
from typing import Literal

from gpushare.gates.queries import DEFAULT_QUERIES

Status = Literal["continue", "hold", "rollback"]
Scope = Literal["card", "node"]

# Most severe first: the verdict is the first status any gate reports.
SEVERITY: tuple[Status, ...] = ("rollback", "hold", "continue")
EXIT_CODES: dict[Status, int] = {"continue": 0, "rollback": 3, "hold": 4}
EXIT_BAD_INPUT = 2


class GateInputError(InputError):
    """Metrics, thresholds or options the gates cannot use; the message says what to fix."""


@dataclass(frozen=True)
class Side:
    """Observations for one period (the whole-card baseline or the sharing trial).

    `None` or an empty tuple means "no data"; `gaps` says why, per key, for the hold reason.
    A window of p99_ms / queue_time_s without data is None: it counts against min_window_coverage.
    Counts cover the same length of time on both sides.
    """

    throughput_per_gpu: float | None
    p99_ms: tuple[float | None, ...]
    oom_kills: float | None
    restarts: float | None
    xid_errors: float | None
    queue_time_s: tuple[float | None, ...]
    correlated_failures: float | None = None
    correlated_scope: Scope | None = None  # what a correlated failure shares: a card, or only a node
    fb_peak_pct: float | None = None  # the highest card's FB peak, % of its memory
    fb_no_reserved: float | None = None  # cards whose memory is counted without FB_RESERVED
    dcgm_nodes: tuple[str, ...] | None = None  # the nodes with DCGM series (None: not asked)
    dcgm_uuids: tuple[str, ...] | None = None  # the cards (UUID) with DCGM series (None: not asked)
    context: dict[str, float] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Observations:
    baseline: Side
    trial: Side
    source: dict[str, object]
    error: str | None = None  # why no data came at all (Prometheus unreachable), reported once
    nodes: tuple[str, ...] = ()  # the nodes asked for (--node); each must have DCGM series
    uuids: tuple[str, ...] = ()  # the cards asked for (--uuid); each must have DCGM series


@dataclass(frozen=True)
class Thresholds:
    """The operator's SLOs; see examples/gates/thresholds.yaml for each key's meaning."""

    throughput_min_gain: float
    p99_slo_ms: float
    p99_breach_windows: int
    max_new_xid: int = 0
    max_extra_oom_kills: float = 0
    max_extra_restarts: float = 0
    max_correlated_failures: int = 0
    xid_required: bool = True
    fb_margin: float = 0.2
    min_window_coverage: float = 0.9
    queue_time_min_drop: float = 0.0
    no_queue_s: float = 0.01
    jitter_max_headroom_used: float = 0.75
    jitter_max_spread: float = 0.25
    latency_window_s: int = 300
    queries: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_QUERIES))


@dataclass(frozen=True)
class GateResult:
    name: str
    status: Status
    observed: dict[str, object]
    threshold: str
    reason: str


@dataclass(frozen=True)
class Report:
    verdict: Status
    gates: tuple[GateResult, ...]
    source: dict[str, object]
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]
