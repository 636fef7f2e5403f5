"""The baseline's inputs and results as plain data: the thresholds, what was observed per GPU,
and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpushare.prometheus import InputError

EXIT_OK, EXIT_BAD_INPUT, EXIT_NO_DATA, EXIT_ABSENT = 0, 2, 4, 5
CANDIDATE, NOT_CANDIDATE, INSUFFICIENT = "candidate", "not-candidate", "insufficient-data"
MIN_REPLICAS = 2  # the device plugin refuses time-slicing with fewer replicas


def duration(seconds: int) -> str:
    """`7d`, `36h`, `90m`: whole days, else whole hours, else minutes."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


class BaselineInputError(InputError):
    """Bad input: the message says what to fix (exit 2)."""


class PrometheusUnavailable(RuntimeError):
    """Prometheus did not answer, or holds no DCGM series for the request (exit 4)."""


@dataclass(frozen=True)
class Thresholds:
    min_history_s: int = 7 * 86400  # the seed: at least a week, covering releases, peaks, checkpoints
    max_gap_s: int = 6 * 3600  # the longest run of hours without samples that still counts as covered
    min_coverage: float = 0.9  # hours with samples / hours in the window
    gap_util_pct: float = 30.0  # an hour at or below this average utilisation is idle enough to share
    min_idle_share: float = 0.9  # a stable compute gap: at least this share of hours idle enough
    target_util_pct: float = 80.0  # what the shares together may reach: copies <= target / 1 h p95
    fb_margin: float = 0.2  # memory kept free for model loads and burst batches
    max_replicas: int = 4  # never recommend more
    xid_required: bool = True  # False: the exporter does not collect DCGM_FI_DEV_XID_ERRORS, say so
    queries: dict[str, str] = field(default_factory=dict)  # overrides of queries.DEFAULT_QUERIES


@dataclass(frozen=True)
class GpuKey:
    node: str
    gpu: str
    uuid: str
    instance: str | None = None  # MIG GPU instance id

    def sort_key(self) -> tuple:
        def number(text: str | None) -> tuple[int, str]:
            return (int(text), "") if text and text.isdigit() else (-1, text or "")

        return (self.node, number(self.gpu), self.uuid, number(self.instance))


@dataclass(frozen=True)
class Workload:
    """A pod the exporter mapped to a GPU during the window."""

    namespace: str
    pod: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class GpuSeries:
    """Everything read for one GPU (or MIG instance)."""

    key: GpuKey
    model: str = ""
    mig_profile: str | None = None
    util_1h: dict[int, float] = field(default_factory=dict)  # hour end -> average %
    mem_copy_1h: dict[int, float] = field(default_factory=dict)  # hour end -> peak %
    fb_used_1h: dict[int, float] = field(default_factory=dict)  # hour end -> peak MiB
    fb_used_free_mib: float | None = None  # used + free: the card's memory less what the driver reserves
    fb_reserved_mib: float | None = None  # None: the exporter does not export DCGM_FI_DEV_FB_RESERVED
    xid: int | None = None  # the highest Xid code in the window; None: no DCGM_FI_DEV_XID_ERRORS series
    workloads: list[Workload] = field(default_factory=list)

    @property
    def fb_total_mib(self) -> float | None:
        """used + free + reserved, or used + free where reserved is not exported; None when unknown."""
        if not self.fb_used_free_mib:
            return None
        return self.fb_used_free_mib + (self.fb_reserved_mib or 0)


@dataclass(frozen=True)
class Coverage:
    """Which of the window's hours (named by their end) have samples."""

    hours: int  # hours with samples
    expected_hours: int
    first: int | None  # the first and last hour with samples
    last: int | None
    leading_h: int  # hours without samples before the first one (a short history)
    trailing_h: int  # ... after the last one (a series that stopped)
    longest_gap_h: int  # the longest run of hours without samples between the first and the last
    gap_start: int | None  # the end of the last hour before that run

    @property
    def share(self) -> float:
        return self.hours / self.expected_hours if self.expected_hours else 0.0


@dataclass(frozen=True)
class WorkloadFacts:
    """What the metrics cannot tell about a workload, from the inventory (baseline_workloads)."""

    retryable: bool
    checkpointed: bool
    latency_critical: bool
    owner: str = ""
    namespace: str | None = None  # selectors: both must match when both are given
    labels: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"namespace {self.namespace}"] if self.namespace else []
        parts += [f"{key}={value}" for key, value in self.labels.items()]
        return ", ".join(parts)


@dataclass
class GpuVerdict:
    series: GpuSeries
    coverage: Coverage
    util_1h_p50: float | None
    util_1h_p95: float | None
    idle_share: float | None
    mem_copy_1h_p95: float | None
    mem_copy_peak_pct: float | None
    fb_peak_mib: float | None
    replicas_by_memory: int | None
    replicas_by_compute: int | None
    verdict: str
    reasons: list[str]
    recommended_replicas: int | None
    owners: list[str]
    plot: str | None = None
    absent: bool = False  # asked for (--node, --gpus) but without any series in the window
    mode: str | None = None  # a candidate's recommended sharing mode: time-slicing, mps or mig
    mode_reason: str = ""
