"""The sharing mode the baseline recommends for a candidate GPU - time-slicing, MPS or MIG - with
its reason, from the readings (memory peak against MPS's per-share limit), the workload facts (how
many teams' workloads would share it) and the card (MIG capability). No I/O."""

from __future__ import annotations

from dataclasses import dataclass

from gpushare import mps
from gpushare.gpu_catalog import PRODUCTS

TIME_SLICING, MPS, MIG = "time-slicing", "mps", "mig"


@dataclass(frozen=True)
class Mode:
    mode: str
    reason: str


def mig_capable(model: str) -> bool:
    """DCGM's modelName (e.g. "NVIDIA H100 80GB HBM3") against the catalog's GFD product names."""
    name = "-".join(model.split())
    product = PRODUCTS.get(name)
    return bool(product and product.mig_capable)


def recommend(replicas: int, memory_peak_mib: float | None, memory_total_mib: float | None, owners: int,
              model: str) -> Mode:
    """For a candidate GPU with `replicas` shares: MIG when several teams would share a MIG-capable
    card (isolation of memory, cache and faults); else MPS when the memory peak fits MPS's
    per-share pinned limit (a hard limit: one pod's OOM stays its own); else time-slicing."""
    if owners > 1 and mig_capable(model):
        return Mode(MIG, f"workloads of {owners} teams would share it and the card is MIG-capable: MIG isolates "
                         "memory, cache and faults between them")
    if memory_peak_mib is None or not memory_total_mib:
        return Mode(TIME_SLICING, "no memory peak or card memory read: no per-share memory limit can be chosen, "
                                  "so MPS's hard limit is not recommended")
    limits = mps.share_limits(int(memory_total_mib), replicas)
    if memory_peak_mib <= limits.pinned_memory_mib:
        return Mode(MPS, f"its memory peak of {memory_peak_mib:.0f} MiB fits MPS's per-share limit of "
                         f"{limits.pinned_memory_mib} MiB at {replicas} replicas ({limits.active_thread_percentage}% "
                         "of SMs each): a hard memory limit per pod, where time-slicing lets one pod's OOM take "
                         "its neighbours down")
    return Mode(TIME_SLICING, f"its memory peak of {memory_peak_mib:.0f} MiB is above MPS's per-share limit of "
                              f"{limits.pinned_memory_mib} MiB at {replicas} replicas: time-slicing lets each pod use "
                              "the whole memory in turn")
