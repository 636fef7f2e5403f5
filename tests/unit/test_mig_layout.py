"""A node's MIG layout and what `nvidia-mig-parted apply` does to it (gpushare.mig_layout), for the
MIG runbook's plan: entries in turn, a later one winning on a GPU both match; what one GPU's MIG
devices need of it; the simulated hardware's annotation read back as the same layout."""

from __future__ import annotations

import json

from gpushare.gpu_catalog import product
from gpushare.mig_layout import apply, devices, instances, mode_change, needs, selected, whole_gpus
from gpushare.mig_parted_config import MigConfigSpec
from gpushare_testbed.simulator import mig_manager as mm

A100_ID = ("0x20B010DE",)
ALL_OFF = MigConfigSpec(None, None, False, {})
FIRST_TWO = MigConfigSpec(None, (0, 1), True, {"3g.20gb": 2})
OTHER_PRODUCT = MigConfigSpec(("0x233010DE",), None, True, {"1g.10gb": 7})


def test_entries_apply_in_turn_and_a_later_one_wins() -> None:
    assert apply([ALL_OFF, FIRST_TWO], A100_ID, [{"1g.5gb": 7}] * 3) == [{"3g.20gb": 2}, {"3g.20gb": 2}, None]
    assert apply([FIRST_TWO, ALL_OFF], A100_ID, [{"1g.5gb": 7}] * 3) == [None] * 3


def test_gpus_no_entry_matches_keep_theirs() -> None:
    assert apply([OTHER_PRODUCT], A100_ID, [{"1g.5gb": 7}, None]) == [{"1g.5gb": 7}, None]
    assert selected([OTHER_PRODUCT], A100_ID, 2) == []
    assert [i for i, _ in selected([FIRST_TWO, ALL_OFF], A100_ID, 3)] == [0, 1, 0, 1, 2]


def test_what_one_gpus_devices_need() -> None:
    profiles = product("NVIDIA-A100-SXM4-40GB").mig_profiles
    assert needs({"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, profiles).fits
    assert (needs({"3g.20gb": 2, "1g.5gb": 2}, profiles).compute, needs({"1g.10gb": 3, "1g.5gb": 3}, profiles).memory) == (8, 9)
    assert needs({"1g.5gb": 8}, profiles).too_many == ("1g.5gb",)


def test_counts_whole_gpus_and_mode_changes() -> None:
    layout = [{"1g.5gb": 2, "2g.10gb": 1}, None, {}]
    assert instances(layout) == {"1g.5gb": 2, "2g.10gb": 1} and whole_gpus(layout) == 1
    assert devices({"1g.5gb": 2, "2g.10gb": 1}) == ["1g.5gb", "1g.5gb", "2g.10gb"]
    assert mode_change(layout, [None, None, {}]) and not mode_change(layout, [{"7g.40gb": 1}, None, {"1g.5gb": 1}])


def test_the_simulated_hardware_annotation_reads_back_as_the_layout() -> None:
    raw = json.dumps([["1g.5gb", "1g.5gb", "2g.10gb"], None, []])
    assert mm.applied_layout({mm.LAYOUT_ANNOTATION: raw}, 3) == [{"1g.5gb": 2, "2g.10gb": 1}, None, {}]
    assert mm.applied_layout({}, 2) == [None, None]
