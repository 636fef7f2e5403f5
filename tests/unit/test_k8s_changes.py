"""Change lists (gpushare.k8s.changes) without a cluster: what a change may say, the JSON-patch
operations behind taint/untaint, and what --diff shows. Applying them against the API server is
tests/integration/test_k8s_changes.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpushare.k8s.changes import Change, ChangeFailed, Outcome, _taint_ops, comparable, diffs
from gpushare.k8s.patch import PatchConflict, json_patch
from tests.unit.cluster_objects import POOL_TAINT, node

UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                 "timeAdded": "2026-12-01T09:00:00Z"}
OWN = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}


def test_a_change_from_the_roles_yaml() -> None:
    change = Change.from_dict({"action": "merge", "kind": "ConfigMap", "name": "time-slicing-config",
                               "namespace": "gpu-operator", "body": {"data": {"shared": None}},
                               "preconditions": None, "why": "remove the key"})
    assert change == Change("merge", "ConfigMap", "time-slicing-config", "gpu-operator", {"data": {"shared": None}},
                            why="remove the key")
    assert change.title == "ConfigMap gpu-operator/time-slicing-config"
    assert Change.from_dict({"action": "untaint", "kind": "Node", "name": "gpu-node"}).title == "Node gpu-node"


@pytest.mark.parametrize(("data", "complaint"), [
    pytest.param(["merge", "Node"], "a change is a mapping", id="not-a-mapping"),
    pytest.param({"action": "merge", "kind": "Node", "name": "n", "dryRun": True}, "unknown keys in change: dryRun",
                 id="unknown-key"),
    pytest.param({"action": "apply", "kind": "Node", "name": "n"}, "change action must be one of create, merge",
                 id="unknown-action"),
    pytest.param({"action": "create", "kind": "Node", "name": "n", "exists": "overwrite"},
                 "exists must be fail or keep, got 'overwrite'", id="unknown-exists"),
    pytest.param({"action": "merge", "kind": "Node"}, "name", id="no-name"),
    pytest.param({"action": "merge", "kind": "Node", "name": None}, "name", id="null-name"),
    pytest.param({"kind": "Node", "name": "n"}, "action", id="no-action"),
])
def test_a_malformed_change_is_a_value_error_naming_what_is_wrong(data: Any, complaint: str) -> None:
    """ValueError is what gpushare_apply turns into a failure message; anything else is a traceback."""
    with pytest.raises(ValueError, match=complaint):
        Change.from_dict(data)


def taints_after(node_obj: dict[str, Any], taint: dict[str, Any], add: bool) -> list[dict[str, Any]]:
    return json_patch(node_obj, _taint_ops(node_obj, taint, add)).get("spec", {}).get("taints") or []


def test_taint_a_node_without_taints() -> None:
    bare = node("gpu-node")
    assert taints_after(bare, POOL_TAINT, add=True) == [POOL_TAINT]


def test_taint_keeps_the_other_taints() -> None:
    tainted = node("gpu-node", taints=[UNSCHEDULABLE, OWN])
    assert taints_after(tainted, POOL_TAINT, add=True) == [UNSCHEDULABLE, OWN, POOL_TAINT]


@pytest.mark.parametrize("existing", [
    pytest.param(POOL_TAINT, id="the-same-taint"),
    pytest.param({"key": "nvidia.com/gpu", "value": "dedicated", "effect": "NoSchedule"}, id="same-key-and-effect"),
    pytest.param({"key": "nvidia.com/gpu", "effect": "NoSchedule"}, id="same-key-and-effect-no-value"),
])
def test_taint_leaves_a_taint_with_the_same_key_and_effect(existing: dict[str, Any]) -> None:
    assert _taint_ops(node("gpu-node", taints=[existing]), POOL_TAINT, add=True) == []


def test_a_taint_with_the_same_key_but_another_effect_is_not_the_pool_taint() -> None:
    no_execute = {"key": "nvidia.com/gpu", "value": "shared", "effect": "NoExecute"}
    assert taints_after(node("gpu-node", taints=[no_execute]), POOL_TAINT, add=True) == [no_execute, POOL_TAINT]


def test_untaint_removes_exactly_that_taint() -> None:
    tainted = node("gpu-node", taints=[OWN, POOL_TAINT, UNSCHEDULABLE])
    assert taints_after(tainted, POOL_TAINT, add=False) == [OWN, UNSCHEDULABLE]


@pytest.mark.parametrize("taints", [
    pytest.param([], id="no-taints"),
    pytest.param([OWN], id="other-taints"),
    pytest.param([{"key": "nvidia.com/gpu", "value": "dedicated", "effect": "NoSchedule"}], id="another-value"),
    pytest.param([{"key": "nvidia.com/gpu", "value": "shared", "effect": "NoExecute"}], id="another-effect"),
])
def test_untaint_leaves_what_is_not_exactly_the_pool_taint(taints: list[dict[str, Any]]) -> None:
    assert _taint_ops(node("gpu-node", taints=taints), POOL_TAINT, add=False) == []


@pytest.mark.parametrize(("read", "meanwhile", "add"), [
    pytest.param([], [UNSCHEDULABLE], True, id="taint-a-node-cordoned-meanwhile"),
    pytest.param([OWN], [OWN, UNSCHEDULABLE], True, id="taint-a-node-whose-taints-changed"),
    pytest.param([POOL_TAINT], [UNSCHEDULABLE, POOL_TAINT], False, id="untaint-after-a-taint-moved-it"),
    pytest.param([POOL_TAINT], [], False, id="untaint-after-someone-removed-it"),
])
def test_taint_operations_refuse_a_node_whose_taints_changed_since_the_read(
        read: list[dict[str, Any]], meanwhile: list[dict[str, Any]], add: bool) -> None:
    """Controllers write taints too (the cordon's node.kubernetes.io/unschedulable): operations made
    from the node as read must not apply to the node as it is now, or they would drop a taint."""
    operations = _taint_ops(node("gpu-node", taints=read), POOL_TAINT, add)
    with pytest.raises((PatchConflict, KeyError)):
        json_patch(node("gpu-node", taints=meanwhile), operations)


def test_comparable_shows_what_an_operator_wrote() -> None:
    obj = node("gpu-node")
    obj["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    shown = comparable(obj)
    assert "status" not in shown
    assert set(shown["metadata"]) == {"name", "labels", "annotations"}
    assert shown["spec"] == obj["spec"]
    assert comparable(None) == {}


def test_diffs_only_for_what_changed() -> None:
    before = node("gpu-node")
    after = node("gpu-node", labels={"gpu-mode": "shared"})
    after["metadata"]["resourceVersion"] = "999"
    merge = Change("merge", "Node", "gpu-node", body={"metadata": {"labels": {"gpu-mode": "shared"}}})
    create = Change("create", "ConfigMap", "cm", "gpu-operator")
    delete = Change("delete", "ConfigMap", "old", "gpu-operator")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "uid": "u"}, "data": {"a": "1"}}
    entries = diffs([Outcome(merge, True, before, after), Outcome(merge, False, after, after),
                     Outcome(create, True, None, cm), Outcome(delete, True, cm, None)])
    assert [e["before_header"] for e in entries] == ["Node gpu-node", "ConfigMap gpu-operator/cm",
                                                     "ConfigMap gpu-operator/old"]
    labels = [yaml.safe_load(e["after"])["metadata"]["labels"] for e in entries[:1]]
    assert labels[0]["gpu-mode"] == "shared"
    assert "resourceVersion" not in entries[0]["after"]
    assert (entries[1]["before"], yaml.safe_load(entries[1]["after"])) == ("", {**cm, "metadata": {"name": "cm"}})
    assert entries[2]["after"] == ""


def test_a_failure_names_what_was_already_written() -> None:
    first = Change("merge", "Node", "gpu-node")
    second = Change("merge", "Node", "gpu-node-2")
    third = Change("json", "ClusterPolicy", "cluster-policy")
    failed = ChangeFailed(third, [Outcome(first, True, {}, {}), Outcome(second, False, {}, {})], "it is gone")
    assert failed.written == ["Node gpu-node"]
    assert str(failed) == "json of ClusterPolicy cluster-policy failed: it is gone"
