"""Run records as untrusted input: a record is a ConfigMap the runbook identity writes, so anyone
holding that identity can forge one. A record that cannot be read is named and skipped, never a
crash; a readable one makes a rollback write only what the runbooks' write model allows, whoever
runs it, or the rollback is refused before its first write."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings as hypothesis_settings
from hypothesis import strategies as st

from gpushare.bounded import MAX_BYTES, MAX_DEPTH, Unreadable, load_json, load_yaml
from gpushare.mig import plan as mig_plan
from gpushare.mig.settings import ENABLE as MIG_ENABLE, MARK as MIG_MARK, ROLLBACK as MIG_ROLLBACK, Mark, MigSettings
from gpushare.runbook.records import FieldChange, Intent, Record, new_record
from gpushare.runbook.state import ClusterState
from gpushare.timeslicing.plan import plan as enable_plan
from gpushare.timeslicing_rollback.plan import RollbackPlan
from tests.unit.cluster_objects import (ASSET_TOLERATION, CONFIGMAP, NOW, applied, clusterpolicy, configmap,
                                        enabled_read, managed_configmap, record, settings)
from tests.unit.test_mig_plan import configmap as mig_configmap, gpu_node, state as mig_state
from tests.unit.test_timeslicing_rollback_plan import ENABLE_RECORD, NAME, TOLERATIONS, roll_back

CONFIG = "/spec/devicePlugin/config"
OPERATOR_OWN = ["default-mig-parted-config", "nvidia-device-plugin-entrypoint"]
POOL_TOLERATION = {"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}


def forged_refusal(result: RollbackPlan, *fragments: str) -> str:
    """The rollback is refused before its first write, naming the record."""
    assert result.changes == {} and result.record == "", result.changes
    assert all(r.endswith("Nothing was changed.") for r in result.refusals)
    matching = [r for r in result.refusals if all(f in r for f in fragments)]
    assert matching, result.refusals
    assert f"gpushare-system/{ENABLE_RECORD}" in matching[0]
    return matching[0]


def mig_settings(runbook: str, **values: Any) -> MigSettings:
    return MigSettings.of(runbook, {"namespace": "gpu-operator", "clusterpolicy_name": "cluster-policy", **values})


def enable_record(**kwargs: Any) -> dict[str, Any]:
    return record(ENABLE_RECORD, "enable-timeslicing", **{"state": "complete", "nodes": ["gpu-node"], **kwargs})


def with_intent(text: str, runbook: str = "enable-timeslicing", **data: str) -> dict[str, Any]:
    body = record("gpushare-run-enable-20261201t095000z-dead", runbook, nodes=["gpu-node"])
    body["data"].update({"intent.json": text, **data})
    return body


# ---- a record naming another ConfigMap as the enable's --------------------------------------------------
@pytest.mark.parametrize("victim", OPERATOR_OWN)
def test_a_record_naming_an_operator_configmap_as_created_does_not_get_it_deleted(victim: str) -> None:
    forged = enable_record(created=True, configmap_name=victim, keys_added=["config.yaml", "entrypoint.sh"])
    cluster = enabled_read(configmaps=[managed_configmap(), forged,
                                       configmap(victim, {"config.yaml": "x", "entrypoint.sh": "y"})])
    message = forged_refusal(roll_back(cluster, ["gpu-node"]), f"names ConfigMap {victim} as the one its run wrote")
    assert f"-e timeslicing_configmap_name={victim}" in message and "kubectl -n gpushare-system delete configmap" in message


# ---- attacker values at allowed ClusterPolicy paths --------------------------------------------------------
def config_record(before: Any, path: str = CONFIG) -> dict[str, Any]:
    after = {"name": CONFIGMAP, "default": "default"} if path == CONFIG else CONFIGMAP
    return enable_record(created=True, keys_added=["default", "shared"], fields=[FieldChange(path, before, after)])


@pytest.mark.parametrize(("before", "path", "why"), [
    pytest.param({"name": "evil-config"}, CONFIG, "no ConfigMap gpu-operator/evil-config exists", id="absent"),
    pytest.param({"name": "default-mig-parted-config", "default": "x"}, CONFIG,
                 "ConfigMap default-mig-parted-config is the GPU Operator's own", id="mig-parted-config"),
    pytest.param("nvidia-device-plugin-entrypoint", NAME, "is the GPU Operator's own", id="entrypoint"),
    pytest.param("owned-by-the-operator", NAME, "is the GPU Operator's own", id="owner-reference"),
    pytest.param({"name": "", "default": "../x"}, CONFIG, "the default config is a ConfigMap key", id="bad-key"),
])
def test_a_device_plugin_config_outside_the_write_model_is_refused(before: Any, path: str, why: str) -> None:
    owned = configmap("owned-by-the-operator", {"a": "b"})
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                             "name": "cluster-policy", "uid": "uid-cp", "controller": True}]
    cluster = enabled_read(configmaps=[managed_configmap(), config_record(before, path), owned,
                                       *(configmap(n, {"x": "y"}) for n in OPERATOR_OWN)])
    cluster["clusterpolicy"]["spec"]["devicePlugin"]["config"] = {"name": CONFIGMAP, "default": "default"}
    message = forged_refusal(roll_back(cluster, ["gpu-node"]), "which no rollback writes", why)
    assert "field devicePlugin/config" in message


def test_a_device_plugin_config_of_the_administrators_own_is_restored() -> None:
    """Before the first enable the device plugin read an administrator's ConfigMap: it goes back."""
    own = configmap("operator-config", {"all-off": "version: v1\n"})
    cluster = enabled_read(configmaps=[managed_configmap(), own,
                                       config_record({"name": "operator-config", "default": "all-off"})])
    cluster["clusterpolicy"]["spec"]["devicePlugin"]["config"] = {"name": CONFIGMAP, "default": "default"}
    result = roll_back(cluster, ["gpu-node"])
    assert result.refusals == []
    assert applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])["spec"]["devicePlugin"]["config"] == {
        "name": "operator-config", "default": "all-off"}


def tolerations_cluster(before: Any, now: list[dict[str, Any]]) -> dict[str, Any]:
    forged = enable_record(created=True, fields=[FieldChange(TOLERATIONS, before, [ASSET_TOLERATION, POOL_TOLERATION])])
    cluster = enabled_read(configmaps=[managed_configmap(), forged])
    cluster["clusterpolicy"] = clusterpolicy(CONFIGMAP, "default", tolerations=now)
    return cluster


@pytest.mark.parametrize(("before", "now", "confirm"), [
    pytest.param([{"operator": "Exists"}], [ASSET_TOLERATION, POOL_TOLERATION], False, id="tolerate-everything"),
    pytest.param([ASSET_TOLERATION, {"key": "x", "operator": "Exists"}], [ASSET_TOLERATION, POOL_TOLERATION], False,
                 id="adds-one"),
    pytest.param([], [ASSET_TOLERATION, {"key": "x", "operator": "Exists"}], True,
                 id="removes-another-than-the-pool-taints"),
    pytest.param([{"operator": "Exists"}], [ASSET_TOLERATION, {"key": "y", "operator": "Exists"}, POOL_TOLERATION],
                 True, id="overwrite-confirmed"),
])
def test_tolerations_may_only_lose_the_pool_taints_toleration(before: Any, now: list[dict[str, Any]],
                                                              confirm: bool) -> None:
    result = roll_back(tolerations_cluster(before, now), ["gpu-node"], pool_taint_key="gpu-mode",
                       confirm_overwrite=confirm)
    forged_refusal(result, "field daemonsets/tolerations", "which no rollback writes", "the pool taint's toleration")


def test_the_pool_taints_toleration_is_removed() -> None:
    cluster = tolerations_cluster([ASSET_TOLERATION], [ASSET_TOLERATION, POOL_TOLERATION])
    result = roll_back(cluster, ["gpu-node"], pool_taint_key="gpu-mode")
    assert result.refusals == []
    assert applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])["spec"]["daemonsets"]["tolerations"] == [
        ASSET_TOLERATION]


def test_a_named_backup_record_is_held_to_the_same_write_model() -> None:
    backup = clusterpolicy("evil-config", "shared")
    cluster = enabled_read(configmaps=[managed_configmap(), enable_record(created=True, backup=backup)])
    result = roll_back(cluster, ["gpu-node"], backup=ENABLE_RECORD)
    forged_refusal(result, f"The backup (record gpushare-system/{ENABLE_RECORD})", "evil-config exists")


def test_run_as_the_runbook_identity_a_forged_record_cordons_nothing() -> None:
    """Before, such a rollback cordoned and drained the node, then failed at a write its identity
    may not make, leaving it cordoned, and so did every re-run: now nothing is written."""
    cluster = enabled_read(configmaps=[managed_configmap(), config_record({"name": "evil-config"})])
    cluster["clusterpolicy"]["spec"]["devicePlugin"]["config"] = {"name": CONFIGMAP, "default": "default"}
    for _ in range(2):
        result = roll_back(cluster, ["gpu-node"], confirm_overwrite=True)
        forged_refusal(result, "evil-config")


# ---- records that cannot be read ------------------------------------------------------------------------
DEEP = "[" * 50_000 + "]" * 50_000


@pytest.mark.parametrize(("text", "why"), [
    pytest.param("[]", "intent.json is a JSON list, not an object", id="a-list"),
    pytest.param(DEEP, f"it nests deeper than {MAX_DEPTH} levels", id="deep"),
    pytest.param('{"a": "' + "x" * MAX_BYTES + '"}', "more than the 262144 characters", id="huge"),
    pytest.param('{"nodes": "gpu-node"}', "nodes is a str, not a list", id="nodes-a-string"),
    pytest.param('{"nodes": ["../etc"]}', "which is not a node name", id="node-name"),
    pytest.param('{"configmap": {"name": "x", "created": "yes"}}', "configmap.created is a str, not a bool",
                 id="created-a-string"),
    pytest.param('{"configmap": {"name": "Not A Name"}}', "is not a ConfigMap name", id="configmap-name"),
    pytest.param('{"clusterpolicy": [{"before": 1}]}', "a change without a path", id="no-path"),
    pytest.param('{"node_labels": {"gpu-node": {"kubernetes.io/hostname": "x"}}}', "which no runbook changes",
                 id="foreign-label"),
    pytest.param('{"node_labels": {"gpu-node": {"nvidia.com/mig.config": "a b"}}}', "not a label value",
                 id="label-value"),
    pytest.param('{"runbook": "rollback-timeslicing"}', "names runbook 'rollback-timeslicing'", id="runbook"),
])
def test_an_unreadable_record_is_named_and_skipped_by_every_plan(text: str, why: str) -> None:
    cluster = enabled_read(configmaps=[managed_configmap(), *enabled_read()["records"], with_intent(text)])
    state = ClusterState.of(cluster)
    assert [r.name for r in state.records] == [ENABLE_RECORD]
    assert why in state.unreadable_records["gpushare-run-enable-20261201t095000z-dead"]
    warning = "Run record gpushare-system/gpushare-run-enable-20261201t095000z-dead cannot be read ("
    rollback = roll_back(cluster, ["gpu-node"])
    assert rollback.refusals == [] and rollback.writes
    enable = enable_plan(state, settings(), ["gpu-node-2"], {}, NOW)
    mig = mig_plan.plan(state, [], mig_settings(MIG_ENABLE, configs={"gpu-node-mig": "all-1g.5gb"}),
                        ["gpu-node-mig"], {}, NOW)
    for result in (rollback, enable, mig):
        assert any(w.startswith(warning) and why in w and "every run skips it" in w for w in result.warnings), \
            result.warnings


@pytest.mark.parametrize("data", [
    {"clusterpolicy.yaml": DEEP}, {"clusterpolicy.yaml": "- " * 50_000 + "x"},
    {"clusterpolicy.yaml": "a: &a [1, 2]\nb: [*a, *a, *a]\n"}, {"readers.json": DEEP}])
def test_a_deep_backup_or_readers_list_does_not_crash_a_run(data: dict[str, str]) -> None:
    body = enable_record(created=True, backup=clusterpolicy())
    body["data"].update(data)
    cluster = enabled_read(configmaps=[managed_configmap(), body])
    result = roll_back(cluster, ["gpu-node"])
    assert result.refusals == []
    if "clusterpolicy.yaml" in data:
        assert any("cannot be read (clusterpolicy.yaml: it" in w for w in result.warnings), result.warnings


def test_a_state_annotation_no_run_writes_makes_the_record_unreadable() -> None:
    body = enable_record()
    body["metadata"]["annotations"]["gpushare.io/state"] = "done"
    assert "its state 'done' is none of" in Record.of(body).problem


def test_the_bounded_loaders() -> None:
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert load_json('["' + "[" * 1000 + '"]') == ["[" * 1000]  # brackets in a string are text
    assert load_yaml(yaml.safe_dump(clusterpolicy())) == clusterpolicy()
    for bad in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x" * (MAX_BYTES + 1), "{", None):
        with pytest.raises(Unreadable):
            load_json(bad)
    for bad in ("[" * (MAX_DEPTH + 1), "- " * (MAX_DEPTH + 1) + "x", "a: &x 1\nb: *x\n", "a: [", 3):
        with pytest.raises(Unreadable):
            load_yaml(bad)


def test_a_record_writes_its_backup_without_aliases() -> None:
    shared = {"key": "k"}
    policy = {**clusterpolicy(), "extra": [shared, shared]}
    body = new_record("r", "gpushare-system", Intent("enable-timeslicing"), policy, NOW, {})
    assert Record.of(body).clusterpolicy_backup == policy


# ---- the MIG runbooks ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mark", [
    {"previous": "all-3g.20gb", "config": "all-1g.5gb", "gpus": 10 ** 12},
    {"previous": "all-3g.20gb", "config": "all-1g.5gb", "gpus": True},
    {"previous": "../../x", "config": "all-1g.5gb", "gpus": 4},
    {"previous": ["all-3g.20gb"], "config": "all-1g.5gb", "gpus": 4}])
def test_a_forged_mig_mark_is_no_mark(mark: dict[str, Any]) -> None:
    assert Mark.parse(json.dumps(mark)) is None
    assert Mark.parse("[" * 50_000) is None
    cluster = mig_state([gpu_node(config="all-1g.5gb", annotations={MIG_MARK: json.dumps(mark)})])
    result = mig_plan.plan(cluster, [], mig_settings(MIG_ROLLBACK), ["gpu-node-mig"], {}, NOW)
    assert result.expected["targets"]["gpu-node-mig"]["config"] == "all-disabled"


def test_an_unreadable_record_does_not_stop_the_mig_rollback() -> None:
    forged = new_record("gpushare-run-enable-mig-20261201t083000z-abcd", "gpushare-system",
                        Intent(MIG_ENABLE, ["gpu-node-mig"]), None, NOW - dt.timedelta(hours=1), {})
    forged["data"]["intent.json"] = DEEP
    cluster = mig_state([gpu_node(config="all-1g.5gb")], [mig_configmap("default-mig-parted-config"), forged])
    result = mig_plan.plan(cluster, [], mig_settings(MIG_ROLLBACK), ["gpu-node-mig"], {}, NOW)
    assert result.refusals == [] and result.writes
    assert any("gpushare-run-enable-mig-20261201t083000z-abcd cannot be read" in w for w in result.warnings)
    assert "gpushare-run-enable-mig-20261201t083000z-abcd" not in [c.name for c in result.changes["finish"]]


# ---- fuzz ------------------------------------------------------------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=10)
PATHS = st.sampled_from([CONFIG, NAME, "/spec/devicePlugin/config/default", TOLERATIONS, "/spec/driver/repository"])
NAMES = st.sampled_from(["", CONFIGMAP, "evil-config", "default-mig-parted-config", "operator-config", "../x"])
VALUES = (JSON | NAMES | st.fixed_dictionaries({"name": NAMES, "default": NAMES})
          | st.lists(st.sampled_from([ASSET_TOLERATION, POOL_TOLERATION, {"operator": "Exists"}]), max_size=3))
CHANGES = st.lists(st.fixed_dictionaries({"path": PATHS, "before": VALUES, "after": VALUES}), max_size=3)
INTENTS = st.fixed_dictionaries({}, optional={
    "runbook": st.sampled_from(["enable-timeslicing", "rollback-timeslicing"]) | JSON,
    "nodes": st.lists(st.sampled_from(["gpu-node", "gpu-node-2", "Bad Name"]), max_size=2) | JSON,
    "clusterpolicy": CHANGES | JSON,
    "configmap": st.fixed_dictionaries({}, optional={"name": NAMES | JSON, "created": st.booleans() | JSON,
                                                     "keys_added": st.lists(NAMES, max_size=2) | JSON}) | JSON,
    "node_labels": JSON})
TEXTS = (INTENTS.map(json.dumps) | JSON.map(json.dumps) | st.text(max_size=30)
         | st.integers(1, 3).map(lambda n: ["[", "{\"a\":"][n % 2] * (MAX_DEPTH * n)))


def allowed_write(change: dict[str, Any]) -> bool:
    """What the runbooks' write model allows a rollback (the configured ConfigMap; devicePlugin.config
    naming none, it or the administrator's own; tolerations less the pool taint's)."""
    if change.kind == "ConfigMap":
        return change.name == CONFIGMAP or change.namespace == "gpushare-system"
    if change.kind != "ClusterPolicy":
        return change.kind == "Node"
    for op in change.body:
        value = op.get("value")
        if op["op"] == "test" or op["path"] == "/spec/devicePlugin" and value == {}:
            continue
        if op["path"] == CONFIG:
            value = (value or {}).get("name")
        if op["path"] in (CONFIG, NAME) and value not in (None, "", CONFIGMAP, "operator-config"):
            return False
        if op["path"] == TOLERATIONS and value not in (None, [], [ASSET_TOLERATION]):
            return False
        if op["path"] not in (CONFIG, NAME, "/spec/devicePlugin/config/default", TOLERATIONS):
            return False
    return True


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, state_name=st.sampled_from(["in-progress", "complete", "rolled-back", "bogus"]),
       backup=st.sampled_from(["", "x: [", "- a", "spec: {}", DEEP[:300]]), confirm=st.booleans())
def test_fuzzed_records_are_refused_or_skipped_and_never_crash(text: str, state_name: str, backup: str,
                                                              confirm: bool) -> None:
    body = with_intent(text, **({"clusterpolicy.yaml": backup} if backup else {}))
    body["metadata"]["annotations"]["gpushare.io/state"] = state_name
    cluster = enabled_read(configmaps=[managed_configmap(), configmap("operator-config", {"all-off": "v"}),
                                       configmap("default-mig-parted-config", {"config.yaml": "v"}),
                                       *enabled_read()["records"], body])
    cluster["clusterpolicy"] = clusterpolicy(CONFIGMAP, "default", tolerations=[ASSET_TOLERATION, POOL_TOLERATION])
    before = copy.deepcopy(cluster)
    result = roll_back(cluster, ["gpu-node"], pool_taint_key="gpu-mode", confirm_overwrite=confirm)
    assert cluster == before
    assert all(allowed_write(c) for changes in result.changes.values() for c in changes), result.changes
    state = ClusterState.of(cluster)
    enable_plan(state, settings(), ["gpu-node-2"], {}, NOW)
    mig_plan.plan(state, [], mig_settings(MIG_ROLLBACK), ["gpu-node-mig"], {}, NOW)
