"""The MPS control daemon (`nvidia-device-plugin-mps-control-daemon`) as the simulated operator runs
it: on a node whose per-node config shares with `sharing.mps`, GFD labels `nvidia.com/mps.capable=true`,
the daemon's DaemonSet schedules a pod there, the pod turns Ready once it started an MPS server with
each share limited to memory/replicas and 100/replicas (recorded in its LIMITS_ANNOTATION), and only
then does the device plugin serve the replicas (it waits for the daemon). On MIG-enabled cards the
daemon starts no server: no `mps.capable`, no daemon pod, and the plugin keeps failing to start
(k8s-device-plugin cmd/mps-control-daemon/mps, internal/plugin server.go Start)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpushare.gpu_catalog import product
from gpushare.mps import share_limits
from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import mig_manager as mm
from gpushare_testbed.simulator import operands
from gpushare_testbed.simulator.mps_daemon import LIMITS_ANNOTATION, WAIT_ERROR
from tests.integration.sim_support import (
    MIG_NODE, SHARED, TIMEOUT_S, advertised, apply_configmap, container_status, label_node, node_history, operand_pods,
    physical_counts, point_plugin_at, pod_ready, shows_replicas, simulated_gpus,
)
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]
TRIAL = "gpu-node"  # 1 x H100 80GB in the default fleet


def mps_config(replicas: int) -> str:
    return ("version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
            f"    - name: nvidia.com/gpu\n      replicas: {replicas}\n")


def daemon_on(cluster: Cluster, node: str) -> Any:
    return operand_pods(cluster, operands.MPS_CONTROL_DAEMON).get(node)


def limits_of(pod: Any) -> dict[str, Any] | None:
    text = (pod.metadata.annotations or {}).get(LIMITS_ANNOTATION) if pod is not None else None
    return json.loads(text) if text else None


def plugin_error(cluster: Cluster, node: str) -> str | None:
    pod = operand_pods(cluster, operands.DEVICE_PLUGIN).get(node)
    if pod is None:
        return None
    last = container_status(pod, "nvidia-device-plugin").last_state
    return last.terminated.message if last and last.terminated else None


def test_mps_node_runs_a_ready_daemon_with_per_share_limits_before_the_plugin_serves(
        clean_cluster: Cluster, tmp_path: Path) -> None:
    cluster = clean_cluster
    physical = physical_counts(cluster)[TRIAL]
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "mps-4": mps_config(4)})
    point_plugin_at(cluster, "whole")
    assert daemon_on(cluster, TRIAL) is None, "no MPS daemon where nothing is shared with MPS"
    before = cluster.node(TRIAL)
    label_node(cluster, TRIAL, cp.CONFIG_LABEL, "mps-4")

    def view(node: Any) -> tuple:
        labels, allocatable = node.metadata.labels or {}, node.status.allocatable or {}
        return labels.get("nvidia.com/mps.capable"), labels.get("nvidia.com/gpu.sharing-strategy"), allocatable.get(SHARED)

    history = node_history(cluster, TRIAL, view, before, lambda now: now == ("true", "mps", str(physical * 4)))
    assert history[-1] == ("true", "mps", str(physical * 4))
    first_shared = next(i for i, state in enumerate(history) if state[2] == str(physical * 4))
    first_capable = next(i for i, state in enumerate(history) if state[0] == "true")
    assert first_capable <= first_shared, "GFD labels the node MPS-capable before the plugin can serve (it waits for the daemon)"
    wait_for(lambda: daemon_on(cluster, TRIAL) is not None and pod_ready(daemon_on(cluster, TRIAL)), TIMEOUT_S,
             "the MPS daemon to be Ready on the node")
    card = product(cluster.node(TRIAL).metadata.labels["nvidia.com/gpu.product"])
    expected = share_limits(card.memory_mib, 4)
    wait_for(lambda: limits_of(daemon_on(cluster, TRIAL)) is not None, TIMEOUT_S, "the daemon to record its limits")
    # the runbooks' model of the daemon (gpushare.mps) and the simulator's, written apart, agree
    assert limits_of(daemon_on(cluster, TRIAL)) == {SHARED: {"replicas": 4, "pinnedDeviceMemoryLimitMiB": expected.pinned_memory_mib,
                                                          "activeThreadPercentage": expected.active_thread_percentage}}
    assert expected.active_thread_percentage == 25
    assert shows_replicas(cluster, TRIAL, physical, 4)
    assert set(operand_pods(cluster, operands.MPS_CONTROL_DAEMON)) == {TRIAL}, "only the MPS node runs the daemon"

    label_node(cluster, TRIAL, cp.CONFIG_LABEL, None)  # back to the default: whole cards, the daemon goes
    wait_for(lambda: shows_replicas(cluster, TRIAL, physical, 1) and daemon_on(cluster, TRIAL) is None, TIMEOUT_S,
             "whole cards and no MPS daemon")
    assert advertised(cluster, TRIAL)[1].get("nvidia.com/mps.capable") == "false"


def test_too_many_replicas_leave_the_daemon_failing_and_the_plugin_waiting(clean_cluster: Cluster, tmp_path: Path) -> None:
    cluster = clean_cluster
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "mps-49": mps_config(49)})
    point_plugin_at(cluster, "whole")
    label_node(cluster, TRIAL, cp.CONFIG_LABEL, "mps-49")
    wait_for(lambda: daemon_on(cluster, TRIAL) is not None, TIMEOUT_S, "the MPS daemon pod on the node")

    def daemon_error() -> str | None:
        pod = daemon_on(cluster, TRIAL)
        last = container_status(pod, "mps-control-daemon-ctr").last_state if pod is not None else None
        return last.terminated.message if last and last.terminated else None

    wait_for(lambda: daemon_error() is not None, TIMEOUT_S, "the daemon to fail")
    assert daemon_error() == "invalid MPS configuration: invalid device maximum allowed replicas exceeded: 49 > 48"
    assert not pod_ready(daemon_on(cluster, TRIAL))
    wait_for(lambda: plugin_error(cluster, TRIAL) is not None, TIMEOUT_S, "the plugin to fail")
    assert plugin_error(cluster, TRIAL) == f"error starting plugins: {WAIT_ERROR}"
    assert advertised(cluster, TRIAL)[0].get(SHARED, "0") == "0"


def test_mps_on_mig_enabled_cards_runs_no_daemon_and_the_plugin_never_starts(clean_cluster: Cluster, tmp_path: Path) -> None:
    cluster = clean_cluster
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "mps-2": mps_config(2)})
    point_plugin_at(cluster, "whole")
    before = cluster.node(MIG_NODE)
    label_node(cluster, MIG_NODE, mm.MIG_CONFIG, "all-1g.5gb")
    node_history(cluster, MIG_NODE, lambda n: ((n.metadata.labels or {}).get(mm.MIG_STATE),), before,
                 lambda now: now[0] in ("success", "failed"))
    assert (cluster.node(MIG_NODE).metadata.labels or {}).get(mm.MIG_STATE) == "success"
    label_node(cluster, MIG_NODE, cp.CONFIG_LABEL, "mps-2")
    expected = f"error starting plugins: {WAIT_ERROR}"
    probe: Callable[[], bool] = lambda: plugin_error(cluster, MIG_NODE) == expected  # noqa: E731
    wait_for(probe, TIMEOUT_S, "the plugin to wait for an MPS daemon that never comes")
    assert advertised(cluster, MIG_NODE)[1].get("nvidia.com/mps.capable") == "false"
    assert daemon_on(cluster, MIG_NODE) is None
