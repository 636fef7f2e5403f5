"""mig-parted configs as the MIG runbook reads them (gpushare.mig.parted): which ConfigMap a node's
MIG manager uses, the entries read from the file (judged in test_mig_parted_config), and what
applying a config does to a node's GPUs (device-filter, devices, what mig-parted refuses, what the
runbook leaves to the MIG manager)."""

from __future__ import annotations

import pytest
import yaml

from gpushare import mig_layout
from gpushare.mig import parted
from gpushare.mig.hardware import model
from gpushare.mig_parted_config import MigConfigSpec, parse_configs

A100 = model("NVIDIA-A100-SXM4-40GB")
H100 = model("NVIDIA-H100-80GB-HBM3")
# Shaped like the operator's default-mig-parted-config: device filters where counts differ.
CONFIG = yaml.safe_dump({"version": "v1", "mig-configs": {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
    "all-1g.10gb": [
        {"device-filter": ["0x233010DE", "0x20B210DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 7}},
        {"device-filter": "0x20b010de", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 4}}],
    "all-balanced": [{"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True,
                      "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}],
    "first-two": [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
}})


def _configs() -> dict[str, list[MigConfigSpec]]:
    return parse_configs(CONFIG)


# ---- which ConfigMap ---------------------------------------------------------------------------------
def test_a_custom_config_named_by_the_clusterpolicy_wins() -> None:
    spec = {"migManager": {"config": {"name": "team-config", "default": "all-disabled"}}}
    assert parted.source(spec, {"gpu-node-mig-mig-config": {}}, "gpu-node-mig").configmap == "team-config"


def test_without_one_the_configs_the_mig_manager_generated_for_the_node() -> None:
    spec = {"migManager": {"config": {"default": "all-disabled"}}}
    assert parted.source(spec, {"gpu-node-mig-mig-config": {}}, "gpu-node-mig").configmap == "gpu-node-mig-mig-config"


def test_else_the_operators_default() -> None:
    assert parted.source({}, {}, "gpu-node-mig") == parted.Source(parted.DEFAULT_CONFIGMAP, "the GPU Operator's default")


# ---- the file -------------------------------------------------------------------------------------------
def test_entries_are_read_with_their_filters_and_devices() -> None:
    configs = _configs()
    assert configs["all-1g.10gb"][1].device_filter == ("0x20b010de",)  # as written; matched as a number
    assert configs["first-two"][0].devices == (0, 1)
    assert configs["all-disabled"][0] == MigConfigSpec(None, None, False, {})


# ---- applying a config -------------------------------------------------------------------------------------
def test_all_1g_5gb_gives_seven_instances_per_a100_40gb() -> None:
    layout, refusals, warnings = parted.apply(_configs()["all-1g.5gb"], A100, [None] * 4)
    assert (layout, refusals, warnings) == ([{"1g.5gb": 7}] * 4, [], [])
    assert mig_layout.instances(layout) == {"1g.5gb": 28} and mig_layout.whole_gpus(layout) == 0


def test_the_device_filter_picks_the_entry_of_the_product() -> None:
    assert parted.apply(_configs()["all-1g.10gb"], A100, [None] * 4)[0] == [{"1g.10gb": 4}] * 4
    assert parted.apply(_configs()["all-1g.10gb"], H100, [None])[0] == [{"1g.10gb": 7}]


def test_gpus_no_entry_selects_keep_what_they_have() -> None:
    layout, refusals, _ = parted.apply(_configs()["first-two"], A100, [None, None, {"1g.5gb": 7}, None])
    assert refusals == [] and layout == [{"3g.20gb": 2}, {"3g.20gb": 2}, {"1g.5gb": 7}, None]
    assert mig_layout.whole_gpus(layout) == 1


def test_a_config_that_matches_no_gpu_of_the_node_would_change_nothing() -> None:
    _, refusals, _ = parted.apply(_configs()["all-balanced"], H100, [None])
    assert refusals and "none of its entries applies" in refusals[0] and "0x233010DE" in refusals[0]


def test_a_device_filter_on_a_product_without_known_id_cannot_be_judged() -> None:
    _, refusals, _ = parted.apply(_configs()["all-1g.10gb"], model("NVIDIA-B200", 183359), [None])
    assert "does not know the PCI device ID of NVIDIA-B200" in refusals[0]


@pytest.mark.parametrize(("wanted", "problem"), [
    pytest.param({"2g.20gb": 3}, "2g.20gb is not a MIG profile of NVIDIA-A100-SXM4-40GB", id="foreign-profile"),
    pytest.param({"1g.5gb": 8}, "8 x 1g.5gb on one NVIDIA-A100-SXM4-40GB: at most 7", id="too-many"),
    pytest.param({"3g.20gb": 2, "1g.5gb": 2}, "needs 8 compute slices", id="compute-slices"),
    pytest.param({"1g.10gb": 3, "1g.5gb": 3}, "needs 9 memory slices", id="memory-slices"),
    pytest.param({"big": 1}, "'big' is not a MIG profile name", id="not-a-profile"),
])
def test_what_mig_parted_refuses_on_one_gpu(wanted: dict[str, int], problem: str) -> None:
    refusals, _ = parted.fits_one_gpu(wanted, A100)
    assert any(problem in r for r in refusals), refusals


def test_a_full_gpu_fits() -> None:
    assert parted.fits_one_gpu({"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, A100) == ([], [])
    assert parted.fits_one_gpu({"7g.40gb": 1}, A100) == ([], [])


def test_a_profile_the_tables_lack_is_left_to_the_mig_manager() -> None:
    refusals, warnings = parted.fits_one_gpu({"1g.5gb+me": 1}, A100)
    assert refusals == [] and "profile 1g.5gb+me is not in the runbook's tables" in warnings[0]


def test_all_disabled_turns_mig_off() -> None:
    layout, refusals, _ = parted.apply(_configs()["all-disabled"], A100, [{"1g.5gb": 7}] * 4)
    assert refusals == [] and layout == [None] * 4
