"""Does the description fit the nodes: selection, capacity at its exact boundary, taints, cordons,
shared GPUs only on shared nodes, flavors that overlap."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.kueue import filters
from gpushare.kueue.capacity import cluster_problems, devices_per_node, drivers
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


# ---- a resource a DeviceClass backs with DRA (KEP-5004: allocatable first, else the class's devices) ----------
def resource_slice(node_name: str, devices: int, *, driver: str = "gpu.nvidia.com", generation: int = 1) -> dict[str, Any]:
    return {"spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}


DRA_CLASS = {"metadata": {"name": "gpu-er", "creationTimestamp": "2026-12-01T08:00:00Z"},
             "spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": [
                 {"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
DRA_NODES = [node("gpu-1", 8), node("gpu-dra", 0)]
DRA_SLICES = [resource_slice("gpu-dra", 4, generation=1), resource_slice("gpu-dra", 2, generation=2),
              resource_slice("gpu-1", 8), resource_slice("gpu-dra", 5, driver="other.example.com")]


def test_devices_count_per_node_the_newest_generation_of_the_named_drivers() -> None:
    assert drivers(DRA_CLASS) == {"gpu.nvidia.com"}
    assert devices_per_node(DRA_SLICES, {"gpu.nvidia.com"}) == {"gpu-dra": 2, "gpu-1": 8}


def test_a_node_serving_the_resource_through_dra_counts_its_devices() -> None:
    description = {"cohort": "gpu-teams", "priority_classes": [], "flavors": [WHOLE],
                   "teams": [{"name": "team-a", "quotas": {"whole-card": {"nvidia.com/gpu": {"nominalQuota": 10}}}}]}
    assert filters.cluster_problems(description, DRA_NODES, [DRA_CLASS], DRA_SLICES) == []
    description["teams"][0]["quotas"]["whole-card"]["nvidia.com/gpu"]["nominalQuota"] = 11
    assert filters.cluster_problems(description, DRA_NODES, [DRA_CLASS], DRA_SLICES) == [
        "nominal quotas for nvidia.com/gpu on flavor whole-card add up to 11 (team-a 11) but its nodes offer 10 "
        "allocatable (gpu-1 8, gpu-dra 2 through DRA): lower the quotas or add nodes to the pool"]
    # without a class that names it, the devices are not the resource's: the node offers none
    assert "its nodes offer 8 allocatable (gpu-1 8, gpu-dra 0)" in filters.cluster_problems(
        description, DRA_NODES, None, DRA_SLICES)[0]
