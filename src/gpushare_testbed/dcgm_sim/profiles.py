"""What each simulated GPU does over time: a workload profile, evaluated as a pure function of time.

The live exporter and the backfilled history evaluate the same functions, so a Prometheus that
holds the generated week and then scrapes the exporter sees one continuous series. Times are unix
seconds; `epoch` is the moment the simulated history is anchored to (the exporter's start): an Xid
raised "three days ago" or a card installed "three days ago" is placed relative to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from zlib import crc32


@dataclass(frozen=True)
class Profile:
    """One kind of workload on a card. Fractions are of the card's (or MIG instance's) memory."""

    name: str
    namespace: str | None  # where its pods run; None: nothing is scheduled on the card
    util_pct: float = 0.0  # sustained utilisation outside the busy hours
    fb_fraction: float = 0.0  # memory held outside checkpoints
    mem_copy_ratio: float = 0.4  # memory-copy utilisation per unit of utilisation
    noise_pct: float = 2.0  # +- jitter of each sample
    busy_hours: tuple[int, int] | None = None  # UTC hours [from, to) of a daily peak
    busy_util_pct: float = 0.0
    checkpoint_every_h: int = 0  # memory peaks every N hours ...
    checkpoint_minutes: int = 0  # ... for this many minutes ...
    checkpoint_fb_fraction: float = 0.0  # ... up to this fraction
    spike_minute_of_day: int | None = None  # one minute a day at 100 % (a burst, not a load)
    xid_code: int = 0  # an Xid raised xid_before_s before the epoch; the gauge keeps the last code
    xid_before_s: int = 0
    history_s: int | None = None  # the card reports only since epoch - history_s


@dataclass(frozen=True)
class Reading:
    util_pct: float
    mem_copy_pct: float
    fb_used_mib: int
    xid: int


def _noise(seed: int, step: int) -> float:
    """A reproducible value in [0, 1) for (seed, step): an integer hash, cheap enough for a fleet-week."""
    h = (seed * 0x9E3779B1 + step * 0x85EBCA77) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & 0xFFFFFFFF
    h ^= h >> 12
    return h / 2**32


def seed_of(*parts: object) -> int:
    return crc32("/".join(str(p) for p in parts).encode())


def reading(profile: Profile, seed: int, fb_total_mib: int, t: int, epoch: int) -> Reading | None:
    """The card's values at time t; None before the card reported anything."""
    if profile.history_s is not None and t < epoch - profile.history_s:
        return None
    minute = t // 60
    busy = profile.busy_hours is not None and profile.busy_hours[0] <= (t % 86400) // 3600 < profile.busy_hours[1]
    util = profile.busy_util_pct if busy else profile.util_pct
    if profile.namespace is not None:
        util += profile.noise_pct * (2 * _noise(seed, minute) - 1)
    if profile.spike_minute_of_day is not None and (t % 86400) // 60 == profile.spike_minute_of_day:
        util = 100.0
    util = min(100.0, max(0.0, util))
    in_checkpoint = (
        profile.checkpoint_every_h > 0 and t % (profile.checkpoint_every_h * 3600) < profile.checkpoint_minutes * 60
    )
    fraction = profile.checkpoint_fb_fraction if in_checkpoint else profile.fb_fraction
    fb_used = fb_total_mib * fraction * (0.99 + 0.02 * _noise(seed + 1, minute))
    xid = profile.xid_code if profile.xid_code and t >= epoch - profile.xid_before_s else 0
    return Reading(round(util, 1), round(min(100.0, util * profile.mem_copy_ratio), 1), int(fb_used), xid)


DAY = 86400
# The simulated fleet's workloads, handed out in order over the GPUs sorted by node and index, so
# that the default fleet (gpu-node: 1 GPU, gpu-node-2: 8, gpu-node-mig: 4) shows every verdict.
FLEET_PROFILES: tuple[Profile, ...] = (
    Profile("notebooks", "dev-notebooks", util_pct=6, fb_fraction=0.12),
    Profile("training", "ml-training", util_pct=93, fb_fraction=0.70, checkpoint_every_h=4, checkpoint_minutes=10,
            checkpoint_fb_fraction=0.97),
    Profile("chat-inference", "inference-prod", util_pct=25, fb_fraction=0.45, busy_hours=(9, 18), busy_util_pct=75),
    Profile("etl", "batch-etl", util_pct=15, fb_fraction=0.30, checkpoint_every_h=6, checkpoint_minutes=5,
            checkpoint_fb_fraction=0.96),
    Profile("nightly-eval", "nightly-eval", util_pct=5, fb_fraction=0.20, busy_hours=(1, 5), busy_util_pct=90),
    Profile("idle", None),
    Profile("ci-runners", "ci", util_pct=20, fb_fraction=0.25, spike_minute_of_day=12 * 60 + 30),
    Profile("faulty", "batch-etl", util_pct=12, fb_fraction=0.20, xid_code=79, xid_before_s=3 * DAY),
    Profile("new-card", "ci", util_pct=10, fb_fraction=0.15, history_s=3 * DAY),
    Profile("sandbox", "research-sandbox", util_pct=8, fb_fraction=0.10),
    Profile("embeddings", "embeddings", util_pct=25, fb_fraction=0.32),
    Profile("long-training", "research-long", util_pct=35, fb_fraction=0.40),
)
