"""Unit tests of gpushare.release_gates.plan and .report (the gates' inputs, command line, verdict and
what the run does on it) and of the release_gates role's filter plugin, which registers them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpushare.gates.evaluate import evaluate
from gpushare.gates.inputs import load_metrics
from gpushare.gates.report import from_dict, to_json
from gpushare.gates.thresholds import load_thresholds
from gpushare.release_gates import plan as gates_plan
from gpushare.release_gates import report as gates_report
from tests.support.cluster import REPO
from tests.support.filters import load_filters

EXAMPLES = REPO / "examples" / "gates"
OFF = {"metrics_file": None, "prometheus_url": None, "window": "1h", "baseline_window": None, "trial_end": None,
       "nodes": None, "query_timeout": 10, "thresholds_file": None, "enabled": None, "command": ["gpushare"]}


def plan(cwd: str = "/work", run_nodes: list[str] | None = None, **given: Any) -> dict[str, Any]:
    return gates_plan.plan({**OFF, **given}, cwd, run_nodes or ["gpu-node"])


def test_no_source_means_no_gates() -> None:
    gates = plan()
    assert (gates["on"], gates["problems"], gates["argv"]) == (False, [], [])
    assert gates["reason"] == "no metrics source given (release_gates_metrics_file or release_gates_prometheus_url)"
    assert plan(enabled="false", metrics_file="m.json")["reason"] == "release_gates_enabled is false"
    assert gates_report.not_evaluated(gates) == {"evaluated": False, "verdict": "not evaluated", "reason": gates["reason"],
                                            "action": "none", "gates": [], "error": None, "source": {}}


def test_a_metrics_file_relative_to_where_the_operator_runs() -> None:
    gates = plan(metrics_file="examples/gates/m.json", thresholds_file="/etc/slo.yaml")
    assert gates["on"] and gates["problems"] == []
    assert gates["argv"] == gates["dry_argv"] == ["gpushare", "gate", "--format", "json", "--thresholds", "/etc/slo.yaml",
                                                  "--metrics", "/work/examples/gates/m.json"]


def test_prometheus_with_every_option_and_the_run_nodes() -> None:
    gates = plan(run_nodes=["gpu-a", "gpu-b"], prometheus_url="http://prom:9090", thresholds_file="slo.yaml",
                 baseline_window="3d", trial_end="1767225600", query_timeout="20", command="python3 -m gpushare")
    query = ["python3", "-m", "gpushare", "gate", "--format", "json", "--thresholds", "/work/slo.yaml",
             "--prometheus", "http://prom:9090", "--window", "1h", "--baseline-window", "3d", "--trial-end",
             "1767225600", "--node=gpu-a", "--node=gpu-b"]
    assert gates["argv"] == [*query, "--timeout", "20"]
    assert gates["dry_argv"] == [*query, "--timeout", "1"]
    given_nodes = plan(prometheus_url="https://p", thresholds_file="/t", run_nodes=["x"], nodes="a, b")["argv"]
    assert [w for w in given_nodes if w.startswith("--node")] == ["--node=a", "--node=b"]


CARD = "GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51"


def test_cards_scope_the_prometheus_gates_and_a_runbook_names_them_after_its_preflight() -> None:
    given = plan(prometheus_url="http://p:9090", thresholds_file="/t", uuids=[CARD])
    assert f"--uuid={CARD}" in given["argv"] and f"--uuid={CARD}" in given["dry_argv"]
    other = "GPU-9e3c51d0-8a6e-1b7f-4c2d-7f0b1e6d3a92"
    scoped = gates_plan.scoped(given, [other])
    assert [w for w in scoped["argv"] if w.startswith("--uuid")] == [f"--uuid={other}"]
    assert scoped["dry_argv"] == given["dry_argv"]
    unscoped = plan(prometheus_url="http://p:9090", thresholds_file="/t")
    assert gates_plan.scoped(unscoped, None) == unscoped
    from_file = plan(metrics_file="m.json", thresholds_file="/t")
    assert gates_plan.scoped(from_file, [CARD]) == from_file  # a metrics file's values are already chosen


def test_auto_rollback_is_refused_for_another_runbooks_rollback() -> None:
    (problem,) = plan(prometheus_url="http://p:9090", thresholds_file="/t", auto_rollback="true",
                      rollback_playbook="playbooks/rollback-dra-pilot.yml")["problems"]
    assert "on a rollback verdict, run playbooks/rollback-dra-pilot.yml" in problem
    assert problem.endswith("Nothing was changed.")
    assert plan(prometheus_url="http://p:9090", thresholds_file="/t", auto_rollback="true")["problems"] == []


@pytest.mark.parametrize("given, said", [
    ({"metrics_file": "m.json", "prometheus_url": "http://p:9090", "thresholds_file": "t"},
     "Release gates: give ONE source of metrics"),
    ({"enabled": "true", "thresholds_file": "t"}, "Release gates: release_gates_enabled is true but no source"),
    ({"metrics_file": "m.json"}, "Release gates: release_gates_thresholds_file is required when the gates run"),
    ({"prometheus_url": "prom:9090", "thresholds_file": "t"},
     "Release gates: release_gates_prometheus_url 'prom:9090' is not an http(s):// URL"),
])
def test_bad_inputs(given: dict[str, Any], said: str) -> None:
    (problem,) = plan(**given)["problems"]
    assert problem.startswith(said) and problem.endswith("Nothing was changed."), problem
    assert plan(**given)["argv"] == []


def test_refusal_of_the_gate_command() -> None:
    argv = ["gpushare", "gate"]
    assert gates_report.refusal({"rc": 3, "stdout": "{}"}, argv, True) == ""
    bad = {"rc": 2, "stdout": "", "stderr": "querying ...\nerror: cannot read the metrics file /m.json: No such file"}
    assert gates_report.refusal(bad, argv, True) == ("Release gates: error: cannot read the metrics file /m.json: No such file "
                                               "(from `gpushare gate`). Nothing was changed.")
    assert gates_report.refusal(bad, argv, False).endswith("The share check ran; evaluate again with the same command.")
    missing = {"rc": 2, "msg": "[Errno 2] No such file or directory: b'gpushare'", "stdout": "", "stderr": ""}
    assert gates_report.refusal(missing, argv, True).startswith("Release gates: could not run `gpushare gate` ([Errno 2]")


def report(metrics: str) -> str:
    return to_json(evaluate(load_metrics(EXAMPLES / metrics), load_thresholds(EXAMPLES / "thresholds.yaml")))


def test_result_keeps_the_gate_report_and_prints_it_with_its_own_table() -> None:
    gates = plan(metrics_file=str(EXAMPLES / "metrics-rollback.json"), thresholds_file=str(EXAMPLES / "thresholds.yaml"))
    found = gates_report.result({"rc": 3, "stdout": report("metrics-rollback.json")}, gates)
    assert (found["evaluated"], found["verdict"], found["exit_code"], found["action"]) == (True, "rollback", 3, "none")
    assert found["command"] == " ".join(gates["argv"])
    expected = evaluate(load_metrics(EXAMPLES / "metrics-rollback.json"), load_thresholds(EXAMPLES / "thresholds.yaml"))
    assert from_dict(found) == expected  # the gate command's report, read back from the runbook's result


@pytest.mark.parametrize("metrics, auto, hold, action, failure", [
    ("metrics-continue.json", False, False, "none", ""),
    ("metrics-hold.json", False, False, "held", ""),
    ("metrics-hold.json", False, True, "failed the run", "Release gates say hold (throughput_per_gpu, p99_ms, queue_time_s) "
                                                         "and release_gates_fail_on_hold is true"),
    ("metrics-rollback.json", False, False, "none", "Release gates say rollback (oom_kills, restarts, correlated_failures, memory_headroom, "
                                                    "xid_errors, queue_time_s): roll the trial back with "),
    ("metrics-rollback.json", "true", False, "rollback started", ""),
])
def test_outcome(metrics: str, auto: Any, hold: bool, action: str, failure: str) -> None:
    found = {**json.loads(report(metrics)), "evaluated": True}
    decided = gates_report.outcome(found, auto, hold, ["trial", "trial-2"])
    assert decided["action"] == action
    assert decided["failure"].startswith(failure) and bool(decided["failure"]) == bool(failure)
    if metrics == "metrics-rollback.json" and not auto:
        assert decided["failure"].endswith("ansible-playbook playbooks/rollback-timeslicing.yml -l trial,trial-2 (or "
                                           "re-run with -e release_gates_auto_rollback=true).")
    assert gates_report.outcome(gates_report.not_evaluated(plan()), True, True, ["x"]) == {"action": "none", "failure": ""}
    if metrics == "metrics-rollback.json" and not auto:
        dra = gates_report.outcome(found, auto, hold, ["pilot"], "playbooks/rollback-dra-pilot.yml")["failure"]
        assert dra.endswith("ansible-playbook playbooks/rollback-dra-pilot.yml -l pilot.")


F = load_filters("plugins/filter/release_gates.py")


def test_the_role_registers_them(tmp_path: Path) -> None:
    assert sorted(F) == ["release_gates_not_evaluated", "release_gates_outcome", "release_gates_plan",
                         "release_gates_refusal", "release_gates_result", "release_gates_scoped", "release_gates_table"]
    gates = F["release_gates_plan"]({**OFF, "metrics_file": "m.json", "thresholds_file": "t.yaml"}, str(tmp_path), ["n"])
    assert gates["argv"][-1] == str(tmp_path / "m.json")


def test_the_table_a_runbook_prints_is_the_gate_commands_own() -> None:
    uuid = "GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51"
    gate = {"name": "dcgm_uuids", "status": "hold", "reason": f"no DCGM series for {uuid} (in the trial)",
            "threshold": "DCGM series for every --uuid", "observed": {"asked": [uuid]}}
    lines = gates_report.table({"evaluated": True, "verdict": "hold", "error": None, "gates": [gate],
                                "source": {"uuids": [uuid]}, "action": "none", "command": "gpushare gate"})
    text = "\n".join(lines)
    assert lines[0].startswith("GATE") and f"no DCGM series for {uuid}" in text, text
    assert f"uuids [{uuid}]" in text and lines[-1] == "verdict: hold", text
    assert gates_report.table({"evaluated": False, "verdict": "not evaluated", "reason": "no metrics given"}) == [
        "Release gates: not evaluated (no metrics given)"]
