"""The enable preflight first reads the targets and the nodes with a device-plugin config label; a
plan that writes, refuses or has cluster scope asks for every node (`needs_fleet`) and, made again
with them, is the plan a read of every node gives. A re-run is decided without the other nodes."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.model.node import CONFIG_LABEL, FIELDS, packed, trimmed, unpacked
from gpushare.timeslicing import filters
from gpushare.runbook import records
from tests.unit.cluster_objects import INPUTS, NOW, enabled_read, node, read, shared_node

CALLER = {"command": "ansible-playbook playbooks/enable-timeslicing.yml -l gpu-node", "user": "alice"}


@pytest.fixture(autouse=True)
def fixed_time_and_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filters, "utc_now", lambda: NOW)
    monkeypatch.setattr(records.secrets, "token_hex", lambda _: "beef")


def first_read(cluster: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    """What the preflight's first gpushare_read returns on `cluster`."""
    nodes = cluster["nodes"]
    resources = {**cluster, "nodes": [trimmed(n) for n in nodes if n["metadata"]["name"] in targets],
                 "configured_nodes": packed([trimmed(n) for n in nodes if CONFIG_LABEL in n["metadata"]["labels"]])}
    return {"resources": resources, "not_served": cluster["not_served"], "caller": CALLER}


def fleet_read(cluster: dict[str, Any]) -> dict[str, Any]:
    return {"resources": {"nodes": packed([trimmed(n) for n in cluster["nodes"]])}, "not_served": [], "caller": CALLER}


def whole_read(cluster: dict[str, Any]) -> dict[str, Any]:
    return {"resources": cluster, "not_served": cluster["not_served"], "caller": CALLER}


def planned(cluster: dict[str, Any], targets: list[str], **inputs: Any) -> dict[str, Any]:
    """The preflight's plan: the first read's, or the one made again with every node."""
    first = filters.timeslicing_enable_plan(first_read(cluster, targets), {**INPUTS, **inputs}, targets)
    if not first["needs_fleet"]:
        return first
    again = filters.timeslicing_enable_plan(first_read(cluster, targets), {**INPUTS, **inputs}, targets,
                                            fleet_read(cluster))
    assert not again["needs_fleet"]
    return again


def test_a_rerun_is_decided_by_the_first_read() -> None:
    first = filters.timeslicing_enable_plan(first_read(enabled_read(), ["gpu-node"]), INPUTS, ["gpu-node"])
    assert not first["needs_fleet"] and not first["writes"] and first["refusals"] == []
    assert first["lines"][0].startswith("Nothing to change: time-slicing is already enabled as asked")


@pytest.mark.parametrize(("cluster", "targets", "inputs"), [
    pytest.param(read(), ["gpu-node"], {}, id="a first trial"),
    pytest.param(enabled_read(), ["gpu-node"], {"replicas": 4}, id="a replicas change"),
    pytest.param(enabled_read(), ["gpu-node-2"], {}, id="a second node"),
    pytest.param(enabled_read(shared=("gpu-node", "gpu-node-2")), ["gpu-node"], {"replicas": 4},
                 id="a key another node uses"),
    pytest.param(enabled_read(), ["gpu-node"], {"scope": "cluster", "confirm_cluster_scope": True},
                 id="cluster scope"),
    pytest.param(enabled_read(), ["no-such-node"], {}, id="an unknown target"),
    pytest.param(read([*read()["nodes"], node("gpu-node-4", 2, labels={CONFIG_LABEL: "gone"})]), ["gpu-node"], {},
                 id="an orphaned config label"),
])
def test_a_plan_the_first_read_does_not_decide_is_the_plan_of_every_node(
        cluster: dict[str, Any], targets: list[str], inputs: dict[str, Any]) -> None:
    first = filters.timeslicing_enable_plan(first_read(cluster, targets), {**INPUTS, **inputs}, targets)
    assert first["needs_fleet"]
    whole = filters.timeslicing_enable_plan(whole_read(cluster), {**INPUTS, **inputs}, targets)
    assert planned(cluster, targets, **inputs) == {**whole, "needs_fleet": False}


def test_the_bystanders_of_a_change_are_every_other_gpu_node() -> None:
    plan = planned(enabled_read(), ["gpu-node"], replicas=4)
    assert plan["writes"] and sorted(unpacked(plan["expected"]["bystanders"])) == ["gpu-node-2", "gpu-node-mig"]


def test_the_second_read_brings_every_node_every_pod_not_finished_or_both() -> None:
    cluster, targets = enabled_read(), ["gpu-node-2"]
    fleet = fleet_read(cluster)
    plans = {name: filters.timeslicing_enable_plan(first_read(cluster, targets), INPUTS, targets, more) for name, more in {
        "nodes": fleet, "both": {**fleet, "resources": {**fleet["resources"], "pods": []}},
        "pods": {"resources": {"pods": []}, "not_served": [], "caller": CALLER}, "skipped": {"skipped": True}}.items()}
    assert not plans["nodes"]["needs_fleet"] and not plans["both"]["needs_fleet"]
    assert sorted(unpacked(plans["both"]["expected"]["bystanders"])) == ["gpu-node", "gpu-node-mig"]
    assert plans["pods"]["needs_fleet"] and plans["skipped"]["needs_fleet"], "without nodes the first read's stay partial"


def test_a_read_keeps_of_a_node_what_the_model_reads() -> None:
    raw = shared_node("gpu-node", 2)
    raw["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    raw["status"].update({"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kernelVersion": "6.1"}})
    kept = trimmed(raw)
    assert set(kept["metadata"]) <= set(FIELDS["metadata"]) and "labels" in kept["metadata"]
    assert set(kept["status"]) == {"capacity", "allocatable"} and set(kept["spec"]) <= set(FIELDS["spec"])
    assert unpacked(packed([kept])) == [kept]


def test_the_verify_watches_the_nodes_from_the_read_its_fingerprints_come_from() -> None:
    cluster = enabled_read()  # prepared: a second trial node is a label change and its pods' restart
    fleet = {**fleet_read(cluster), "versions": {"nodes": "1234"}}
    plan = filters.timeslicing_enable_plan(first_read(cluster, ["gpu-node-2"]), INPUTS, ["gpu-node-2"], fleet)
    expected = plan["expected"]
    assert plan["writes"] and expected["since"] == "1234" and expected["versions"] == {"gpu-node-2": "305"}
    assert sorted(unpacked(expected["bystanders"])) == ["gpu-node", "gpu-node-mig"]
    # a first trial rolls the operator's DaemonSets over every node: its verify lists them all again
    cluster = read()
    fleet = {**fleet_read(cluster), "versions": {"nodes": "1234"}}
    plan = filters.timeslicing_enable_plan(first_read(cluster, ["gpu-node"]), INPUTS, ["gpu-node"], fleet)
    assert plan["rolls_fleet"] and plan["expected"]["since"] == ""
