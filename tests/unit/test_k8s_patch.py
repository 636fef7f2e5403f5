"""Local patches (gpushare.k8s.patch): what the runbooks predict a patch does before sending it
must be what the API server does with it (RFC 7386 merge patch, RFC 6902 JSON patch)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpushare.k8s.patch import PatchConflict, escape, json_patch, merge_patch, pointer, resolve


# RFC 7386, appendix A: every example, in order.
@pytest.mark.parametrize(("target", "patch", "result"), [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_removes_a_node_label_and_keeps_the_others() -> None:
    node = {"metadata": {"labels": {"gpu-mode": "shared", "kubernetes.io/hostname": "gpu-node"}}}
    assert merge_patch(node, {"metadata": {"labels": {"gpu-mode": None}}}) == {
        "metadata": {"labels": {"kubernetes.io/hostname": "gpu-node"}}}


def test_merge_patch_leaves_its_inputs_alone() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"taints": [{"key": "x"}]}}
    patch = {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"taints": [{"key": "y"}]}}
    saved = copy.deepcopy((target, patch))
    result = merge_patch(target, patch)
    result["spec"]["taints"][0]["key"] = "changed"
    assert (target, patch) == saved


NODE = {"metadata": {"name": "gpu-node", "annotations": {"nvidia.com/gpu.deploy": "true", "a~b": "1"}},
        "spec": {"taints": [{"key": "t1", "effect": "NoSchedule"}, {"key": "t2", "effect": "NoExecute"}]}}


@pytest.mark.parametrize(("operations", "expected"), [
    pytest.param([{"op": "add", "path": "/metadata/labels", "value": {"x": "1"}}],
                 {**NODE, "metadata": {**NODE["metadata"], "labels": {"x": "1"}}}, id="add-member"),
    pytest.param([{"op": "add", "path": "/metadata/name", "value": "other"}],
                 {**NODE, "metadata": {**NODE["metadata"], "name": "other"}}, id="add-replaces-an-existing-member"),
    pytest.param([{"op": "add", "path": "/spec/taints/0", "value": {"key": "t0"}}],
                 {**NODE, "spec": {"taints": [{"key": "t0"}, *NODE["spec"]["taints"]]}}, id="add-inserts-at-index"),
    pytest.param([{"op": "add", "path": "/spec/taints/2", "value": {"key": "t3"}}],
                 {**NODE, "spec": {"taints": [*NODE["spec"]["taints"], {"key": "t3"}]}}, id="add-at-the-length"),
    pytest.param([{"op": "add", "path": "/spec/taints/-", "value": {"key": "t3"}}],
                 {**NODE, "spec": {"taints": [*NODE["spec"]["taints"], {"key": "t3"}]}}, id="add-appends"),
    pytest.param([{"op": "remove", "path": "/spec/taints/0"}],
                 {**NODE, "spec": {"taints": [NODE["spec"]["taints"][1]]}}, id="remove-element"),
    pytest.param([{"op": "remove", "path": "/metadata/annotations/nvidia.com~1gpu.deploy"}],
                 {**NODE, "metadata": {**NODE["metadata"], "annotations": {"a~b": "1"}}}, id="remove-escaped-slash"),
    pytest.param([{"op": "replace", "path": "/metadata/annotations/a~0b", "value": "2"}],
                 {**NODE, "metadata": {**NODE["metadata"], "annotations": {"nvidia.com/gpu.deploy": "true",
                                                                           "a~b": "2"}}}, id="replace-escaped-tilde"),
    pytest.param([{"op": "replace", "path": "/spec/taints/1", "value": {"key": "t9"}}],
                 {**NODE, "spec": {"taints": [NODE["spec"]["taints"][0], {"key": "t9"}]}}, id="replace-element"),
    pytest.param([{"op": "test", "path": "/spec/taints/1/key", "value": "t2"},
                  {"op": "remove", "path": "/spec/taints/1"}],
                 {**NODE, "spec": {"taints": [NODE["spec"]["taints"][0]]}}, id="test-then-remove"),
    pytest.param([{"op": "test", "path": "/spec/unschedulable", "value": None},
                  {"op": "add", "path": "/spec/unschedulable", "value": True}],
                 {**NODE, "spec": {**NODE["spec"], "unschedulable": True}}, id="test-null-of-an-absent-field"),
])
def test_json_patch_operations(operations: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    assert json_patch(NODE, operations) == expected


def test_json_patch_leaves_the_document_alone() -> None:
    saved = copy.deepcopy(NODE)
    json_patch(NODE, [{"op": "remove", "path": "/spec/taints/0"}, {"op": "add", "path": "/spec/x", "value": [1]}])
    assert saved == NODE


def test_a_failed_test_names_the_path_what_was_expected_and_what_is_there() -> None:
    with pytest.raises(PatchConflict) as failed:
        json_patch(NODE, [{"op": "add", "path": "/metadata/labels", "value": {}},
                          {"op": "test", "path": "/spec/taints/0/key", "value": "t2"}])
    assert (failed.value.path, failed.value.expected, failed.value.found) == ("/spec/taints/0/key", "t2", "t1")
    assert str(failed.value) == "/spec/taints/0/key is 't1', expected 't2'"
    assert "labels" not in NODE["metadata"]


def test_a_test_of_a_value_on_an_absent_path_fails() -> None:
    with pytest.raises(PatchConflict):
        json_patch(NODE, [{"op": "test", "path": "/spec/podCIDR", "value": "10.0.0.0/24"}])


@pytest.mark.parametrize("operation", [
    pytest.param({"op": "remove", "path": "/metadata/labels"}, id="remove-absent-member"),
    pytest.param({"op": "replace", "path": "/metadata/labels", "value": {}}, id="replace-absent-member"),
    pytest.param({"op": "add", "path": "/status/phase", "value": "x"}, id="add-under-absent-parent"),
    pytest.param({"op": "remove", "path": "/spec/taints/2"}, id="remove-past-the-end"),
    pytest.param({"op": "replace", "path": "/spec/taints/2", "value": {}}, id="replace-past-the-end"),
    pytest.param({"op": "add", "path": "/spec/taints/3", "value": {}}, id="add-past-the-length"),
])
def test_a_path_that_is_not_there_is_a_key_error(operation: dict[str, Any]) -> None:
    """As the API server refuses them (apply_changes turns KeyError into a ChangeFailed)."""
    with pytest.raises(KeyError):
        json_patch(NODE, [operation])


@pytest.mark.parametrize("operation", [
    {"op": "move", "from": "/metadata/name", "path": "/metadata/other"},
    {"op": "copy", "from": "/metadata/name", "path": "/metadata/other"},
    {"op": "add", "path": "", "value": {}},
])
def test_what_the_runbooks_never_send_is_refused(operation: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        json_patch(NODE, [operation])


def test_pointers() -> None:
    assert pointer("") == []
    assert pointer("/metadata/annotations/nvidia.com~1gpu.deploy") == ["metadata", "annotations",
                                                                       "nvidia.com/gpu.deploy"]
    assert pointer("/a~01") == ["a~1"]  # ~0 first would give "a/" (RFC 6901 section 4)
    assert escape("a~1/b") == "a~01~1b"
    assert pointer("/" + escape("a~1/b")) == ["a~1/b"]
    with pytest.raises(ValueError):
        pointer("metadata/name")


def test_resolve() -> None:
    assert resolve(NODE, "/spec/taints/1/key") == "t2"
    assert resolve(NODE, "") is NODE
    assert resolve(NODE, "/spec/taints/5", None) is None
    assert resolve(NODE, "/spec/taints/key", "absent") == "absent"
    with pytest.raises(KeyError):
        resolve(NODE, "/spec/unschedulable")
