"""The rollback runbook's plan (gpushare.timeslicing_rollback.plan): it undoes exactly what the enable
runs changed (the fields they set, each only if it still holds their value; the ConfigMap or keys
they created), refuses what would lose work, warns of pods that would come straight back, and says
where a failed run stopped."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushare.model.node import Node, unpacked
from gpushare.runbook.drain import shared_resources
from gpushare.runbook.records import RECORDS_NAMESPACE, FieldChange, Record
from gpushare.runbook.state import ClusterState
from gpushare.timeslicing_common import sharing
from gpushare.timeslicing_common.mark import timeslicing_mark
from gpushare.timeslicing_rollback.plan import PHASES, RESTORABLE, RollbackPlan, plan, progress
from gpushare.timeslicing_rollback.settings import RollbackSettings
from tests.unit.cluster_objects import (ASSET_TOLERATION, CLUSTERPOLICY, CONFIGMAP, NAMESPACE, NOW, POOL_TAINT,
                                        clusterpolicy, configmap, daemonset, enabled_read, managed_configmap, mark,
                                        applied, assert_guarded, node, operand_pod, read, record, shared_node,
                                        workload_pod)

ENABLE_RECORD = "gpushare-run-enable-20261201t090000z-0a0a"
NAME, DEFAULT = "/spec/devicePlugin/config/name", "/spec/devicePlugin/config/default"
TOLERATIONS = "/spec/daemonsets/tolerations"


def rollback_settings(**overrides: Any) -> RollbackSettings:
    return RollbackSettings.of({"pool_label_key": "gpu-mode", "pool_label_value": "shared",
                                "pool_taint_key": "nvidia.com/gpu", "pool_taint_value": "shared",
                                "config_key": "shared", "configmap_name": CONFIGMAP, "namespace": NAMESPACE,
                                "clusterpolicy_name": CLUSTERPOLICY, "confirm_cluster_scope": False,
                                "confirm_overwrite": False, "drain_force": False, "drain_delete_emptydir_data": False,
                                "backup": "", "backup_text": "", **overrides})


def roll_back(cluster: dict[str, Any], targets: list[str], pods: list[dict[str, Any]] | None = None,
              **inputs: Any) -> RollbackPlan:
    return plan(ClusterState.of(cluster), pods or [], rollback_settings(**inputs), targets,
                {"command": "ansible-playbook playbooks/rollback-timeslicing.yml"}, NOW)


def refused(result: RollbackPlan, fragment: str) -> str:
    matching = [r for r in result.refusals if fragment in r]
    assert matching, result.refusals
    assert all(r.endswith("Nothing was changed.") for r in result.refusals)
    assert result.changes == {}
    return matching[0]


# ---- the rollback of the only shared node ------------------------------------------------------------
def test_the_last_shared_node_is_rolled_back_and_the_cluster_with_it() -> None:
    cluster = enabled_read()
    pods = [workload_pod("trainer-5d4f7b9c8-aaaaa", "gpu-node")]
    result = roll_back(cluster, ["gpu-node"], pods)
    assert result.refusals == [] and result.warnings == []
    assert result.nodes == ["gpu-node"] and result.restore_cluster and result.rolls_fleet
    assert list(result.changes) == ["record", "stop", "restore", "clusterpolicy", "configmap", "records",
                                    "uncordon", "finish"]

    gpu_node = cluster["nodes"][0]
    stopped = applied(gpu_node, result.changes["stop"])
    assert Node(stopped).unschedulable and "gpu-mode" not in Node(stopped).labels
    restored = Node(applied(stopped, result.changes["restore"]))
    assert restored.config_label == "" and restored.taints == []
    done = Node(applied(restored.raw, result.changes["uncordon"]))
    assert not done.unschedulable and timeslicing_mark(done) is None and done.cordoned_by == ""

    policy = applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])
    assert policy["spec"]["devicePlugin"]["config"] == {"name": "", "default": ""}
    assert policy["spec"] == {**cluster["clusterpolicy"]["spec"], "devicePlugin": policy["spec"]["devicePlugin"]}
    assert result.expected["clusterpolicy"] == {NAME: "", DEFAULT: ""}

    assert [c.as_dict() for c in result.changes["configmap"]] == [{
        "action": "delete", "kind": "ConfigMap", "name": CONFIGMAP, "namespace": NAMESPACE,
        "preconditions": {"uid": f"uid-{CONFIGMAP}"},
        "why": "delete the ConfigMap the enable runbook created, nothing uses it any more"}]
    assert [c.name for c in result.changes["records"]] == [ENABLE_RECORD]
    assert result.changes["records"][0].body["metadata"]["annotations"]["gpushare.io/state"] == "rolled-back"
    rollback_record = Record.of(result.changes["record"][0].body)
    assert rollback_record.intent.nodes == ["gpu-node"] and rollback_record.clusterpolicy_backup is not None
    assert "evict 1 shared pod(s) (team-a/trainer-5d4f7b9c8-aaaaa)" in result.lines[1]


def test_the_clusterpolicy_restore_is_guarded_by_the_values_the_enable_set() -> None:
    cluster = enabled_read()
    result = roll_back(cluster, ["gpu-node"])
    assert_guarded(cluster["clusterpolicy"], result.changes,
                   lambda spec: spec["devicePlugin"]["config"].update(default="someone-elses"))


def test_only_the_fields_the_enable_changed_are_restored() -> None:
    """The operator had set the default key before; the enable only pointed the name."""
    own = configmap(CONFIGMAP, {"all-off": "version: v1\n", "shared": "x"},
                    annotations={"gpushare.io/managed-keys": "shared"})
    enable = record(ENABLE_RECORD, "enable-timeslicing", state="complete", nodes=["gpu-node"],
                    fields=[FieldChange(NAME, "", CONFIGMAP)], keys_added=["shared"],
                    backup=clusterpolicy("", "all-off"))
    cluster = enabled_read(policy=clusterpolicy(CONFIGMAP, "all-off"), configmaps=[own, enable])
    result = roll_back(cluster, ["gpu-node"])
    ops = result.changes["clusterpolicy"][0].body
    assert {op["path"] for op in ops} == {NAME}
    assert applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])["spec"]["devicePlugin"]["config"] == {
        "name": "", "default": "all-off"}
    # not created by the runbook: only the key it added goes
    assert [c.as_dict() for c in result.changes["configmap"]] == [{
        "action": "merge", "kind": "ConfigMap", "name": CONFIGMAP, "namespace": NAMESPACE,
        "body": {"data": {"shared": None}, "metadata": {"annotations": {"gpushare.io/managed-keys": None}}},
        "why": "remove the key(s) shared the enable runbook added"}]


PREPARE_RECORD = "gpushare-run-enable-20261201t080000z-0b0b"


def prepared_then_trial() -> dict[str, Any]:
    """A prepare run (no node: the ConfigMap and the ClusterPolicy), then a trial on gpu-node."""
    prepare = record(PREPARE_RECORD, "enable-timeslicing", state="complete", nodes=[], created=True,
                     keys_added=["default", "shared"], backup=clusterpolicy(),
                     fields=[FieldChange(NAME, "", CONFIGMAP), FieldChange(DEFAULT, "", "default")],
                     finished="2026-12-01T08:06:00Z")
    trial = record(ENABLE_RECORD, "enable-timeslicing", state="complete", nodes=["gpu-node"],
                   backup=clusterpolicy(CONFIGMAP, "default"), finished="2026-12-01T09:06:00Z")
    return enabled_read(configmaps=[managed_configmap(), prepare, trial])


def test_a_trials_rollback_keeps_the_cluster_prepared() -> None:
    result = roll_back(prepared_then_trial(), ["gpu-node"])
    assert result.refusals == [] and result.nodes == ["gpu-node"]
    assert not result.rolls_fleet and result.changes["clusterpolicy"] == [] and result.changes["configmap"] == []
    assert [c.name for c in result.changes["records"]] == [ENABLE_RECORD]  # the prepare record stays live
    assert any(f"The cluster stays prepared for trials (prepare record {PREPARE_RECORD}" in n and
               "-e timeslicing_rollback_unprepare=true" in n for n in result.notes)


def toleration_trial(auto_upgrade: bool) -> dict[str, Any]:
    """A trial on a prepared cluster that confirmed the operand roll (it added the pool taint's toleration)."""
    added = [ASSET_TOLERATION, {"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}]
    cluster = prepared_then_trial()
    cluster["records"][-1] = record(ENABLE_RECORD, "enable-timeslicing", state="complete", nodes=["gpu-node"],
                                       fields=[FieldChange(TOLERATIONS, [ASSET_TOLERATION], added)],
                                       backup=clusterpolicy(CONFIGMAP, "default"), finished="2026-12-01T09:06:00Z")
    cluster["clusterpolicy"] = clusterpolicy(CONFIGMAP, "default", tolerations=added, auto_upgrade=auto_upgrade)
    cluster["daemonsets"] = [daemonset(n) for n in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery",
                                                    "nvidia-driver-daemonset")]
    return cluster


@pytest.mark.parametrize("auto_upgrade", [True, False])
def test_removing_the_toleration_a_trial_added_rolls_every_operand(auto_upgrade: bool) -> None:
    """A trial on a prepared cluster that confirmed the operand roll: its rollback puts back
    spec.daemonsets.tolerations only, which re-renders every operand, the driver's included."""
    cluster = toleration_trial(auto_upgrade)
    cluster["daemonsets"].append(daemonset("nvidia-device-plugin-mps-control-daemon", updated=0, desired=0))
    result = roll_back(cluster, ["gpu-node"], pool_taint_key="gpu-mode")  # the trial's pool taint
    assert result.refusals == [] and result.rolls_fleet and not result.restores_config
    assert {op["path"] for op in result.changes["clusterpolicy"][0].body} == {TOLERATIONS}
    [roll] = [line for line in result.lines if line.startswith("  the operator re-renders")]
    assert roll.startswith("  the operator re-renders these DaemonSets, whose pods restart one node at a time: "
                           "gpu-feature-discovery on 3 GPU nodes, nvidia-device-plugin-daemonset on 3 GPU nodes; "
                           "nvidia-driver-daemonset's template changes too")
    assert "mps-control-daemon" not in roll
    assert ("the driver upgrade controller will cordon and drain each of its 3 GPU nodes in turn, 1 at a time"
            in roll) is auto_upgrade
    # the other nodes' allocatable dips in the roll, and the upgrade controller cordons them in turn
    assert not result.expected["compare_allocatable"]
    assert result.expected["compare_schedulable"] is not auto_upgrade
    # the waits after it end at once on a node that upgrade leaves upgrade-failed
    assert result.expected["driver_upgrade"] == ("cluster-policy" if auto_upgrade else "")


def test_under_on_delete_removing_the_toleration_restarts_the_node_itself_and_names_the_driver_upgrade() -> None:
    """The same rollback under OnDelete: no operand pod rolls, the run restarts its node's readers, and
    the driver upgrade (its DaemonSet is always OnDelete, its upgrade controller restarts it) is named
    and waited for."""
    cluster = toleration_trial(auto_upgrade=True)
    for ds in cluster["daemonsets"]:
        ds["spec"]["updateStrategy"] = {"type": "OnDelete"}
    result = roll_back(cluster, ["gpu-node"], pool_taint_key="gpu-mode")
    assert result.refusals == [] and result.rerenders and result.rolls_fleet, "the fleet wait is the driver upgrade's"
    assert not any(line.startswith("  the operator re-renders these DaemonSets") for line in result.lines)
    assert any("nvidia-driver-daemonset's template changes too" in line and "cordon and drain each of its 3 GPU" in line
               for line in result.lines), result.lines
    assert any(line.startswith("- gpu-node: restart its") for line in result.lines)
    assert result.expected["driver_upgrade"] == "cluster-policy"


def test_undoing_the_preparation_too_restores_the_clusterpolicy_and_deletes_the_configmap() -> None:
    cluster = prepared_then_trial()
    result = roll_back(cluster, ["gpu-node"], unprepare=True)
    assert result.refusals == [] and result.rolls_fleet
    assert applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])["spec"]["devicePlugin"]["config"] == {
        "name": "", "default": ""}
    assert [c.action for c in result.changes["configmap"]] == ["delete"]
    assert sorted(c.name for c in result.changes["records"]) == [PREPARE_RECORD, ENABLE_RECORD]
    assert not any("stays prepared" in n for n in result.notes)


def test_a_field_someone_changed_since_is_refused_unless_confirmed() -> None:
    cluster = enabled_read(policy=clusterpolicy(CONFIGMAP, "tuned-by-alice"))
    message = refused(roll_back(cluster, ["gpu-node"]),
                      "field devicePlugin/config/default was changed by someone else since the enable run")
    assert 'it is "tuned-by-alice", the enable set "default", the backup has ""' in message
    assert "-e timeslicing_rollback_confirm_overwrite=true" in message

    confirmed = roll_back(cluster, ["gpu-node"], confirm_overwrite=True)
    assert confirmed.refusals == []
    assert {"op": "test", "path": DEFAULT, "value": "tuned-by-alice"} in confirmed.changes["clusterpolicy"][0].body
    assert applied(cluster["clusterpolicy"], confirmed.changes["clusterpolicy"])["spec"]["devicePlugin"]["config"] \
        == {"name": "", "default": ""}


def test_a_field_already_back_is_left_alone() -> None:
    cluster = enabled_read(policy=clusterpolicy(CONFIGMAP, ""))
    result = roll_back(cluster, ["gpu-node"])
    assert [op["path"] for op in result.changes["clusterpolicy"][0].body] == [NAME, NAME]


def test_tolerations_the_enable_added_are_removed_or_put_back() -> None:
    added = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
             {"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}]
    for before in (None, [], [added[0]]):
        policy = clusterpolicy(CONFIGMAP, "default", tolerations=added)
        enable = record(ENABLE_RECORD, "enable-timeslicing", state="complete", nodes=["gpu-node"], created=True,
                        fields=[FieldChange(NAME, "", CONFIGMAP), FieldChange(DEFAULT, "", "default"),
                                FieldChange("/spec/daemonsets/tolerations", before, added)])
        cluster = enabled_read(policy=policy, configmaps=[managed_configmap(), enable])
        result = roll_back(cluster, ["gpu-node"], pool_taint_key="gpu-mode")  # the enable's pool taint
        daemonsets = applied(policy, result.changes["clusterpolicy"])["spec"]["daemonsets"]
        assert daemonsets.get("tolerations") == before and daemonsets["updateStrategy"] == "RollingUpdate"


# ---- the ConfigMap -----------------------------------------------------------------------------------
def test_a_configmap_the_enable_created_keeps_what_someone_else_added() -> None:
    cm = managed_configmap({"default": "version: v1\n", "shared": "x", "alices-trial": "version: v1\n"})
    cm["metadata"]["annotations"]["gpushare.io/managed-keys"] = "default,shared"
    result = roll_back(enabled_read(configmaps=[cm, *enabled_read()["records"]]), ["gpu-node"])
    [cleanup] = result.changes["configmap"]
    assert cleanup.action == "merge"
    assert cleanup.body["data"] == {"default": None, "shared": None}


def test_the_configmap_stays_while_the_clusterpolicy_still_points_at_it() -> None:
    """A backup naming the same ConfigMap: the default key stays readable, the shared key goes."""
    cluster = enabled_read()
    backup = clusterpolicy(CONFIGMAP, "default")
    text = yaml.safe_dump(backup)
    result = roll_back(cluster, ["gpu-node"], backup="clusterpolicy-20261201T090000Z.yaml", backup_text=text)
    assert result.refusals == []
    [cleanup] = result.changes["configmap"]
    assert cleanup.action == "merge" and cleanup.body["data"] == {"shared": None}


# ---- what stays: others still share, or nothing to do -------------------------------------------------
def test_rolling_back_one_of_two_shared_nodes_leaves_the_cluster_level_to_the_other() -> None:
    result = roll_back(enabled_read(shared=("gpu-node", "gpu-node-2")), ["gpu-node"])
    assert result.refusals == [] and result.nodes == ["gpu-node"]
    assert not result.restore_cluster and not result.rolls_fleet
    assert result.changes["clusterpolicy"] == [] and result.changes["configmap"] == [] \
        and result.changes["records"] == []
    assert "- ClusterPolicy and ConfigMap stay: gpu-node-2 still use(s) the shared config" in result.lines
    assert result.expected["compare_allocatable"]


def test_nothing_to_do_on_a_node_that_never_shared() -> None:
    result = roll_back(read(), ["gpu-node-2"])
    assert not result.writes and result.changes == {}
    assert result.lines == ["Nothing to do: gpu-node-2 never shared (no gpushare.io/timeslicing mark, no shared "
                            "config label, no shared allocatable). Nothing was changed."]


def test_nothing_to_do_on_a_node_rolled_back_before_says_when() -> None:
    earlier = record("gpushare-run-rollback-20261201t093000z-0c0c", "rollback-timeslicing", state="complete",
                     nodes=["gpu-node"], finished="2026-12-01T09:35:00Z")
    enable = record(ENABLE_RECORD, "enable-timeslicing", state="rolled-back", nodes=["gpu-node"])
    result = roll_back(read(configmaps=[earlier, enable]), ["gpu-node", "gpu-node-2"])
    assert not result.writes
    assert result.lines == ["Nothing to do: gpu-node was rolled back at 2026-12-01T09:35:00Z (record "
                            "gpushare-run-rollback-20261201t093000z-0c0c); gpu-node-2 never shared (no "
                            "gpushare.io/timeslicing mark, no shared config label, no shared allocatable). "
                            "Nothing was changed."]


# ---- an interrupted enable ---------------------------------------------------------------------------
def test_an_enable_interrupted_before_any_node_is_undone_at_the_cluster_level() -> None:
    interrupted = "gpushare-run-enable-20261201t093000z-beef"
    cluster = read(policy=clusterpolicy(CONFIGMAP, "default"),
                   configmaps=[managed_configmap(), record(interrupted, "enable-timeslicing", nodes=["gpu-node"],
                                                           fields=[FieldChange(NAME, "", CONFIGMAP),
                                                                   FieldChange(DEFAULT, "", "default")],
                                                           created=True, keys_added=["default", "shared"],
                                                           backup=clusterpolicy())])
    result = roll_back(cluster, ["gpu-node"])
    assert result.refusals == [] and result.nodes == []
    assert any(n.startswith(f"An enable run was interrupted: record {interrupted}") for n in result.notes)
    assert result.lines[0] == "Plan: roll back time-slicing on no node (cluster-level cleanup only)"
    assert applied(cluster["clusterpolicy"], result.changes["clusterpolicy"]) == clusterpolicy()
    assert result.changes["configmap"][0].action == "delete"
    assert [c.name for c in result.changes["records"]] == [interrupted]


@pytest.mark.parametrize(("backup", "backup_file", "where"), [
    pytest.param(clusterpolicy(), "/srv/backups/clusterpolicy-20261201T093000Z.yaml",
                 "ClusterPolicy backup: ConfigMap gpushare-system/gpushare-run-enable-20261201t093000z-beef (key "
                 "clusterpolicy.yaml) and file /srv/backups/clusterpolicy-20261201T093000Z.yaml on the machine that "
                 "ran it.", id="record-and-file"),
    pytest.param(clusterpolicy(), "", "ClusterPolicy backup: ConfigMap gpushare-system/gpushare-run-enable-"
                 "20261201t093000z-beef (key clusterpolicy.yaml).", id="record-only"),
    pytest.param(None, "", "it holds no ClusterPolicy backup.", id="no-backup"),
])
def test_the_note_on_an_interrupted_enable_says_where_its_backup_is(backup: dict[str, Any] | None, backup_file: str,
                                                                     where: str) -> None:
    interrupted = "gpushare-run-enable-20261201t093000z-beef"
    cluster = read(configmaps=[record(interrupted, "enable-timeslicing", nodes=["gpu-node"], created=True,
                                      keys_added=["default", "shared"], backup=backup, backup_file=backup_file)])
    result = roll_back(cluster, ["gpu-node"])
    assert result.interrupted == [f"An enable run was interrupted: record {interrupted}, started 2026-12-01T09:00:00Z, "
                                  f"it was changing ConfigMap {CONFIGMAP} (created); nodes gpu-node; {where}"]
    assert f"{result.interrupted[0]} This rollback undoes it." in result.notes


def test_a_refused_rollback_still_tells_of_the_interrupted_enable() -> None:
    interrupted = "gpushare-run-enable-20261201t093000z-beef"
    cluster = read(configmaps=[record(interrupted, "enable-timeslicing", nodes=["gpu-node"], backup=clusterpolicy())])
    result = roll_back(cluster, ["gpu-node", "no-such-node"])
    refused(result, "no-such-node: not a node of this cluster")
    assert [n.split(",")[0] for n in result.interrupted] == [f"An enable run was interrupted: record {interrupted}"]


def test_the_fields_of_several_enable_runs_go_back_to_the_first_ones_original() -> None:
    first = record(ENABLE_RECORD, "enable-timeslicing", state="complete", nodes=["gpu-node"], created=True,
                   fields=[FieldChange(NAME, "", CONFIGMAP), FieldChange(DEFAULT, "", "default")])
    second = record("gpushare-run-enable-20261201t093000z-beef", "enable-timeslicing", state="complete",
                    nodes=["gpu-node"], fields=[FieldChange(DEFAULT, "default", "shared")])
    cluster = enabled_read(policy=clusterpolicy(CONFIGMAP, "shared"), configmaps=[managed_configmap(), first, second])
    result = roll_back(cluster, ["gpu-node"], confirm_cluster_scope=True)
    ops = result.changes["clusterpolicy"][0].body
    assert {"op": "test", "path": DEFAULT, "value": "shared"} in ops
    assert applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])["spec"]["devicePlugin"]["config"] == {
        "name": "", "default": ""}


# ---- the node: cordon, taint, marks -----------------------------------------------------------------
def test_a_node_cordoned_by_the_operator_stays_cordoned() -> None:
    cluster = enabled_read(nodes=[shared_node("gpu-node", 1, unschedulable=True), node("gpu-node-2", 8)])
    result = roll_back(cluster, ["gpu-node"])
    assert "unschedulable" not in (result.changes["stop"][0].body or {}).get("spec", {})
    final = applied(cluster["nodes"][0], result.changes["stop"] + result.changes["restore"]
                    + result.changes["uncordon"])
    assert Node(final).unschedulable
    assert "already cordoned (stays so)" in result.lines[1]


def test_a_node_this_runbook_cordoned_in_an_interrupted_run_is_uncordoned() -> None:
    cordoned = shared_node("gpu-node", 1, unschedulable=True,
                           annotations={"gpushare.io/cordoned-by": "rollback-timeslicing"})
    result = roll_back(enabled_read(nodes=[cordoned, node("gpu-node-2", 8)]), ["gpu-node"])
    assert result.changes["uncordon"][0].body["spec"] == {"unschedulable": None}


def test_a_taint_the_node_had_before_the_enable_stays() -> None:
    own = enabled_read(nodes=[shared_node("gpu-node", 1, own_taint=True), node("gpu-node-2", 8)])
    result = roll_back(own, ["gpu-node"])
    assert not any(c.action == "untaint" for c in result.changes["restore"])


@pytest.mark.parametrize(("annotation", "taint", "removed"), [
    pytest.param(mark(taint_added=True), POOL_TAINT, True, id="added-by-the-enable"),
    pytest.param({"gpushare.io/timeslicing": "garbled"}, POOL_TAINT, True, id="unreadable-mark"),
    pytest.param({}, POOL_TAINT, True, id="no-mark"),
    pytest.param(mark(taint_added=True), {**POOL_TAINT, "value": "dedicated"}, False, id="another-value"),
])
def test_which_pool_taints_go(annotation: dict[str, str], taint: dict[str, str], removed: bool) -> None:
    tainted = node("gpu-node", 1, replicas=2, labels={"nvidia.com/device-plugin.config": "shared"},
                   taints=[taint], annotations=annotation)
    result = roll_back(enabled_read(nodes=[tainted, shared_node("gpu-node-2", 8)]), ["gpu-node"])
    untaints = [c for c in result.changes["restore"] if c.action == "untaint"]
    assert bool(untaints) is removed


# ---- pods --------------------------------------------------------------------------------------------
def test_only_the_shared_pods_of_the_rolled_nodes_are_drained() -> None:
    pods = [workload_pod("trainer-5d4f7b9c8-aaaaa", "gpu-node"),
            workload_pod("web-6b7c8d9e0-bbbbb", "gpu-node", resource="cpu", owner_name="web-6b7c8d9e0"),
            workload_pod("done-x", "gpu-node", phase="Succeeded", owner="Job", owner_name="done"),
            workload_pod("elsewhere-5d4f7b9c8-ccccc", "gpu-node-2")]
    result = roll_back(enabled_read(), ["gpu-node"], pods)
    assert "evict 1 shared pod(s) (team-a/trainer-5d4f7b9c8-aaaaa)" in result.lines[1]


def test_without_renaming_nvidia_com_gpu_is_the_share() -> None:
    assert shared_resources(Node(shared_node("gpu-node", 1))) == ("nvidia.com/gpu.shared",)
    unrenamed = Node(node("gpu-node", 1, replicas=2, renamed=False))
    assert shared_resources(unrenamed) == ("nvidia.com/gpu.shared", "nvidia.com/gpu")
    assert shared_resources(Node(node("gpu-node-2", 8))) == ("nvidia.com/gpu.shared",)
    cluster = enabled_read(nodes=[shared_node("gpu-node", 1, renamed=False)])
    result = roll_back(cluster, ["gpu-node"], [workload_pod("t-5d4f7b9c8-a", "gpu-node", resource="nvidia.com/gpu",
                                                            owner_name="t-5d4f7b9c8")])
    assert "evict 1 shared pod(s)" in result.lines[1]


@pytest.mark.parametrize(("pod", "fragment", "confirm"), [
    pytest.param(workload_pod("notebook", "gpu-node", owner=None),
                 "Pod team-a/notebook holds a shared replica and has no controller", "drain_force", id="unowned"),
    pytest.param(workload_pod("trainer-5d4f7b9c8-aaaaa", "gpu-node", volumes=[{"name": "s", "emptyDir": {}}]),
                 "Pod team-a/trainer-5d4f7b9c8-aaaaa uses an emptyDir volume", "drain_delete_emptydir_data",
                 id="emptydir"),
])
def test_pods_whose_eviction_loses_data_are_refused_unless_confirmed(pod: dict[str, Any], fragment: str,
                                                                     confirm: str) -> None:
    message = refused(roll_back(enabled_read(), ["gpu-node"], [pod]), fragment)
    assert f"-e timeslicing_rollback_{confirm}=true" in message
    assert roll_back(enabled_read(), ["gpu-node"], [pod], **{confirm: True}).refusals == []


def test_a_pod_whose_grace_period_outlasts_the_drain_is_refused_before_anything_is_written() -> None:
    pod = workload_pod("trainer-5d4f7b9c8-aaaaa", "gpu-node")
    pod["spec"]["terminationGracePeriodSeconds"] = 600
    message = refused(roll_back(enabled_read(), ["gpu-node"], [pod]), "may take 600 s to stop once evicted")
    assert "the drain waits at most 300 s (timeslicing_rollback_drain_timeout)" in message
    assert "-e timeslicing_rollback_drain_grace_period=<seconds>" in message
    assert roll_back(enabled_read(), ["gpu-node"], [pod], drain_timeout=900).refusals == []
    assert roll_back(enabled_read(), ["gpu-node"], [pod], drain_grace_period=30).refusals == []
    # unset, the grace period is Kubernetes' default: 30 s
    del pod["spec"]["terminationGracePeriodSeconds"]
    assert "may take 30 s" in refused(roll_back(enabled_read(), ["gpu-node"], [pod], drain_timeout=30), "to stop")


def test_a_daemonset_pod_holding_a_share_stays_with_a_warning() -> None:
    pod = workload_pod("agent-x", "gpu-node", owner="DaemonSet", owner_name="agent")
    result = roll_back(enabled_read(), ["gpu-node"], [pod])
    assert result.refusals == []
    assert result.warnings == ["DaemonSet pod team-a/agent-x holds a shared replica and stays (a drain leaves "
                               "DaemonSet pods); change its DaemonSet to ask for whole cards."]
    assert any(line.startswith("- gpu-node: cordon, leave the shared pool, evict 0 shared pod(s)")
               for line in result.lines)


CORDON_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(("tolerations", "selector", "warned"), [
    pytest.param([{"operator": "Exists"}], {"kubernetes.io/hostname": "gpu-node"}, True, id="pinned-tolerates-all"),
    pytest.param([CORDON_TOLERATION, POOL_TAINT | {"operator": "Equal"}], None, True,
                 id="tolerates-the-cordon-and-the-pool-taint"),
    pytest.param([CORDON_TOLERATION], None, False, id="tolerates-the-cordon-not-the-pool-taint"),
    pytest.param([{"operator": "Exists"}], {"gpu-mode": "shared"}, False, id="selects-the-pool-label"),
    pytest.param(None, {"kubernetes.io/hostname": "gpu-node"}, False, id="does-not-tolerate-the-cordon"),
    pytest.param([{"operator": "Exists"}], {"kubernetes.io/hostname": "gpu-node-2"}, False, id="selects-another-node"),
])
def test_a_warning_for_pods_that_would_come_straight_back(tolerations: list[dict[str, Any]] | None,
                                                          selector: dict[str, str] | None, warned: bool) -> None:
    pod = workload_pod("trainer-5d4f7b9c8-aaaaa", "gpu-node", tolerations=tolerations, node_selector=selector)
    result = roll_back(enabled_read(), ["gpu-node"], [pod])
    assert result.refusals == []
    assert bool(result.warnings) is warned
    if warned:
        assert result.warnings[0].startswith("Deployment team-a/trainer (pod trainer-5d4f7b9c8-aaaaa) will come back "
                                             "to gpu-node after its eviction: it tolerates the cordon")
        assert f"  WARNING: {result.warnings[0]}" in result.lines
        assert ("kubernetes.io/hostname" if selector else "it has no node selector or required node affinity."
                ) in result.warnings[0]


# ---- cluster scope -------------------------------------------------------------------------------------
def cluster_scope_read() -> dict[str, Any]:
    nodes = [node("gpu-node", 1, replicas=2, labels={"gpu-mode": "shared"}, taints=[POOL_TAINT],
                  annotations=mark(scope="cluster")),
             node("gpu-node-2", 8, replicas=2), node("gpu-node-mig", 4, replicas=2), node("cpu-node", gpu=False)]
    enable = record(ENABLE_RECORD, "enable-timeslicing", state="complete", nodes=["gpu-node", "gpu-node-2",
                                                                                  "gpu-node-mig"],
                    fields=[FieldChange(NAME, "", CONFIGMAP), FieldChange(DEFAULT, "", "shared")], created=True)
    return enabled_read(nodes=nodes, policy=clusterpolicy(CONFIGMAP, "shared"),
                        configmaps=[managed_configmap(), enable])


def test_a_cluster_wide_rollback_needs_confirmation_and_rolls_every_shared_node() -> None:
    message = refused(roll_back(cluster_scope_read(), ["gpu-node"]), "time-slicing is enabled cluster-wide")
    assert "(gpu-node, gpu-node-2, gpu-node-mig)" in message and "-e timeslicing_confirm_cluster_scope=true" in message
    confirmed = roll_back(cluster_scope_read(), ["gpu-node"], confirm_cluster_scope=True)
    assert confirmed.refusals == [] and confirmed.nodes == ["gpu-node", "gpu-node-2", "gpu-node-mig"]
    assert unpacked(confirmed.expected["bystanders"]) == {}


# ---- an explicit backup ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("backup", "text", "fragment"), [
    pytest.param("gpushare-run-enable-nope", "", "No run record 'gpushare-run-enable-nope' with a ClusterPolicy "
                                                 f"backup in {RECORDS_NAMESPACE} (records with one: {ENABLE_RECORD})",
                 id="no-such-record"),
    pytest.param("clusterpolicy-x.yaml", "spec: [", "The backup file clusterpolicy-x.yaml is not valid YAML",
                 id="not-yaml"),
    pytest.param("clusterpolicy-x.yaml", yaml.safe_dump({**clusterpolicy(), "kind": "Deployment"}),
                 "is not a ClusterPolicy named cluster-policy with a spec", id="not-a-clusterpolicy"),
    pytest.param("clusterpolicy-x.yaml", yaml.safe_dump({**clusterpolicy(), "metadata": {"name": "other"}}),
                 "is not a ClusterPolicy named cluster-policy", id="another-clusterpolicy"),
])
def test_an_unusable_backup_is_refused(backup: str, text: str, fragment: str) -> None:
    message = refused(roll_back(enabled_read(), ["gpu-node"], backup=backup, backup_text=text), fragment)
    assert "-e timeslicing_rollback_backup=" in message


def test_a_named_record_restores_its_backup() -> None:
    result = roll_back(enabled_read(), ["gpu-node"], backup=ENABLE_RECORD)
    assert result.refusals == []
    assert result.expected["clusterpolicy"] == {"/spec/devicePlugin/config": {"name": "", "default": ""}}


# ---- refusals before anything ----------------------------------------------------------------------------
def test_unknown_nodes_and_a_missing_operator_are_refused() -> None:
    refused(roll_back(enabled_read(), ["gpu-node-9"]), "gpu-node-9: not a node of this cluster")
    refused(roll_back(read(policy=None), ["gpu-node"]), "ClusterPolicy 'cluster-policy' not found")


def test_a_rollback_interrupted_before_marking_itself_complete_is_finished_by_its_re_run() -> None:
    left = record("gpushare-run-rollback-20261201t093000z-0c0c", "rollback-timeslicing", nodes=["gpu-node"])
    enable = record(ENABLE_RECORD, "enable-timeslicing", state="rolled-back", nodes=["gpu-node"])
    result = roll_back(read(configmaps=[left, enable]), ["gpu-node"])
    assert result.writes and "gpushare-run-rollback-20261201t093000z-0c0c" in [
        c.name for c in result.changes["finish"]]


# ---- where a failed run stopped ----------------------------------------------------------------------------
@pytest.mark.parametrize(("phase", "stopped_after", "done", "policy", "cordoned"), [
    ("cordon", "", [], "untouched", True),
    ("drain", "", ["cordon"], "untouched", True),
    ("confirm", "", ["cordon", "drain"], "untouched", True),
    ("restore node", "", ["cordon", "drain", "confirm"], "untouched", True),
    ("restore cluster", "", ["cordon", "drain", "confirm", "restore node"], "partly restored (the re-run finishes it)",
     True),
    ("verify", "", list(PHASES[:5]), "restored", True),
    ("uncordon", "", list(PHASES[:6]), "restored", True),
    ("cordon", "cordon", ["cordon"], "untouched", True),
    ("drain", "drain", ["cordon", "drain"], "untouched", True),
    ("restore cluster", "clusterpolicy", list(PHASES[:5]), "restored", True),
    ("verify", "verify", list(PHASES[:6]), "restored", True),
])
def test_progress_of_a_failed_or_stopped_run(phase: str, stopped_after: str, done: list[str], policy: str,
                                             cordoned: bool) -> None:
    where = progress(phase, stopped_after)
    assert where["done"] == done
    assert where["not_done"] == [p for p in PHASES if p not in done]
    assert (where["policy"], where["cordoned"]) == (policy, cordoned)


def test_progress_of_a_run_that_failed_before_its_first_phase() -> None:
    """The lock could not be taken: no phase began, nothing was done, nothing is cordoned."""
    where = progress("", "")
    assert where["done"] == [] and where["policy"] == "untouched"
    assert where["cordoned"] is False


def test_every_phase_id_is_set_by_the_role_as_its_phase_begins() -> None:
    """The rescue reads _timeslicing_rollback_phase: each id of PHASES is set exactly once, and no
    other, so renaming a task cannot change the advice."""
    tasks = Path(__file__).parents[2] / "roles" / "timeslicing_rollback" / "tasks"
    ids = [task["ansible.builtin.set_fact"]["_timeslicing_rollback_phase"]
           for path in sorted(tasks.glob("*.yml")) if path.name != "main.yml"
           for task in yaml.safe_load(path.read_text()) or []
           if "_timeslicing_rollback_phase" in (task.get("ansible.builtin.set_fact") or {})]
    assert sorted(ids) == sorted(PHASES)


def test_the_plan_is_made_at_its_moment() -> None:
    later = plan(ClusterState.of(enabled_read()), [], rollback_settings(), ["gpu-node"], {},
                 NOW + dt.timedelta(hours=1))
    assert later.record.startswith("gpushare-run-rollback-20261201t110000z-")
    assert later.changes["finish"][0].body["metadata"]["annotations"]["gpushare.io/finished-at"] == \
        "2026-12-01T11:00:00Z"


def test_the_enable_refuses_to_overwrite_labels_a_rollback_could_not_put_back() -> None:
    """The node mark keeps no backup of a label: a node's own config label or another value of the
    pool label is refused before any write, so the rollback never loses one."""
    from gpushare.timeslicing.plan import plan as enable_plan
    from tests.unit.cluster_objects import settings

    own = configmap("operator-config", {"all-off": "version: v1\n", "a100-split": "version: v1\n"})
    labelled = node("gpu-node", 1, labels={"nvidia.com/device-plugin.config": "a100-split", "gpu-mode": "dedicated"})
    before = read([labelled, node("gpu-node-2", 8)], policy=clusterpolicy("operator-config", "all-off"),
                  configmaps=[own])
    enabled = enable_plan(ClusterState.of(before), settings(configmap_name="operator-config"), ["gpu-node"], {}, NOW)
    assert not enabled.changes
    assert any("already uses its own device-plugin config (nvidia.com/device-plugin.config=a100-split)" in r
               for r in enabled.refusals), enabled.refusals
    assert any("already carries gpu-mode=dedicated" in r and r.endswith("Nothing was changed.")
               for r in enabled.refusals), enabled.refusals


# ---- a run record edited or forged in the operator namespace -------------------------------------------
@pytest.mark.parametrize(("field", "fragment"), [
    (FieldChange("/spec/driver/repository", "nvcr.io/nvidia", "evil.example/driver"),
     "names ClusterPolicy path /spec/driver/repository, which no enable run changes"),
    (FieldChange("/spec/devicePlugin/config/name/../../../driver", "", "x"),
     "names ClusterPolicy path /spec/devicePlugin/config/name/../../../driver"),
    (FieldChange("/spec/devicePlugin/config", None, {"name": CONFIGMAP, "default": "shared", "env": [{"name": "X"}]}),
     "gives ClusterPolicy path /spec/devicePlugin/config a value of a shape no enable run writes"),
    (FieldChange(TOLERATIONS, [{"key": "a", "operator": "Exists", "effect": "NoSchedule", "privileged": True}], []),
     "gives ClusterPolicy path /spec/daemonsets/tolerations a value of a shape"),
])
def test_a_record_naming_a_path_no_enable_writes_is_refused_before_any_write(field: FieldChange, fragment: str) -> None:
    forged = record(ENABLE_RECORD, "enable-timeslicing", state="complete", nodes=["gpu-node"],
                    fields=[FieldChange(NAME, "", CONFIGMAP), field], keys_added=["shared"],
                    backup=clusterpolicy("", ""))
    own = configmap(CONFIGMAP, {"shared": "x"}, annotations={"gpushare.io/managed-keys": "shared"})
    result = roll_back(enabled_read(configmaps=[own, forged]), ["gpu-node"])
    message = refused(result, fragment)
    assert message.startswith(f"Run record {RECORDS_NAMESPACE}/{ENABLE_RECORD} (intent.json)"), message
    assert result.record == "" and not result.restore_cluster


def test_the_paths_an_enable_writes_are_the_restorable_ones() -> None:
    """Every ClusterPolicy path the enable's plan can write is on the rollback's allow-list."""
    assert set(RESTORABLE) == {sharing.CONFIG, sharing.CONFIG_NAME, sharing.CONFIG_DEFAULT, sharing.TOLERATIONS}



def test_under_on_delete_the_rollback_restarts_its_nodes_readers_and_waits_for_no_roll() -> None:
    """daemonsets.updateStrategy OnDelete: restoring devicePlugin.config re-renders the readers but
    rolls no pod, so the plan names the rolled-back node's reader pods the run restarts itself and
    promises no operator roll (the fleet-roll wait is skipped, the bystanders keep their pods)."""
    cluster = enabled_read()
    for ds in cluster["daemonsets"]:
        ds["spec"]["updateStrategy"] = {"type": "OnDelete"}
    on_node = [workload_pod("trainer-5d4f7b9c8-aaaaa", "gpu-node"), operand_pod("nvidia-device-plugin-daemonset", "gpu-node"),
               operand_pod("gpu-feature-discovery", "gpu-node")]  # the pods on the target, as the preflight reads them
    result = roll_back(cluster, ["gpu-node"], on_node)
    assert result.refusals == [] and result.restores_config
    assert result.rerenders and not result.rolls_fleet
    assert result.expected["compare_allocatable"], "no roll restarts the bystanders' plugins"
    assert not any(line.startswith("  the operator re-renders these DaemonSets") for line in result.lines), result.lines
    assert any("under daemonsets.updateStrategy OnDelete" in line and "restarts them itself on the nodes below" in line
               for line in result.lines), result.lines
    assert ("- gpu-node: restart its nvidia-device-plugin-daemonset and gpu-feature-discovery pods (nvidia-device-plugin-"
            "daemonset-gpu-node, gpu-feature-discovery-gpu-node; on the whole-card template)") in result.lines
    assert "only the operator's roll" not in result.lines[-2]


def test_under_rolling_update_the_rollback_still_lets_the_operator_roll() -> None:
    result = roll_back(enabled_read(), ["gpu-node"], [workload_pod("trainer-5d4f7b9c8-aaaaa", "gpu-node")])
    assert result.rolls_fleet and not result.rerenders
