"""The MIG manager on gpu-node-mig (4 x A100-SXM4-40GB), driven by `kubectl label node ...
nvidia.com/mig.config=<name>`: the states it writes, the GPU clients it pauses and restores (their
pods really go and come back), what the plugin and GFD show per `mig.strategy`, the configs it
generates from the GPUs, and the reboot, stuck-client and never-finishing paths (contract section
"MIG"; mig-parted v0.15 pkg/mig/reconfigure, cmd/nvidia-mig-manager)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushare.polling import WaitTimeout, wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import mig_manager as mm
from gpushare_testbed.simulator import operands
from tests.integration.sim_support import (
    GPU, MIG_NODE, POLICY, TIMEOUT_S, advertised, apply_configmap, label_node, node_history,
    operand_pods, patch_policy_and_wait, pod_uids, simulated_gpus, stays,
)
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
__all__ = ["simulated_gpus"]
PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
HOLD = "gpushare.test/hold"  # a finalizer that keeps a pod terminating until the test removes it



def states(node: Any) -> tuple:
    labels = node.metadata.labels or {}
    return labels.get(mm.MIG_STATE), labels.get(PLUGIN_LABEL), labels.get("nvidia.com/gpu.deploy.dcgm")


def relabel(cluster: Cluster, config: str, until: Callable[[tuple], bool] = lambda s: s[0] in ("success", "failed")) -> list[tuple]:
    """`kubectl label node gpu-node-mig nvidia.com/mig.config=<config> --overwrite`; what followed."""
    before = cluster.node(MIG_NODE)
    label_node(cluster, MIG_NODE, mm.MIG_CONFIG, config)
    return node_history(cluster, MIG_NODE, states, before, until)


def sequence(history: list[tuple]) -> list[str]:
    names = [s[0] for s in history]
    return [s for i, s in enumerate(names) if i == 0 or names[i - 1] != s]


def shows(cluster: Cluster, resource: str, count: int, **labels: str) -> bool:
    allocatable, node_labels = advertised(cluster, MIG_NODE)
    return allocatable.get(resource) == str(count) and all(node_labels.get(k) == v for k, v in labels.items())


@pytest.mark.parametrize("strategy", ["single", "mixed"])
def test_mig_label_round_trip(clean_cluster: Cluster, strategy: str) -> None:
    """`nvidia.com/mig.config` drives `mig.config.state` pending -> success | failed, pausing the GPU
    clients' deploy labels (their pods go) and restoring them (new pods); an unknown config fails at
    once; resources and labels follow `spec.mig.strategy`."""
    cluster = clean_cluster
    if strategy == "mixed":
        patch_policy_and_wait(cluster, {"mig": {"strategy": "mixed"}})
    plugins = pod_uids(cluster)
    history = relabel(cluster, "all-1g.5gb")
    assert sequence(history) == ["pending", "success"]
    assert ("pending", "paused-for-mig-change", "paused-for-mig-change") in history
    assert history[-1][1:] == ("true", "true")
    if strategy == "single":
        wait_for(lambda: shows(cluster, GPU, 28, **{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                                                     "nvidia.com/gpu.count": "28"}), TIMEOUT_S, "28 x nvidia.com/gpu")
    else:
        wait_for(lambda: shows(cluster, "nvidia.com/mig-1g.5gb", 28, **{"nvidia.com/mig-1g.5gb.count": "28",
                                                                         "nvidia.com/gpu.sharing-strategy": "none"}),
                 TIMEOUT_S, "28 x nvidia.com/mig-1g.5gb")
        assert advertised(cluster, MIG_NODE)[0][GPU] == "0"
    after = pod_uids(cluster)
    for app in (operands.DEVICE_PLUGIN, operands.GFD, "nvidia-dcgm-exporter", operands.VALIDATOR):
        assert after[f"{app}/{MIG_NODE}"] != plugins[f"{app}/{MIG_NODE}"], f"{app} restarted on {MIG_NODE}"
    assert after[f"{operands.DRIVER}/{MIG_NODE}"] == plugins[f"{operands.DRIVER}/{MIG_NODE}"]
    mig_view = advertised(cluster, MIG_NODE)[0]

    assert sequence(relabel(cluster, "no-such-config")) == ["failed"]  # assert --valid-config fails before pending
    assert sequence(relabel(cluster, "all-1g.5gb")) == ["success"]  # already applied
    # not among the configs generated from the node's GPUs (no 80gb instance on a 40GB card): fails before pending
    assert sequence(relabel(cluster, "all-7g.80gb")) == ["failed"]
    wait_for(lambda: advertised(cluster, MIG_NODE)[0] == mig_view, TIMEOUT_S, "the MIG devices as they were")

    assert sequence(relabel(cluster, "all-disabled")) == ["pending", "success"]
    # the plugin and GFD restart on their own schedules: whole cards first, GFD's MIG labels gone after
    wait_for(lambda: shows(cluster, GPU, 4, **{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}), TIMEOUT_S, "whole cards")
    wait_for(lambda: not [k for k in advertised(cluster, MIG_NODE)[1] if k.startswith("nvidia.com/mig-")], TIMEOUT_S,
             "no MIG labels left")
    allocatable = advertised(cluster, MIG_NODE)[0]
    assert all(allocatable[k] == "0" for k in allocatable if k.startswith("nvidia.com/mig-"))


def test_a_deploy_label_set_to_false_stays_false(clean_cluster: Cluster) -> None:
    cluster = clean_cluster
    label_node(cluster, MIG_NODE, "nvidia.com/gpu.deploy.dcgm", "false")
    history = relabel(cluster, "all-1g.5gb")
    assert ("pending", "paused-for-mig-change", "false") in history
    assert history[-1] == ("success", "true", "false")


def test_a_mode_change_that_needs_a_reboot_fails_without_with_reboot(clean_cluster: Cluster) -> None:
    """The GPU Operator does not set WITH_REBOOT: the mode change does not take effect and the run
    ends failed, its clients back; with `migManager.env` WITH_REBOOT=true it reboots instead."""
    cluster = clean_cluster
    cluster.kubectl("annotate", "node", MIG_NODE, f"{mm.REBOOT_ANNOTATION}=true")
    assert sequence(relabel(cluster, "all-1g.5gb")) == ["pending", "failed"]
    assert states(cluster.node(MIG_NODE))[1:] == ("true", "true")
    wait_for(lambda: shows(cluster, GPU, 4), TIMEOUT_S, "the 4 whole cards back")
    label_node(cluster, MIG_NODE, mm.MIG_CONFIG, "all-disabled")
    wait_for(lambda: states(cluster.node(MIG_NODE))[0] == "success", TIMEOUT_S, "all-disabled, applied already")
    patch_policy_and_wait(cluster, {"migManager": {"env": [{"name": "WITH_REBOOT", "value": "true"}]}})
    assert sequence(relabel(cluster, "all-1g.5gb")) == ["pending", "rebooting", "pending", "success"]
    wait_for(lambda: shows(cluster, GPU, 28), TIMEOUT_S, "28 x nvidia.com/gpu after the reboot")


def test_gpu_clients_that_do_not_go_leave_the_node_pending_until_the_mig_manager_restarts(clean_cluster: Cluster) -> None:
    """waitForPodsToBeDeleted gives up (5 minutes; here the node's knob makes it 3 s) and the run
    ends with nothing restored; the pods going later changes nothing; a new MIG manager pod runs the
    label again."""
    cluster = clean_cluster
    cluster.kubectl("annotate", "node", MIG_NODE, f"{mm.CLIENT_TIMEOUT_ANNOTATION}=3")
    exporter = operand_pods(cluster, "nvidia-dcgm-exporter")[MIG_NODE].metadata.name
    held = ["-n", cluster.operator_namespace, "pod", exporter]
    cluster.kubectl("patch", *held, "--type", "merge", "-p", json.dumps({"metadata": {"finalizers": [HOLD]}}))
    assert sequence(relabel(cluster, "all-1g.5gb", until=lambda s: s[0] == "pending" and s[1] != "true")) == ["pending"]
    stays(lambda: states(cluster.node(MIG_NODE))[:2] == ("pending", "paused-for-mig-change"), 6,
          "the pending MIG change past the MIG manager's wait")
    cluster.kubectl("patch", *held, "--type", "json", "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))
    wait_for(lambda: not cluster.core.list_namespaced_pod(cluster.operator_namespace, field_selector=f"metadata.name={exporter}").items,
             TIMEOUT_S, "the held pod to go")
    stays(lambda: states(cluster.node(MIG_NODE))[:2] == ("pending", "paused-for-mig-change"), 3,
          "the MIG manager, which does not retry")
    manager = operand_pods(cluster, operands.MIG_MANAGER)[MIG_NODE].metadata.name
    cluster.kubectl("delete", "pod", "-n", cluster.operator_namespace, manager)
    try:
        wait_for(lambda: states(cluster.node(MIG_NODE)) == ("success", "true", "true"), TIMEOUT_S,
                 "the restarted MIG manager to apply all-1g.5gb")
    except WaitTimeout as err:  # seen once in `make test`: what the node and its pods were then
        pods = cluster.core.list_namespaced_pod(cluster.operator_namespace, field_selector=f"spec.nodeName={MIG_NODE}")
        found = [f"{p.metadata.name} {p.status.phase}{' deleting' if p.metadata.deletion_timestamp else ''}"
                 for p in pods.items]
        raise WaitTimeout(f"{err}; the node's (state, device-plugin, dcgm) labels: {states(cluster.node(MIG_NODE))}; "
                          f"the operator's pods on it: {found}") from None
    wait_for(lambda: shows(cluster, GPU, 28), TIMEOUT_S, "28 x nvidia.com/gpu")


def test_the_configs_come_from_the_gpus_and_the_default_only_when_discovery_finds_nothing(clean_cluster: Cluster) -> None:
    """setupMigConfig: ConfigMap <node>-mig-config (owned by the MIG manager's pod) with the node's own
    configs; all-2g.20gb, a config of the operator's default for the 80 GB cards, is not among them:
    failed at once. A MIG manager whose discovery finds nothing uses default-mig-parted-config, where
    all-2g.20gb exists (for every GPU): it tries it, and mig-parted fails on the 40 GB card."""
    cluster = clean_cluster
    generated = f"{MIG_NODE}-mig-config"
    configmap = cluster.core.read_namespaced_config_map(generated, cluster.operator_namespace)
    manager = operand_pods(cluster, operands.MIG_MANAGER)[MIG_NODE]
    assert [(o.kind, o.uid) for o in configmap.metadata.owner_references] == [("Pod", manager.metadata.uid)]
    assert "all-2g.20gb" not in yaml.safe_load(configmap.data["config.yaml"])["mig-configs"]
    assert sequence(relabel(cluster, "all-2g.20gb")) == ["failed"]
    cluster.kubectl("annotate", "node", MIG_NODE, f"{mm.DISCOVERY_ANNOTATION}=none")
    before = cluster.node(MIG_NODE)
    cluster.kubectl("delete", "pod", "-n", cluster.operator_namespace, manager.metadata.name)
    assert sequence(node_history(cluster, MIG_NODE, states, before, lambda s: s[0] == "failed")) == ["pending", "failed"]
    assert not cluster.core.list_namespaced_config_map(cluster.operator_namespace,
                                                       field_selector=f"metadata.name={generated}").items, \
        f"{generated} went with its pod, and no new one"
    wait_for(lambda: shows(cluster, GPU, 4), TIMEOUT_S, "the 4 whole cards back: nothing changed")


def test_a_mig_manager_before_v0_14_generates_no_node_config_and_reads_the_operators_default(
        clean_cluster: Cluster) -> None:
    """GPU Operator v25.10's MIG manager (v0.13.1): no <node>-mig-config; the operator's
    default-mig-parted-config decides, where all-2g.20gb exists: tried, and failed on the 40 GB card."""
    cluster = clean_cluster
    generated = f"{MIG_NODE}-mig-config"
    version = cp.default_instance("v25.10")["spec"]["migManager"]["version"]
    patch_policy_and_wait(cluster, {"migManager": {"version": version}})
    wait_for(lambda: not cluster.core.list_namespaced_config_map(cluster.operator_namespace,
                                                                 field_selector=f"metadata.name={generated}").items,
             TIMEOUT_S, f"{generated} to go with the pod that wrote it")
    assert operand_pods(cluster, operands.MIG_MANAGER)[MIG_NODE].spec.containers[0].image.endswith(f":{version}")
    wait_for(lambda: (cluster.node(MIG_NODE).metadata.labels or {}).get(mm.MIG_STATE) == "success", TIMEOUT_S,
             "the new MIG manager to apply the node's current config")
    assert sequence(relabel(cluster, "all-2g.20gb")) == ["pending", "failed"]
    assert not cluster.core.list_namespaced_config_map(cluster.operator_namespace,
                                                       field_selector=f"metadata.name={generated}").items


def test_a_mig_manager_that_never_finishes_stays_pending(clean_cluster: Cluster) -> None:
    cluster = clean_cluster
    cluster.kubectl("annotate", "node", MIG_NODE, f"{mm.STALL_ANNOTATION}=true")
    assert sequence(relabel(cluster, "all-1g.5gb", until=lambda s: s[0] == "pending" and s[1] != "true")) == ["pending"]
    stays(lambda: states(cluster.node(MIG_NODE))[:2] == ("pending", "paused-for-mig-change"), 5, "the pending MIG change")
    assert advertised(cluster, MIG_NODE)[0][GPU] == "0", "its device plugin is gone"
    cluster.kubectl("annotate", "node", MIG_NODE, f"{mm.STALL_ANNOTATION}-")  # the timeout path's clean-up
    wait_for(lambda: states(cluster.node(MIG_NODE))[0] == "success", TIMEOUT_S, "the MIG change to finish")


def test_mixed_geometry_under_single_is_mig_invalid(clean_cluster: Cluster, tmp_path: Path) -> None:
    """A custom mig-parted ConfigMap (`migManager.config.name`) with two profiles on one node: under
    `single`, GFD labels `-MIG-INVALID` with count 0 and the plugin refuses to start."""
    cluster = clean_cluster
    custom = {"version": "v1", "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "split": [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
                  {"devices": [2, 3], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]}}
    apply_configmap(cluster, tmp_path, {"config.yaml": yaml.safe_dump(custom)}, name="custom-mig-parted-config")
    patch_policy_and_wait(cluster, {"migManager": {"config": {"name": "custom-mig-parted-config", "default": "all-disabled"}}})
    assert sequence(relabel(cluster, "split")) == ["pending", "success"]
    wait_for(lambda: advertised(cluster, MIG_NODE)[1].get("nvidia.com/gpu.product") == "NVIDIA-A100-SXM4-40GB-MIG-INVALID",
             TIMEOUT_S, "GFD to label the invalid MIG configuration")
    labels = advertised(cluster, MIG_NODE)[1]
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"]) == ("0", "0")

    def plugin_state() -> Any:
        """The plugin container's waiting state, once its (perhaps just re-created) pod reports it."""
        plugin = operand_pods(cluster, operands.DEVICE_PLUGIN).get(MIG_NODE)
        statuses = (plugin.status.container_statuses or []) if plugin is not None else []
        state = next((s.state for s in statuses if s.name == "nvidia-device-plugin"), None)
        return state if state is not None and state.waiting else None

    state = wait_for(plugin_state, TIMEOUT_S, "the device plugin on the node to report its container waiting")
    assert "more than one MIG device type present on node" in state.waiting.message
    assert advertised(cluster, MIG_NODE)[0][GPU] == "0"


def test_without_a_mig_strategy_the_operator_sets_none_and_the_plugin_decides(clean_cluster: Cluster) -> None:
    """applyMIGConfiguration: no `mig.strategy`, no MIG_STRATEGY env; the plugin and GFD run their
    default (`none`): no `nvidia.com/mig.strategy` label."""
    cluster = clean_cluster
    before = {d.metadata.name for d in cluster.apps.list_namespaced_daemon_set(cluster.operator_namespace).items}
    cluster.kubectl("patch", POLICY, "--type", "json", "-p", json.dumps([{"op": "remove", "path": "/spec/mig/strategy"}]))
    def plugin_envs() -> list[set[str]]:
        return [{e.name for e in pod.spec.containers[0].env or []}
                for pod in operand_pods(cluster, operands.DEVICE_PLUGIN).values()]

    # GFD's labels can change before every plugin pod is replaced: wait for both
    wait_for(lambda: all("nvidia.com/mig.strategy" not in advertised(cluster, n)[1] for n in ("gpu-node", MIG_NODE))
             and all("MIG_STRATEGY" not in env for env in plugin_envs()), TIMEOUT_S,
             "GFD to drop nvidia.com/mig.strategy and the device plugin pods to run without MIG_STRATEGY")
    assert all("NVIDIA_MIG_MONITOR_DEVICES" in env for env in plugin_envs())
    assert {d.metadata.name for d in cluster.apps.list_namespaced_daemon_set(cluster.operator_namespace).items} == before
