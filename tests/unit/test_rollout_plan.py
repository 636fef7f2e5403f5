"""The rollout's plan and progress: start, resume, nothing to do, refusals; what each event records
and decides (continue, hold, the last hold, rollback of the step or of everything); the holder;
the writes; what a step waits for and reads."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from gpushare.k8s.patch import PatchConflict, json_patch
from gpushare.rollout import progress as pr
from gpushare.rollout.plan import gate_inputs, plan, wait
from gpushare.rollout.settings import RolloutSettings
from gpushare.runbook.state import ClusterState

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = dt.datetime(2026, 1, 5, 10, 0, 0, tzinfo=dt.timezone.utc)
HOSTS = [("gpu-node", "gpu-node"), ("gpu-node-2", "gpu-node-2"), ("mig", "gpu-node-mig")]
WHO = {"command": "ansible-playbook playbooks/rollout-timeslicing.yml", "operator": "ops as admin"}
HOLDER = "rollout-timeslicing@control/4242/20260105T100000Z-beef"


def settings(**inputs: Any) -> RolloutSettings:
    base = {"replicas": [2, 4], "soak": 0, "hold_retries": 2, "hold_interval": 30,
            "thresholds_file": str(EXAMPLES / "gates" / "thresholds.yaml"),
            "metrics_files": {"default": str(EXAMPLES / "gates" / "metrics-continue.json")}}
    return RolloutSettings.of({**base, **inputs})


def node(name: str, mig: bool = False) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "1"}
    if mig:
        labels["nvidia.com/mig.config"] = "all-1g.10gb"
    return {"metadata": {"name": name, "labels": labels}}


NODES = [node("gpu-node"), node("gpu-node-2"), node("gpu-node-mig")]


def never_live(record: pr.RolloutRecord, now: dt.datetime) -> bool:
    return False


def planned(record: dict[str, Any] | None = None, check_mode: bool = False, holder: str = HOLDER,
            live: Any = never_live, nodes: list[dict[str, Any]] | None = None, **inputs: Any):
    return plan({"record": record, "nodes": NODES if nodes is None else nodes}, settings(**inputs), HOSTS, NOW, WHO,
                holder, check_mode, live)


def stored(body: dict[str, Any], version: int = 1) -> dict[str, Any]:
    obj = copy.deepcopy(body)
    obj["metadata"].update({"uid": "0d1e2f3a-0000", "resourceVersion": str(version)})
    return obj


def new_record(**inputs: Any) -> dict[str, Any]:
    return stored(planned(**inputs).take[0].body)


def written(record: dict[str, Any], changes: list[dict[str, Any]]) -> dict[str, Any]:
    """The record after a write, as the API server applies the JSON patch."""
    (change,) = changes
    assert change.action == "json"
    return json_patch(record, change.body)


def event(record: dict[str, Any], name: str, step: str, details: dict[str, Any] | None = None,
          at: dt.datetime = NOW, **inputs: Any) -> dict[str, Any]:
    """One event written the way the role writes it (through the filter's pieces)."""
    rec = pr.RolloutRecord.of(record)
    chosen = settings(**inputs)
    new = pr.apply_event(rec.progress, name, step, {**(details or {}), "on_rollback": chosen.on_rollback}, at)
    return written(record, pr.write_changes("gpu-operator", new, rec.holder, at + dt.timedelta(seconds=900), "", at, ""))


def gates(verdict: str) -> dict[str, Any]:
    statuses = {"continue": ["continue", "continue"], "hold": ["hold", "continue"], "rollback": ["rollback", "hold"]}
    return {"evaluated": True, "verdict": verdict, "source": {"metrics": "m.json"}, "error": None,
            "gates": [{"name": name, "status": status, "reason": f"{name} says {status}", "threshold": "t",
                       "observed": {}} for name, status in zip(("p99_ms", "xid_errors"), statuses[verdict])]}


def through(record: dict[str, Any], step: str, *verdicts: str, last: bool = False, **inputs: Any) -> dict[str, Any]:
    record = event(record, "started", step, **inputs)
    record = event(record, "enabled", step, {"share_check": "passed"}, **inputs)
    for n, verdict in enumerate(verdicts):
        record = event(record, "evaluated", step, {"result": gates(verdict), "last": last and n == len(verdicts) - 1},
                       **inputs)
    return record


def progress(record: dict[str, Any]) -> pr.Progress:
    return pr.RolloutRecord.of(record).progress


# ---- the plan ------------------------------------------------------------------------------------
def test_a_new_rollout_creates_its_record_and_hands_each_play_its_hosts() -> None:
    result = planned()
    assert result.refusals == [] and result.status == "new" and result.prepare
    (take,) = result.take
    assert (take.action, take.name) == ("create", pr.RECORD)
    body = take.body
    assert body["metadata"]["labels"]["gpushare.io/run"] == "rollout-timeslicing"
    assert body["metadata"]["annotations"][pr.HOLDER] == HOLDER
    assert body["metadata"]["annotations"]["gpushare.io/state"] == "in-progress"
    assert body["metadata"]["annotations"][pr.VALID_UNTIL] == "2026-01-05T10:15:00Z"
    assert json.loads(body["data"]["intent.json"])["nodes"] == ["gpu-node", "gpu-node-2", "gpu-node-mig"]
    assert "## canary: pending" in body["data"][pr.CHANGE_RECORD]
    assert result.hosts == {"widen": ["gpu-node", "gpu-node-2", "mig"], "serial": [1, 1, 1],
                            "raise": ["gpu-node", "gpu-node-2", "mig"], "undo": []}
    assert result.raise_steps == ["replicas-4"]


def test_check_mode_previews_the_take_and_runs_no_step() -> None:
    result = planned(check_mode=True)
    assert result.take and result.prepare
    assert result.hosts == {"widen": [], "serial": [], "raise": [], "undo": []} and result.raise_steps == []


def test_resume_takes_over_the_record_and_goes_on_at_the_first_step_not_continued() -> None:
    record = through(new_record(), "canary", "continue")
    record = event(record, "started", "batch-1")
    result = planned(record, holder="rollout-timeslicing@control/5151/x")
    assert result.status == "resume" and result.prepare  # the prepare is not recorded done yet
    assert result.hosts["widen"] == ["gpu-node-2", "mig"] and result.hosts["serial"] == [1, 1]
    (take,) = result.take
    assert take.action == "json" and take.body[0] == {
        "op": "test", "path": "/metadata/annotations/gpushare.io~1rollout-holder", "value": HOLDER}
    taken = written(record, result.take)
    assert taken["metadata"]["annotations"][pr.HOLDER] == "rollout-timeslicing@control/5151/x"
    assert json.loads(taken["data"][pr.DATA]) == json.loads(record["data"][pr.DATA])


def test_after_the_prepare_a_resume_does_not_prepare_again() -> None:
    record = event(new_record(), "prepared", "")
    assert planned(record).prepare is False and progress(record).prepared


def test_a_rollout_in_the_raise_step_resumes_there_only() -> None:
    record = new_record()
    for step in ("canary", "batch-1", "batch-2"):
        record = through(record, step, "continue")
    result = planned(record)
    assert result.hosts["widen"] == [] and result.raise_steps == ["replicas-4"]
    assert result.hosts["raise"] == ["gpu-node", "gpu-node-2", "mig"]


def test_a_finished_rollout_has_nothing_to_do_and_writes_nothing() -> None:
    record = new_record()
    for step in ("canary", "batch-1", "batch-2", "replicas-4"):
        record = through(record, step, "continue")
    assert record["metadata"]["annotations"]["gpushare.io/state"] == "complete"
    assert "gpushare.io/finished-at" in record["metadata"]["annotations"]
    result = planned(record)
    assert result.status == "finished" and result.take == [] and not result.prepare
    assert result.hosts == {"widen": [], "serial": [], "raise": [], "undo": []}


def test_a_finished_rollout_with_another_plan_starts_a_new_one_keeping_the_old_record() -> None:
    record = new_record()
    for step in ("canary", "batch-1", "batch-2", "replicas-4"):
        record = through(record, step, "continue")
    result = planned(record, replicas=[2, 8])
    assert result.status == "start-over"
    archive, delete, create = result.take
    assert archive.action == "create" and archive.exists == "keep"
    assert archive.name == f"{pr.RECORD}-20260105t100000z-0d1e2"
    assert archive.body["data"] == record["data"]
    assert archive.body["metadata"]["annotations"][pr.ARCHIVED] == "2026-01-05T10:00:00Z"
    assert delete.as_dict() == {"action": "delete", "kind": "ConfigMap", "name": pr.RECORD, "namespace": "gpushare-system",
                      "preconditions": {"uid": "0d1e2f3a-0000", "resourceVersion": "1"},
                      "why": "make room for the new rollout's record"}
    assert create.action == "create" and "kept as ConfigMap" in result.notes[0]


def test_another_plan_while_one_is_in_progress_is_refused() -> None:
    result = planned(event(new_record(), "started", "canary"), serial=2)
    assert result.take == [] and "A rollout with another plan is in progress" in result.refusals[0]
    assert "steps: canary (gpu-node, 2 replicas), batch-1 (gpu-node-2, 2 replicas)" in result.refusals[0] and "rollout_start_over=true" in result.refusals[0]


def test_start_over_abandons_the_rollout_in_progress() -> None:
    result = planned(event(new_record(), "started", "canary"), start_over=True)
    assert result.status == "start-over" and [c.action for c in result.take] == ["create", "delete", "create"]
    assert result.hosts["widen"] == ["gpu-node", "gpu-node-2", "mig"]


def test_a_live_holder_is_refused_even_with_start_over() -> None:
    for inputs in ({}, {"start_over": True}):
        result = planned(new_record(), live=lambda record, now: True, **inputs)
        assert result.take == [] and f"Another run holds the rollout: {HOLDER}" in result.refusals[0]


def test_an_unreadable_record_is_refused() -> None:
    record = new_record()
    record["data"][pr.DATA] = "{edited"
    assert "cannot be read" in planned(record).refusals[0]


@pytest.mark.parametrize(("nodes", "message"), [
    ([node("gpu-node"), node("gpu-node-2")], "gpu-node-mig is not a GPU node of this cluster"),
    ([node("gpu-node"), node("gpu-node-2"), node("gpu-node-mig", mig=True)], "gpu-node-mig has MIG enabled"),
])
def test_nodes_that_cannot_share_are_refused(nodes: list[dict[str, Any]], message: str) -> None:
    result = planned(nodes=nodes)
    assert result.take == [] and message in result.refusals[0] and result.refusals[0].endswith("Nothing was changed.")


def test_bad_inputs_are_refused_first() -> None:
    assert "rollout_replicas is empty" in planned(replicas=[]).refusals[0]


# ---- events and decisions ---------------------------------------------------------------------------
def test_continue_goes_to_the_next_step_and_the_last_completes() -> None:
    record = through(new_record(), "canary", "continue")
    state = progress(record).state("canary")
    assert (state.state, state.decision, state.share_check) == ("continued", "continue to batch-1", "passed")
    assert state.started == state.enabled == "2026-01-05T10:00:00Z"
    assert state.evaluations[0]["gates"][0] == {"name": "p99_ms", "status": "continue", "reason": "p99_ms says continue",
                                                "threshold": "t", "observed": {}}
    assert progress(record).outcome == "in-progress"


def test_hold_evaluates_again_and_the_last_hold_stops_the_rollout_resumably() -> None:
    record = through(new_record(), "canary", "hold")
    assert progress(record).state("canary").decision == "hold: evaluate again"
    assert progress(record).outcome == "in-progress"
    record = event(record, "evaluated", "canary", {"result": gates("hold"), "last": True})
    held = progress(record)
    assert held.outcome == "held" and held.reasons == "p99_ms: p99_ms says hold."
    assert held.state("canary").decision == "stop: still hold after 2 evaluation(s)"
    assert record["metadata"]["annotations"]["gpushare.io/state"] == "in-progress"
    assert [s.name for s in held.pending][:1] == ["canary"]
    result = planned(record)
    assert result.status == "resume" and result.hosts["widen"][0] == "gpu-node"


def test_hold_then_continue_goes_on() -> None:
    record = through(new_record(), "canary", "hold", "continue")
    assert [e["verdict"] for e in progress(record).state("canary").evaluations] == ["hold", "continue"]
    assert progress(record).state("canary").state == "continued"


def test_rollback_of_the_step_condemns_its_nodes_only() -> None:
    record = through(new_record(), "canary", "continue")
    record = through(record, "batch-1", "continue")
    record = through(record, "batch-2", "rollback")
    stopped = progress(record)
    assert stopped.outcome == "rolling-back" and stopped.reasons == "p99_ms: p99_ms says rollback."
    assert stopped.undo == {"step": "batch-2", "scope": "step", "steps": ["batch-2"], "hosts": ["mig"],
                            "nodes": ["gpu-node-mig"], "state": "pending"}
    assert stopped.state("batch-2").decision == "roll back this step, stop"
    result = planned(record)  # a crash before the undo: the re-run rolls back, runs no step
    assert result.hosts == {"widen": [], "serial": [], "raise": [], "undo": ["mig"]} and result.raise_steps == []
    record = event(record, "undone", "")
    done = progress(record)
    assert done.outcome == "rolled-back" and done.state("batch-2").state == "rolled-back"
    assert done.state("batch-1").state == "continued"
    assert record["metadata"]["annotations"]["gpushare.io/state"] == "rolled-back"
    assert planned(record).status == "finished"


def test_rollback_of_everything_condemns_every_step_started() -> None:
    record = through(new_record(), "canary", "continue", on_rollback="all")
    record = through(record, "batch-1", "rollback", on_rollback="all")
    undo = progress(record).undo
    assert undo["steps"] == ["canary", "batch-1"] and undo["hosts"] == ["gpu-node", "gpu-node-2"]
    assert progress(record).state("batch-1").decision == "roll back everything this rollout changed, stop"


def test_a_failed_step_is_retried_from_its_start() -> None:
    record = event(event(new_record(), "started", "canary"), "failed", "canary", {"message": "verify timed out"})
    assert progress(record).state("canary").failure == "verify timed out"
    assert planned(record).hosts["widen"][0] == "gpu-node"
    record = event(record, "started", "canary", at=NOW + dt.timedelta(minutes=5))
    state = progress(record).state("canary")
    assert (state.state, state.failure, state.started) == ("started", "", "2026-01-05T10:00:00Z")


def test_an_unknown_event_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        pr.apply_event(progress(new_record()), "paused", "canary", {}, NOW)


@pytest.mark.parametrize("text", ["[" * 50_000 + "]" * 50_000, "[]", '"x"', '{"fingerprint": "f", "steps": 7}',
                                  "{" + " " * 300_000 + "}"])
def test_a_rollout_record_edited_beyond_reading_has_no_progress(text: str) -> None:
    """The record is untrusted input: deep, huge or ill-typed progress is unreadable, never a crash."""
    record = new_record()
    record["data"][pr.DATA] = text
    assert progress(record) is None


# ---- the holder and the writes ----------------------------------------------------------------------
def holder_record(state: str = "in-progress", until: str = "2026-01-05T10:15:00Z",
                  holder: str = HOLDER) -> pr.RolloutRecord:
    return pr.RolloutRecord.of({"metadata": {"name": pr.RECORD, "annotations": {
        pr.HOLDER: holder, pr.VALID_UNTIL: until, "gpushare.io/state": state}}})


@pytest.mark.parametrize(("record", "host", "alive", "live"), [
    (holder_record(), "control", True, True),                       # its process runs
    (holder_record(), "control", False, False),                     # killed: seen dead at once
    (holder_record(), "laptop", False, True),                       # on another machine: until its time is up
    (holder_record(until="2026-01-05T10:00:00Z"), "laptop", True, False),   # its time is up (at the limit)
    (holder_record(until="2026-01-05T10:00:01Z"), "laptop", True, True),
    (holder_record(state="complete"), "control", True, False),      # a finished rollout holds nothing
    (holder_record(holder="someone-else"), "laptop", True, True),
])
def test_who_holds_the_rollout(record: pr.RolloutRecord, host: str, alive: bool, live: bool) -> None:
    assert pr.holder_live(record, NOW, host, lambda pid: alive) is live


def test_every_write_first_tests_that_this_run_still_holds_the_record() -> None:
    record = new_record()
    rec = pr.RolloutRecord.of(record)
    changes = pr.write_changes("gpu-operator", rec.progress, "rollout-timeslicing@other/1/x", NOW, "", NOW, "why")
    with pytest.raises(PatchConflict, match="expected 'rollout-timeslicing@other/1/x'"):
        json_patch(record, changes[0].body)


def test_the_rollout_record_is_a_run_record_of_the_rollout() -> None:
    record = new_record()
    rec = pr.RolloutRecord.of(record)
    assert (rec.runbook, rec.state, rec.started) == ("rollout-timeslicing", "in-progress", "2026-01-05T10:00:00Z")
    assert rec.intent.nodes == sorted({n for s in rec.progress.steps for n in s.nodes})
    assert [r.name for r in ClusterState.of({"records": [record]}).interrupted("rollout-timeslicing")] == [pr.RECORD]


def test_holder_identity_names_this_machine_and_the_playbook_process() -> None:
    who = pr.holder_identity(NOW)
    assert who.startswith("rollout-timeslicing@") and "/20260105T100000Z-" in who
    assert who.split("/")[1].isdigit()


# ---- what a step needs -----------------------------------------------------------------------------
def test_each_batch_of_the_widen_play_is_named_by_its_first_host() -> None:
    assert planned().batch_steps == {"gpu-node": "canary", "gpu-node-2": "batch-1", "mig": "batch-2"}
    record = through(new_record(), "canary", "continue")
    assert planned(record).batch_steps == {"gpu-node-2": "batch-1", "mig": "batch-2"}


def test_the_soak_runs_from_the_enable_and_the_hold_interval_from_the_last_evaluation() -> None:
    record = event(event(new_record(soak=600), "started", "batch-1", soak=600), "enabled", "batch-1", soak=600)
    current = progress(record)
    soak = wait(current, "batch-1", "soak", settings(soak=600), NOW + dt.timedelta(seconds=100))
    assert soak == {"until": "2026-01-05T10:10:00Z", "timeout": 510, "interval": 25}
    assert wait(current, "batch-1", "soak", settings(soak=600), NOW + dt.timedelta(hours=1))["timeout"] == 10
    record = event(record, "evaluated", "batch-1", {"result": gates("hold"), "last": False})
    hold = wait(progress(record), "batch-1", "hold", settings(), NOW)
    assert hold == {"until": "2026-01-05T10:00:30Z", "timeout": 40, "interval": 1}


def test_the_gates_read_the_steps_file_per_evaluation_or_prometheus_since_the_enable() -> None:
    hold, continue_ = (str(EXAMPLES / "gates" / f"metrics-{v}.json") for v in ("hold", "continue"))
    files = {"batch-1": [hold, continue_], "default": continue_}
    record = through(new_record(metrics_files=files), "batch-1", "hold", metrics_files=files)
    inputs = gate_inputs(progress(record), "batch-1", 1, settings(metrics_files=files), NOW)
    assert inputs["metrics_file"] == continue_ and inputs["prometheus_url"] is None and inputs["trial_end"] is None
    assert inputs["nodes"] == ["gpu-node-2"] and inputs["last"] is False
    assert gate_inputs(progress(record), "batch-1", 2, settings(metrics_files=files), NOW)["last"] is True
    prometheus = settings(metrics_files={}, prometheus_url="http://prom:9090")
    later = gate_inputs(progress(record), "batch-1", 0, prometheus, NOW + dt.timedelta(minutes=45))
    assert later["metrics_file"] is None and later["prometheus_url"] == "http://prom:9090"
    assert later["window"] == "2700s" and later["trial_end"] == "2026-01-05T10:45:00Z"
    assert gate_inputs(progress(record), "batch-1", 0, prometheus, NOW)["window"] == "60s"  # at least a minute
