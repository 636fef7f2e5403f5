"""Unit tests of roles/change_record/filter_plugins/change_record.py (behaviour only)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.filters import load_filters

F = load_filters("roles/change_record/filter_plugins/change_record.py")

node_row = F["change_record_node_row"]
md_cell = F["change_record_md_cell"]
observed = F["change_record_observed"]


def test_filter_names() -> None:
    assert sorted(F) == ["change_record_md_cell", "change_record_node_row", "change_record_observed"]


@pytest.mark.parametrize("value", [None, {}])
def test_missing_node(value: Any) -> None:
    assert node_row(value, "gpu-mode", "shared") == {"exists": False}


def test_shared_node_row() -> None:
    node = {"metadata": {"name": "gpu-1",
                         "labels": {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-H100-SHARED",
                                    "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
                                    "nvidia.com/device-plugin.config": "shared", "gpu-mode": "shared"},
                         "annotations": {"gpushare.io/timeslicing": '{"replicas": 4}'}},
            "spec": {"unschedulable": True, "taints": [{"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"},
                                                       {"key": "gpu-mode", "effect": "NoExecute"},
                                                       {"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "8"}}}
    assert node_row(node, "gpu-mode", "shared") == {
        "exists": True, "physical_gpus": "2", "product": "NVIDIA-H100-SHARED", "replicas": "4",
        "strategy": "time-slicing", "gpu": "0", "shared": "8", "config": "shared", "pool_label": True,
        "pool_taint": "gpu-mode=shared:NoSchedule, gpu-mode=:NoExecute", "schedulable": False,
        "annotation": '{"replicas": 4}'}


def test_bare_node_row() -> None:
    node = {"metadata": {"name": "gpu-1", "labels": {"nvidia.com/device-plugin.config": "", "gpu-mode": "other"},
                         "annotations": {"gpushare.io/timeslicing": ""}}}
    assert node_row(node, "gpu-mode", "shared") == {
        "exists": True, "physical_gpus": "-", "product": "-", "replicas": "-", "strategy": "-", "gpu": "0",
        "shared": "0", "config": "(cluster default)", "pool_label": False, "pool_taint": "none",
        "schedulable": True, "annotation": "none"}


@pytest.mark.parametrize("value, cell", [
    ("plain", "plain"),
    ("a|b", "a\\|b"),
    ("back\\slash", "back\\\\slash"),
    ("back\\|pipe", "back\\\\\\|pipe"),
    ("two\nlines\r\nhere", "two lines  here"),
    ("  padded \n", "padded"),
    (None, ""),
    (0, "0"),
    (False, "False"),
    (["a", "b"], "['a', 'b']"),
])
def test_md_cell(value: Any, cell: str) -> None:
    assert md_cell(value) == cell


@pytest.mark.parametrize("values, line", [
    ({"p95_ms": 123.456789, "restarts": 0, "ok": True}, "p95_ms=123.5 restarts=0 ok=True"),
    ({"ratio": 0.000012345, "big": 1234567.0}, "ratio=1.234e-05 big=1.235e+06"),
    ({"x": None, "pods": ["a", 1.23456, None, [2.0]]}, "x=n/a pods=[a, 1.235, n/a, [2]]"),
    ({"empty": []}, "empty=[]"),
    ({}, ""),
    (None, ""),
])
def test_observed(values: dict[str, Any] | None, line: str) -> None:
    assert observed(values) == line
