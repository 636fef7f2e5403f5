"""The enable plan with sharing strategy MPS (playbooks/enable-mps.yml): the config it renders
(`sharing.mps`), each share's limits in the plan, and the refusals before any write."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpushare.model.node import Node, packed
from gpushare.runbook.records import state_patch
from gpushare.timeslicing import filters
from gpushare.timeslicing.plan import EnablePlan, plan
from gpushare.runbook.state import ClusterState
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operand_specs
from tests.unit.cluster_objects import (CONFIGMAP, NOW, clusterpolicy, daemonset, enabled_read, fleet, managed_configmap,
                                        node, operand_pod, read, settings, shared_node)

MPS_DAEMON = "nvidia-device-plugin-mps-control-daemon"
MEMORY = {"nvidia.com/gpu.memory": "81559"}  # GFD's label of an H100 80GB


def mps_daemonset() -> dict[str, Any]:
    body = daemonset(MPS_DAEMON)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.deploy.device-plugin": "true",
                                                        "nvidia.com/mps.capable": "true"}
    return body


def cluster(nodes: list[dict[str, Any]] | None = None, **kwargs: Any) -> dict[str, Any]:
    daemonsets = [daemonset(n) for n in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")] + [mps_daemonset()]
    nodes = nodes if nodes is not None else [node("gpu-node", 1, labels=MEMORY), *fleet()[1:]]
    return read(nodes, daemonsets=daemonsets, **kwargs)


def enable(state: dict[str, Any], targets: list[str], **inputs: Any) -> EnablePlan:
    return plan(ClusterState.of(state), settings(**{"sharing_strategy": "mps", "config_key": "mps", **inputs}), targets,
                {"command": "ansible-playbook playbooks/enable-mps.yml", "operator": "alice"}, NOW)


def only_refusal(result: EnablePlan) -> str:
    assert len(result.refusals) == 1, result.refusals
    assert result.refusals[0].endswith("Nothing was changed.") and result.changes == {}
    return result.refusals[0]


def test_the_plan_states_each_shares_limits_and_renders_sharing_mps() -> None:
    result = enable(cluster(), ["gpu-node"], replicas=4)
    assert result.refusals == []
    assert result.lines[0].startswith("Plan: MPS with 4 replicas per GPU on gpu-node")
    assert "- gpu-node: 4 shares of NVIDIA-H100-80GB-HBM3: 19.9 GiB pinned memory and 25% of SMs each" in result.lines
    config = yaml.safe_load(result.changes["configmap"][0].body["data"]["mps"])
    assert config["sharing"] == {"mps": {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                                         "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    assert result.expected["strategy"] == "mps"


def test_time_slicing_plans_are_unchanged_by_the_strategy_parameter() -> None:
    result = plan(ClusterState.of(cluster()), settings(), ["gpu-node"], {"command": "x", "operator": "alice"}, NOW)
    assert result.refusals == [] and result.lines[0].startswith("Plan: time-slicing with 2 replicas")
    assert not any("pinned memory" in line for line in result.lines)


def test_mig_enabled_cards_are_refused_in_the_plugins_words() -> None:
    mig_node = node("gpu-node-mig", 4, product="NVIDIA-A100-SXM4-40GB", mig="all-1g.5gb")
    refusal = only_refusal(enable(cluster([mig_node]), ["gpu-node-mig"]))
    assert "MPS sharing is not supported for MIG devices" in refusal and "rollback-mig.yml" in refusal


def test_fail_requests_greater_than_one_false_is_refused() -> None:
    refusal = only_refusal(enable(cluster(), ["gpu-node"], fail_requests_greater_than_one=False))
    assert "failRequestsGreaterThanOne: false with MPS" in refusal and "Keep failRequestsGreaterThanOne: true" in refusal


def test_more_replicas_than_the_daemon_allows_are_refused_with_its_error() -> None:
    result = enable(cluster(), ["gpu-node"], replicas=49, max_replicas=64)
    assert result.changes == {} and all(r.endswith("Nothing was changed.") for r in result.refusals)
    assert any("invalid device maximum allowed replicas exceeded: 49 > 48" in r for r in result.refusals)


def test_replicas_beyond_the_baselines_memory_peak_are_refused_with_what_fits() -> None:
    refusal = only_refusal(enable(cluster(), ["gpu-node"], replicas=4, memory_peak_mib=30000))
    assert "20389 MiB pinned memory each, below the workloads' memory peak of 30000 MiB" in refusal
    assert "Use at most 2 replicas" in refusal
    assert enable(cluster(), ["gpu-node"], replicas=4, memory_peak_mib=20000).refusals == []


def test_a_node_the_daemon_cannot_run_on_is_refused() -> None:
    nodes = [node("gpu-node", 1, labels={**MEMORY, "nvidia.com/gpu.deploy.device-plugin": "false"}), *fleet()[1:]]
    refusal = only_refusal(enable(cluster(nodes), ["gpu-node"]))
    assert "the MPS control daemon cannot run there" in refusal
    assert "nvidia.com/gpu.deploy.device-plugin=false" in refusal


def test_an_operator_without_the_mps_daemonset_is_refused() -> None:
    state = read([node("gpu-node", 1, labels=MEMORY)])
    refusal = only_refusal(enable(state, ["gpu-node"]))
    assert f"runs no {MPS_DAEMON} DaemonSet" in refusal


def test_switching_a_time_sliced_node_to_mps_asks_for_a_rollback_first() -> None:
    state = enabled_read(("gpu-node",))
    state["daemonsets"].append(mps_daemonset())
    refusal = only_refusal(enable(state, ["gpu-node"]))
    assert "gpu-node already shares its cards with time-slicing" in refusal
    assert "Roll back first (playbooks/rollback-timeslicing.yml, limited to this node)" in refusal


def test_the_time_slicing_enable_refuses_an_mps_node_the_same_way() -> None:
    mps_node = node("gpu-node", 1, replicas=2, labels={**MEMORY, "nvidia.com/device-plugin.config": "mps",
                                                       "nvidia.com/gpu.sharing-strategy": "mps"})
    result = plan(ClusterState.of(cluster([mps_node, *fleet()[1:]])), settings(), ["gpu-node"],
                  {"command": "x", "operator": "alice"}, NOW)
    refusal = only_refusal(result)
    assert "gpu-node already shares its cards with MPS" in refusal and "then enable time-slicing" in refusal


@pytest.mark.parametrize(("labels", "capacity", "seen"), [
    pytest.param({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, {},
                 "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", id="single-strategy-product"),
    pytest.param({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID"}, {},
                 "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-INVALID", id="a-mix-of-geometries"),
    pytest.param({"nvidia.com/mig-1g.5gb.count": "14"}, {}, "nvidia.com/mig-1g.5gb.count=14", id="mixed-strategy-labels"),
    pytest.param({}, {"nvidia.com/mig-3g.20gb": "2"}, "nvidia.com/mig-3g.20gb=2", id="mixed-strategy-resource"),
])
def test_mig_enabled_outside_the_mig_manager_is_read_from_the_hardware(labels: dict[str, str],
                                                                       capacity: dict[str, str], seen: str) -> None:
    """No nvidia.com/mig.config label says it (MIG enabled with nvidia-smi, or the MIG manager kept off
    the node): what GFD labels and the plugin advertises does, and the plugin exits on MPS there."""
    mig_node = node("gpu-node-mig", 4, product="NVIDIA-A100-SXM4-40GB", labels=labels)
    mig_node["status"]["capacity"].update(capacity)
    refusal = only_refusal(enable(cluster([mig_node]), ["gpu-node-mig"]))
    assert f"gpu-node-mig has MIG enabled on its cards ({seen}), though not by the MIG manager " \
           "(nvidia.com/mig.config=all-disabled): MPS sharing is not supported for MIG devices" in refusal, refusal
    assert Node(node("gpu-node-mig", 4, product="NVIDIA-A100-SXM4-40GB")).mig_in_hardware == ""


def test_the_mixed_mig_strategy_is_refused_in_the_plugins_words() -> None:
    """The operator's MIG_STRATEGY env overrides the config file: the plugin would exit on MPS."""
    policy = clusterpolicy()
    policy["spec"]["mig"] = {"strategy": "mixed"}
    refusal = only_refusal(enable(cluster(policy=policy), ["gpu-node"]))
    assert "mig.strategy is mixed: using --mig-strategy=mixed is not supported with MPS" in refusal
    assert "playbooks/enable-timeslicing.yml" in refusal
    policy["spec"]["mig"] = {"strategy": "single"}
    assert enable(cluster(policy=policy), ["gpu-node"]).refusals == []


# ---- per-node MPS per GPU Operator release (gpushare.mps.per_node_failure) ------------------------------
def release_cluster(release: str, configured: bool = True) -> dict[str, Any]:
    """The cluster with the MPS control daemon's DaemonSet as `release`'s operator renders it (the
    simulator's rendering of the gpu-operator asset), pointed at a device-plugin config or not yet."""
    spec = cp.default_instance(release)["spec"]
    if configured:
        spec["devicePlugin"]["config"] = {"name": "time-slicing-config", "default": "default"}
    state = cluster()
    daemon = next(d for d in state["daemonsets"] if d["metadata"]["name"] == MPS_DAEMON)
    daemon["spec"]["template"]["spec"] = {**operand_specs.mps_control_daemon(spec)[1],
                                          "nodeSelector": daemon["spec"]["template"]["spec"]["nodeSelector"]}
    return state


@pytest.mark.parametrize(("release", "version", "why"), [
    ("v26.7", "v0.20.0", 'PROCESS_TO_SIGNAL=/usr/bin/mps-control-daemon but the daemon\'s argv[0] is mps-control-daemon: '
                         '"error finding pid: no process found" (NVIDIA/k8s-device-plugin PR #1827, not released)'),
    ("v26.3", "v0.19.3", "panics on the first kernel thread (NVIDIA/k8s-device-plugin#1726, fixed in v0.20.0 by #1822)"),
])
@pytest.mark.parametrize("configured", [True, False], ids=["pointed-at-a-config", "before-the-first-enable"])
def test_per_node_mps_is_refused_where_the_daemon_can_never_load_the_key(
        release: str, version: str, why: str, configured: bool) -> None:
    refusal = only_refusal(enable(release_cluster(release, configured), ["gpu-node"]))
    assert f"its MPS control daemon runs device plugin {version}" in refusal
    assert why in refusal
    assert "-e timeslicing_scope=cluster -e timeslicing_confirm_cluster_scope=true" in refusal
    assert "plugin v0.18.1 or earlier" in refusal and "PR #1827" in refusal


def test_per_node_mps_runs_where_init_waits_for_the_label() -> None:
    assert enable(release_cluster("v25.10"), ["gpu-node"]).refusals == []


def test_cluster_scope_mps_is_not_refused_on_any_release() -> None:
    result = enable(release_cluster("v26.7"), ["gpu-node"], scope="cluster", confirm_cluster_scope=True)
    assert result.refusals == [] and result.lines[0].endswith("scope cluster)")


# ---- a re-run after the MPS control daemon started within the ConfigMap's write second ----------------------
def mps_enabled_read(daemon_created: str) -> dict[str, Any]:
    """The cluster after a complete per-node enable of 4 MPS shares on gpu-node, its ConfigMap written at
    09:00:00 and its MPS control daemon created at `daemon_created`."""
    state = enabled_read(("gpu-node",))
    state["nodes"][0] = shared_node("gpu-node", 1, replicas=4, key="mps", labels={
        **MEMORY, "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/mps.capable": "true"})
    mps = settings(sharing_strategy="mps", config_key="mps", replicas=4).config.text
    state["configmaps"][0] = managed_configmap({"default": "version: v1\n", "mps": mps}, written="2026-12-01T09:00:00Z")
    state["daemonsets"].append(mps_daemonset())
    state["pods"].append(operand_pod(MPS_DAEMON, "gpu-node", created=daemon_created))
    return state


def test_a_rerun_leaves_the_mps_daemon_the_first_run_named_although_it_started_in_the_writes_second() -> None:
    """The first run's restart listed gpu-node's readers before the node label started the MPS control
    daemon, in the second of the ConfigMap's write: its creation time cannot tell it read the write.
    The record names it (read once the verify succeeded), so a re-run changes nothing; a record naming
    only the restart's readers had the re-run restart it."""
    assert enable(mps_enabled_read("2026-12-01T09:00:01Z"), ["gpu-node"], replicas=4).restart_nodes == []
    state = mps_enabled_read("2026-12-01T09:00:00Z")
    pods = [p for p in state["pods"] if p["spec"]["nodeName"] == "gpu-node"]
    restart_readers = [p["metadata"]["uid"] for p in pods if p["metadata"]["name"] != f"{MPS_DAEMON}-gpu-node"]
    restarted = {"restarted": {}, "readers": restart_readers, "problems": [], "listed": {"gpu-node": restart_readers},
                 "configmap_version": state["configmaps"][0]["metadata"]["resourceVersion"]}
    record = state["records"][0]
    finish = [{"action": "merge", "kind": "ConfigMap", "name": record["metadata"]["name"],
               "body": state_patch("complete", NOW), "why": "mark this run complete"}]
    settled = {"resources": {"daemonsets": packed(state["daemonsets"]), "pods": packed(pods)}}
    for read_after_verify, restarts in (({}, ["gpu-node"]), (settled, [])):
        [complete] = filters.timeslicing_with_readers(finish, restarted, CONFIGMAP, read_after_verify)
        record["data"].update(complete["body"]["data"])
        result = enable(state, ["gpu-node"], replicas=4)
        assert result.restart_nodes == restarts
    assert result.lines == ["Nothing to change: MPS is already enabled as asked (4 replicas, key mps, scope node) on gpu-node."]
