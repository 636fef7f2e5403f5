"""The profile-fit planner: the seed's questions before partitioning, answered from the workloads
the operator lists. Each workload needs its memory plus headroom (KV cache, a training peak) in
one instance; the smallest instance that holds it is its profile. All replicas are then placed on
the node's instances (one replica per instance), and what is left shows the fragmentation: free
instances that no listed workload can use, or that only the small ones can."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpushare.gpu_catalog import MigProfile

WHOLE = "whole GPU"


@dataclass(frozen=True)
class Workload:
    name: str
    memory_gib: float
    headroom: float = 0.0  # a fraction: 0.2 is 20 % more than memory_gib
    replicas: int = 1

    @property
    def need_mib(self) -> float:
        return round(self.memory_gib * 1024 * (1 + self.headroom), 6)

    @property
    def need_text(self) -> str:
        base = f"{self.memory_gib:g} GiB"
        return f"{self.need_mib / 1024:.1f} GiB = {base} + {self.headroom * 100:g} %" if self.headroom else base


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def parse_workloads(raw: Any) -> tuple[list[Workload], list[str]]:
    """`mig_workloads` as given: a list of {name, memory_gib, headroom (default 0), replicas (default 1)}."""
    if raw in (None, "", []):
        return [], []
    if not isinstance(raw, list):
        return [], [f"mig_workloads must be a list of {{name, memory_gib, headroom, replicas}}, got {raw!r}."]
    workloads, problems = [], []
    for index, item in enumerate(raw):
        where = f"mig_workloads[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be a mapping {{name, memory_gib, headroom, replicas}}, got {item!r}.")
            continue
        unknown = sorted(set(item) - {"name", "memory_gib", "headroom", "replicas"})
        name = str(item.get("name") or "")
        memory = _number(item.get("memory_gib"))
        headroom = _number(item.get("headroom", 0))
        replicas = item.get("replicas", 1)
        replicas = int(replicas) if str(replicas).isdigit() else None
        found = []
        if unknown:
            found.append(f"unknown key(s) {', '.join(unknown)} (known: name, memory_gib, headroom, replicas)")
        if not name:
            found.append("needs a name")
        if memory is None or memory <= 0:
            found.append(f"memory_gib must be a number of GiB above 0, got {item.get('memory_gib')!r}")
        if headroom is None or not 0 <= headroom <= 1:
            found.append(f"headroom is a fraction from 0 to 1 (0.2 for 20 %), got {item.get('headroom')!r}")
        if replicas is None or replicas < 1:
            found.append(f"replicas must be a whole number of at least 1, got {item.get('replicas')!r}")
        if found:
            problems.append(f"{where}{f' ({name})' if name else ''}: {'; '.join(found)}.")
        else:
            workloads.append(Workload(name, float(memory), float(headroom), int(replicas)))
    names = Counter(w.name for w in workloads)
    problems += [f"mig_workloads names {name!r} {count} times; give each workload once, with its replicas."
                 for name, count in sorted(names.items()) if count > 1]
    return workloads, problems


def holds(profile: MigProfile, workload: Workload) -> bool:
    return profile.memory_mib >= workload.need_mib


def _size(profile: MigProfile) -> tuple[int, int, str]:
    return profile.memory_mib, profile.compute_slices, profile.name


def smallest_fit(workload: Workload, profiles: Iterable[MigProfile]) -> MigProfile | None:
    """The smallest instance (memory, then compute) that holds the workload; None when none does."""
    return min((p for p in profiles if holds(p, workload)), key=_size, default=None)


@dataclass
class Placement:
    placed: dict[str, Counter[str]]  # workload -> instance kind -> replicas placed there
    free: Counter[str]  # instances left

    def used(self) -> Counter[str]:
        return sum(self.placed.values(), Counter())


def place(workloads: list[Workload], pool: Counter[str], profiles: dict[str, MigProfile]) -> Placement:
    """Every replica, largest need first, on the smallest free instance that holds it. A replica can
    use every instance at least as large as it needs, so these choices are nested and this greedy
    order places as many replicas as any placement can."""
    free = Counter({k: n for k, n in pool.items() if n > 0})
    placed: dict[str, Counter[str]] = {w.name: Counter() for w in workloads}
    kinds = sorted(free, key=lambda k: _size(profiles[k]))
    for workload in sorted(workloads, key=lambda w: -w.need_mib):
        for _ in range(workload.replicas):
            slot = next((k for k in kinds if free[k] > 0 and holds(profiles[k], workload)), None)
            if slot is None:
                break
            free[slot] -= 1
            placed[workload.name][slot] += 1
    return Placement(placed, +free)


def room_left(workload: Workload, free: Counter[str], profiles: dict[str, MigProfile]) -> int:
    """How many more replicas of the workload the instances left could take."""
    return sum(n for k, n in free.items() if holds(profiles[k], workload))


@dataclass
class Fit:
    """The planner's answer for one node and one layout."""

    workloads: list[Workload]
    profiles: dict[str, MigProfile]  # every instance kind of before and after, by name
    before: Counter[str] | None  # None: unknown (the MIG manager has not applied the current config)
    after: Counter[str]
    placement: Placement

    @property
    def unfit(self) -> list[Workload]:
        return [w for w in self.workloads if smallest_fit(w, (self.profiles[k] for k in self.after)) is None]

    @property
    def short(self) -> list[tuple[Workload, int]]:
        """Workloads that fit an instance but not with all their replicas: (workload, replicas placed)."""
        return [(w, sum(self.placement.placed[w.name].values())) for w in self.workloads if w not in self.unfit
                and sum(self.placement.placed[w.name].values()) < w.replicas]

    def coverage(self) -> str:
        fit = len(self.workloads) - len(self.unfit)
        return f"{fit} of {len(self.workloads)} listed workload(s) fit an instance"

    def fragmentation_rows(self) -> list[list[Any]]:
        """instance | memory | before | after | for the listed workloads | left free, smallest first."""
        used = self.placement.used()
        kinds = sorted(set(self.after) | set(self.before or ()), key=lambda k: _size(self.profiles[k]))
        rows = []
        for kind in kinds:
            profile = self.profiles[kind]
            memory = f"{profile.memory_gib:.2f} GiB" + ("" if profile.exact or kind == WHOLE else " (from its name)")
            rows.append([kind, memory, "?" if self.before is None else self.before.get(kind, 0), self.after.get(kind, 0),
                         used.get(kind, 0), self.placement.free.get(kind, 0)])
        return rows

    def workload_rows(self) -> list[list[Any]]:
        """workload | needs | smallest instance that fits | replicas placed | more that fit in what is left."""
        rows = []
        for workload in self.workloads:
            best = smallest_fit(workload, (self.profiles[k] for k in self.after))
            placed = self.placement.placed[workload.name]
            rows.append([workload.name, workload.need_text, best.name if best else "none fits",
                         f"{sum(placed.values())} of {workload.replicas}"
                         + (f" ({', '.join(f'{n} on {k}' for k, n in sorted(placed.items()))})" if placed else ""),
                         room_left(workload, self.placement.free, self.profiles)])
        return rows


def fit(workloads: list[Workload], profiles: dict[str, MigProfile], before: Counter[str] | None,
        after: Counter[str]) -> Fit:
    return Fit(workloads, profiles, before, after, place(workloads, after, profiles))
