"""A node's MIG layout and what `nvidia-mig-parted apply` does to it (NVIDIA/mig-parted
cmd/nvidia-mig-parted/apply), for the MIG runbook's plan (gpushare.mig.parted; the simulated MIG
manager models the same upstream code on its own): each entry of the selected config, in turn, sets the
GPUs its device-filter and devices match (MIG mode off, or on with its MIG devices); GPUs no entry
matches keep what they have. One GPU's MIG devices fit when they need at most its compute and memory
slices and no profile has more instances than its most per GPU."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Union

from gpushare.gpu_catalog import COMPUTE_SLICES, MEMORY_SLICES
from gpushare.mig_parted_config import MigConfigSpec

DISABLED = "all-disabled"  # the config every MIG manager has: MIG mode off on every GPU
# One entry per GPU: None (MIG mode off) or its MIG devices, profile -> instances ({}: MIG mode on, no device).
Layout = list[Union[dict[str, int], None]]


def selected(entries: Iterable[MigConfigSpec], device_ids: tuple[str, ...], gpus: int) -> list[tuple[int, MigConfigSpec]]:
    """(GPU index, entry) in the order mig-parted applies them: every entry in turn, on each GPU it matches."""
    return [(index, entry) for entry in entries for index in range(gpus) if entry.matches(device_ids, index)]


def apply(entries: Iterable[MigConfigSpec], device_ids: tuple[str, ...], current: Sequence[dict[str, int] | None]) -> Layout:
    """The layout after applying `entries` to GPUs of these PCI device IDs (a later entry wins)."""
    layout: Layout = list(current)
    for index, entry in selected(entries, device_ids, len(layout)):
        layout[index] = dict(entry.mig_devices) if entry.mig_enabled else None
    return layout


class SliceFacts(Protocol):
    @property
    def compute_slices(self) -> int: ...
    @property
    def memory_slices(self) -> int | None: ...  # None: not known (counted as none)
    @property
    def max_per_gpu(self) -> int | None: ...  # None: not known


@dataclass(frozen=True)
class Needs:
    """What MIG devices need of one GPU."""

    compute: int  # compute slices
    memory: int  # memory slices
    too_many: tuple[str, ...]  # profiles with more instances than their most per GPU

    @property
    def fits(self) -> bool:
        return self.compute <= COMPUTE_SLICES and self.memory <= MEMORY_SLICES and not self.too_many


def needs(wanted: Mapping[str, int], profiles: Mapping[str, SliceFacts]) -> Needs:
    """What the instances `wanted` (each profile in `profiles`) need of one GPU."""
    return Needs(sum(profiles[p].compute_slices * n for p, n in wanted.items()),
                 sum((profiles[p].memory_slices or 0) * n for p, n in wanted.items()),
                 tuple(p for p, n in sorted(wanted.items())
                       if (most := profiles[p].max_per_gpu) is not None and n > most))


def devices(gpu: Mapping[str, int]) -> list[str]:
    """One GPU's MIG devices, one name per instance."""
    return [name for name, count in gpu.items() for _ in range(count)]


def instances(layout: Layout) -> Counter[str]:
    """MIG instances per profile on the node."""
    return sum((Counter(g) for g in layout if g), Counter())


def whole_gpus(layout: Layout) -> int:
    """GPUs with MIG mode off (advertised whole)."""
    return sum(1 for g in layout if g is None)


def mode_change(current: Layout, target: Layout) -> bool:
    """Whether going from `current` to `target` turns MIG mode on or off on a GPU."""
    return any((a is None) != (b is None) for a, b in zip(current, target))
