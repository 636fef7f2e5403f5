"""The MPS control daemon's per-share limits (k8s-device-plugin cmd/mps-control-daemon/mps)."""

from __future__ import annotations

import pytest

from gpushare.gpu_catalog import product
from gpushare.mps import MAX_CLIENTS, describe, replicas_problem, share_limits


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

