"""The fleet file: what nodes the embedded cluster gets, and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpushare_testbed.fleet import HARDWARE_ANNOTATION, NFD_NVIDIA_LABEL, FleetError, load_fleet, parse_fleet

REPO = Path(__file__).resolve().parents[2]


def test_default_fleet_matches_the_runbook_trial_setup() -> None:
    fleet = load_fleet()
    by_name = {n.name: n for n in fleet.nodes}
    assert (by_name["gpu-node"].gpus, by_name["gpu-node"].product) == (1, "NVIDIA-H100-80GB-HBM3")
    assert (by_name["gpu-node-2"].gpus, by_name["gpu-node-2"].product) == (8, "NVIDIA-H100-80GB-HBM3")
    assert (by_name["gpu-node-mig"].gpus, by_name["gpu-node-mig"].product) == (4, "NVIDIA-A100-SXM4-40GB")
    assert by_name["cpu-node"].gpus == 0
    assert [n.name for n in fleet.gpu_nodes] == ["gpu-node", "gpu-node-2", "gpu-node-mig"]


def test_gpu_node_registers_as_a_kubelet_would_before_the_gpu_operator_runs() -> None:
    # GPU resources and nvidia.com/* labels come from the device plugin and GFD; NFD has seen the card
    manifest = load_fleet().node("gpu-node-2").manifest()
    labels = manifest["metadata"]["labels"]
    assert labels[NFD_NVIDIA_LABEL] == "true"
    assert not any(k.startswith("nvidia.com/") for k in labels)
    assert "nvidia.com/gpu" not in manifest["status"]["capacity"]
    assert json.loads(manifest["metadata"]["annotations"][HARDWARE_ANNOTATION]) == {
        "count": 8, "product": "NVIDIA-H100-80GB-HBM3"}


def test_cpu_node_has_no_gpu_labels_or_resources() -> None:
    manifest = load_fleet().node("cpu-node").manifest()
    assert not any(k.startswith("nvidia.com/") or k == NFD_NVIDIA_LABEL for k in manifest["metadata"]["labels"])
    assert "nvidia.com/gpu" not in manifest["status"]["capacity"]
    assert HARDWARE_ANNOTATION not in manifest["metadata"]["annotations"]


def test_groups_expand_with_zero_padded_index() -> None:
    fleet = load_fleet(REPO / "fleets" / "scale-500.yaml")
    assert len(fleet.gpu_nodes) == 500
    assert fleet.nodes[1].name == "h100-001" and fleet.node("h100-399").gpus == 8


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param({}, "expected a mapping with a `nodes:` list", id="no-nodes-key"),
        pytest.param({"nodes": []}, "has no nodes", id="empty"),
        pytest.param({"nodes": [{"gpus": 1}]}, "`name` is required", id="no-name"),
        pytest.param({"nodes": [{"name": "a", "gpus": 2}]}, "needs `product`", id="gpus-without-product"),
        pytest.param({"nodes": [{"name": "a", "gpus": -1, "product": "NVIDIA-L4"}]}, "whole number >= 0", id="negative"),
        pytest.param({"nodes": [{"name": "a", "gpus": "two", "product": "NVIDIA-L4"}]}, "whole number >= 0", id="not-a-number"),
        pytest.param({"nodes": [{"name": "a", "gpus": 1, "product": "GeForce-9"}]}, "unknown GPU product", id="bad-product"),
        pytest.param({"nodes": [{"name": "a"}, {"name": "a"}]}, "appears twice", id="duplicate"),
        pytest.param({"nodes": [{"name": "n", "count": 3}]}, "needs `{index}`", id="group-without-index"),
        pytest.param({"nodes": [{"name": "Bad_Name"}]}, "not a valid node name", id="bad-name"),
        pytest.param({"nodes": [{"name": "a", "gpu": 1}]}, "unknown keys ['gpu']", id="typo-key"),
    ],
)
def test_bad_fleet_files_are_refused_with_the_fix(document: object, message: str) -> None:
    with pytest.raises(FleetError, match=message.replace("[", r"\[").replace("]", r"\]").replace("{", r"\{").replace("}", r"\}")):
        parse_fleet(document, source="fleet.yaml")


def test_unreadable_fleet_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="cannot read fleet file"):
        load_fleet(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodes: [")
    with pytest.raises(FleetError, match="not valid YAML"):
        load_fleet(broken)
