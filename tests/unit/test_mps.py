"""The MPS control daemon's per-share limits (k8s-device-plugin cmd/mps-control-daemon/mps)."""

from __future__ import annotations

import pytest

from gpushare.gpu_catalog import product
from gpushare.mps import MAX_CLIENTS, describe, failure_pending, never_serves, replicas_problem, share_limits
from tests.unit.cluster_objects import mps_daemon_pod as daemon_pod


def test_four_shares_of_an_h100_get_a_quarter_of_its_memory_and_25_percent_of_sms() -> None:
    h100 = product("NVIDIA-H100-80GB-HBM3")
    limits = share_limits(h100.memory_mib, 4)
    assert (limits.pinned_memory_mib, limits.active_thread_percentage) == (20389, 25)  # 81559 MiB // 4
    assert describe(h100.name, h100.memory_mib, 4) == (
        "4 shares of NVIDIA-H100-80GB-HBM3: 19.9 GiB pinned memory and 25% of SMs each")


@pytest.mark.parametrize(("replicas", "threads"), [(1, 100), (2, 50), (3, 33), (7, 14), (48, 2)])
def test_thread_percentage_is_the_integer_100_over_replicas(replicas: int, threads: int) -> None:
    assert share_limits(40960, replicas).active_thread_percentage == threads


@pytest.mark.parametrize("replicas", [1, 2, 3, 5, 7, 11, 48])
def test_the_shares_never_pin_more_than_the_card_holds(replicas: int) -> None:
    limits = share_limits(81559, replicas)
    assert limits.pinned_memory_mib * replicas <= 81559 < (limits.pinned_memory_mib + 1) * replicas


def test_more_than_48_clients_is_refused_in_the_daemons_words() -> None:
    assert replicas_problem(MAX_CLIENTS) is None
    assert replicas_problem(49) == "invalid MPS configuration: invalid device maximum allowed replicas exceeded: 49 > 48"


def test_no_replicas_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        share_limits(1000, 0)


# ---- a daemon that never serves (gpushare.mps.never_serves) -------------------------------------------
@pytest.mark.parametrize(("release", "why"), [
    ("v26.7", '"error finding pid: no process found" (NVIDIA/k8s-device-plugin PR #1827, not released)'),
    ("v26.3", "panics on the first kernel thread (NVIDIA/k8s-device-plugin#1726"),
])
def test_a_daemon_whose_sidecar_failed_on_a_release_that_cannot_signal_never_serves(release: str, why: str) -> None:
    said = never_serves("gpu-node", "trial", "nvidia.com/gpu.shared", 0, [daemon_pod(release, 3)])
    assert said is not None and said.startswith("gpu-node: the MPS control daemon never serves")
    assert why in said and "has failed 3 time(s) since pod mps-abc started" in said
    assert "Roll back: ansible-playbook playbooks/rollback-timeslicing.yml -l trial; then use MPS on every GPU node" in said


@pytest.mark.parametrize(("release", "restarts", "allocatable"), [
    ("v26.7", 0, 0),  # the sidecar has not signalled yet: the daemon may still be starting
    ("v26.7", 2, 4),  # the node serves its shares
    ("v25.10", 2, 0),  # init started the daemon on the node's key: a failed signal is not why it does not serve
])
def test_no_verdict_while_the_daemon_may_still_serve(release: str, restarts: int, allocatable: int) -> None:
    assert never_serves("gpu-node", None, "nvidia.com/gpu.shared", allocatable, [daemon_pod(release, restarts)]) is None


def test_only_the_daemon_of_the_node_counts() -> None:
    assert never_serves("gpu-node", None, "nvidia.com/gpu.shared", 0, [daemon_pod("v26.7", 3, node="other")]) is None


@pytest.mark.parametrize(("release", "restarts", "node", "pending"), [
    ("v26.7", 0, "gpu-node", True),  # its sidecar will fail and has not yet: the MPS verdict is still to come
    ("v26.3", 0, "gpu-node", True),
    ("v26.7", 3, "gpu-node", False),  # it has failed: never_serves says so
    ("v25.10", 0, "gpu-node", False),  # its signal arrives
    ("v26.7", 0, "other", False),  # only the node's daemon counts
])
def test_a_daemon_is_in_its_config_managers_failure_window_until_its_sidecar_fails(
        release: str, restarts: int, node: str, pending: bool) -> None:
    """Within it a device plugin serving nothing waits for the daemon: no NVIDIA/k8s-device-plugin#1645."""
    assert failure_pending("gpu-node", [daemon_pod(release, restarts, node=node)]) is pending
