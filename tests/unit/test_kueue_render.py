"""The Kueue objects the runbook writes, the plan that keeps a re-run from writing, the Kueue
presence check, readiness and the report."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest

from gpushare.kueue.description import parse
from gpushare.kueue.render import (
    LAST_APPLIED,
    changes,
    kueue_objects,
    kueue_problems,
    not_ready,
    plan,
    report,
    writes,
)

NOW = dt.datetime(2026, 12, 1, 8, 0, 0, tzinfo=dt.timezone.utc)
FLAVORS = [{"name": "whole-card", "nodeLabels": {"nvidia.com/gpu.sharing-strategy": "none"}},
           {"name": "shared", "nodeLabels": {"gpu-mode": "shared"},
            "tolerations": [{"key": "gpu-mode", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}]}]
TEAMS = [
    {"name": "training", "namespace": "team-training",
     "quotas": {"whole-card": {"nvidia.com/gpu": {"nominalQuota": 8, "lendingLimit": 6}}},
     "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}},
    {"name": "inference", "namespace": "team-inference", "localQueue": "serving",
     "quotas": {"whole-card": {"nvidia.com/gpu": {"nominalQuota": 4, "borrowingLimit": 4}},
                "shared": {"nvidia.com/gpu.shared": {"nominalQuota": 2}}}},
]
DESCRIPTION = parse("gpu-teams", FLAVORS, TEAMS, [{"name": "high", "value": 1000, "description": "first"}])


def by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        result.setdefault(obj["kind"], []).append(obj)
    return result


def test_objects_come_in_an_order_where_references_exist_first() -> None:
    kinds = [o["kind"] for o in kueue_objects(DESCRIPTION)]
    assert kinds == ["WorkloadPriorityClass", "ResourceFlavor", "ResourceFlavor", "Cohort", "ClusterQueue",
                     "ClusterQueue", "LocalQueue", "LocalQueue"]
    assert all(o["apiVersion"] == "kueue.x-k8s.io/v1beta2" and
               o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpushare"}
               for o in kueue_objects(DESCRIPTION))


def test_a_cluster_queue_per_team_in_the_cohort() -> None:
    training, inference = by_kind(kueue_objects(DESCRIPTION))["ClusterQueue"]
    assert training["spec"] == {
        "cohortName": "gpu-teams",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-training"}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "whole-card", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "6"}]}]}],
    }
    # Flavors quoting different resources make separate resource groups.
    assert [g["coveredResources"] for g in inference["spec"]["resourceGroups"]] == [["nvidia.com/gpu"], ["nvidia.com/gpu.shared"]]


def test_flavors_local_queues_and_priority_classes() -> None:
    objects = by_kind(kueue_objects(DESCRIPTION))
    assert objects["ResourceFlavor"][1]["spec"] == {"nodeLabels": {"gpu-mode": "shared"}, "tolerations": FLAVORS[1]["tolerations"]}
    assert [(q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in objects["LocalQueue"]] == [
        ("team-training", "gpu", "training"), ("team-inference", "serving", "inference")]
    high = objects["WorkloadPriorityClass"][0]
    assert (high["value"], high["description"], "spec" in high) == (1000, "first", False)


def as_applied(obj: dict[str, Any], **server_defaults: Any) -> dict[str, Any]:
    """The object as the API server returns it after it was applied (kubernetes.core or this runbook)."""
    stored = copy.deepcopy(obj)
    stored["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(obj, sort_keys=True)}
    stored["metadata"]["resourceVersion"] = "42"
    stored.setdefault("spec", {}).update(server_defaults)
    return stored


def test_a_rerun_plans_no_write_despite_server_defaults() -> None:
    desired = kueue_objects(DESCRIPTION)
    existing = [as_applied(o, stopPolicy="None") if o["kind"] == "ClusterQueue" else as_applied(o) for o in desired]
    assert plan(desired, existing) == []


def test_the_plan_names_what_is_missing_changed_or_edited_by_hand() -> None:
    desired = kueue_objects(DESCRIPTION)
    existing = [as_applied(o) for o in desired[1:]]  # the priority class is missing
    edited = next(o for o in existing if o["kind"] == "ClusterQueue")
    edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "16"  # by hand
    assert [(o["kind"], o["metadata"]["name"]) for o in plan(desired, existing)] == [
        ("WorkloadPriorityClass", "high"), ("ClusterQueue", "training")]


def test_a_field_removed_from_the_description_is_applied() -> None:
    before = parse("gpu-teams", FLAVORS, TEAMS)
    teams = copy.deepcopy(TEAMS)
    del teams[0]["quotas"]["whole-card"]["nvidia.com/gpu"]["lendingLimit"]
    after = kueue_objects(parse("gpu-teams", FLAVORS, teams))
    existing = [as_applied(o) for o in kueue_objects(before)]
    assert [(o["kind"], o["metadata"]["name"]) for o in plan(after, existing)] == [("ClusterQueue", "training")]


def test_an_object_someone_else_created_is_adopted() -> None:
    desired = kueue_objects(DESCRIPTION)
    foreign = copy.deepcopy(desired[1])  # same content, never applied by the runbook
    assert desired[1] in plan(desired, [foreign])


def test_an_object_an_earlier_release_labelled_is_relabelled() -> None:
    """Release 0.1.0 labelled the runbook's objects managed-by=gpushare-queue-backfill: a run patches the
    label to gpushare (the admission policy refuses any other write of the runbook identity)."""
    desired = kueue_objects(DESCRIPTION)
    earlier = copy.deepcopy(desired)
    for obj in earlier:
        obj["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpushare-queue-backfill"}
    existing = [as_applied(o, stopPolicy="None") if o["kind"] == "ClusterQueue" else as_applied(o) for o in earlier]
    made = changes(plan(desired, existing), existing, [])
    assert len(made) == len(desired)
    assert {c.action for c in made} == {"merge"}
    assert all(c.body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpushare"} for c in made)


def lease(holder: str = "kueue-7d9f", renewed: dt.datetime = NOW, duration: int = 15) -> dict[str, Any]:
    return {"spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


@pytest.mark.parametrize(("unserved", "found", "message"), [
    (["ClusterQueue", "Cohort"], lease(), "Kueue is not installed: this cluster serves no kueue.x-k8s.io/v1beta2 "
                                          "ClusterQueue, Cohort. Install Kueue v0.17 to v0.19"),
    ([], None, "no Kueue controller is running: its leader-election Lease kueue-system/kueue does not exist"),
    ([], lease(holder=""), "no Kueue controller is running: its Lease kueue-system/kueue has been released"),
    ([], lease(renewed=NOW - dt.timedelta(seconds=31)), "was last renewed 31s ago (it lasts 15s)"),
])
def test_kueue_missing_or_not_running(unserved: list[str], found: dict | None, message: str) -> None:
    problems = kueue_problems(unserved, found, "kueue-system/kueue", NOW)
    assert len(problems) == 1 and message in problems[0], problems


@pytest.mark.parametrize("age_s", [0, 30])  # up to twice the lease: clock skew between machines
def test_a_renewed_lease_means_kueue_runs(age_s: int) -> None:
    assert kueue_problems([], lease(renewed=NOW - dt.timedelta(seconds=age_s)), "kueue-system/kueue", NOW) == []


def queue(name: str, active: str | None, namespace: str | None = None, reason: str = "Ready", **status: Any) -> dict:
    conditions = [{"type": "Active", "status": active, "reason": reason, "message": "m"}] if active else []
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": metadata, "status": {"conditions": conditions, **status}}


def test_readiness_names_what_is_not_active() -> None:
    cqs = [queue("training", "True"), queue("inference", "False", reason="FlavorNotFound")]
    lqs = [queue("gpu", "True", "team-training")]
    assert not_ready(DESCRIPTION, cqs, lqs) == ["ClusterQueue inference is not active (FlavorNotFound: m)",
                                                "LocalQueue team-inference/serving does not exist"]
    assert not_ready(DESCRIPTION, cqs, None) == ["ClusterQueue inference is not active (FlavorNotFound: m)"]
    assert not_ready(DESCRIPTION, [queue("training", None), queue("inference", "True")], None) == [
        "ClusterQueue training is not active (no status from Kueue yet)"]


def test_a_field_removed_from_the_description_is_removed_by_the_patch_and_others_fields_kept() -> None:
    before = parse("gpu-teams", FLAVORS, TEAMS)
    flavors, teams = copy.deepcopy(FLAVORS), copy.deepcopy(TEAMS)
    del flavors[1]["tolerations"]
    del teams[0]["quotas"]["whole-card"]["nvidia.com/gpu"]["lendingLimit"]
    existing = [as_applied(o, stopPolicy="None") for o in kueue_objects(before)]
    edited = next(o for o in existing if o["metadata"]["name"] == "training")
    edited["metadata"]["labels"]["team-owner"] = "alice"  # set by someone else
    after = kueue_objects(parse("gpu-teams", flavors, teams))
    flavor, queue_ = changes(plan(after, existing), existing, [])
    assert [(c.action, c.kind, c.name) for c in (flavor, queue_)] == [
        ("merge", "ResourceFlavor", "shared"), ("merge", "ClusterQueue", "training")]
    assert flavor.body["spec"] == {"tolerations": None}
    assert queue_.body["spec"] == {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "whole-card", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}
    assert "labels" not in queue_.body["metadata"]  # alice's label and the server's stopPolicy stay
    applied = json.loads(queue_.body["metadata"]["annotations"][LAST_APPLIED])
    assert applied == next(o for o in after if o["metadata"]["name"] == "training")


def test_missing_namespaces_and_objects_are_created_before_anything_else() -> None:
    desired = kueue_objects(DESCRIPTION)
    made = changes(desired[:1], [], ["team-a"])
    assert [(c.action, c.kind, c.name) for c in made] == [
        ("create", "Namespace", "team-a"), ("create", "WorkloadPriorityClass", "high")]
    assert made[0].exists == "keep"
    # deploy/rbac/61-admission-kueue.yaml lets the runbook identity create only a namespace with this label
    assert made[0].body["metadata"] == {"name": "team-a", "labels": {"app.kubernetes.io/managed-by": "gpushare"}}
    assert json.loads(made[1].body["metadata"]["annotations"][LAST_APPLIED]) == desired[0]


def test_the_report_has_a_row_per_queue_flavor_and_resource() -> None:
    cqs = [queue("training", "True", admittedWorkloads=3, pendingWorkloads=1), queue("inference", "True")]
    lines = report(DESCRIPTION, cqs).splitlines()
    assert lines[0] == "Cohort gpu-teams"
    assert lines[1].split("  ")[0] == "queue"
    rows = [[cell for cell in line.split("  ") if cell] for line in lines[3:]]
    assert [c.strip() for c in rows[0]] == ["training", "team-training/gpu", "whole-card", "nvidia.com/gpu", "8",
                                            "no limit", "6", "3", "1"]
    assert [c.strip() for c in rows[2]] == ["shared", "nvidia.com/gpu.shared", "2", "no limit", "all"]


def test_writes_says_what_the_run_wrote() -> None:
    local_queue = [o for o in kueue_objects(DESCRIPTION) if o["kind"] == "LocalQueue"][:1]
    assert writes(changes(local_queue, [], ["team-a"]), False) == "Written: Namespace team-a, LocalQueue team-training/gpu."
    assert writes(changes(local_queue, [], []), True).startswith("CHECK MODE, nothing was changed. Would write: LocalQueue")
    assert writes([], False) == "Nothing to change: the queues are as described."
