"""mig-parted's side of the MIG manager: the operator's default config (generated from the catalog,
shaped like assets/state-mig-manager/0400_configmap.yaml), parsing as api/spec/v1/spec.go does,
and applying a config to a node's GPUs (cmd/nvidia-mig-parted/apply); contract section "MIG"."""

from __future__ import annotations

import pytest
import yaml

from gpushare.gpu_catalog import COMPUTE_SLICES, MEMORY_SLICES, PRODUCTS, product
from gpushare_testbed.simulator.mig import DISABLED, apply, default_config, instances, mode_change
from gpushare_testbed.simulator.mig_parted import MigConfigError, parse_configs, select

CONFIGS = parse_configs(default_config(PRODUCTS.values()))


def applied(product_name: str, config: str, gpus: int = 4) -> list:
    return apply(product(product_name), [None] * gpus, select(CONFIGS, config))


@pytest.mark.parametrize(
    ("product_name", "config", "per_gpu"),
    [
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-1g.10gb", {"1g.10gb": 7}, id="h100-all-1g.10gb-7"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-1g.20gb", {"1g.20gb": 4}, id="h100-all-1g.20gb-4"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-3g.40gb", {"3g.40gb": 2}, id="h100-all-3g.40gb-2"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-7g.80gb", {"7g.80gb": 1}, id="h100-all-7g.80gb-1"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-1g.5gb", {"1g.5gb": 7}, id="a100-40gb-all-1g.5gb-7"),
        # the same name, another count per product: a device-filter entry each (as upstream's all-1g.10gb)
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-1g.10gb", {"1g.10gb": 4}, id="a100-40gb-all-1g.10gb-4"),
        pytest.param("NVIDIA-A100-SXM4-80GB", "all-1g.10gb", {"1g.10gb": 7}, id="a100-80gb-all-1g.10gb-7"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-2g.10gb", {"2g.10gb": 3}, id="a100-40gb-all-2g.10gb-3"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-7g.40gb", {"7g.40gb": 1}, id="a100-40gb-all-7g.40gb-1"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, id="h100-balanced"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-balanced", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, id="a100-balanced"),
    ],
)
def test_default_config_profiles(product_name: str, config: str, per_gpu: dict[str, int]) -> None:
    layout = applied(product_name, config)
    assert layout == [per_gpu] * 4
    assert instances(layout) == {name: count * 4 for name, count in per_gpu.items()}


def test_profile_tables_fit_one_gpu() -> None:
    for gpu in PRODUCTS.values():
        for profile in gpu.mig_profiles.values():
            assert profile.compute_slices * profile.max_per_gpu <= COMPUTE_SLICES, profile
            assert profile.memory_slices * profile.max_per_gpu <= MEMORY_SLICES, profile


def test_all_disabled_and_all_enabled() -> None:
    assert applied("NVIDIA-A100-SXM4-40GB", DISABLED) == [None] * 4
    assert applied("NVIDIA-A100-SXM4-40GB", "all-enabled") == [{}] * 4  # MIG mode on, no devices


def test_non_mig_capable_gpus_are_skipped_by_all_device_entries() -> None:
    # apply: "Skipping -- non MIG-capable GPU" for `devices: all`
    assert applied("NVIDIA-L4", "all-1g.10gb", 2) == [None, None]


@pytest.mark.parametrize(
    ("product_name", "config", "message"),
    [
        # no 80gb instance on a 40GB card: the config exists, applying it fails
        pytest.param("NVIDIA-A100-SXM4-40GB", "all-7g.80gb", "not supported on NVIDIA-A100-SXM4-40GB", id="a100-7g.80gb"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "all-1g.5gb", "not supported", id="h100-1g.5gb"),
    ],
)
def test_configs_that_do_not_apply(product_name: str, config: str, message: str) -> None:
    with pytest.raises(MigConfigError, match=message):
        applied(product_name, config)


def test_unknown_config_is_refused_by_select() -> None:
    with pytest.raises(MigConfigError, match="selected mig-config not present: custom-layout"):
        select(CONFIGS, "custom-layout")


def test_custom_config_per_device_index_and_overcommit() -> None:
    text = yaml.safe_dump({"version": "v1", "mig-configs": {
        "split": [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
                  {"devices": [2, 3], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
        "too-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2, "1g.5gb": 1}}],
    }})
    configs = parse_configs(text)
    a100 = product("NVIDIA-A100-SXM4-40GB")
    assert apply(a100, [None] * 4, select(configs, "split")) == [{"1g.5gb": 7}] * 2 + [{"3g.20gb": 2}] * 2
    with pytest.raises(MigConfigError, match="does not fit"):
        apply(a100, [None] * 4, select(configs, "too-big"))


def test_mode_change() -> None:
    assert mode_change([None, None], [{"1g.5gb": 1}, None])
    assert not mode_change([{"1g.5gb": 1}, None], [{"2g.10gb": 1}, None])  # only the devices change
