"""The short form of a --diff entry (gpushare.k8s.short_diff, printed by the quiet stdout callback):
one line per changed field under the object's header, the runbooks' bookkeeping in one line; the
whole objects stay in the entry for -v."""

from __future__ import annotations

import datetime as dt

import yaml

from gpushare.k8s.changes import Change, Outcome, diffs
from gpushare.k8s.short_diff import bookkeeping_line, changed_fields, field_lines, object_lines, size
from gpushare.runbook import lock
from gpushare.runbook.records import Intent, bookkeeping, new_record

SHARED = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone.utc)


def node(labels: dict[str, str], taints: list[dict[str, str]] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node", "labels": labels},
            "spec": {"taints": taints} if taints else {}}


def test_a_changed_object_shows_each_changed_field_and_nothing_else() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "shared", "effect": "NoSchedule"}
    before = node({"kubernetes.io/os": "linux", "gpu-mode": "exclusive"})
    after = node({"kubernetes.io/os": "linux", "gpu-mode": "shared", "nvidia.com/device-plugin.config": "shared"}, [taint])
    assert object_lines("Node gpu-node", before, after) == [
        "~ Node gpu-node",
        "  - metadata.labels.gpu-mode: exclusive",
        "  + metadata.labels.gpu-mode: shared",
        "  + metadata.labels.nvidia.com/device-plugin.config: shared",
        "  + spec.taints: [{effect: NoSchedule, key: nvidia.com/gpu, value: shared}]"]


def test_a_created_object_shows_every_field_text_as_a_block() -> None:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tsc", "namespace": "gpu-operator"},
                 "data": {"shared": SHARED, "one": "line"}}
    assert object_lines("ConfigMap gpu-operator/tsc", None, configmap) == [
        "+ ConfigMap gpu-operator/tsc", "  + apiVersion: v1", "  + data.one: line", "  + data.shared: |",
        *(f"  +     {line}" for line in SHARED.splitlines())]
    assert object_lines("ConfigMap gpu-operator/tsc", configmap, None)[:2] == ["- ConfigMap gpu-operator/tsc",
                                                                               "  - apiVersion: v1"]


def test_changed_text_shows_its_changed_lines_among_the_others() -> None:
    lines = field_lines({"data": {"shared": SHARED}}, {"data": {"shared": SHARED.replace("replicas: 2", "replicas: 4")}})
    assert lines[0] == "  ~ data.shared:"
    assert "  -           replicas: 2" in lines and "  +           replicas: 4" in lines
    assert "        version: v1" in lines


def test_a_field_that_stops_being_a_mapping_is_one_change() -> None:
    assert changed_fields({"spec": {"config": {"name": "x"}}}, {"spec": {"config": None}}) == [
        ("spec.config", {"name": "x"}, None)]
    assert changed_fields({"a": 1}, {"a": 1}) == []


def test_bookkeeping_is_one_line_its_size_or_the_fields_it_changes() -> None:
    record = {"kind": "ConfigMap", "data": {"clusterpolicy.yaml": "x" * 3000}}
    assert bookkeeping_line("ConfigMap ns/r", "run record", None, record) == "+ ConfigMap ns/r (run record, 3 KiB)"
    assert bookkeeping_line("ConfigMap ns/r", "run record", record, None) == "- ConfigMap ns/r (run record)"
    done = {**record, "metadata": {"annotations": {"a": "1", "b": "2", "c": "3", "d": "4"}}}
    assert bookkeeping_line("ConfigMap ns/r", "run record", record, done) == (
        "~ ConfigMap ns/r (run record: metadata.annotations.a, metadata.annotations.b, metadata.annotations.c and 1 more)")
    assert size("x" * 10) == "10 B"


def test_the_run_record_and_the_lock_are_bookkeeping_the_cluster_objects_are_not() -> None:
    record = new_record("gpushare-run-enable-x", "gpushare-system", Intent("enable-timeslicing", ["gpu-node"]),
                        {"kind": "ClusterPolicy", "spec": {}}, NOW, {"command": "c", "operator": "o"})
    assert bookkeeping(record) == "run record with the ClusterPolicy backup"
    assert bookkeeping(new_record("r", "ns", Intent("enable-mig"), None, NOW, {})) == "run record"
    take = lock.take(None, "gpushare-runbook-lock", "gpushare-system", "me", 300, NOW)
    assert bookkeeping(take.body) == "runbook lock"
    assert bookkeeping(node({"gpu-mode": "shared"})) == ""
    assert bookkeeping({"kind": "ConfigMap", "metadata": {"name": "time-slicing-config"}}) == ""


def test_diffs_keep_the_whole_objects_and_give_the_short_form() -> None:
    record = new_record("gpushare-run-enable-x", "gpushare-system", Intent("enable-timeslicing", ["gpu-node"]),
                        {"kind": "ClusterPolicy", "spec": {"big": "y" * 14000}}, NOW, {"command": "c", "operator": "o"})
    label = Change("merge", "Node", "gpu-node")
    taint = Change("taint", "Node", "gpu-node")
    entries = diffs([Outcome(Change("create", "ConfigMap", "gpushare-run-enable-x", "gpushare-system"), True, None, record),
                     Outcome(label, True, node({}), node({"gpu-mode": "shared"})),
                     Outcome(taint, True, node({"gpu-mode": "shared"}), node({"gpu-mode": "shared"}, [{"key": "k"}]))],
                    bookkeeping)
    assert entries[0]["summary"] == ["+ ConfigMap gpushare-system/gpushare-run-enable-x "
                                     "(run record with the ClusterPolicy backup, 14 KiB)"]
    assert yaml.safe_load(entries[0]["after"])["data"] == record["data"]  # -v: whole
    # a second change of the same object goes on under its header
    assert entries[1]["summary"] == ["~ Node gpu-node", "  + metadata.labels.gpu-mode: shared"]
    assert entries[2]["summary"] == ["  + spec.taints: [{key: k}]"]
