"""The baseline's recommended sharing mode per candidate GPU (gpushare.baseline.mode)."""

from __future__ import annotations

from gpushare.baseline.mode import MIG, MPS, TIME_SLICING, mig_capable, recommend


def test_a_peak_within_the_per_share_limit_recommends_mps() -> None:
    mode = recommend(4, 18000, 81559, 1, "NVIDIA H100 80GB HBM3")
    assert mode.mode == MPS
    assert "18000 MiB fits MPS's per-share limit of 20389 MiB at 4 replicas (25% of SMs each)" in mode.reason


def test_a_peak_above_the_per_share_limit_recommends_time_slicing() -> None:
    mode = recommend(4, 30000, 81559, 1, "NVIDIA H100 80GB HBM3")
    assert mode.mode == TIME_SLICING and "above MPS's per-share limit of 20389 MiB" in mode.reason


def test_several_teams_on_a_mig_capable_card_recommend_mig_and_not_on_a_t4() -> None:
    assert recommend(2, 1000, 40960, 2, "NVIDIA A100-SXM4-40GB").mode == MIG
    assert recommend(2, 1000, 15360, 2, "Tesla T4").mode == MPS


def test_without_memory_readings_time_slicing_is_recommended_with_why() -> None:
    mode = recommend(2, None, None, 1, "NVIDIA H100 80GB HBM3")
    assert mode.mode == TIME_SLICING and "no memory peak" in mode.reason


def test_dcgm_model_names_map_to_the_catalog() -> None:
    assert mig_capable("NVIDIA H100 80GB HBM3") and mig_capable("NVIDIA A100-SXM4-40GB")
    assert not mig_capable("Tesla T4") and not mig_capable("")
