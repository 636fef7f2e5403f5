"""mig-parted configs on the simulated products (NVIDIA MIG user guide profile tables,
mig-parted's default `all-*` configs); contract section "MIG"."""

from __future__ import annotations

import pytest

from gpushare.gpu_catalog import product
from gpushare.simulator.mig import MigConfigError, devices, layout


@pytest.mark.parametrize(
    ("product_name", "config", "per_gpu"),
    [
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-1g.10gb", {"1g.10gb": 7}, id="h100-all-1g.10gb-7"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-1g.20gb", {"1g.20gb": 4}, id="h100-all-1g.20gb-4"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-3g.40gb", {"3g.40gb": 2}, id="h100-all-3g.40gb-2"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-7g.80gb", {"7g.80gb": 1}, id="h100-all-7g.80gb-1"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-1g.5gb", {"1g.5gb": 7}, id="a100-40gb-all-1g.5gb-7"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-2g.10gb", {"2g.10gb": 3}, id="a100-40gb-all-2g.10gb-3"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-7g.40gb", {"7g.40gb": 1}, id="a100-40gb-all-7g.40gb-1"),
        pytest.param("NVIDIA-A100-SXM4-80GB", "all-1g.10gb", {"1g.10gb": 7}, id="a100-80gb-all-1g.10gb-7"),
        # mig-parted's all-balanced
        pytest.param(
            "NVIDIA-H100-80GB-HBM3", "all-balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, id="h100-all-balanced"
        ),
        pytest.param(
            "NVIDIA-A100-SXM4-40GB",
            "all-balanced",
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
            id="a100-40gb-all-balanced",
        ),
        # MIG mode on, no instances
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-enabled", {}, id="all-enabled-no-devices"),
    ],
)
def test_profile_tables(product_name: str, config: str, per_gpu: dict[str, int]) -> None:
    gpus = 4
    mig_layout = layout(product(product_name), config, gpus)
    assert mig_layout is not None and len(mig_layout) == gpus
    assert all(devices([gpu]) == per_gpu for gpu in mig_layout)
    assert devices(mig_layout) == {name: count * gpus for name, count in per_gpu.items()}


def test_balanced_layout_fits_the_seven_compute_slices() -> None:
    for name in ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB"):
        gpu = product(name)
        slices = sum(gpu.mig_profiles[p].compute_slices * n for p, n in gpu.mig_balanced.items())
        assert slices <= 7, name


@pytest.mark.parametrize("product_name", ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB", "NVIDIA-L4", "Tesla-T4"])
def test_all_disabled_means_whole_cards_on_any_product(product_name: str) -> None:
    assert layout(product(product_name), "all-disabled", 2) is None


@pytest.mark.parametrize(
    ("product_name", "config", "message"),
    [
        # the A100-40GB has no 80gb (or 10gb-per-slice) instances
        pytest.param(
            "NVIDIA-A100-SXM4-40GB",
            "all-7g.80gb",
            "does not fit NVIDIA-A100-SXM4-40GB",
            id="a100-40gb-7g.80gb-unfitting",
        ),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-1g.20gb", "does not fit", id="a100-40gb-1g.20gb-unfitting"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-1g.5gb", "does not fit", id="h100-1g.5gb-unfitting"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-2g.99gb", "does not fit", id="unknown-profile"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "custom-layout", "does not exist", id="unknown-config-name"),
        # not MIG capable: only all-disabled applies
        pytest.param("NVIDIA-L4", "all-1g.10gb", "does not support MIG", id="l4-not-mig-capable"),
        pytest.param("Tesla-T4", "all-balanced", "does not support MIG", id="t4-not-mig-capable"),
    ],
)
def test_configs_mig_parted_refuses(product_name: str, config: str, message: str) -> None:
    with pytest.raises(MigConfigError, match=message):
        layout(product(product_name), config, 4)
