"""`gpushare gate`: exit status, JSON and table output, and bad input on stderr."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from gpushare.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gates"
THRESHOLDS = str(EXAMPLES / "thresholds.yaml")


def gate(*args: str) -> int:
    return main(["gate", "--thresholds", THRESHOLDS, *args])


@pytest.mark.parametrize(("verdict", "exit_code"), [("continue", 0), ("rollback", 3), ("hold", 4)])
def test_json_verdict_and_exit_status(capsys, verdict, exit_code) -> None:
    assert gate("--metrics", str(EXAMPLES / f"metrics-{verdict}.json"), "--format", "json") == exit_code
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == verdict
    assert report["source"] == {"metrics": str(EXAMPLES / f"metrics-{verdict}.json")}
    for result in report["gates"]:
        assert set(result) == {"name", "status", "observed", "threshold", "reason"}
    assert verdict in {result["status"] for result in report["gates"]}


def test_table_is_the_default(capsys) -> None:
    assert gate("--metrics", str(EXAMPLES / "metrics-rollback.json")) == 3
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["GATE", "STATUS", "OBSERVED", "THRESHOLD", "REASON"]
    assert "xid_errors           rollback" in out
    assert "verdict: rollback" in out.splitlines()[-1]


def write_metrics(tmp_path: Path, change: dict) -> str:
    document = json.loads((EXAMPLES / "metrics-continue.json").read_text())
    document["trial"].update(change)
    document["trial"] = {key: value for key, value in document["trial"].items() if value != "<drop>"}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"restarts": "<drop>"}, "missing key(s) trial.restarts"),
        ({"oom_kills": -2}, "trial.oom_kills is -2; it cannot be negative"),
        ({"p99_ms": "high"}, 'trial.p99_ms is "high"; expected a finite number'),
        ({"xid_errors": [0]}, "trial.xid_errors is [0]; expected a finite number"),
    ],
    ids=["missing-key", "negative-count", "non-number", "wrong-type"],
)
def test_bad_metrics_exit_2(tmp_path, capsys, change, message) -> None:
    assert gate("--metrics", write_metrics(tmp_path, change)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: metrics: {message}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metrics", "/nonexistent/m.json"], "cannot read the metrics file /nonexistent/m.json"),
        (["--metrics", "M", "--window", "1h"], "--window only apply with --prometheus"),
        (["--prometheus", "http://p:9090"], "--prometheus needs --window"),
        (["--prometheus", "http://p:9090", "--window", "1 hour"], "--window: '1 hour' is not a duration"),
        (["--prometheus", "http://p:9090", "--window", "1h", "--baseline-window", "x"], "--baseline-window: 'x'"),
        (["--prometheus", "http://p:9090", "--window", "1h", "--trial-end", "today"], "--trial-end: 'today'"),
        (["--prometheus", "http://p:9090", "--window", "1h", "--node", "GPU_1"], "--node GPU_1: not a Kubernetes"),
        (["--prometheus", "http://p:9090", "--window", "2m"], "shorter than latency_window 5m"),
        (["--prometheus", "http://p:9090", "--window", "1h", "--timeout", "0"], "--timeout 0.0"),
    ],
)
def test_bad_options_exit_2(capsys, args, message) -> None:
    assert gate(*args) == 2
    assert message in capsys.readouterr().err


def test_unreadable_thresholds_exit_2(tmp_path, capsys) -> None:
    assert main(["gate", "--metrics", str(EXAMPLES / "metrics-continue.json"),
                 "--thresholds", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the thresholds file" in capsys.readouterr().err


@pytest.mark.parametrize("args", [[], ["--metrics", "m.json", "--prometheus", "http://p"]])
def test_exactly_one_source_is_required(capsys, args) -> None:
    with pytest.raises(SystemExit) as exit_:
        gate(*args)
    assert exit_.value.code == 2
    assert "--metrics" in capsys.readouterr().err


def test_prometheus_that_does_not_answer_holds_every_gate(capsys) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    assert gate("--prometheus", url, "--window", "1h", "--format", "json") == 4
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert {result["status"] for result in report["gates"]} == {"hold"}
    assert all(f"Prometheus at {url} did not answer" in result["reason"] for result in report["gates"])
    assert f"querying {url}: trial 1h" in captured.err
