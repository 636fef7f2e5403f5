"""The device plugin's MPS control daemon as the simulator runs it, modelled on NVIDIA/k8s-device-plugin
cmd/mps-control-daemon/mps:

- each of a card's `replicas` shares gets a default pinned device memory limit of the card's total
  bytes / replicas / 1024 / 1024, in MiB (daemon.go perDevicePinnedDeviceMemoryLimits) and an active
  thread percentage of 100 / replicas (daemon.go activeThreadPercentage);
- a device shared more ways than an MPS server takes clients is refused (device.go assertReplicas:
  48 from compute capability 7.5, every product the simulator runs; 16 below);
- the device plugin waits for a healthy daemon before it serves (plugin server.go Start, mps.go
  waitForDaemon, daemon.go AssertHealthy / EchoPipeToControl), failing with WAIT_ERROR meanwhile."""

from __future__ import annotations

import json
from dataclasses import dataclass

MAX_CLIENTS = 48
# Where the simulated daemon records what it told its MPS servers (a pod annotation a test can read).
LIMITS_ANNOTATION = "sim.gpushare.io/mps-share-limits"
WAIT_ERROR = ("error waiting for MPS daemon: error checking MPS daemon health: "
              "failed to send command to MPS daemon: exit status 1")


@dataclass(frozen=True)
class ShareLimits:
    """What the daemon sets for each share of one card."""

    replicas: int
    pinned_memory_mib: int  # set_default_device_pinned_mem_limit <index> <n>M
    active_thread_percentage: int  # set_default_active_thread_percentage <n>

    def as_dict(self) -> dict[str, int]:
        return {"replicas": self.replicas, "pinnedDeviceMemoryLimitMiB": self.pinned_memory_mib,
                "activeThreadPercentage": self.active_thread_percentage}


def replicas_refusal(replicas: int) -> str | None:
    """The daemon's error for a card shared `replicas` ways (manager.go Daemons wraps assertReplicas), None when it starts."""
    if replicas > MAX_CLIENTS:
        return f"invalid MPS configuration: invalid device maximum allowed replicas exceeded: {replicas} > {MAX_CLIENTS}"
    return None


def share_limits(memory_mib: int, replicas: int) -> ShareLimits:
    """The limits of each of `replicas` shares of a card with `memory_mib` MiB."""
    return ShareLimits(replicas, memory_mib * 1024 * 1024 // replicas // 1024 // 1024, 100 // replicas)


def limits_annotation(limits: dict[str, ShareLimits]) -> str:
    """LIMITS_ANNOTATION's value: resource -> its shares' limits."""
    return json.dumps({name: value.as_dict() for name, value in sorted(limits.items())}, sort_keys=True)
