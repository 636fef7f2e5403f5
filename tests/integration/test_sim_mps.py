"""The MPS control daemon (`nvidia-device-plugin-mps-control-daemon`) as the simulated operator runs
it: on a node whose config shares with `sharing.mps`, GFD labels `nvidia.com/mps.capable=true`, the
daemon's DaemonSet schedules a pod there, the pod turns Ready once it started an MPS server with each
share limited to memory/replicas and 100/replicas (recorded in its LIMITS_ANNOTATION), and only then
does the device plugin serve the replicas (it waits for the daemon, Running). A per-node config
reaches the daemon only up to plugin v0.18.1 (init waits for the label); from v0.18.2 init starts it
on the default and its sidecar cannot signal it (a kernel-thread panic before v0.20.0, "no process
found" on v0.20.0): it crash-loops, the daemon serves nothing, the plugin waits. With the MPS key as
the config's default (cluster scope) every release works. On MIG-enabled cards the daemon starts no
server: no `mps.capable`, no daemon pod, and the plugin waits (k8s-device-plugin
cmd/mps-control-daemon, cmd/config-manager, internal/plugin server.go Start)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpushare.gpu_catalog import product
from gpushare.k8s.session import Session
from gpushare.model.releases import KERNEL_THREAD_PANIC, NO_PROCESS_FOUND
from gpushare.model.operands import OperandPod
from gpushare.mps import failure_pending, share_limits
from gpushare.polling import DeadEnd, wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import mig_manager as mm
from gpushare_testbed.simulator import operands
from gpushare.timeslicing.checks import ZERO_DEVICES_GRACE_S, timeslicing_enabled
from gpushare_testbed.simulator.mps_daemon import LIMITS_ANNOTATION
from tests.integration.sim_support import (
    CHART_PLUGIN, MIG_NODE, SHARED, TIMEOUT_S, advertised, apply_configmap, container_status, label_node, node_history,
    operand_pods, physical_counts, point_plugin_at, pod_ready, run_device_plugin, shows_replicas, simulated_gpus,
)
from tests.integration.test_timeslicing_checks import paused
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]
TRIAL = "gpu-node"  # 1 x H100 80GB in the default fleet
SIGNALLING_PLUGIN = "v0.18.1"  # GPU Operator v25.10's: init waits for the node label


def mps_config(replicas: int) -> str:
    return ("version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
            f"    - name: nvidia.com/gpu\n      replicas: {replicas}\n")


def daemon_on(cluster: Cluster, node: str) -> Any:
    return operand_pods(cluster, operands.MPS_CONTROL_DAEMON).get(node)


def limits_of(pod: Any) -> dict[str, Any] | None:
    text = (pod.metadata.annotations or {}).get(LIMITS_ANNOTATION) if pod is not None else None
    return json.loads(text) if text else None


def plugin_waits(cluster: Cluster, node: str) -> bool:
    """The device plugin on `node` runs (never restarted) and serves no share: it waits for its MPS daemon."""
    pod = operand_pods(cluster, operands.DEVICE_PLUGIN).get(node)
    if pod is None or not pod_ready(pod):
        return False
    return container_status(pod, "nvidia-device-plugin").restart_count == 0 and \
        advertised(cluster, node)[0].get(SHARED, "0") == "0"


def sidecar_failure(pod: Any) -> str | None:
    last = container_status(pod, "config-manager").last_state if pod is not None else None
    return last.terminated.message if last and last.terminated else None


def test_mps_node_runs_a_ready_daemon_with_per_share_limits_before_the_plugin_serves(
        clean_cluster: Cluster, tmp_path: Path) -> None:
    cluster = clean_cluster
    run_device_plugin(cluster, SIGNALLING_PLUGIN)
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
    run_device_plugin(cluster, SIGNALLING_PLUGIN)
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
    wait_for(lambda: plugin_waits(cluster, TRIAL), TIMEOUT_S, "the plugin to run, waiting, serving no share")


@pytest.mark.parametrize(("version", "failure"), [("v0.19.3", KERNEL_THREAD_PANIC), (CHART_PLUGIN, NO_PROCESS_FOUND)])
def test_a_per_node_mps_config_never_reaches_the_daemon_from_v0_18_2(
        clean_cluster: Cluster, tmp_path: Path, version: str, failure: str) -> None:
    cluster = clean_cluster
    run_device_plugin(cluster, version)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "mps-4": mps_config(4)})
    point_plugin_at(cluster, "whole")
    label_node(cluster, TRIAL, cp.CONFIG_LABEL, "mps-4")
    wait_for(lambda: sidecar_failure(daemon_on(cluster, TRIAL)) is not None, TIMEOUT_S,
             "the daemon's config-manager sidecar to fail")
    daemon = daemon_on(cluster, TRIAL)
    assert sidecar_failure(daemon) == failure
    assert container_status(daemon, "config-manager").state.waiting.reason == "CrashLoopBackOff"
    assert container_status(daemon, "mps-control-daemon-ctr").state.running is not None, "the daemon waits, running"
    assert limits_of(daemon) is None, "it started no MPS server: the default config shares nothing"
    assert advertised(cluster, TRIAL)[1].get("nvidia.com/gpu.sharing-strategy") == "mps", "GFD runs the node's key"
    wait_for(lambda: plugin_waits(cluster, TRIAL), TIMEOUT_S, "the plugin to run, waiting, serving no share")
    # the enable's verify ends its wait at once, naming why
    want = {"targets": {TRIAL: {"gpus": physical_counts(cluster)[TRIAL], "pool": False}}, "replicas": 4, "rename": True,
            "scope": "node", "strategy": "mps", "key": "mps-4", "keys": [], "bystanders": {},
            "pool": {"label_key": "gpu-mode", "label_value": "shared", "taint": None},
            "compare_allocatable": True, "compare_schedulable": True}
    with pytest.raises(DeadEnd) as ended:
        timeslicing_enabled(Session(cluster.kubeconfig), cluster.operator_namespace, want)
    assert ended.value.problems[0].startswith(f"{TRIAL}: the MPS control daemon never serves")
    assert f"device plugin {version}" in ended.value.problems[0]


def test_a_daemon_in_its_config_managers_failure_window_is_not_taken_for_1645(
        clean_cluster: Cluster, tmp_path: Path) -> None:
    """The overlap of two verdicts on a per-node MPS target: the device plugin Ready for the #1645
    grace period while the node serves nothing, and a new MPS daemon pod whose sidecar will fail but
    has not yet (the simulator paused right after the pod was replaced holds that window open). The
    verify waits there instead of ending on NVIDIA/k8s-device-plugin#1645 (which would restart the
    plugin for nothing), and names the MPS cause once the sidecar has failed."""
    cluster = clean_cluster  # the chart's plugin, v0.20.0: "no process found"
    session = Session(cluster.kubeconfig)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "mps-4": mps_config(4)})
    point_plugin_at(cluster, "whole")
    label_node(cluster, TRIAL, cp.CONFIG_LABEL, "mps-4")
    wait_for(lambda: sidecar_failure(daemon_on(cluster, TRIAL)) is not None, TIMEOUT_S,
             "the daemon's config-manager sidecar to fail")
    wait_for(lambda: plugin_waits(cluster, TRIAL), TIMEOUT_S, "the plugin to run, waiting, serving no share")

    def plugin_ready_for() -> float:
        raw = next(p for p in session.pods_on([TRIAL], cluster.operator_namespace)
                   if OperandPod(p).daemonset == operands.DEVICE_PLUGIN)
        since = OperandPod(raw).ready_since
        return (dt.datetime.now(dt.timezone.utc) - since).total_seconds() if since else 0.0

    wait_for(lambda: plugin_ready_for() >= ZERO_DEVICES_GRACE_S, TIMEOUT_S, "the plugin Ready for the #1645 grace period")
    want = {"targets": {TRIAL: {"gpus": physical_counts(cluster)[TRIAL], "pool": False}}, "replicas": 4, "rename": True,
            "scope": "node", "strategy": "mps", "key": "mps-4", "keys": [], "bystanders": {},
            "pool": {"label_key": "gpu-mode", "label_value": "shared", "taint": None},
            "compare_allocatable": True, "compare_schedulable": True}
    old = daemon_on(cluster, TRIAL)
    with paused(cluster, "gpu-operator-sim"):
        cluster.core.delete_namespaced_pod(old.metadata.name, cluster.operator_namespace)
        wait_for(lambda: (new := daemon_on(cluster, TRIAL)) is not None and new.metadata.uid != old.metadata.uid,
                 TIMEOUT_S, "the DaemonSet to replace the daemon's pod")
        pods = session.pods_on([TRIAL], cluster.operator_namespace)
        # the overlap, in effect as the check acts: the new daemon's sidecar will fail and has not yet,
        # the plugin is Ready past the grace period, the node serves nothing
        assert failure_pending(TRIAL, pods), "the new daemon pod is within its sidecar's failure window"
        assert plugin_ready_for() >= ZERO_DEVICES_GRACE_S and advertised(cluster, TRIAL)[0].get(SHARED, "0") == "0"
        problems = timeslicing_enabled(session, cluster.operator_namespace, want)  # waits: no DeadEnd
        assert problems and not any("1645" in p for p in problems)
        assert failure_pending(TRIAL, session.pods_on([TRIAL], cluster.operator_namespace)), "still in the window"

    def verdict() -> str:
        try:
            timeslicing_enabled(session, cluster.operator_namespace, want)
        except DeadEnd as ended:
            return ended.problems[0]
        return ""

    wait_for(lambda: verdict() != "", TIMEOUT_S, "the verify to end on the MPS verdict")
    assert verdict().startswith(f"{TRIAL}: the MPS control daemon never serves")


def test_with_the_mps_key_as_the_default_the_daemon_starts_on_it_and_serves(clean_cluster: Cluster, tmp_path: Path) -> None:
    cluster = clean_cluster  # the chart's plugin, v0.20.0: no signal is needed
    physical = physical_counts(cluster)[TRIAL]
    apply_configmap(cluster, tmp_path, {"mps-2": mps_config(2)})
    point_plugin_at(cluster, "mps-2")
    wait_for(lambda: shows_replicas(cluster, TRIAL, physical, 2), TIMEOUT_S, "2 MPS shares per card on the node")
    daemon = daemon_on(cluster, TRIAL)
    assert pod_ready(daemon) and container_status(daemon, "config-manager").restart_count == 0
    assert limits_of(daemon) is not None


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
    probe: Callable[[], bool] = lambda: (  # noqa: E731
        plugin_waits(cluster, MIG_NODE) and advertised(cluster, MIG_NODE)[1].get("nvidia.com/gpu.sharing-strategy") == "mps")
    wait_for(probe, TIMEOUT_S, "the plugin to wait for an MPS daemon that never comes")
    assert advertised(cluster, MIG_NODE)[1].get("nvidia.com/mps.capable") == "false"
    assert daemon_on(cluster, MIG_NODE) is None
