"""`gpushare gate`: exit status, JSON and table output, and bad input on stderr."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import pytest

from gpushare import gates_cli
from gpushare.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gates"
THRESHOLDS = str(EXAMPLES / "thresholds.yaml")


CARD = "GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51"


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
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GATE", "STATUS", "REASON,", "THRESHOLD,", "OBSERVED"]
    xid = lines.index("xid_errors           rollback  1 new Xid error(s) during the trial: check the GPU "
                      "(nvidia-smi -q, kernel log)")
    assert lines[xid + 1:xid + 3] == [" " * 31 + "threshold: <= 0 new", " " * 31 + "observed: baseline=0 trial=1"]
    assert lines[-2:] == [f"source:  metrics {EXAMPLES / 'metrics-rollback.json'}", "verdict: rollback"]


@pytest.mark.parametrize("example", ["continue", "hold", "rollback"])
def test_table_fits_120_columns(capsys, example) -> None:
    gate("--metrics", str(EXAMPLES / f"metrics-{example}.json"))
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 120, "\n".join(line for line in lines if len(line) > 120)
    # Wrapped, not cut: every reason is there whole.
    text = " ".join(" ".join(lines).split())
    gate("--metrics", str(EXAMPLES / f"metrics-{example}.json"), "--format", "json")
    for result in json.loads(capsys.readouterr().out)["gates"]:
        assert result["reason"] in text, result["reason"]


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
        (["--prometheus", "http://p:9090", "--window", "1h", "--uuid", "GPU-1"], "--uuid GPU-1: not a GPU UUID"),
        (["--prometheus", "http://p:9090", "--window", "1h", "--uuid", f'{CARD}",Hostname=~".*'],
         "not a GPU UUID"),
        (["--metrics", "M", "--uuid", CARD], "--uuid only apply with --prometheus"),
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


def unanswered_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_prometheus_that_does_not_answer_holds_every_gate(capsys) -> None:
    url = unanswered_url()
    assert gate("--prometheus", url, "--window", "1h", "--format", "json") == 4
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["verdict"] == "hold"
    assert report["error"].startswith(f"Prometheus at {url} did not answer (")
    assert "check the URL and that Prometheus is running" in report["error"]
    assert {result["status"] for result in report["gates"]} == {"hold"}
    assert {result["reason"] for result in report["gates"]} == {
        "no baseline data: Prometheus did not answer", "no trial data: Prometheus did not answer"}
    trial_end = report["source"]["trial"].split("/")[1]
    assert captured.err == f"querying {url}: trial 1h to {trial_end}, baseline 1w before it\n"  # no error repeated


def test_prometheus_that_does_not_answer_is_reported_once_in_the_table(capsys) -> None:
    url = unanswered_url()
    assert gate("--prometheus", url, "--window", "1h") == 4
    out = capsys.readouterr().out
    assert out.count("Connection refused") == 1 and out.count(f"Prometheus at {url}") == 1
    assert "\nerror:   Prometheus at " in out and out.endswith("\nverdict: hold\n")
    assert max(len(line) for line in out.splitlines()) <= 120


def test_retired_threshold_is_bad_input(tmp_path, capsys) -> None:
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text((EXAMPLES / "thresholds.yaml").read_text() + "queue_max_p99_increase: 0.10\n")
    assert main(["gate", "--metrics", str(EXAMPLES / "metrics-continue.json"), "--thresholds", str(thresholds)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: thresholds: queue_max_p99_increase is no longer used")


def gate_help(capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(["gate", "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_help_explains_every_option(capsys) -> None:
    commands = argparse.ArgumentParser(prog="gpushare").add_subparsers()
    gates_cli.register(commands)
    for action in commands.choices["gate"]._actions:
        assert action.help and action.help.strip(), action.option_strings
    text = " ".join(gate_help(capsys).split())
    for option in ("--metrics", "--prometheus", "--thresholds", "--window", "--baseline-window", "--trial-end",
                   "--node", "--uuid", "--timeout", "--format"):
        assert option in text
    assert "json: {verdict, error, source, gates: [{name, status, observed, threshold, reason}]}" in text
    assert "exit status: 0 continue, 3 rollback, 4 hold" in text
    assert "2 bad input" in text
    assert "examples/gates/thresholds.yaml" in text


def test_help_fits_80_columns(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert max(len(line) for line in gate_help(capsys).splitlines()) <= 80


def test_help_examples_run_as_written(capsys) -> None:
    lines = gate_help(capsys).split("examples:\n", 1)[1].split("\n\n", 1)[0]
    first = lines.replace("\\\n", " ").splitlines()[0].split()
    assert first[:2] == ["gpushare", "gate"]
    repo = EXAMPLES.parents[1]
    assert main([first[1], *(str(repo / arg) if arg.startswith("examples/") else arg for arg in first[2:])]) == 0


def test_readme_shows_the_real_gate_table(capsys, monkeypatch) -> None:
    readme = (EXAMPLES.parents[1] / "README.md").read_text()
    command = "gpushare gate --metrics examples/gates/metrics-rollback.json --thresholds examples/gates/thresholds.yaml"
    shown = readme.split(f"$ {command}\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(EXAMPLES.parents[1])
    assert main(command.split()[1:]) == 3
    assert capsys.readouterr().out == shown
