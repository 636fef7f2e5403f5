"""Run records (gpushare.runbook.records): what a run writes before its first change reads
back the same for any later run, and a damaged record is told apart instead of trusted."""

from __future__ import annotations

import re

import yaml

from gpushare.timeslicing import filters
from gpushare.runbook.records import FieldChange, Intent, Record, new_record, readers_patch, record_name, state_patch
from gpushare.model.node import packed
from gpushare.model.operands import DEVICE_PLUGIN as PLUGIN
from gpushare.model.operands import MPS
from tests.unit.cluster_objects import (NAMESPACE, NOW, clusterpolicy, configmap, daemonset, managed_configmap,
                                        operand_pod)

INTENT = Intent("enable-timeslicing", ["gpu-node", "gpu-node-2"],
                [FieldChange("/spec/devicePlugin/config/name", "", "time-slicing-config"),
                 FieldChange("/spec/daemonsets/tolerations", None, [{"operator": "Exists"}])],
                "time-slicing-config", True, ["default", "shared"])


def test_a_record_reads_back_as_written() -> None:
    policy = clusterpolicy()
    body = new_record("gpushare-run-enable-20261201t100000z-ab12", NAMESPACE, INTENT, policy, NOW,
                      {"command": "ansible-playbook playbooks/enable-timeslicing.yml -l gpu-node",
                       "operator": "alice as gpushare-admin"})
    assert Record.is_record(body)
    assert body["metadata"]["labels"]["gpushare.io/backup"] == "clusterpolicy"
    assert body["metadata"]["annotations"]["gpushare.io/operator"] == "alice as gpushare-admin"
    record = Record.of(body)
    assert (record.name, record.runbook, record.state, record.started, record.finished, record.valid) == (
        "gpushare-run-enable-20261201t100000z-ab12", "enable-timeslicing", "in-progress", "2026-12-01T10:00:00Z", "",
        True)
    assert record.intent == INTENT
    assert record.clusterpolicy_backup == policy


def test_a_record_without_a_backup() -> None:
    body = new_record("gpushare-run-rollback-20261201t100000z-ab12", NAMESPACE, Intent("rollback-timeslicing"), None,
                      NOW, {})
    assert "gpushare.io/backup" not in body["metadata"]["labels"]
    record = Record.of(body)
    assert record.valid and record.clusterpolicy_backup is None and record.intent == Intent("rollback-timeslicing")


def test_finished_and_rolled_back_records() -> None:
    body = new_record("r", NAMESPACE, INTENT, None, NOW, {})
    patched = {**body, "metadata": {**body["metadata"], "annotations": {
        **body["metadata"]["annotations"], **state_patch("rolled-back", NOW)["metadata"]["annotations"]}}}
    record = Record.of(patched)
    assert (record.state, record.finished) == ("rolled-back", "2026-12-01T10:00:00Z")
    assert state_patch("complete") == {"metadata": {"annotations": {"gpushare.io/state": "complete"}}}


def test_a_damaged_record_is_invalid_and_trusted_for_nothing() -> None:
    labels = {"gpushare.io/run": "enable-timeslicing"}
    for data in ({"intent.json": "{not json"}, {"intent.json": '{"nodes": ["n"]}', "clusterpolicy.yaml": "- a list\n"},
                 {"intent.json": '{"clusterpolicy": [{"before": 1}]}'},
                 {"intent.json": '{"nodes": ["n"]}', "clusterpolicy.yaml": "{"}):
        record = Record.of(configmap("gpushare-run-enable-x", data, labels=labels))
        assert not record.valid, data
        assert record.clusterpolicy_backup is None and record.runbook == "enable-timeslicing"
        assert record.intent == Intent("enable-timeslicing"), data  # nothing of a damaged record is trusted


def test_only_labelled_configmaps_are_records() -> None:
    assert not Record.is_record(managed_configmap())
    assert not Record.is_record(configmap("x", {}, labels={"app.kubernetes.io/managed-by": "gpushare"}))


def test_record_names_are_valid_configmap_names_that_sort_by_time() -> None:
    earlier = record_name("enable-timeslicing", NOW)
    later = record_name("rollback-timeslicing", NOW.replace(hour=11))
    assert re.fullmatch(r"gpushare-run-enable-20261201t100000z-[0-9a-f]{4}", earlier)
    assert later.startswith("gpushare-run-rollback-20261201t110000z-")


def test_what_an_intent_says_to_the_operator() -> None:
    assert INTENT.describe() == ("ClusterPolicy devicePlugin/config/name, daemonsets/tolerations; ConfigMap "
                                 "time-slicing-config (created); nodes gpu-node, gpu-node-2")
    keys = Intent("enable-timeslicing", [], [], "time-slicing-config", False, ["shared"])
    assert keys.describe() == "ConfigMap time-slicing-config keys shared"
    assert Intent("enable-timeslicing").describe() == "nothing at the cluster level"
    assert Intent.of(yaml.safe_load(yaml.safe_dump(INTENT.as_dict()))) == INTENT


def test_the_readers_a_run_restarted_are_known_at_the_configmap_version_they_read() -> None:
    body = new_record("r", NAMESPACE, INTENT, None, NOW, {})
    body["data"].update(readers_patch("time-slicing-config", {"readers": ["uid-b", "uid-a"], "configmap_version": "465"})
                        ["data"])
    record = Record.of(body)
    assert record.started_after("time-slicing-config", "465") == ["uid-a", "uid-b"]
    assert record.started_after("time-slicing-config", "466") == []  # written again since
    assert record.started_after("other-config", "465") == []
    assert Record.of(new_record("r", NAMESPACE, INTENT, None, NOW, {})).started_after("time-slicing-config", "465") == []
    for damaged in ("{not json", '["uid-a"]', '{"configmap": "time-slicing-config", "resourceVersion": "465"}'):
        body["data"]["readers.json"] = damaged
        assert Record.of(body).started_after("time-slicing-config", "465") == [], damaged


def test_the_run_is_marked_complete_with_the_readers_its_restart_left_running() -> None:
    finish = [{"action": "merge", "kind": "ConfigMap", "name": "r", "namespace": NAMESPACE,
               "body": state_patch("complete", NOW), "why": "mark this run complete"}]
    restarted = {"restarted": {"gpu-node": ["nvidia-device-plugin-daemonset/p"]}, "readers": ["uid-a"],
                 "configmap_version": "465", "problems": [], "listed": {"gpu-node": ["uid-p"]}}
    skipped = {"skipped": True, "changed": False}  # Ansible's result of a skipped task
    [change] = filters.timeslicing_with_readers(finish, restarted, "time-slicing-config", skipped)
    assert change["body"]["metadata"] == finish[0]["body"]["metadata"]
    body = new_record("r", NAMESPACE, INTENT, None, NOW, {})
    body["data"].update(change["body"]["data"])
    assert Record.of(body).started_after("time-slicing-config", "465") == ["uid-a"]
    # no restart in this run: the record names none
    assert filters.timeslicing_with_readers(finish, skipped, "time-slicing-config", skipped) == finish


def test_the_record_also_names_the_readers_a_label_started_after_the_restart() -> None:
    """The MPS control daemon GFD's nvidia.com/mps.capable label starts on a restarted node, after the
    restart's first listing (gpushare.runbook.restart.late_readers), read once the verify succeeded."""
    finish = [{"action": "merge", "kind": "ConfigMap", "name": "r", "namespace": NAMESPACE,
               "body": state_patch("complete", NOW), "why": "mark this run complete"}]
    plugin, daemon = (operand_pod(name, "gpu-node") for name in (PLUGIN, MPS))
    restarted = {"restarted": {"gpu-node": [f"{PLUGIN}/old"]}, "readers": [plugin["metadata"]["uid"]],
                 "configmap_version": "465", "problems": [], "listed": {"gpu-node": ["uid-old"]}}
    settled = {"resources": {"daemonsets": packed([daemonset(PLUGIN), daemonset(MPS)]), "pods": packed([plugin, daemon])}}
    [change] = filters.timeslicing_with_readers(finish, restarted, "time-slicing-config", settled)
    body = new_record("r", NAMESPACE, INTENT, None, NOW, {})
    body["data"].update(change["body"]["data"])
    assert Record.of(body).started_after("time-slicing-config", "465") == sorted(
        [plugin["metadata"]["uid"], daemon["metadata"]["uid"]])
