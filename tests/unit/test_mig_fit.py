"""The profile-fit planner (gpushare.mig.fit) at its boundaries: the workloads as given, the
smallest instance that holds one, the placement of every replica and what is left."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpushare.mig.fit import WHOLE, Workload, fit, parse_workloads, place, room_left, smallest_fit
from gpushare.gpu_catalog import MigProfile
from gpushare.mig.hardware import model

A100 = model("NVIDIA-A100-SXM4-40GB")
PROFILES = {**A100.table, WHOLE: MigProfile(WHOLE, 7, 40960, 1, True)}


def mib(gib: float) -> float:
    return gib * 1024


# ---- the workloads as the operator lists them ---------------------------------------------------
def test_defaults_are_no_headroom_and_one_replica() -> None:
    workloads, problems = parse_workloads([{"name": "embedder", "memory_gib": 3}])
    assert problems == [] and workloads == [Workload("embedder", 3.0, 0.0, 1)]


def test_need_is_memory_plus_headroom() -> None:
    workload = Workload("llm-13b", 12, 0.2, 2)
    assert workload.need_mib == pytest.approx(mib(14.4))
    assert workload.need_text == "14.4 GiB = 12 GiB + 20 %"
    assert Workload("embedder", 3).need_text == "3 GiB"


@pytest.mark.parametrize(("raw", "problem"), [
    pytest.param("llm", "mig_workloads must be a list", id="not-a-list"),
    pytest.param(["llm"], "mig_workloads[0] must be a mapping", id="item-not-a-mapping"),
    pytest.param([{"memory_gib": 4}], "needs a name", id="no-name"),
    pytest.param([{"name": "a", "memory_gib": 0}], "memory_gib must be a number of GiB above 0, got 0", id="zero-memory"),
    pytest.param([{"name": "a", "memory_gib": "lots"}], "memory_gib must be a number", id="memory-a-word"),
    pytest.param([{"name": "a", "memory_gib": True}], "memory_gib must be a number", id="memory-a-bool"),
    pytest.param([{"name": "a", "memory_gib": 4, "headroom": 20}], "headroom is a fraction from 0 to 1 (0.2 for 20 %), "
                 "got 20", id="headroom-in-percent"),
    pytest.param([{"name": "a", "memory_gib": 4, "headroom": -0.1}], "headroom is a fraction", id="negative-headroom"),
    pytest.param([{"name": "a", "memory_gib": 4, "replicas": 0}], "replicas must be a whole number of at least 1",
                 id="no-replica"),
    pytest.param([{"name": "a", "memory_gib": 4, "replicas": 1.5}], "replicas must be a whole number", id="half-replica"),
    pytest.param([{"name": "a", "memory_gib": 4, "gpus": 1}], "unknown key(s) gpus", id="unknown-key"),
    pytest.param([{"name": "a", "memory_gib": 4}, {"name": "a", "memory_gib": 8}], "names 'a' 2 times", id="twice"),
])
def test_bad_workloads_are_named(raw: object, problem: str) -> None:
    _, problems = parse_workloads(raw)
    assert any(problem in p for p in problems), problems


def test_headroom_bounds_are_included() -> None:
    workloads, problems = parse_workloads([{"name": "a", "memory_gib": 1, "headroom": 0},
                                           {"name": "b", "memory_gib": 1, "headroom": 1}])
    assert problems == [] and [w.headroom for w in workloads] == [0.0, 1.0]


# ---- the smallest instance that holds a workload ---------------------------------------------------
def test_an_instance_exactly_as_large_as_the_need_holds_it() -> None:
    exact = PROFILES["1g.5gb"].memory_gib  # 4864 MiB
    assert smallest_fit(Workload("a", exact), PROFILES.values()).name == "1g.5gb"
    assert smallest_fit(Workload("a", exact + 0.001), PROFILES.values()).name == "1g.10gb"


def test_equal_memory_goes_to_fewer_compute_slices() -> None:
    # 1g.10gb (9856 MiB, 1 slice) before 2g.10gb (9984 MiB, 2 slices)
    assert smallest_fit(Workload("a", 9), PROFILES.values()).name == "1g.10gb"


def test_headroom_moves_a_model_up_a_profile() -> None:
    assert smallest_fit(Workload("llm", 12), [PROFILES["2g.10gb"], PROFILES["3g.20gb"]]).name == "3g.20gb"
    assert smallest_fit(Workload("llm", 9, 0.2), [PROFILES["2g.10gb"], PROFILES["3g.20gb"]]).name == "3g.20gb"
    assert smallest_fit(Workload("llm", 8, 0.2), [PROFILES["2g.10gb"], PROFILES["3g.20gb"]]).name == "2g.10gb"


def test_nothing_holds_a_workload_larger_than_every_instance() -> None:
    assert smallest_fit(Workload("llm-70b", 140), PROFILES.values()) is None


# ---- placing every replica ----------------------------------------------------------------------------
BALANCED = Counter({"1g.5gb": 8, "2g.10gb": 4, "3g.20gb": 4})  # all-balanced on 4 A100-40GB


def test_the_balanced_layout_places_the_issue_example() -> None:
    workloads = [Workload("llm-13b", 12, 0.2, 2), Workload("embedder", 3, 0, 6)]
    placement = place(workloads, BALANCED, PROFILES)
    assert placement.placed == {"llm-13b": Counter({"3g.20gb": 2}), "embedder": Counter({"1g.5gb": 6})}
    assert placement.free == Counter({"1g.5gb": 2, "2g.10gb": 4, "3g.20gb": 2})
    assert room_left(Workload("llm-13b", 12, 0.2), placement.free, PROFILES) == 2


def test_small_replicas_spill_into_larger_instances_only_when_the_small_ones_are_gone() -> None:
    placement = place([Workload("small", 3, 0, 10)], BALANCED, PROFILES)
    assert placement.placed["small"] == Counter({"1g.5gb": 8, "2g.10gb": 2})


def test_replicas_beyond_the_instances_stay_unplaced() -> None:
    result = fit([Workload("llm", 12, 0.2, 5)], PROFILES, Counter({WHOLE: 4}), BALANCED)
    assert result.unfit == [] and [(w.name, n) for w, n in result.short] == [("llm", 4)]


def test_fit_names_the_workloads_no_instance_holds_and_the_coverage() -> None:
    result = fit([Workload("llm-13b", 12, 0.2), Workload("embedder", 3)], PROFILES, Counter({WHOLE: 4}),
                 Counter({"1g.5gb": 28}))
    assert [w.name for w in result.unfit] == ["llm-13b"]
    assert result.coverage() == "1 of 2 listed workload(s) fit an instance"


def test_the_fragmentation_rows_go_smallest_first_with_before_and_after() -> None:
    result = fit([Workload("embedder", 3, 0, 6)], PROFILES, Counter({WHOLE: 4}), BALANCED)
    assert result.fragmentation_rows() == [
        ["1g.5gb", "4.75 GiB", 0, 8, 6, 2], ["2g.10gb", "9.75 GiB", 0, 4, 0, 4], ["3g.20gb", "19.62 GiB", 0, 4, 0, 4],
        [WHOLE, "40.00 GiB", 4, 0, 0, 0]]
    assert result.workload_rows() == [["embedder", "3 GiB", "1g.5gb", "6 of 6 (6 on 1g.5gb)", 2 + 4 + 4]]


def test_an_unknown_before_shows_as_a_question_mark() -> None:
    assert fit([], PROFILES, None, BALANCED).fragmentation_rows()[0][2] == "?"


def _most_placeable(needs: list[float], pool: Counter[str]) -> int:
    """Brute force: the most replicas any one-replica-per-instance assignment places."""
    slots = [k for k, n in pool.items() for _ in range(n)]
    for size in range(len(needs), 0, -1):
        for chosen in itertools.combinations(range(len(needs)), size):
            if any(all(PROFILES[s].memory_mib >= mib(needs[i]) for i, s in zip(chosen, perm))
                   for perm in itertools.permutations(slots, size)):
                return size
    return 0


@settings(max_examples=60, deadline=None)
@given(needs=st.lists(st.sampled_from([2.0, 4.75, 5.0, 9.0, 9.7, 12.0, 19.0, 30.0, 45.0]), min_size=1, max_size=4),
       pool=st.dictionaries(st.sampled_from(["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"]), st.integers(0, 2), max_size=3))
def test_greedy_placement_places_as_many_replicas_as_any_placement(needs: list[float], pool: dict[str, int]) -> None:
    workloads = [Workload(f"w{i}", need) for i, need in enumerate(needs)]
    placed = sum(sum(c.values()) for c in place(workloads, Counter(pool), PROFILES).placed.values())
    assert placed == _most_placeable(needs, Counter(pool))
