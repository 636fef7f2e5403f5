"""`gpushare sim status`'s fleet table (gpushare_testbed.fleet_report): one row per node, by name, with the
GPU labels and allocatable resources as the API server wrote them and the kubelet's readiness."""

from __future__ import annotations

from gpushare_testbed.fleet_report import HEADERS, rows
from tests.unit.cluster_objects import node


def test_one_row_per_node_by_name() -> None:
    shared = node("gpu-node-2", 1, replicas=4)
    shared["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    cpu = node("cpu-node-1", gpu=False)
    cpu["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert HEADERS == ["node", "ready", "physical GPUs", "product", "replicas", "nvidia.com/gpu",
                       "nvidia.com/gpu.shared"]
    assert rows([shared, cpu]) == [
        ["cpu-node-1", "no", "0", "-", "-", "0", "0"],
        ["gpu-node-2", "yes", "1", "NVIDIA-H100-80GB-HBM3", "4", "0", "4"],
    ]
