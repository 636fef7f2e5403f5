"""Steps about the staged rollout: its plan file and per-step metrics, a real SIGKILL of the rollout
in the middle of a step, and what the rollout record, the plan and the summary say."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pytest_bdd import given, parsers, then, when

from gpushare.k8s.session import Session
from gpushare.polling import wait_for
from tests.steps.cluster_steps import Before, node_state
from tests.steps.fault_steps import start_runbook
from tests.steps.runbook_steps import RunbookRun, run_runbook
from tests.support.ansible import inventory_limit
from tests.support.cluster import REPO, Cluster

RECORD = "gpushare-rollout-timeslicing"


def rollout_record(kube: Cluster) -> dict[str, Any]:
    record = Session(kube.kubeconfig).get("ConfigMap", RECORD, kube.records_namespace)
    assert record is not None, f"no rollout record {kube.records_namespace}/{RECORD}"
    return record


def progress(kube: Cluster) -> dict[str, Any]:
    return json.loads(rollout_record(kube)["data"]["rollout.json"])


def table_rows(datatable: list[list[str]]) -> list[dict[str, str]]:
    header, *rows = datatable
    return [dict(zip(header, row)) for row in rows]


def columns(line: str) -> list[str]:
    """A line of a printed table, cell by cell (cells are separated by two spaces or more)."""
    return re.split(r"\s{2,}", line.strip())


# ---- situations -------------------------------------------------------------------------------------
@given(parsers.parse('the rollout plan "{path}"'), target_fixture="runbook_inputs")
def rollout_plan(kube: Cluster, runbook_inventory: Path, runbook_inputs: dict[str, Any], path: str) -> dict[str, Any]:
    """Every run of the scenario gets the plan's variables (like -e @plan.yml), its canary written
    in this inventory's host names, as the plan's operator writes it."""
    plan = yaml.safe_load((REPO / path).read_text())
    limit = inventory_limit(dataclasses.replace(kube, inventory=runbook_inventory), ",".join(plan["rollout_canary"]))
    return {**runbook_inputs, **plan, "rollout_canary": (limit or "").split(",")}


@given("the rollout leaves the share check to its own feature", target_fixture="runbook_inputs")
def without_share_check(runbook_inputs: dict[str, Any]) -> dict[str, Any]:
    # features/share_check.feature covers the four-pod check; each step here is decided by the gates.
    return {**runbook_inputs, "rollout_share_check": False}


@given(parsers.re(r'the gates of "(?P<step>[^"]+)" read (?P<files>"[^"]+"(?: then "[^"]+")*)$'),
       target_fixture="runbook_inputs")
def gates_read(runbook_inputs: dict[str, Any], step: str, files: str) -> dict[str, Any]:
    """One metrics file per evaluation of the step (the last repeats)."""
    metrics = {**runbook_inputs.get("rollout_metrics_files", {}), step: re.findall(r'"([^"]+)"', files)}
    return {**runbook_inputs, "rollout_metrics_files": metrics}


@given(parsers.parse('the rollout "{command}" has completed'))
def rollout_completed(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                      command: str) -> None:
    done = run_runbook(kube, tmp_path / "completed", command, inventory=runbook_inventory, extravars=runbook_inputs)
    assert done.run.ok, done.describe()
    assert progress(kube)["outcome"] == "complete"


# ---- what the operator does --------------------------------------------------------------------------
@when(parsers.parse('the rollout "{command}" is killed once "{step}" is {state}'))
def rollout_killed(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                   command: str, step: str, state: str) -> None:
    """A real `ansible-playbook` killed with SIGKILL (a lost session) as soon as the record shows the
    step at that stage: here, between two writes of the rollout, no runbook lock held."""
    run = start_runbook(kube, tmp_path / "background", runbook_inventory, runbook_inputs, command)
    session = Session(kube.kubeconfig)

    def reached() -> bool:
        record = session.get("ConfigMap", RECORD, kube.records_namespace)
        states = json.loads(record["data"]["rollout.json"])["states"] if record else {}
        return (states.get(step) or {}).get("state") == state or run.process.poll() is not None

    try:
        wait_for(reached, 300, f"the rollout to have {step} {state}", interval_s=0.02)
    finally:
        ended_by_itself = run.process.poll() is not None
        run.kill()
    assert not ended_by_itself, f"the rollout ended by itself: {run.log.read_text()[-3000:]}"
    assert progress(kube)["states"][step]["state"] == state, "killed too late: the step went on"


# ---- what the rollout did ---------------------------------------------------------------------------
@then(parsers.parse('the rollout record says "{outcome}"'))
def record_says(kube: Cluster, outcome: str) -> None:
    record = rollout_record(kube)
    assert progress(kube)["outcome"] == outcome, progress(kube)
    annotations = record["metadata"]["annotations"]
    state = outcome if outcome in ("complete", "rolled-back") else "in-progress"
    assert annotations["gpushare.io/state"] == state, annotations
    assert ("gpushare.io/finished-at" in annotations) == (state != "in-progress"), annotations


@then(parsers.parse("the rollout ran its steps in order: {steps}"))
def ran_in_order(kube: Cluster, steps: str) -> None:
    """Each step started only after the one before was decided, and every step was decided."""
    names = [s.strip() for s in steps.split(",")]
    current = progress(kube)
    assert [s["name"] for s in current["steps"]] == names
    moments = []
    for name in names:
        state = current["states"][name]
        assert state["state"] == "continued", (name, state)
        moments += [state["started"], state["enabled"], state["evaluations"][-1]["at"]]
    assert moments == sorted(moments), moments


@then("the plan shows the steps")
def plan_shows(runbook_run: RunbookRun, datatable: list[list[str]]) -> None:
    lines = runbook_run.run.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if columns(line)[:3] == ["step", "nodes", "replicas"])
    shown = [columns(line)[:3] for line in lines[start + 2:start + 2 + len(datatable) - 1]]
    assert shown == [[r["step"], r["nodes"], r["replicas"]] for r in table_rows(datatable)], "\n".join(lines[start:])


@then("the summary shows")
def summary_shows(runbook_run: RunbookRun, datatable: list[list[str]]) -> None:
    lines = runbook_run.run.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if columns(line)[:4] == ["step", "nodes", "replicas", "share check"])
    rows = {columns(line)[0]: columns(line) for line in lines[start + 2:] if line and not line.startswith(" ")}
    for row in table_rows(datatable):
        cells = rows.get(row["step"])
        assert cells, f"no row for {row['step']} in the summary:\n" + "\n".join(lines[start:])
        assert cells[4:6] == [row["gates"], row["decision"]], cells


@then("the change record has the gate table of every step")
def change_record_tables(kube: Cluster) -> None:
    text = rollout_record(kube)["data"]["change-record.md"]
    for step in progress(kube)["steps"]:
        section = text.split(f"## {step['name']}: ", 1)[1].split("\n## ", 1)[0]
        assert "| gate | status | reason | threshold |" in section and "Decision: " in section, section
        assert all(f"| {gate} |" in section for gate in ("throughput_per_gpu", "p99_ms", "xid_errors")), section


@then(parsers.parse('node "{node}" is exactly as before'))
def node_as_before(kube: Cluster, before: Before, node: str) -> None:
    wait_for(lambda: node_state(kube, node) == before.nodes[node], 30,
             f"{node} to be as before ({node_state(kube, node)} vs {before.nodes[node]})")


@then(parsers.parse('the output does not say "{text}"'))
def output_does_not_say(runbook_run: RunbookRun, text: str) -> None:
    assert text not in " ".join(runbook_run.run.stdout.split()), runbook_run.run.stdout[-3000:]
