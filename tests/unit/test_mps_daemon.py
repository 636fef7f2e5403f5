"""The simulator's MPS control daemon (gpushare_testbed.simulator.mps_daemon), against the figures
NVIDIA/k8s-device-plugin cmd/mps-control-daemon/mps computes: bytes / replicas / 1024 / 1024 MiB of
pinned memory and 100 / replicas percent of the SMs per share, at most 48 clients."""

from __future__ import annotations

import json

import pytest

from gpushare_testbed.simulator.mps_daemon import MAX_CLIENTS, limits_annotation, replicas_refusal, share_limits


@pytest.mark.parametrize(("memory_mib", "replicas", "pinned", "threads"), [
    (81559, 4, 20389, 25), (40960, 2, 20480, 50), (23034, 3, 7678, 33), (81559, 48, 1699, 2), (40960, 1, 40960, 100)])
def test_each_share_gets_its_part_of_memory_and_sms(memory_mib: int, replicas: int, pinned: int, threads: int) -> None:
    limits = share_limits(memory_mib, replicas)
    assert (limits.replicas, limits.pinned_memory_mib, limits.active_thread_percentage) == (replicas, pinned, threads)


def test_a_server_takes_at_most_48_clients() -> None:
    assert MAX_CLIENTS == 48
    assert replicas_refusal(48) is None
    assert replicas_refusal(49) == "invalid MPS configuration: invalid device maximum allowed replicas exceeded: 49 > 48"


def test_the_annotation_lists_each_resource() -> None:
    text = limits_annotation({"nvidia.com/gpu": share_limits(40960, 2)})
    assert json.loads(text) == {"nvidia.com/gpu": {"replicas": 2, "pinnedDeviceMemoryLimitMiB": 20480, "activeThreadPercentage": 50}}
