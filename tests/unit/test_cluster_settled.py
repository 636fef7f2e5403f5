"""What the test bed waits out before it takes a cluster as settled: a change the operator is still
making to a GPU node, read from the labels a real node carries too."""

from __future__ import annotations

import pytest

from gpushare_testbed.cluster_bootstrap import in_flight


@pytest.mark.parametrize(("labels", "problem"), [
    ({}, None),
    ({"nvidia.com/gpu-driver-upgrade-state": "upgrade-done", "nvidia.com/mig.config.state": "success"}, None),
    ({"nvidia.com/mig.config.state": "failed"}, None),  # over: what failed stays so
    ({"nvidia.com/gpu-driver-upgrade-state": "pod-restart-required"}, "the driver upgrade to finish (pod-restart-required)"),
    ({"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}, None),  # over, failed
    ({"nvidia.com/mig.config.state": "pending"}, "the MIG reconfiguration to finish (pending)"),
    ({"nvidia.com/mig.config.state": "rebooting"}, "the MIG reconfiguration to finish (rebooting)"),
])
def test_a_node_is_in_flight_until_its_driver_upgrade_and_mig_reconfiguration_end(
        labels: dict[str, str], problem: str | None) -> None:
    assert in_flight(labels) == problem
