"""What the rollout prints (the plan, the summary, the stop message) and the change record it keeps:
a screenful for a small fleet, bounded for a large one."""

from __future__ import annotations

from typing import Any

from gpushare.rollout import filters, report
from gpushare.rollout.plan import plan
from gpushare.rollout.progress import RolloutRecord
from tests.unit.test_rollout_plan import HOSTS, NOW, event, new_record, planned, settings, through


def plan_dict(**inputs: Any) -> dict[str, Any]:
    return planned(**inputs).as_dict()


def test_the_plan_lists_each_step_with_its_nodes_replicas_soak_and_gates() -> None:
    lines = report.plan_lines(plan_dict(), settings(), "gpu-operator", "time-slicing-config")
    assert lines[0] == ("Rollout of time-slicing on 3 GPU node(s), 4 steps: a new rollout "
                        "(record gpushare-system/gpushare-rollout-timeslicing).")
    assert lines[1].startswith("- prepare: ConfigMap gpu-operator/time-slicing-config and the ClusterPolicy's")
    start = next(i for i, line in enumerate(lines) if line.startswith("step "))
    table = [line.split() for line in lines[start:start + 6]]
    assert table[0] == ["step", "nodes", "replicas", "soak", "gates", "state"]
    assert table[2] == ["canary", "gpu-node", "2", "0s", "metrics-continue.json", "pending"]
    assert table[5][:1] == ["replicas-4"] and "4" in table[5]
    assert "on hold evaluate again up to 2 time(s), 30s apart" in " ".join(" ".join(lines).split())
    assert len(lines) <= 14 and all(len(line) <= 120 for line in lines)


def test_a_resumed_plan_says_so_and_shows_each_steps_state() -> None:
    record = through(event(new_record(), "prepared", ""), "canary", "continue")
    lines = report.plan_lines(planned(record).as_dict(), settings(), "gpu-operator", "time-slicing-config")
    assert "resuming" in lines[0] and not any(line.startswith("- prepare") for line in lines)
    assert next(line for line in lines if line.startswith("canary")).split()[-1] == "continued"


def test_a_finished_rollout_says_there_is_nothing_to_do() -> None:
    record = new_record()
    for step in ("canary", "batch-1", "batch-2", "replicas-4"):
        record = through(record, step, "continue")
    lines = report.plan_lines(planned(record).as_dict(), settings(), "gpu-operator", "x")
    assert lines == ["Nothing to do: this rollout is complete (record gpushare-system/gpushare-rollout-timeslicing); "
                     "its summary follows."]


def complete() -> dict[str, Any]:
    record = through(new_record(), "canary", "continue")
    record = through(record, "batch-1", "hold", "continue")
    for step in ("batch-2", "replicas-4"):
        record = through(record, step, "continue")
    return record


def test_the_summary_shows_per_step_the_nodes_the_gates_and_the_decision_in_a_screenful() -> None:
    lines = report.summary_lines(complete(), "gpushare-system", False)
    assert lines[0] == "Rollout complete: 4 of 4 steps continued (started 2026-01-05T10:00:00Z)."
    rows = {line.split()[0]: line for line in lines[3:7]}
    assert rows["batch-1"].split()[1:] == ["gpu-node-2", "2", "passed", "hold,", "continue", "continue", "to", "batch-2"]
    assert rows["replicas-4"].endswith("rollout complete")
    matrix = lines[lines.index(next(line for line in lines if line.startswith("gate (last evaluation)"))):]
    assert matrix[2].split() == ["p99_ms", "continue", "continue", "continue", "continue"]
    assert lines[-1].startswith("Change record: kubectl -n gpushare-system get cm gpushare-rollout-timeslicing")
    assert len(lines) <= 20 and all(len(line) <= 120 for line in lines)


def test_a_rolled_back_rollout_names_what_was_rolled_back_and_what_to_do() -> None:
    record = through(new_record(), "canary", "continue")
    record = through(record, "batch-1", "rollback")
    record = event(record, "undone", "")
    lines = report.summary_lines(record, "gpushare-system", False)
    assert lines[0].startswith("Rollout rolled back: 1 of 4 steps continued")
    assert "Rolled back gpu-node-2." in lines
    assert lines[-1] == "Next: find out why, then start a new rollout with -e rollout_start_over=true."
    assert filters.rollout_stop_message(record) == (
        "The rollout stopped at batch-1: the release gates say rollback. p99_ms: p99_ms says rollback. "
        "Rolled back: gpu-node-2.")


def test_a_held_rollout_says_how_to_go_on() -> None:
    record = through(new_record(), "canary", "hold", "hold", last=True)
    assert report.summary_lines(record, "gpushare-system", False)[-1].startswith("Next: re-run the same command")
    assert filters.rollout_stop_message(record).startswith("The rollout stopped at canary: the release gates still say "
                                                           "hold. p99_ms: p99_ms says hold.")
    assert filters.rollout_stop_message(complete()) == ""


def test_check_mode_says_nothing_ran() -> None:
    lines = report.summary_lines(None, "gpushare-system", True, plan_dict(check_mode=True))
    assert lines == ["Preview only (--check): the record and the prepare were dry runs; the steps (canary, batch-1, "
                     "batch-2, replicas-4) run for real only, each on what the one before changed."]


def test_a_large_fleet_keeps_one_line_per_step_and_the_gate_tables_in_the_change_record() -> None:
    hosts = [(f"h{i:03d}", f"node-{i:03d}") for i in range(200)]
    nodes = [{"metadata": {"name": n, "labels": {"nvidia.com/gpu.present": "true"}}} for _, n in hosts]
    result = plan({"record": None, "nodes": nodes}, settings(serial="10%"), hosts, NOW, {}, "h", False)
    record = {**result.take[0].body, "metadata": {**result.take[0].body["metadata"], "uid": "u", "resourceVersion": "1"}}
    lines = report.summary_lines(record, "gpushare-system", False)
    assert len(result.progress.steps) == 12 and len(lines) == 1 + 2 + 12 + 2  # + change record, next
    assert next(line for line in lines if line.startswith("batch-1 ")).split()[1:5] == ["node-001,", "node-002,",
                                                                                      "node-003", "+17"]
    assert all(len(line) <= 120 for line in lines)
    assert next(line for line in lines if line.startswith("replicas-4")).split()[1:3] == ["all", "200"]


def test_the_change_record_has_every_evaluations_gate_table_and_each_decision() -> None:
    text = report.change_record(RolloutRecord.of(complete()).progress,
                                 {"gpushare.io/started-at": "2026-01-05T10:00:00Z", "gpushare.io/operator": "ops as admin",
                                  "gpushare.io/command": "ansible-playbook playbooks/rollout-timeslicing.yml"})
    assert text.startswith("# Change record: rollout of GPU time-slicing (complete)\n")
    assert "- Command: `ansible-playbook playbooks/rollout-timeslicing.yml`" in text
    assert "## batch-1: continued" in text and "- Nodes (1): gpu-node-2" in text
    assert text.count("| gate | status | reason | threshold |") == 5
    assert "Evaluation 1 at 2026-01-05T10:00:00Z: **hold** (metrics m.json)" in text
    assert "| p99_ms | hold | p99_ms says hold | t |" in text
    assert "Decision: continue to batch-2." in text and "Decision: rollout complete." in text


def test_hosts_are_named_once_per_step_in_order() -> None:
    assert [s.hosts for s in planned().progress.steps][:3] == [(h,) for h, _ in HOSTS]
