"""The rollout's inputs and steps: batch sizes as Ansible's serial computes them, the replica
schedule, the canary, the gates' sources and files, and what makes two plans the same rollout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpushare.rollout.settings import RolloutSettings, batch_size
from gpushare.rollout.steps import fingerprint, metrics_problems, schedule

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOSTS = [(f"h{i}", f"node-{i}") for i in range(1, 11)]


def settings(**inputs: Any) -> RolloutSettings:
    base = {"replicas": [2, 4], "soak": 0, "thresholds_file": str(EXAMPLES / "gates" / "thresholds.yaml"),
            "metrics_files": {"default": str(EXAMPLES / "gates" / "metrics-continue.json")}}
    return RolloutSettings.of({**base, **inputs})


@pytest.mark.parametrize(("value", "total", "size"), [
    (1, 10, 1), ("3", 10, 3), ("25%", 10, 2), ("10%", 5, 1), ("100%", 7, 7), ("33.3%", 200, 66), (" 50 % ", 4, 2),
])
def test_batch_size_counts_and_percentages_like_serial(value: Any, total: int, size: int) -> None:
    assert batch_size(value, total) == size


@pytest.mark.parametrize("value", [0, "0", "-1", "0%", "101%", "half", "2.5"])
def test_batch_size_refuses_what_is_not_a_size(value: Any) -> None:
    with pytest.raises(ValueError):
        batch_size(value, 10)


def names(steps: list) -> list[tuple[str, list[str], int]]:
    return [(s.name, list(s.hosts), s.replicas) for s in steps]


def test_canary_first_then_batches_then_the_raise_on_every_node() -> None:
    steps, refusals = schedule(HOSTS[:4], settings(serial=1))
    assert refusals == []
    assert names(steps) == [("canary", ["h1"], 2), ("batch-1", ["h2"], 2), ("batch-2", ["h3"], 2),
                            ("batch-3", ["h4"], 2), ("replicas-4", ["h1", "h2", "h3", "h4"], 4)]
    assert [s.kind for s in steps] == ["widen"] * 4 + ["raise"]
    assert steps[0].nodes == ("node-1",)


def test_serial_list_last_value_repeats_and_percentages_are_of_all_nodes() -> None:
    steps, _ = schedule(HOSTS, settings(serial=[1, "30%"], canary=["h5"], replicas=[2]))
    assert names(steps) == [("canary", ["h5"], 2), ("batch-1", ["h1"], 2), ("batch-2", ["h2", "h3", "h4"], 2),
                            ("batch-3", ["h6", "h7", "h8"], 2), ("batch-4", ["h9", "h10"], 2)]


def test_each_later_replica_count_is_one_more_step_and_soaks() -> None:
    steps, _ = schedule(HOSTS[:2], settings(replicas=[2, 4, 8], soak=60, canary_soak=300))
    assert [(s.name, s.replicas, s.soak) for s in steps] == [
        ("canary", 2, 300), ("batch-1", 2, 60), ("replicas-4", 4, 60), ("replicas-8", 8, 60)]


def test_a_single_host_is_its_own_canary() -> None:
    steps, refusals = schedule(HOSTS[:1], settings(replicas="2,4"))
    assert refusals == [] and names(steps) == [("canary", ["h1"], 2), ("replicas-4", ["h1"], 4)]


@pytest.mark.parametrize(("canary", "message"), [
    (["h99"], "rollout_canary names h99, not among this run's hosts"),
    (["h1", "h2", "h3"], "rollout_canary takes every host of the run"),
])
def test_canary_refusals(canary: list[str], message: str) -> None:
    steps, refusals = schedule(HOSTS[:3], settings(canary=canary))
    assert steps == [] and message in refusals[0] and refusals[0].endswith("Nothing was changed.")


def test_no_host_is_refused() -> None:
    assert "the play has no host" in schedule([], settings())[1][0]


@pytest.mark.parametrize(("inputs", "message"), [
    ({"replicas": []}, "rollout_replicas is empty"),
    ({"replicas": [1, 4]}, "each value is at least 2"),
    ({"replicas": [2, 32]}, "at most 16"),
    ({"replicas": [4, 2]}, "only raises the replicas"),
    ({"replicas": [2, 2]}, "only raises the replicas"),
    ({"replicas": ["two"]}, "'two' is not a number of replicas"),
    ({"serial": ["5", "0%"]}, "rollout_serial 0%: a percentage is above 0%"),
    ({"on_rollback": "everything"}, "rollout_on_rollback must be step"),
    ({"metrics_files": {}}, "give ONE source of metrics"),
    ({"prometheus_url": "http://prom:9090"}, "give ONE source of metrics"),
    ({"metrics_files": {}, "prometheus_url": "prom:9090"}, "is not an http(s):// URL"),
    ({"thresholds_file": None}, "rollout_thresholds_file is required"),
    ({"thresholds_file": "nowhere.yaml"}, "rollout_thresholds_file nowhere.yaml: no such file"),
    ({"metrics_files": {"canary": "nowhere.json"}}, "rollout_metrics_files: no such file: nowhere.json"),
    ({"metrics_files": {"canary": []}}, "no file given for canary"),
    ({"metrics_files": "canary.json"}, "rollout_metrics_files maps each step"),
    ({"soak": "soon"}, "rollout_soak must be a whole number"),
    ({"hold_retries": -1}, "rollout_hold_retries must be at least 0"),
    ({"lock_duration": 10}, "rollout_lock_duration must be at least 60"),
])
def test_bad_inputs_are_refused_before_anything_is_read(inputs: dict[str, Any], message: str) -> None:
    problems = settings(**inputs).problems()
    assert any(message in p for p in problems), problems
    assert all(p.endswith("Nothing was changed.") for p in problems)


def test_good_inputs_have_no_problem() -> None:
    assert settings().problems() == []
    assert settings(metrics_files={}, prometheus_url="https://prom:9090").problems() == []


def test_metrics_file_per_evaluation_the_last_repeats_and_default_covers_the_rest() -> None:
    continue_, hold = (str(EXAMPLES / "gates" / f"metrics-{v}.json") for v in ("continue", "hold"))
    chosen = settings(metrics_files={"batch-1": [hold, continue_], "default": continue_})
    assert [chosen.metrics_file("batch-1", n) for n in range(3)] == [hold, continue_, continue_]
    assert chosen.metrics_file("canary", 0) == continue_
    assert settings(metrics_files={}, prometheus_url="http://p:9090").metrics_file("canary", 0) == ""


def test_relative_paths_are_taken_from_where_ansible_playbook_runs(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text("throughput_min_gain: 0.1\n")
    (tmp_path / "m.json").write_text("{}")
    chosen = RolloutSettings.of({"replicas": [2], "thresholds_file": "t.yaml", "metrics_files": {"default": "m.json"},
                                 "cwd": str(tmp_path)})
    assert chosen.problems() == [] and chosen.metrics_file("canary", 0) == str(tmp_path / "m.json")


def test_metrics_files_must_cover_every_step_and_other_steps_are_noted() -> None:
    steps, _ = schedule(HOSTS[:3], settings())
    path = str(EXAMPLES / "gates" / "metrics-continue.json")
    problems, notes = metrics_problems(steps, settings(metrics_files={"canary": path, "batch-9": path}))
    assert "gives no metrics file for batch-1, batch-2, replicas-4 (the steps of this run: canary, batch-1" in problems[0]
    assert notes == ["rollout_metrics_files names batch-9, not a step of this run: not used."]
    assert metrics_problems(steps, settings(metrics_files={"canary": path, "default": path})) == ([], [])


def test_the_same_nodes_steps_and_replicas_are_the_same_rollout() -> None:
    steps, _ = schedule(HOSTS[:4], settings(soak=0))
    assert fingerprint(steps) == fingerprint(schedule(HOSTS[:4], settings(soak=999, hold_retries=9))[0])
    assert fingerprint(steps) != fingerprint(schedule(HOSTS[:4], settings(serial=2))[0])
    assert fingerprint(steps) != fingerprint(schedule(HOSTS[:4], settings(replicas=[2, 8]))[0])
    assert fingerprint(steps) != fingerprint(schedule(HOSTS[:3], settings())[0])
