"""Does the description fit the nodes: selection, capacity at its exact boundary, taints, cordons,
shared GPUs only on shared nodes, flavors that overlap."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.kueue.capacity import cluster_problems
from gpushare.kueue.description import parse

SHARED_TAINT = {"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}


def node(name: str, gpus: int = 8, *, strategy: str = "none", shared: int = 0, pool: str | None = None,
         taints: list[dict] | None = None, cordoned: bool = False) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.sharing-strategy": strategy}
    if pool:
        labels["gpu-mode"] = pool
    allocatable = {"cpu": "64", "nvidia.com/gpu": str(gpus), **({"nvidia.com/gpu.shared": str(shared)} if shared else {})}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints or [], **({"unschedulable": True} if cordoned else {})},
            "status": {"allocatable": allocatable}}


WHOLE = {"name": "whole-card", "nodeLabels": {"nvidia.com/gpu.sharing-strategy": "none"}}
SHARED = {"name": "shared", "nodeLabels": {"gpu-mode": "shared"},
          "tolerations": [{"key": "gpu-mode", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}]}
NODES = [node("gpu-1", 8), node("gpu-2", 4), node("cpu-1", 0, strategy="")]


def fit(nominals: dict[str, int], nodes: list[dict], flavor: dict = WHOLE, resource: str = "nvidia.com/gpu",
        flavors: list[dict] | None = None) -> list[str]:
    teams = [{"name": t, "quotas": {flavor["name"]: {resource: {"nominalQuota": n}}}} for t, n in nominals.items()]
    return cluster_problems(parse("gpu-teams", flavors or [flavor], teams), nodes)


@pytest.mark.parametrize(("a", "b", "fits"), [(8, 4, True), (8, 5, False), (0, 0, True)])
def test_nominal_quotas_fit_the_pool_exactly(a: int, b: int, fits: bool) -> None:
    found = fit({"team-a": a, "team-b": b}, NODES)
    assert (not found) == fits, found
    if not fits:
        assert found == ["nominal quotas for nvidia.com/gpu on flavor whole-card add up to 13 (team-a 8, team-b 5) but "
                         "its nodes offer 12 allocatable (gpu-1 8, gpu-2 4): lower the quotas or add nodes to the pool"]


def test_a_flavor_that_selects_no_node() -> None:
    found = fit({"team-a": 1}, NODES, flavor={"name": "h200", "nodeLabels": {"nvidia.com/gpu.product": "H200"}})
    assert found == ["flavor h200 selects no node: no node of the cluster has the labels nvidia.com/gpu.product=H200; "
                     "fix nodeLabels or label the pool's nodes first"]


def test_cordoned_nodes_and_untolerated_taints_do_not_count() -> None:
    nodes = [node("gpu-1", 8, cordoned=True), node("gpu-2", 4, taints=[SHARED_TAINT])]
    found = fit({"team-a": 1}, nodes)
    assert found == ["nominal quotas for nvidia.com/gpu on flavor whole-card add up to 1 (team-a 1) but its nodes offer "
                     "0 allocatable (none); not counted: gpu-1: cordoned; gpu-2: taint gpu-mode=shared:NoSchedule not "
                     "tolerated by the flavor: lower the quotas or add nodes to the pool"]


def test_a_prefer_no_schedule_taint_does_not_block() -> None:
    assert fit({"team-a": 4}, [node("gpu-2", 4, taints=[{**SHARED_TAINT, "effect": "PreferNoSchedule"}])]) == []


def test_shared_gpus_on_the_shared_pool() -> None:
    nodes = NODES + [node("gpu-s", 0, strategy="time-slicing", shared=2, pool="shared", taints=[SHARED_TAINT])]
    assert fit({"team-a": 2}, nodes, flavor=SHARED, resource="nvidia.com/gpu.shared") == []
    assert fit({"team-a": 3}, nodes, flavor=SHARED, resource="nvidia.com/gpu.shared")[0].startswith(
        "nominal quotas for nvidia.com/gpu.shared on flavor shared add up to 3 (team-a 3) but its nodes offer 2")


def test_shared_gpus_on_whole_card_nodes_are_refused() -> None:
    found = fit({"team-a": 2}, NODES, resource="nvidia.com/gpu.shared")
    assert found == ["nvidia.com/gpu.shared is quoted on flavor whole-card (team-a), but its nodes gpu-1 "
                     "(nvidia.com/gpu.sharing-strategy=none), gpu-2 (nvidia.com/gpu.sharing-strategy=none) do not share "
                     "their GPUs: quote nvidia.com/gpu.shared only on a flavor of shared nodes (e.g. nodeLabels gpu-mode: "
                     "shared), after enabling time-slicing on them"]


def test_overlapping_flavors_share_their_capacity() -> None:
    h100 = {"name": "h100", "nodeLabels": {"kubernetes.io/hostname": "gpu-1"}}
    teams = [{"name": "team-a", "quotas": {"whole-card": {"nvidia.com/gpu": {"nominalQuota": 8}}}},
             {"name": "team-b", "quotas": {"h100": {"nvidia.com/gpu": {"nominalQuota": 8}}}}]
    found = cluster_problems(parse("gpu-teams", [WHOLE, h100], teams), NODES)
    assert found == ["flavors whole-card, h100 select some of the same nodes: together their nominal quotas for "
                     "nvidia.com/gpu add up to 16 but those nodes offer 12 (gpu-1 8, gpu-2 4): lower the quotas or make "
                     "the flavors select separate nodes"]


@pytest.mark.parametrize(("toleration", "matches"), [
    ({"key": "gpu-mode", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}, True),
    ({"key": "gpu-mode", "value": "shared"}, True),  # no effect: every effect
    ({"key": "gpu-mode", "operator": "Exists"}, True),
    ({"key": "gpu-mode", "value": "whole"}, False),
    ({"key": "gpu-mode", "operator": "Exists", "effect": "NoExecute"}, False),
])
def test_toleration_matching(toleration: dict, matches: bool) -> None:
    """A flavor's tolerations against a node's taint, as the scheduler matches them (gpushare.model.taints)."""
    flavor = {**WHOLE, "tolerations": [toleration]}
    assert (fit({"team-a": 4}, [node("gpu-2", 4, taints=[SHARED_TAINT])], flavor=flavor) == []) == matches
