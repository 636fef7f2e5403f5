"""The queue-backfill description: what is accepted, and the exact boundaries of what is refused."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from gpushare.kueue.description import DescriptionError, canonical_quantity, parse

FLAVORS = [{"name": "whole-card", "nodeLabels": {"nvidia.com/gpu.sharing-strategy": "none"}}]


def team(name: str, nominal: Any = 4, **limits: Any) -> dict[str, Any]:
    return {"name": name, "namespace": name, "quotas": {"whole-card": {"nvidia.com/gpu": {"nominalQuota": nominal, **limits}}}}


def problems(teams: list[dict[str, Any]] | None = None, *, flavors: Any = None, cohort: Any = "gpu-teams",
             classes: Any = None) -> list[str]:
    try:
        parse(cohort, FLAVORS if flavors is None else flavors, [team("team-a"), team("team-b")] if teams is None
              else teams, classes)
    except DescriptionError as err:
        return err.problems
    return []


def test_a_valid_description_parses_with_kueue_defaults() -> None:
    description = parse("gpu-teams", FLAVORS, [team("team-a", lendingLimit=2), team("team-b", borrowingLimit=2)])
    a, b = description.teams
    assert (a.namespace, a.local_queue, a.queueing_strategy) == ("team-a", "gpu", "BestEffortFIFO")
    assert a.preemption == {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}
    assert a.quotas["whole-card"]["nvidia.com/gpu"].text == {"nominalQuota": "4", "lendingLimit": "2"}
    assert description.quotas("whole-card", "nvidia.com/gpu") == {"team-a": a.quotas["whole-card"]["nvidia.com/gpu"],
                                                                  "team-b": b.quotas["whole-card"]["nvidia.com/gpu"]}


@pytest.mark.parametrize(("limits", "expected"), [
    ({"lendingLimit": 4}, []),  # lending all of it is fine
    ({"lendingLimit": 5}, ["team team-a: nvidia.com/gpu on whole-card: lendingLimit 5 is above nominalQuota 4"]),
    ({"lendingLimit": 0}, []),
])
def test_lending_at_most_the_nominal_quota(limits: dict, expected: list[str]) -> None:
    found = problems([team("team-a", **limits), team("team-b")])
    assert [p.split(": a team")[0] for p in found] == expected


@pytest.mark.parametrize(("a_lends", "b_borrows", "refused"), [(2, 2, False), (2, 3, True), (None, 4, False),
                                                                (None, 5, True), (0, 1, True), (0, 0, False)])
def test_borrowing_at_most_what_the_others_can_lend(a_lends: int | None, b_borrows: int, refused: bool) -> None:
    a = team("team-a", **({"lendingLimit": a_lends} if a_lends is not None else {}))
    found = problems([a, team("team-b", borrowingLimit=b_borrows)])
    assert bool(found) == refused, found
    if refused:
        assert found[0].startswith(f"team team-b: borrowingLimit {b_borrows} nvidia.com/gpu on whole-card is more than "
                                   f"the other teams can lend ({4 if a_lends is None else a_lends}: team-a ")


@pytest.mark.parametrize(("name", "valid"), [("team-a", True), ("a", True), ("Team-A", False), ("team_a", False),
                                             ("-team", False), ("team-", False), ("a" * 253, True), ("a" * 254, False)])
def test_queue_names_are_dns_subdomains(name: str, valid: bool) -> None:
    found = problems([{**team("team-a"), "name": name, "namespace": "team-a"}])
    assert (not found) == valid, found


@pytest.mark.parametrize(("namespace", "valid"), [("a" * 63, True), ("a" * 64, False), ("team.a", False)])
def test_namespaces_are_dns_labels(namespace: str, valid: bool) -> None:
    assert (not problems([{**team("team-a"), "namespace": namespace}])) == valid


@pytest.mark.parametrize(("value", "message"), [
    (-1, "is negative"), (1.5, "counted in whole units"), ("500m", "counted in whole units"), ("four", "is not a quantity"),
    (True, "is not a quantity"), (None, "is not a quantity"),
])
def test_bad_gpu_quantities(value: Any, message: str) -> None:
    found = problems([team("team-a", nominal=value)])
    assert any(message in p for p in found), found


def test_cpu_and_memory_take_fractions_written_as_kubernetes_stores_them() -> None:
    teams = [{"name": "team-a", "quotas": {"whole-card": {"cpu": {"nominalQuota": "0.5"},
                                                         "memory": {"nominalQuota": "64Gi"}}}}]
    quotas = parse("gpu-teams", FLAVORS, teams).teams[0].quotas["whole-card"]
    assert (quotas["cpu"].text["nominalQuota"], quotas["memory"].text["nominalQuota"]) == ("500m", str(64 * 2**30))


@pytest.mark.parametrize(("value", "text"), [(Decimal(4), "4"), (Decimal("0.5"), "500m"), (Decimal("0.0005"), "0.0005")])
def test_canonical_quantity(value: Decimal, text: str) -> None:
    assert canonical_quantity(value) == text


def test_an_unknown_flavor_names_the_known_ones() -> None:
    teams = [{"name": "team-a", "quotas": {"nowhere": {"nvidia.com/gpu": {"nominalQuota": 1}}}}]
    assert problems(teams)[0].startswith("team team-a: quota on unknown flavor 'nowhere'; the flavors are whole-card")


def test_every_problem_is_reported_at_once() -> None:
    found = problems([team("Team_A", nominal=-1), {"name": "team-b", "quotas": {}}], cohort="Gpu Teams")
    assert len(found) == 5, found  # cohort name, team name, namespace, negative quota, no quota for team-b


def test_a_missing_nominal_quota_and_unknown_keys() -> None:
    found = problems([{"name": "team-a", "quotas": {"whole-card": {"nvidia.com/gpu": {"nominal": 4}}}}])
    assert "team team-a: nvidia.com/gpu on whole-card: unknown keys nominal" in found[0]
    assert "team team-a: nvidia.com/gpu on whole-card: nominalQuota is required" in found


def test_a_resource_in_two_resource_groups_is_refused() -> None:
    flavors = FLAVORS + [{"name": "mig", "nodeLabels": {"nvidia.com/mig.config": "all-1g.10gb"}}]
    teams = [{"name": "team-a", "quotas": {"whole-card": {"nvidia.com/gpu": {"nominalQuota": 1}, "cpu": {"nominalQuota": 8}},
                                           "mig": {"nvidia.com/gpu": {"nominalQuota": 1}}}}]
    found = problems(teams, flavors=flavors)
    assert found == ["team team-a: nvidia.com/gpu is quoted on whole-card with cpu, nvidia.com/gpu and on mig with "
                     "nvidia.com/gpu: every flavor of a resource must quote the same resources (Kueue's resource groups)"]


@pytest.mark.parametrize(("preemption", "message"), [
    ({"reclaimWithinCohort": "Always"}, "preemption.reclaimWithinCohort 'Always' is not one of Never, LowerPriority, Any"),
    ({"withinClusterQueue": "Any"}, "withinClusterQueue 'Any' is not one of"),
    ({"borrowWithinCohort": {"policy": "LowerPriority"}}, "needs reclaimWithinCohort other than Never"),
    ({"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": "100"}},
     "maxPriorityThreshold '100' must be a whole number"),
])
def test_bad_preemption_policies(preemption: dict, message: str) -> None:
    found = problems([{**team("team-a"), "preemption": preemption}])
    assert any(message in p for p in found), found


def test_a_valid_borrow_within_cohort_policy_is_kept() -> None:
    preemption = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}
    parsed = parse("gpu-teams", FLAVORS, [{**team("team-a"), "preemption": preemption}]).teams[0]
    assert parsed.preemption == {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never",
                                 "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}


@pytest.mark.parametrize(("flavors", "message"), [
    ([], "queue_backfill_flavors is empty"),
    ([{"name": "x", "nodeLabels": {"gpu": True}}], "nodeLabels must map label keys to string values"),
    ([{"name": "x", "tolerations": [{"key": "gpu-mode", "operator": "Exists", "value": "shared"}]}],
     "a toleration with operator Exists takes no value"),
    ([{"name": "x", "tolerations": [{"key": "gpu-mode", "effect": "NoRun"}]}], "effect 'NoRun' is not one of"),
    ([{"name": "x", "tolerations": [{"operator": "Exists"}]}],
     "tolerations[1]: operator Exists without a key tolerates every taint"),
    ([{"name": "x", "tolerations": [{"key": "", "operator": "Exists", "effect": "NoSchedule"}]}],
     "tolerations[1]: operator Exists without a key tolerates every taint"),
    (FLAVORS * 2, "flavor whole-card is described twice"),
])
def test_bad_flavors(flavors: list, message: str) -> None:
    assert any(message in p for p in problems([team("team-a")], flavors=flavors)), problems([team("team-a")], flavors=flavors)


def test_duplicate_teams_and_local_queues() -> None:
    found = problems([team("team-a"), copy.deepcopy(team("team-a"))])
    assert any("team team-a is described twice" in p for p in found)
    assert any("LocalQueue team-a/gpu already belongs to another team" in p for p in found)


@pytest.mark.parametrize(("value", "valid"), [(1000, True), (-5, True), (2**31 - 1, True), (2**31, False), ("1", False),
                                              (True, False)])
def test_priority_class_values_are_int32(value: Any, valid: bool) -> None:
    assert (not problems(classes=[{"name": "high", "value": value}])) == valid


def test_inputs_of_the_wrong_type() -> None:
    assert problems("team-a")[0] == "queue_backfill_teams must be a list, got str"  # type: ignore[arg-type]
    assert "team team-a: quotas must be a mapping, got list" in problems([{"name": "team-a", "quotas": []}])


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "default", "gpu-operator", "gpushare-system",
                                       "kueue-system", "nvidia-gpu-operator"])
def test_a_team_in_a_system_namespace_is_refused(namespace: str) -> None:
    """kube-*, default, the operator, records and Kueue namespaces (the configured ones too) are never a team's."""
    with pytest.raises(DescriptionError) as refused:
        parse("gpu-teams", FLAVORS, [{**team("team-a"), "namespace": namespace}],
              system_namespaces=["nvidia-gpu-operator", "gpushare-system", "kueue-system"])
    assert refused.value.problems == [
        f"team team-a: namespace {namespace} is a system namespace (kube-*, default, gpu-operator, gpushare-system, "
        "kueue-system, nvidia-gpu-operator); give the team a namespace of its own"]


def test_a_pool_taint_tolerated_by_key_and_a_namespace_named_like_a_system_one_are_accepted() -> None:
    flavors = [{**FLAVORS[0], "tolerations": [{"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}]}]
    parsed = parse("gpu-teams", flavors, [{**team("team-a"), "namespace": "team-kube-system"}])
    assert parsed.teams[0].namespace == "team-kube-system"
