"""The enable runbook's plan (gpushare.timeslicing.plan) from one read of the cluster: each
refusal fires when (and only when) its situation is there, says what to do and that nothing was
changed; otherwise the changes, in order, each guarded against what others change meanwhile."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from gpushare.model.node import Node, unpacked
from gpushare.runbook import records
from gpushare.runbook.records import FieldChange, Record
from gpushare.runbook.state import ClusterState
from gpushare.timeslicing.plan import EnablePlan, needs_fleet, plan, refusals
from gpushare.timeslicing_common.mark import Mark, timeslicing_mark
from tests.unit.cluster_objects import (ASSET_TOLERATION, CONFIGMAP, NOW, POOL_TAINT, clusterpolicy, configmap,
                                        daemonset, enabled_read, managed_configmap, mark, node, operand_pod,
                                        applied, assert_guarded, read, record, settings, shared_node)

GPU_NODES = ("gpu-node", "gpu-node-2", "gpu-node-mig")
INTERRUPTED = "gpushare-run-enable-20261201t093000z-beef"


def enable(cluster: dict[str, Any], targets: list[str], **inputs: Any) -> EnablePlan:
    return plan(ClusterState.of(cluster), settings(**inputs), targets,
                {"command": "ansible-playbook playbooks/enable-timeslicing.yml", "operator": "alice"}, NOW)


def refused(result: EnablePlan, fragment: str) -> str:
    matching = [r for r in result.refusals if fragment in r]
    assert matching, result.refusals
    assert all(r.endswith("Nothing was changed.") for r in result.refusals)
    assert result.changes == {} and not result.writes
    return matching[0]


# ---- a first trial on a cluster never prepared -------------------------------------------------------
def test_the_first_trial_records_then_configures_then_marks_the_node() -> None:
    cluster = read()
    result = enable(cluster, ["gpu-node"])
    assert result.refusals == []
    assert list(result.changes) == ["record", "configmap", "clusterpolicy", "nodes", "finish"]

    record_body = result.changes["record"][0].body
    assert result.changes["record"][0].action == "create" and record_body["metadata"]["name"] == result.record
    backed_up = Record.of(record_body)
    assert backed_up.clusterpolicy_backup == cluster["clusterpolicy"] and backed_up.state == "in-progress"
    assert backed_up.intent.configmap_created and backed_up.intent.keys_added == ["default", "shared"]
    assert backed_up.intent.nodes == ["gpu-node"]
    assert backed_up.backup_file == result.backup_file == "backups/clusterpolicy-20261201T100000Z.yaml"

    created = result.changes["configmap"][0]
    assert created.action == "create"
    assert yaml.safe_load(created.body["data"]["default"]) == {"version": "v1"}
    assert yaml.safe_load(created.body["data"]["shared"])["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 2}]
    assert created.body["metadata"]["annotations"] == {"gpushare.io/managed-keys": "default,shared",
                                                          "gpushare.io/created-by": "enable-timeslicing"}

    policy = applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])
    assert policy["spec"]["devicePlugin"]["config"] == {"name": CONFIGMAP, "default": "default"}
    assert policy["spec"]["daemonsets"] == cluster["clusterpolicy"]["spec"]["daemonsets"]

    gpu_node = Node(applied(cluster["nodes"][0], result.changes["nodes"]))
    assert gpu_node.config_label == "shared" and gpu_node.labels["gpu-mode"] == "shared"
    assert gpu_node.taints[-1] == Node(node("x", taints=[POOL_TAINT])).taints[0]
    written = timeslicing_mark(gpu_node)
    assert written == Mark(CONFIGMAP, "shared", 2, "node", result.record, True, True, written.raw)

    assert result.rolls_fleet and result.restart_nodes == ["gpu-node"]
    assert sorted(unpacked(result.expected["bystanders"])) == ["gpu-node-2", "gpu-node-mig"]
    assert result.expected["targets"] == {"gpu-node": {"gpus": 1, "pool": True}}
    assert not result.expected["compare_allocatable"]  # the operator's roll dips every node's allocatable
    assert result.lines[-1].endswith("written before the first change")


def test_the_clusterpolicy_change_is_refused_if_someone_changed_the_field_meanwhile() -> None:
    cluster = read()
    result = enable(cluster, ["gpu-node"])
    assert_guarded(cluster["clusterpolicy"], result.changes,
                   lambda spec: spec["devicePlugin"]["config"].update(name="someone-elses-config"))


def test_a_clusterpolicy_without_a_device_plugin_config_gets_one() -> None:
    cluster = read()
    del cluster["clusterpolicy"]["spec"]["devicePlugin"]["config"]
    result = enable(cluster, ["gpu-node"])
    policy = applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])
    assert policy["spec"]["devicePlugin"] == {"enabled": True, "config": {"name": CONFIGMAP, "default": "default"}}


# ---- refusals ---------------------------------------------------------------------------------------
def _no_namespace() -> dict[str, Any]:
    return read(namespace=False, plugin_anywhere=[daemonset("nvidia-device-plugin-daemonset")
                                                  | {"metadata": {"namespace": "nvidia-gpu-operator"}}])


def _configmap_with(**data: str) -> dict[str, Any]:
    return read(configmaps=[configmap(CONFIGMAP, data)])


def _unhealthy(raw: dict[str, Any], resource: str, allocatable: int) -> dict[str, Any]:
    """The node with `allocatable` of `resource` (its capacity as it was): the devices the device plugin
    reports unhealthy."""
    raw["status"]["allocatable"][resource] = str(allocatable)
    return raw


def test_a_resource_the_kubelet_keeps_after_a_rename_is_not_an_unhealthy_gpu() -> None:
    """After renameByDefault the kubelet shows nvidia.com/gpu at its capacity, allocatable 0, for 5
    minutes while nvidia.com/gpu.shared is served: not a fault."""
    renamed = node("gpu-node", 4, replicas=2)
    renamed["status"]["capacity"]["nvidia.com/gpu"] = "4"
    assert Node(renamed).unhealthy is None
    assert enable(read([renamed]), ["gpu-node"]).refusals == []


REFUSALS = [
    pytest.param(read(), ["gpu-node"], {"replicas": 17}, "timeslicing_replicas=17 is above the bound",
                 id="bad-input"),
    pytest.param(_no_namespace(), ["gpu-node"], {}, "set gpu_operator_namespace=nvidia-gpu-operator",
                 id="no-operator-namespace"),
    pytest.param(read(namespace=False), ["gpu-node"], {}, "install the GPU Operator first", id="no-operator-at-all"),
    pytest.param(read(policy=None, not_served=("clusterpolicy",)), ["gpu-node"], {},
                 "The ClusterPolicy API (nvidia.com/v1) is not served", id="no-clusterpolicy-api"),
    pytest.param(read(policy=None), ["gpu-node"], {}, "ClusterPolicy 'cluster-policy' not found",
                 id="no-clusterpolicy"),
    pytest.param(read(daemonsets=[daemonset("gpu-feature-discovery")]), ["gpu-node"], {},
                 "DaemonSet gpu-operator/nvidia-device-plugin-daemonset not found", id="no-device-plugin"),
    pytest.param(read(configmaps=[record("gpushare-run-rollback-20261201t093000z-0b0b", "rollback-timeslicing",
                                         nodes=["gpu-node-2"])]), ["gpu-node"], {},
                 "A rollback was interrupted (record gpushare-run-rollback-20261201t093000z-0b0b",
                 id="rollback-interrupted"),
    pytest.param(read(), ["gpu-node-9"], {}, "gpu-node-9 is not a node of this cluster", id="unknown-node"),
    pytest.param(read(), ["cpu-node"], {}, "cpu-node has no nvidia.com/gpu.present=true label", id="not-a-gpu-node"),
    pytest.param(read([node("gpu-node", None)]), ["gpu-node"], {}, "has no nvidia.com/gpu.count label yet",
                 id="gfd-not-done"),
    pytest.param(read([node("gpu-node-mig", 4, mig="all-1g.10gb")]), ["gpu-node-mig"], {},
                 "gpu-node-mig has MIG enabled (nvidia.com/mig.config=all-1g.10gb)", id="mig"),
    pytest.param(_configmap_with(shared="version: v1\n"), ["gpu-node"], {},
                 "already has a key `shared` with a different config, and it was not written by this runbook",
                 id="someone-elses-key"),
    pytest.param(read(policy=clusterpolicy("operator-config", "all-off")), ["gpu-node"], {},
                 "-e timeslicing_configmap_name=operator-config", id="clusterpolicy-points-elsewhere"),
    pytest.param(_configmap_with(default="version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                         "    - name: nvidia.com/gpu\n      replicas: 4\n"), ["gpu-node"], {},
                 "already has a `default` key that is not a valid no-sharing config (it enables sharing)",
                 id="default-key-shares"),
    pytest.param(read([node("gpu-node", 1), node("gpu-node-2", 8, labels={
        "nvidia.com/device-plugin.config": "a100-split"})]), ["gpu-node"], {},
                 "gpu-node-2 carries nvidia.com/device-plugin.config=a100-split, but ConfigMap time-slicing-config "
                 "has no such key", id="orphan-label"),
    pytest.param(read(), ["gpu-node"], {"pool_taint_key": "gpu-mode"},
                 "The operand DaemonSets do not tolerate the pool taint gpu-mode=shared:NoSchedule",
                 id="pool-taint-not-tolerated"),
    pytest.param(read([_unhealthy(node("gpu-node", 4), "nvidia.com/gpu", 3)]), ["gpu-node"], {},
                 "gpu-node: 1 of its 4 GPUs unhealthy (nvidia.com/gpu allocatable 3 of capacity 4)", id="unhealthy-gpu"),
    pytest.param(read([_unhealthy(node("gpu-node", 4, replicas=2), "nvidia.com/gpu.shared", 4)]), ["gpu-node"], {},
                 "gpu-node: 2 of its 4 GPUs unhealthy (nvidia.com/gpu.shared allocatable 4 of capacity 8)",
                 id="unhealthy-shared-gpus"),
    pytest.param(read([_unhealthy(node("gpu-node", 1), "nvidia.com/gpu", 0)]), ["gpu-node"], {},
                 "gpu-node: 1 of its 1 GPU unhealthy", id="the-only-gpu-unhealthy"),
]


@pytest.mark.parametrize(("cluster", "targets", "inputs", "fragment"), REFUSALS)
def test_each_refusal(cluster: dict[str, Any], targets: list[str], inputs: dict[str, Any], fragment: str) -> None:
    refused(enable(cluster, targets, **inputs), fragment)


@pytest.mark.parametrize(("cluster", "targets", "inputs", "fragment"), REFUSALS)
def test_the_plans_refusals_are_the_refusals_of_its_inputs_and_cluster(
        cluster: dict[str, Any], targets: list[str], inputs: dict[str, Any], fragment: str) -> None:
    found, _ = refusals(ClusterState.of(cluster), settings(**inputs), targets, {"command": "x"})
    assert found == enable(cluster, targets, **inputs).refusals and any(fragment in r for r in found)


def test_a_refused_precondition_hides_what_the_change_would_harm() -> None:
    """An unknown target stops the judging there: the change problems assume the targets exist."""
    found, wanted = refusals(ClusterState.of(read()), settings(pool_taint_key="gpu-mode"), ["gpu-node-9"], {})
    assert wanted is None and len(found) == 1 and "gpu-node-9 is not a node of this cluster" in found[0]


@pytest.mark.parametrize(("targets", "inputs", "fleet"), [
    pytest.param(["gpu-node"], {}, False, id="a re-run: decided by the first read"),
    pytest.param(["gpu-node"], {"replicas": 4}, True, id="a change"),
    pytest.param(["gpu-node-9"], {}, True, id="a refusal"),
    pytest.param(["gpu-node"], {"scope": "cluster", "confirm_cluster_scope": True}, True, id="cluster scope"),
])
def test_the_fleet_read_rule(targets: list[str], inputs: dict[str, Any], fleet: bool) -> None:
    result = enable(enabled_read(), targets, **inputs)
    assert needs_fleet(result, settings(**inputs)) is fleet
    assert not result.needs_fleet, "a plan made from every node needs no other read"


def test_a_healthy_cluster_is_refused_nothing() -> None:
    for targets in (["gpu-node"], ["gpu-node-2", "gpu-node-mig"], list(GPU_NODES)):
        assert enable(read(), targets).refusals == []
    assert enable(read(), ["gpu-node"], scope="cluster", confirm_cluster_scope=True).refusals == []


def test_every_target_problem_at_once() -> None:
    result = enable(read(), ["cpu-node", "gpu-node-9", "gpu-node"])
    assert len(result.refusals) == 2


# ---- the fleet-roll confirmation --------------------------------------------------------------------
def gpu_fleet(count: int) -> list[dict[str, Any]]:
    return [node(f"gpu-{i:02d}", 8) for i in range(count)]


@pytest.mark.parametrize(("gpu_nodes", "confirmed", "refusal"), [
    (10, False, False), (11, False, True), (11, True, False), (3, False, False),
])
def test_pointing_the_clusterpolicy_at_the_configmap_rolls_the_fleet_above_a_threshold_only_if_confirmed(
        gpu_nodes: int, confirmed: bool, refusal: bool) -> None:
    result = enable(read(gpu_fleet(gpu_nodes)), ["gpu-00"], confirm_fleet_roll=confirmed)
    if refusal:
        message = refused(result, "This cluster has not been prepared for time-slicing")
        assert f"restart on all {gpu_nodes} GPU nodes" in message
        assert "playbooks/prepare-timeslicing.yml" in message and "-e timeslicing_confirm_fleet_roll=true" in message
    else:
        assert result.refusals == [] and result.rolls_fleet


def test_a_prepared_cluster_needs_no_fleet_roll_confirmation() -> None:
    prepared = read(gpu_fleet(40), policy=clusterpolicy(CONFIGMAP, "default"),
                    configmaps=[managed_configmap({"default": "version: v1\n"})])
    result = enable(prepared, ["gpu-00"])
    assert result.refusals == [] and not result.rolls_fleet
    assert "clusterpolicy" not in {k for k, v in result.changes.items() if v}
    assert result.expected["compare_allocatable"]


def test_a_trial_is_refused_while_the_operator_still_rolls_an_earlier_change_out() -> None:
    rolling = [daemonset("nvidia-device-plugin-daemonset", updated=12, desired=40),
               daemonset("gpu-feature-discovery")]
    prepared = read(gpu_fleet(40), policy=clusterpolicy(CONFIGMAP, "default"),
                    configmaps=[managed_configmap({"default": "version: v1\n"})], daemonsets=rolling)
    message = refused(enable(prepared, ["gpu-00"]), "The GPU Operator is still rolling out an earlier change")
    assert "DaemonSet nvidia-device-plugin-daemonset has 12 of 40 GPU nodes on its current template" in message
    assert "gpu-feature-discovery" not in message
    assert "kubectl -n gpu-operator rollout status daemonset/nvidia-device-plugin-daemonset" in message


def test_a_template_change_the_controller_has_not_seen_yet_is_a_roll_too() -> None:
    unseen = daemonset("gpu-feature-discovery", generation=3)
    unseen["status"]["observedGeneration"] = 2
    cluster = read(gpu_fleet(4), policy=clusterpolicy(CONFIGMAP, "default"),
                   configmaps=[managed_configmap({"default": "version: v1\n"})],
                   daemonsets=[daemonset("nvidia-device-plugin-daemonset"), unseen])
    refused(enable(cluster, ["gpu-00"]), "DaemonSet gpu-feature-discovery has 3 of 3 GPU nodes")


def test_the_fleet_roll_threshold_counts_gpu_nodes_only() -> None:
    cpus = [node(f"cpu-{i}", gpu=False) for i in range(20)]
    assert enable(read(gpu_fleet(10) + cpus), ["gpu-00"]).refusals == []


# ---- the pool taint and the operands' tolerations ----------------------------------------------------
@pytest.mark.parametrize("tolerations", [
    pytest.param(None, id="chart-default"),
    pytest.param([], id="empty-means-the-assets-own"),
    pytest.param([{"operator": "Exists"}], id="tolerate-everything"),
    pytest.param([{"key": "nvidia.com/gpu", "operator": "Exists"}], id="any-effect"),
])
def test_a_pool_taint_the_operands_tolerate_needs_no_operand_change(tolerations: list[dict[str, Any]] | None) -> None:
    result = enable(read(policy=clusterpolicy(tolerations=tolerations)), ["gpu-node"])
    assert result.refusals == []
    assert not any("/spec/daemonsets" in op["path"] for op in result.changes["clusterpolicy"][0].body)


def test_empty_tolerations_mean_the_assets_own_which_do_not_tolerate_another_key() -> None:
    result = enable(read(policy=clusterpolicy(tolerations=[])), ["gpu-node"], pool_taint_key="gpu-mode")
    message = refused(result, "do not tolerate the pool taint gpu-mode=shared:NoSchedule")
    assert json.dumps(ASSET_TOLERATION)[1:-1].replace('"', "'") in message.replace('"', "'")
    assert "-e timeslicing_confirm_operand_roll=true" in message


def test_a_confirmed_operand_roll_adds_the_toleration_to_the_assets_own() -> None:
    cluster = read(policy=clusterpolicy(tolerations=[]),
                   daemonsets=[daemonset(n) for n in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery",
                                                       "nvidia-driver-daemonset")])
    cluster["clusterpolicy"]["spec"]["driver"]["upgradePolicy"] = {"autoUpgrade": True}
    result = enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True)
    assert result.refusals == [] and result.rolls_fleet
    policy = applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])
    assert policy["spec"]["daemonsets"]["tolerations"] == [
        ASSET_TOLERATION, {"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}]
    note = next(n for n in result.notes if n.startswith("Confirmed"))
    assert "the driver upgrade controller will cordon and drain each of its 3 GPU nodes in turn" in note
    intent = Record.of(result.changes["record"][0].body).intent
    assert FieldChange("/spec/daemonsets/tolerations", [], policy["spec"]["daemonsets"]["tolerations"]) in \
        intent.clusterpolicy


def test_the_plan_names_each_rolled_daemonset_with_its_own_node_count() -> None:
    """The MPS control daemon runs on no node (no MPS config anywhere): the roll restarts nothing of it."""
    readers = [daemonset("nvidia-device-plugin-daemonset"), daemonset("gpu-feature-discovery", updated=2, desired=2),
               daemonset("nvidia-device-plugin-mps-control-daemon", updated=0, desired=0)]
    pods = [operand_pod(d, n) for d in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")
            for n in GPU_NODES[:2 if d == "gpu-feature-discovery" else 3]]
    result = enable(read(daemonsets=readers, pods=pods), ["gpu-node"])
    assert result.refusals == [] and result.rolls_fleet
    assert "  the operator re-renders these DaemonSets, whose pods restart one node at a time: nvidia-device-plugin-" \
           "daemonset on 3 GPU nodes, gpu-feature-discovery on 2 GPU nodes; running workloads keep their GPUs" \
           in result.lines
    assert not any("mps-control-daemon" in line for line in result.lines)


OPERANDS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-driver-daemonset",
            "nvidia-dcgm-exporter")


@pytest.mark.parametrize(("auto_upgrade", "parallel", "driver_line"), [
    pytest.param(True, None, "; nvidia-driver-daemonset's template changes too, and with driver.upgradePolicy."
                 "autoUpgrade on the driver upgrade controller will cordon and drain each of its 3 GPU nodes in "
                 "turn, 1 at a time (maxParallelUpgrades), evicting their GPU pods, and reload the driver",
                 id="chart-default"),
    pytest.param(True, 0, "will cordon and drain each of its 3 GPU nodes in turn, all at once (maxParallelUpgrades=0)",
                 id="no-limit"),
    pytest.param(False, None, "; nvidia-driver-daemonset's template changes too (its pods restart only when deleted: "
                 "autoUpgrade is off); running workloads keep their GPUs", id="no-auto-upgrade"),
])
def test_a_confirmed_operand_roll_says_what_the_driver_upgrade_does(auto_upgrade: bool, parallel: int | None,
                                                                    driver_line: str) -> None:
    cluster = read(policy=clusterpolicy(auto_upgrade=auto_upgrade),
                   daemonsets=[*(daemonset(n) for n in OPERANDS), daemonset("nvidia-mig-manager", updated=0, desired=0)])
    if parallel is not None:
        cluster["clusterpolicy"]["spec"]["driver"]["upgradePolicy"]["maxParallelUpgrades"] = parallel
    result = enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True)
    [roll] = [line for line in result.lines if line.startswith("  the operator re-renders")]
    assert roll.startswith("  the operator re-renders these DaemonSets, whose pods restart one node at a time: "
                           "gpu-feature-discovery on 3 GPU nodes, nvidia-dcgm-exporter on 3 GPU nodes, "
                           "nvidia-device-plugin-daemonset on 3 GPU nodes; nvidia-driver-daemonset's")
    assert driver_line in roll and "nvidia-mig-manager" not in roll
    assert ("running workloads keep their GPUs" in roll) is not auto_upgrade
    # the upgrade controller cordons the other nodes in turn: the verify does not call that a change of theirs
    assert result.expected["compare_schedulable"] is not auto_upgrade
    # the waits after it end at once on a node that upgrade leaves upgrade-failed
    assert result.expected["driver_upgrade"] == ("cluster-policy" if auto_upgrade else "")
    assert not result.expected["compare_allocatable"]


def gpu_workload(name: str, node: str, owner: str | None = "ReplicaSet", empty_dir: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "team"}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-x", "controller": True}]
    return {"metadata": metadata, "status": {"phase": "Running"}, "spec": {
        "nodeName": node, "volumes": [{"name": "tmp", "emptyDir": {}}] if empty_dir else [],
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def confirmed_roll(workloads: list[dict[str, Any]] | None, auto_upgrade: bool = True,
                   skip: tuple[str, ...] = ()) -> EnablePlan:
    cluster = read(policy=clusterpolicy(auto_upgrade=auto_upgrade), daemonsets=[daemonset(n) for n in OPERANDS])
    for entry in cluster["nodes"]:
        if entry["metadata"]["name"] in skip:
            entry["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade.skip"] = "true"
    if workloads is not None:
        cluster["workloads"] = workloads
    return enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True)


def test_a_confirmed_operand_roll_first_reads_every_pod_for_the_driver_upgrade() -> None:
    result = confirmed_roll(None)
    assert result.needs_workloads and result.refusals == []
    assert not confirmed_roll(None, auto_upgrade=False).needs_workloads, "no driver upgrade: no pod to judge"


def test_a_confirmed_operand_roll_is_refused_while_the_driver_upgrade_could_not_evict_a_gpu_pod() -> None:
    """k8s-operator-libs pod_manager.go with the chart's podDeletion (force, deleteEmptyDir false): each
    pod it cannot delete is named with its node and why, with the ways out, before any write."""
    workloads = [gpu_workload("infer", "gpu-node"), gpu_workload("bare", "gpu-node-2", owner=None),
                 gpu_workload("scratch", "gpu-node-2", empty_dir=True), gpu_workload("agent", "gpu-node-mig", owner="DaemonSet")]
    message = refused(confirmed_roll(workloads), "cannot take these pods off their node")
    assert ("team/bare on gpu-node-2 (it has no controller and spec.driver.upgradePolicy.podDeletion.force is false); "
            "team/scratch on gpu-node-2 (it uses an emptyDir volume and spec.driver.upgradePolicy.podDeletion."
            "deleteEmptyDir is false); team/agent on gpu-node-mig (DaemonSet agent-x runs it, and the driver upgrade's "
            "GPU-pod deletion never deletes a DaemonSet's pod)") in message
    assert "team/infer" not in message
    assert "gpu-node-2, gpu-node-mig would end upgrade-failed, still cordoned, and with maxParallelUpgrades 1 the " \
           "upgrade of every other GPU node stops there" in message
    for way in ("podDeletion.force=true", "podDeletion.deleteEmptyDir=true", "drain.enable=true",
                "nvidia.com/gpu-driver-upgrade.skip=true", "-e timeslicing_pool_taint_key=nvidia.com/gpu"):
        assert way in message, way


def test_pods_the_driver_upgrade_can_evict_or_does_not_reach_do_not_stop_a_confirmed_operand_roll() -> None:
    evictable = [gpu_workload("infer", "gpu-node"), gpu_workload("done", "gpu-node-2", owner=None) | {
        "status": {"phase": "Succeeded"}}]
    result = confirmed_roll(evictable)
    assert result.refusals == [] and not result.needs_workloads and result.writes
    assert confirmed_roll([gpu_workload("bare", "gpu-node-2", owner=None)], skip=("gpu-node-2",)).refusals == [], \
        "a node with the upgrade's skip label keeps its driver: its pods are not evicted"


def test_the_tolerations_change_is_refused_if_someone_changed_them_meanwhile() -> None:
    cluster = read()
    result = enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True)
    assert_guarded(cluster["clusterpolicy"], result.changes,
                   lambda spec: spec["daemonsets"]["tolerations"].append({"key": "dedicated", "operator": "Exists"}))


def test_no_pool_taint_needs_no_toleration() -> None:
    result = enable(read(), ["gpu-node"], pool_taint=False, pool_taint_key="gpu-mode")
    assert result.refusals == []
    assert [c.action for c in result.changes["nodes"]] == ["merge"]
    assert Mark.parse(result.changes["nodes"][0].body["metadata"]["annotations"]["gpushare.io/timeslicing"]
                      ).taint_added is False


# ---- a node's own taint with the pool taint's key and effect -------------------------------------------
@pytest.mark.parametrize(("own", "note"), [
    pytest.param({"key": "nvidia.com/gpu", "value": "dedicated", "effect": "NoSchedule"}, True, id="another-value"),
    pytest.param(POOL_TAINT, False, id="the-pool-taint-itself"),
])
def test_a_node_keeps_its_own_taint_and_the_runbook_adds_none(own: dict[str, str], note: bool) -> None:
    result = enable(read([node("gpu-node", 1, taints=[own]), node("gpu-node-2", 8)]), ["gpu-node"])
    assert result.refusals == []
    assert [c.action for c in result.changes["nodes"]] == ["merge"]
    written = Mark.parse(result.changes["nodes"][0].body["metadata"]["annotations"]["gpushare.io/timeslicing"])
    assert written.taint_added is False
    assert any("gpu-node keeps its own taint nvidia.com/gpu=dedicated:NoSchedule" in n for n in result.notes) is note
    assert not any("taint nvidia.com/gpu=shared" in line for line in result.lines if line.startswith("- gpu-node:"))


def test_a_re_run_remembers_that_the_runbook_added_the_taint() -> None:
    """After an interruption between the node's label and the end, a re-run finds the taint it added."""
    cluster = enabled_read()
    cluster["nodes"][0]["metadata"]["annotations"].update(mark(run=INTERRUPTED))
    result = enable(cluster, ["gpu-node"])
    assert result.lines[0].startswith("Nothing to change")
    assert timeslicing_mark(Node(cluster["nodes"][0])).taint_added


def test_a_re_run_does_not_claim_a_taint_the_node_had_before() -> None:
    cluster = enabled_read(nodes=[shared_node("gpu-node", 1, own_taint=True), node("gpu-node-2", 8)])
    result = enable(cluster, ["gpu-node"])
    assert result.lines[0].startswith("Nothing to change")


# ---- bystanders of a key whose content changes ------------------------------------------------------
def four_replicas() -> dict[str, Any]:
    text = settings(replicas=4).config.text
    return managed_configmap({"default": "version: v1\n", "shared": text})


def test_changing_a_shared_key_used_outside_the_limit_is_refused_naming_those_nodes() -> None:
    cluster = enabled_read(shared=("gpu-node-2",), configmaps=[four_replicas()])
    message = refused(enable(cluster, ["gpu-node"]), "differs from this run's (2 replicas)")
    assert "outside the limit that use it: gpu-node-2" in message
    assert "(-l gpu-node,gpu-node-2)" in message


def test_changing_a_shared_key_of_nodes_all_in_the_limit_is_fine() -> None:
    cluster = enabled_read(shared=("gpu-node-2",), configmaps=[four_replicas()])
    result = enable(cluster, ["gpu-node", "gpu-node-2"])
    assert result.refusals == []
    assert result.changes["configmap"][0].body["data"] == {"shared": settings().config.text}
    assert result.restart_nodes == ["gpu-node", "gpu-node-2"]  # their pods mounted the 4-replica config


def test_the_nodes_reading_the_cluster_default_are_bystanders_of_the_default_key() -> None:
    cluster = read(policy=clusterpolicy(CONFIGMAP, "shared"), configmaps=[four_replicas()])
    message = refused(enable(cluster, ["gpu-node"]), "differs from this run's")
    assert "gpu-node-2, gpu-node-mig" in message


# ---- cluster scope -----------------------------------------------------------------------------------
def test_cluster_scope_changes_the_default_and_lets_the_operator_roll_every_node() -> None:
    cluster = read()
    result = enable(cluster, ["gpu-node"], scope="cluster", confirm_cluster_scope=True)
    assert result.refusals == []
    policy = applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])
    assert policy["spec"]["devicePlugin"]["config"] == {"name": CONFIGMAP, "default": "shared"}
    assert "nvidia.com/device-plugin.config" not in result.changes["nodes"][0].body["metadata"]["labels"]
    assert result.restart_nodes == []
    assert sorted(result.expected["targets"]) == list(GPU_NODES)
    assert result.expected["targets"]["gpu-node-2"] == {"gpus": 8, "pool": False}
    assert unpacked(result.expected["bystanders"]) == {}


def test_cluster_scope_is_refused_while_a_gpu_node_reads_another_config() -> None:
    cluster = read([node("gpu-node", 1), node("gpu-node-2", 8, labels={"nvidia.com/device-plugin.config": "other"}),
                    node("gpu-node-mig", 4, mig="all-1g.10gb"), node("gpu-node-3", None)],
                   configmaps=[managed_configmap({"default": "version: v1\n", "other": "version: v1\n"})])
    message = refused(enable(cluster, ["gpu-node"], scope="cluster", confirm_cluster_scope=True),
                      "timeslicing_scope=cluster changes the default config of every GPU node")
    for blocked in ("gpu-node-2 (its own label nvidia.com/device-plugin.config=other)", "gpu-node-3 (no GPU count "
                    "yet)", "gpu-node-mig (MIG enabled)"):
        assert blocked in message
    assert "gpu-node (" not in message


# ---- an interrupted enable, adopted by the re-run ----------------------------------------------------
def interrupted_after_clusterpolicy() -> dict[str, Any]:
    """An enable of gpu-node stopped after it created the ConfigMap and pointed the ClusterPolicy."""
    fields = [FieldChange("/spec/devicePlugin/config/name", "", CONFIGMAP),
              FieldChange("/spec/devicePlugin/config/default", "", "default")]
    return read(policy=clusterpolicy(CONFIGMAP, "default"),
                configmaps=[managed_configmap(), record(INTERRUPTED, "enable-timeslicing", nodes=["gpu-node"],
                                                        fields=fields, created=True, keys_added=["default", "shared"],
                                                        backup=clusterpolicy())])


def test_a_re_run_adopts_the_interrupted_run_keeping_its_record_and_backup() -> None:
    result = enable(interrupted_after_clusterpolicy(), ["gpu-node", "gpu-node-2"])
    assert result.refusals == []
    assert result.record == INTERRUPTED
    assert any(n.startswith(f"An earlier enable run was interrupted: record {INTERRUPTED}") for n in result.notes)
    [extend] = result.changes["record"]
    assert (extend.action, extend.name) == ("merge", INTERRUPTED)
    assert set(extend.body["data"]) == {"intent.json"}  # the backup stays the interrupted run's
    intent = json.loads(extend.body["data"]["intent.json"])
    assert intent["nodes"] == ["gpu-node", "gpu-node-2"]
    assert intent["configmap"] == {"name": CONFIGMAP, "created": True, "keys_added": ["default", "shared"]}
    assert intent["clusterpolicy"] == [{"path": "/spec/devicePlugin/config/name", "before": "", "after": CONFIGMAP},
                                       {"path": "/spec/devicePlugin/config/default", "before": "", "after": "default"}]
    assert result.changes["clusterpolicy"] == [] and result.changes["configmap"] == []
    assert result.changes["finish"][0].name == INTERRUPTED
    assert result.lines[-1].endswith("(the interrupted run's)")
    marks = [Mark.parse(c.body["metadata"]["annotations"]["gpushare.io/timeslicing"])
             for c in result.changes["nodes"] if c.action == "merge"]
    assert {m.run for m in marks} == {INTERRUPTED}


def test_a_refused_re_run_still_tells_of_the_interrupted_run_and_its_backup() -> None:
    cluster = interrupted_after_clusterpolicy()
    cluster["records"][0]["metadata"]["annotations"]["gpushare.io/backup-file"] = (
        "/srv/gpushare/backups/clusterpolicy-20261201T093000Z.yaml")
    result = enable(cluster, ["gpu-node"], replicas=99)
    refused(result, "timeslicing_replicas=99")
    assert result.interrupted == [
        f"An earlier enable run was interrupted: record {INTERRUPTED}, started 2026-12-01T09:00:00Z, it was changing "
        f"ClusterPolicy devicePlugin/config/name, devicePlugin/config/default; ConfigMap {CONFIGMAP} (created); nodes "
        f"gpu-node; ClusterPolicy backup: ConfigMap gpushare-system/{INTERRUPTED} (key clusterpolicy.yaml) and file "
        "/srv/gpushare/backups/clusterpolicy-20261201T093000Z.yaml on the machine that ran it."]


def test_while_the_lock_is_held_the_interrupted_run_may_be_the_one_still_at_work() -> None:
    holder = {"holderIdentity": "enable-timeslicing@ops/20261201T093000Z-1a2b", "leaseDurationSeconds": 1800,
              "acquireTime": "2026-12-01T09:59:00.000000Z", "renewTime": "2026-12-01T09:59:00.000000Z"}
    cluster = {**interrupted_after_clusterpolicy(), "lease": {"metadata": {"resourceVersion": "9"}, "spec": holder}}
    [note] = enable(cluster, ["gpu-node"]).interrupted
    assert note.endswith("(key clusterpolicy.yaml). Unless it is the run that holds the runbook lock, still at work.")
    assert not enable(interrupted_after_clusterpolicy(), ["gpu-node"]).interrupted[0].endswith("still at work.")


def test_a_re_run_merges_what_it_changes_into_the_interrupted_intent() -> None:
    """Interrupted after its record only: the re-run makes the ClusterPolicy change the record announced."""
    fields = [FieldChange("/spec/devicePlugin/config/name", "", CONFIGMAP)]
    cluster = read(configmaps=[record(INTERRUPTED, "enable-timeslicing", nodes=["gpu-node"], fields=fields,
                                      created=True, keys_added=["default", "shared"], backup=clusterpolicy())])
    result = enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True)
    intent = json.loads(result.changes["record"][0].body["data"]["intent.json"])
    assert [c["path"] for c in intent["clusterpolicy"]] == [
        "/spec/devicePlugin/config/name", "/spec/devicePlugin/config/default", "/spec/daemonsets/tolerations"]
    assert intent["clusterpolicy"][0]["before"] == ""


def test_an_interrupted_run_with_nothing_left_to_change_is_still_finished() -> None:
    cluster = enabled_read(configmaps=[managed_configmap(), record(INTERRUPTED, "enable-timeslicing",
                                                                   nodes=["gpu-node"], backup=clusterpolicy())])
    result = enable(cluster, ["gpu-node"])
    assert result.writes and result.changes["finish"][0].name == INTERRUPTED
    assert not result.lines[0].startswith("Nothing to change")


# ---- nothing to change, and what restarts ---------------------------------------------------------------
def test_nothing_to_change_says_what_is_already_there() -> None:
    result = enable(enabled_read(), ["gpu-node"])
    assert result.refusals == [] and not result.writes and result.changes == {}
    assert result.lines == ["Nothing to change: time-slicing is already enabled as asked (2 replicas, key shared, "
                            "scope node) on gpu-node."]
    assert result.expected["targets"] == {"gpu-node": {"gpus": 1, "pool": True}}


def test_another_replica_count_changes_the_key_and_restarts_its_readers() -> None:
    cluster = enabled_read()
    result = enable(cluster, ["gpu-node"], replicas=4)
    assert result.refusals == []
    assert result.changes["configmap"][0].body["data"] == {"shared": settings(replicas=4).config.text}
    assert result.changes["clusterpolicy"] == [] and not result.rolls_fleet
    assert result.restart_nodes == ["gpu-node"]
    assert any("change shared" in line for line in result.lines)


def test_a_second_trial_node_reads_the_key_its_pods_can_already_see() -> None:
    result = enable(enabled_read(), ["gpu-node-2"])
    assert result.changes["configmap"] == [] and result.changes["clusterpolicy"] == []
    assert result.restart_nodes == []  # the config manager reloads on the label
    assert [c.name for c in result.changes["nodes"]] == ["gpu-node-2", "gpu-node-2"]
    assert result.lines[-2] == "Not touched: gpu-node, gpu-node-mig"


def test_only_readers_that_cannot_see_the_configmap_or_run_an_old_template_restart() -> None:
    cluster = enabled_read(shared=("gpu-node", "gpu-node-2"))
    pods = cluster["pods"]
    stale = next(p for p in pods if p["spec"]["nodeName"] == "gpu-node-2")
    stale["metadata"]["creationTimestamp"] = "2026-12-01T08:45:19Z"  # before the ConfigMap's write
    result = enable(cluster, ["gpu-node", "gpu-node-2"])
    assert result.restart_nodes == ["gpu-node-2"]
    assert Record.of(result.changes["record"][0].body).intent.nodes == ["gpu-node-2"]


def test_readers_started_within_the_second_of_the_write_restart_unless_a_complete_run_names_them() -> None:
    cluster = enabled_read(shared=("gpu-node", "gpu-node-2"))
    written = cluster["configmaps"][0]["metadata"]["managedFields"][0]["time"]
    same_second = [p for p in cluster["pods"] if p["spec"]["nodeName"] == "gpu-node-2"]
    for pod in same_second:
        pod["metadata"]["creationTimestamp"] = written  # re-created at once: before or after the write?
    assert enable(cluster, ["gpu-node", "gpu-node-2"]).restart_nodes == ["gpu-node-2"]

    uids = [p["metadata"]["uid"] for p in same_second]
    version = cluster["configmaps"][0]["metadata"]["resourceVersion"]
    record = cluster["records"][0]
    record["data"].update(records.readers_patch(CONFIGMAP, {"readers": uids, "configmap_version": version})["data"])
    result = enable(cluster, ["gpu-node", "gpu-node-2"])
    assert result.restart_nodes == [] and not result.writes
    assert result.known_readers == {"resourceVersion": version, "pods": sorted(uids)}
    # named at another version of the ConfigMap (written again since), or by a run not complete: not known
    for state, named in (("complete", "1"), ("in-progress", version)):
        record["data"].update(records.readers_patch(CONFIGMAP, {"readers": uids, "configmap_version": named})["data"])
        record["metadata"]["annotations"]["gpushare.io/state"] = state
        assert enable(cluster, ["gpu-node", "gpu-node-2"]).restart_nodes == ["gpu-node-2"]


def test_the_operators_own_configmap_gets_the_key_and_keeps_its_default() -> None:
    own = configmap("operator-config", {"all-off": "version: v1\n"})
    cluster = read(policy=clusterpolicy("operator-config", "all-off"), configmaps=[own])
    result = enable(cluster, ["gpu-node"], configmap_name="operator-config")
    assert result.refusals == []
    [update] = result.changes["configmap"]
    assert update.action == "merge"
    assert set(update.body["data"]) == {"shared", "default"}
    assert update.body["metadata"]["annotations"] == {"gpushare.io/managed-keys": "default,shared"}
    assert result.changes["clusterpolicy"] == []  # already points there, its default stays
    assert Record.of(result.changes["record"][0].body).intent.keys_added == ["default", "shared"]
    assert "configmap.yaml" in result.changes["record"][0].body["data"]
    assert result.backup_file == "" and Record.of(result.changes["record"][0].body).backup_file == ""


def test_under_on_delete_the_first_trial_restarts_the_target_and_waits_for_no_roll() -> None:
    """daemonsets.updateStrategy OnDelete: the re-rendered readers restart only when deleted, so the
    run restarts them on its target, never waits for a fleet roll, and the bystanders keep theirs."""
    cluster = read()
    for ds in cluster["daemonsets"]:
        ds["spec"]["updateStrategy"] = {"type": "OnDelete"}
    result = enable(cluster, ["gpu-node"])
    assert result.refusals == []
    assert not result.rolls_fleet and result.restart_nodes == ["gpu-node"]
    assert result.expected["compare_allocatable"]
    assert any("under daemonsets.updateStrategy OnDelete" in line and "keep theirs on the old template" in line
               for line in result.lines), result.lines
    on_delete = ClusterState.of(cluster).device_plugin
    assert on_delete is not None and on_delete.on_delete
    on_delete.raw["status"] = {"observedGeneration": 1, "updatedNumberScheduled": 1, "desiredNumberScheduled": 3}
    assert not on_delete.rolling  # no roll will come: nodes wait for their pods to be deleted


def test_under_on_delete_cluster_scope_restarts_every_node_named_and_only_when_confirmed() -> None:
    """With timeslicing_scope=cluster under OnDelete no operator roll comes: the run restarts the
    readers on every GPU node itself, all at once, which the plan names and which above
    timeslicing_fleet_roll_confirm_above needs timeslicing_confirm_fleet_roll."""
    cluster = read()
    for ds in cluster["daemonsets"]:
        ds["spec"]["updateStrategy"] = {"type": "OnDelete"}
    message = refused(enable(cluster, ["gpu-node"], scope="cluster", confirm_cluster_scope=True,
                             fleet_roll_confirm_above=2), "restarts them itself on all")
    assert "-e timeslicing_confirm_fleet_roll=true" in message
    result = enable(cluster, ["gpu-node"], scope="cluster", confirm_cluster_scope=True, fleet_roll_confirm_above=2,
                    confirm_fleet_roll=True)
    assert result.refusals == [] and not result.rolls_fleet
    assert result.restart_nodes == sorted(GPU_NODES)
    assert any(f"restarts them itself on every GPU node ({len(GPU_NODES)}), all at once" in line
               for line in result.lines), result.lines
    for name in GPU_NODES:
        assert any(line.startswith(f"- {name}: restart its nvidia-device-plugin-daemonset and gpu-feature-discovery "
                                   "pods") for line in result.lines), result.lines


def _operator_release(cluster: dict[str, Any], validator_tag: str, digest: bool = True, stale: bool = False) -> None:
    """The operator's release as its validator's image tag, and the driver config digest its driver
    template carries (set by the operator from v26.3.0)."""
    validator = daemonset("nvidia-operator-validator")
    validator["spec"]["template"]["spec"]["containers"][0]["image"] = \
        f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{validator_tag}"
    cluster["daemonsets"].append(validator)
    driver = next(d for d in cluster["daemonsets"] if d["metadata"]["name"] == "nvidia-driver-daemonset")
    driver["spec"]["template"]["spec"]["containers"][0]["env"] = (
        [{"name": "DRIVER_CONFIG_DIGEST", "value": "f7d172ac4d6584b6"}] if digest else [])
    if stale:  # a driver pod left on an older template (OnDelete), whose digest may differ
        driver["status"]["updatedNumberScheduled"] = driver["status"]["desiredNumberScheduled"] - 1


@pytest.mark.parametrize(("tag", "digest", "stale", "restart_only"), [
    pytest.param("v26.7.0", True, False, True, id="v26.7: restart-only"),
    pytest.param("v26.3.3", True, False, False, id="v26.3: no restart-only predicate"),
    pytest.param("v26.7.0", False, False, False, id="no digest: the full flow"),
    pytest.param("v26.7.0", True, True, False, id="a driver pod on an older template: the full flow"),
])
def test_on_v26_7_a_toleration_change_restarts_the_driver_in_place_and_evicts_nothing(
        tag: str, digest: bool, stale: bool, restart_only: bool) -> None:
    """GPU Operator v26.7 (internal/predicates/restart_only.go, k8s-operator-libs upgrade_inplace.go):
    the tolerations are not in DRIVER_CONFIG_DIGEST, so the driver upgrade they start cordons each node
    and restarts its driver pod in place, with no GPU-pod deletion: no pod it could not evict stops the run."""
    cluster = read(policy=clusterpolicy(auto_upgrade=True), daemonsets=[daemonset(n) for n in OPERANDS])
    _operator_release(cluster, tag, digest, stale)
    assert enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True).needs_workloads \
        is not restart_only
    cluster["workloads"] = [gpu_workload("bare", "gpu-node-2", owner=None)]
    result = enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True)
    [roll] = [line for line in result.lines if line.startswith("  the operator re-renders")] or [""]
    if restart_only:
        assert result.refusals == [], result.refusals
        assert ("will cordon each of its 3 GPU nodes in turn, 1 at a time (maxParallelUpgrades), and restart its driver "
                "pod in place without evicting GPU pods (GPU Operator v26.7 restart-only path") in roll
        assert result.expected["driver_upgrade"], "it still cordons: the verify waits for the upgrade"
    else:
        refused(result, "cannot take these pods off their node")


def test_under_on_delete_a_confirmed_operand_roll_names_the_driver_upgrade_and_no_operand_roll() -> None:
    """The tolerations re-render every operand, but under OnDelete only the driver's upgrade controller
    restarts pods (the driver DaemonSet is always OnDelete): the plan names the run's own restarts and
    that upgrade, not a roll of the other operands."""
    cluster = read(policy=clusterpolicy(auto_upgrade=True), daemonsets=[daemonset(n) for n in OPERANDS])
    for ds in cluster["daemonsets"]:
        ds["spec"]["updateStrategy"] = {"type": "OnDelete"}
    cluster["workloads"] = []
    result = enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_operand_roll=True)
    assert result.refusals == [] and result.restart_nodes == ["gpu-node"]
    assert not any("whose pods restart one node at a time" in line for line in result.lines), result.lines
    assert any("under daemonsets.updateStrategy OnDelete" in line for line in result.lines), result.lines
    assert any(line.startswith("  nvidia-driver-daemonset's template changes too") and "cordon and drain each of its 3"
               in line for line in result.lines), result.lines
