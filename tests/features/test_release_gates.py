"""Steps for features/release_gates.feature: `gpushare gate` against the gate-case Prometheus, and
on metrics files written from the operator's numbers with the shipped thresholds."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pytest_bdd import given, parsers, scenarios, then, when

from gpushare.cli import main
from tests.prometheus_fixture import THRESHOLDS, TRIAL_END, serve_gate_cases

scenarios("release_gates.feature")

SHIPPED_THRESHOLDS = Path(__file__).resolve().parents[2] / "examples" / "gates" / "thresholds.yaml"


@dataclass(frozen=True)
class GateRun:
    exit_code: int
    report: dict


@pytest.fixture(scope="module")
def gate_cases_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_gate_cases(tmp_path_factory) as url:
        yield url


@given("Prometheus holds a week of whole-card baseline and a one-hour sharing trial per node",
       target_fixture="prometheus_url")
def a_prometheus_with_gate_cases(gate_cases_url: str) -> str:
    return gate_cases_url


@given("the operator's SLOs: 10% more work per card, P99 within 500 ms, rollback after 3 windows",
       target_fixture="thresholds_path")
def operator_thresholds(tmp_path) -> str:
    assert (THRESHOLDS["throughput_min_gain"], THRESHOLDS["p99_slo_ms"], THRESHOLDS["p99_breach_windows"]) == (
        0.10, 500, 3)
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.safe_dump(THRESHOLDS))
    return str(path)


@when(parsers.parse("the operator evaluates the release gates for node {node} while Prometheus is {state}"),
      target_fixture="gate_run")
def evaluate_gates(capsys, prometheus_url: str, thresholds_path: str, node: str, state: str) -> GateRun:
    url = prometheus_url if state == "up" else _unanswered_url()
    code = main(["gate", "--prometheus", url, "--window", "1h", "--trial-end", str(TRIAL_END),
                 "--node", node, "--thresholds", thresholds_path, "--format", "json"])
    return GateRun(code, json.loads(capsys.readouterr().out))


@given(parsers.parse("the shipped thresholds with a P99 SLO of {slo:g} ms"), target_fixture="thresholds_path")
def shipped_thresholds(tmp_path, slo: float) -> str:
    document = yaml.safe_load(SHIPPED_THRESHOLDS.read_text())
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.safe_dump({**document, "p99_slo_ms": slo}))
    return str(path)


@given(parsers.parse("a whole-card baseline of {throughput:g} requests/s per GPU, P99 {p99:g} ms and {queue:g} s "
                     "queue time"), target_fixture="baseline")
def whole_card_baseline(throughput: float, p99: float, queue: float) -> dict:
    return {"throughput_per_gpu": throughput, "p99_ms": p99, "queue_time_s": queue,
            "oom_kills": 0, "restarts": 0, "xid_errors": 0}


@when(parsers.parse("the operator evaluates a trial of {throughput:g} requests/s per GPU with {queue:g} s queue time "
                    "and P99 windows of {windows} ms"), target_fixture="gate_run")
def evaluate_trial(capsys, tmp_path, thresholds_path: str, baseline: dict, throughput: float, queue: float,
                   windows: str) -> GateRun:
    trial = {**baseline, "throughput_per_gpu": throughput, "queue_time_s": queue,
             "p99_ms": [float(value) for value in windows.split(",")], "correlated_failures": 0}
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"baseline": baseline, "trial": trial}))
    code = main(["gate", "--metrics", str(metrics), "--thresholds", thresholds_path, "--format", "json"])
    return GateRun(code, json.loads(capsys.readouterr().out))


@then(parsers.parse("the verdict is {verdict} and the command exits with {exit_code:d}"))
def verdict_is(gate_run: GateRun, verdict: str, exit_code: int) -> None:
    assert (gate_run.report["verdict"], gate_run.exit_code) == (verdict, exit_code), gate_run.report


@then(parsers.parse('the {gate} gate says {status} because "{reason}"'))
def gate_says(gate_run: GateRun, gate: str, status: str, reason: str) -> None:
    result = next(result for result in gate_run.report["gates"] if result["name"] == gate)
    assert result["status"] == status, result
    assert reason in result["reason"], result


def _unanswered_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"
