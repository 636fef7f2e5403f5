"""MPS sharing as the device plugin's MPS control daemon applies it, with no I/O.

With `sharing.mps` the plugin's `nvidia-device-plugin-mps-control-daemon` starts one MPS server per
shared resource and gives every share of a card (k8s-device-plugin cmd/mps-control-daemon/mps):

- a default pinned device memory limit of the card's total memory / replicas, in whole MiB
  (daemon.go perDevicePinnedDeviceMemoryLimits: bytes / replicas / 1024 / 1024, written `<n>M`);
- a default active thread percentage of 100 / replicas, an integer (daemon.go activeThreadPercentage);
- at most 48 clients per server on Volta and newer (device.go assertReplicas, maxClients).

MIG devices are skipped (manager.go: "MPS sharing is not supported for MIG devices"), so a node whose
cards are MIG-enabled runs no MPS server and GFD does not label it `nvidia.com/mps.capable=true`; the
device plugin, which waits for the daemon before it serves (plugin server.go Start), never starts.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_CLIENTS = 48  # device.go maxClients, Volta and newer (every product gpushare models)
MIG_UNSUPPORTED = "MPS sharing is not supported for MIG devices"
# validateFlags in the device plugin's main.go: it exits with this under MIG_STRATEGY=mixed.
MIXED_UNSUPPORTED = "using --mig-strategy=mixed is not supported with MPS"


@dataclass(frozen=True)
class ShareLimits:
    """What each MPS share of one card gets."""

    replicas: int
    pinned_memory_mib: int  # set_default_device_pinned_mem_limit <index> <n>M
    active_thread_percentage: int  # set_default_active_thread_percentage <n>

    @property
    def pinned_memory_gib(self) -> float:
        return self.pinned_memory_mib / 1024


def replicas_problem(replicas: int) -> str | None:
    """The daemon's refusal of this many replicas per card (manager.go Daemons), None when it accepts."""
    if replicas > MAX_CLIENTS:
        return (f"invalid MPS configuration: invalid device maximum allowed replicas exceeded: "
                f"{replicas} > {MAX_CLIENTS}")
    return None


def share_limits(memory_mib: int, replicas: int) -> ShareLimits:
    """The limits the daemon sets for each of `replicas` shares of a card with `memory_mib` MiB."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, not {replicas}")
    pinned = memory_mib * 1024 * 1024 // replicas // 1024 // 1024
    return ShareLimits(replicas, pinned, 100 // replicas)


def describe(product: str, memory_mib: int, replicas: int) -> str:
    """e.g. "4 shares of NVIDIA-H100-80GB-HBM3: 19.9 GiB pinned memory and 25% of SMs each"."""
    limits = share_limits(memory_mib, replicas)
    return (f"{replicas} shares of {product}: {limits.pinned_memory_gib:.1f} GiB pinned memory and "
            f"{limits.active_thread_percentage}% of SMs each")
