"""The release gates against a real Prometheus: one node per gate case, queried through the CLI."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpushare.cli import main
from tests.prometheus_fixture import CASES, THRESHOLDS, TRIAL_END, card, node, prometheus_server, serve_gate_cases

pytestmark = pytest.mark.prometheus

GATES = ("throughput_per_gpu", "p99_ms", "oom_kills", "restarts", "correlated_failures", "memory_headroom",
         "xid_errors", "queue_time_s")
NODE_GATES = ("dcgm_nodes", *GATES)  # with --node
# case -> (gates that do not continue, verdict); every other gate must continue.
EXPECTED: dict[str, tuple[dict[str, str], str]] = {
    "continue": ({}, "continue"),
    "no-gain": ({"throughput_per_gpu": "rollback"}, "rollback"),
    "small-gain": ({"throughput_per_gpu": "hold"}, "hold"),
    "p99-breach": ({"p99_ms": "rollback"}, "rollback"),
    "p99-blip": ({"p99_ms": "hold"}, "hold"),
    "oom": ({"oom_kills": "rollback", "restarts": "rollback"}, "rollback"),
    "restart": ({"restarts": "rollback"}, "rollback"),
    "correlated": ({"restarts": "rollback", "correlated_failures": "rollback"}, "rollback"),
    "correlated-two-cards": ({"restarts": "rollback"}, "rollback"),
    "correlated-unmapped": ({"restarts": "rollback", "correlated_failures": "rollback"}, "rollback"),
    "xid": ({"xid_errors": "rollback"}, "rollback"),
    "queue-flat": ({"queue_time_s": "rollback"}, "rollback"),
    "latency-rise": ({}, "continue"),
    "jitter": ({"queue_time_s": "rollback"}, "rollback"),
    "near-slo": ({"queue_time_s": "rollback"}, "rollback"),
    "no-latency": ({"p99_ms": "hold", "queue_time_s": "hold"}, "hold"),
    "no-queue": ({}, "continue"),
    "hostname": ({}, "continue"),
    "no-xid": ({"xid_errors": "hold"}, "hold"),
    "latency-gaps": ({"p99_ms": "hold"}, "hold"),
    "memory-full": ({"memory_headroom": "rollback"}, "rollback"),
}
EXIT_CODES = {"continue": 0, "rollback": 3, "hold": 4}


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_gate_cases(tmp_path_factory) as url:
        yield url


def thresholds_file(directory: Path, **extra: object) -> str:
    path = directory / "thresholds.yaml"
    path.write_text(yaml.safe_dump({**THRESHOLDS, **extra}))
    return str(path)


def run_gate(capsys: pytest.CaptureFixture[str], url: str, thresholds: str, *args: str) -> tuple[int, dict]:
    code = main(["gate", "--prometheus", url, "--window", "1h", "--trial-end", str(TRIAL_END),
                 "--thresholds", thresholds, "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def statuses(report: dict) -> dict[str, str]:
    return {result["name"]: result["status"] for result in report["gates"]}


def gate(report: dict, name: str) -> dict:
    return next(result for result in report["gates"] if result["name"] == name)


def test_every_case_is_tested() -> None:
    assert set(EXPECTED) == set(CASES)


@pytest.mark.parametrize("case", EXPECTED)
def test_gate_case(prometheus, tmp_path, capsys, case) -> None:
    failing, verdict = EXPECTED[case]
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node(case))
    assert statuses(report) == {name: failing.get(name, "continue") for name in NODE_GATES}
    assert (report["verdict"], code) == (verdict, EXIT_CODES[verdict])


def test_values_come_from_the_queries(prometheus, tmp_path, capsys) -> None:
    _, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("continue"))
    throughput = gate(report, "throughput_per_gpu")["observed"]
    assert (throughput["baseline"], throughput["trial"]) == (pytest.approx(10.0), pytest.approx(12.0))
    assert gate(report, "p99_ms")["observed"]["trial_windows"] == [pytest.approx(299.0)] * 12
    queue = gate(report, "queue_time_s")["observed"]
    assert (queue["baseline"], queue["trial"], queue["baseline_p99_ms"]) == pytest.approx((30.0, 10.0, 399.0))
    # The baseline week's crash and OOM kill (two restarts) and one Xid, scaled to the trial hour;
    # the week-old Xid code still held by the gauge is not new in the trial.
    for name, week in (("restarts", 2), ("oom_kills", 1), ("xid_errors", 1)):
        observed = gate(report, name)["observed"]
        assert (observed["baseline"], observed["trial"]) == (pytest.approx(week / 168, rel=0.05), 0.0)
    assert report["source"]["trial"] == "2024-01-07T23:00:00Z/2024-01-08T00:00:00Z"
    # Every card's peak against its memory (used + free + reserved): 61000 of 81920 MiB.
    memory = gate(report, "memory_headroom")["observed"]
    assert (memory["trial_peak_pct"], memory["ceiling_pct"]) == (pytest.approx(100 * 61000 / 81920), 80)
    assert gate(report, "correlated_failures")["observed"]["scope"] == "node"
    assert gate(report, "dcgm_nodes")["observed"] == {
        "asked": [node("continue")], "trial": [node("continue")], "baseline": [node("continue")]}


@pytest.mark.parametrize(("case", "scope", "trial", "reason"), [
    ("correlated", "card", 1.0, "failures correlated on the same card: 1"),
    ("correlated-two-cards", "card", 0.0, "no failures correlated on one card"),
    ("correlated-unmapped", "node", 1.0, "failures correlated on the same node: 1 (the exporter does not map shared "
                                         "pods to cards"),
])
def test_correlated_failures_per_card_where_the_exporter_maps_shares(prometheus, tmp_path, capsys, case, scope,
                                                                    trial, reason) -> None:
    """Two failed pods: on one card, on two cards of one node (pods mapped per card by the exporter's
    vgpu series), and on two cards of a node whose exporter maps no shares (judged per node)."""
    _, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node(case))
    correlated = gate(report, "correlated_failures")
    assert (correlated["observed"]["scope"], correlated["observed"]["trial"]) == (scope, trial)
    assert correlated["reason"].startswith(reason)


def test_no_queue_on_either_side_continues(prometheus, tmp_path, capsys) -> None:
    """Twice the work per GPU, P99 well within the SLO, nothing waiting before or during: continue."""
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("no-queue"))
    assert (code, report["verdict"]) == (0, "continue")
    assert gate(report, "throughput_per_gpu")["observed"]["gain"] == pytest.approx(1.0)
    assert gate(report, "queue_time_s")["reason"] == (
        "no queue to shorten: 0 s -> 0 s, at most 0.01 s on both sides (latency is the p99_ms gate's)")


def test_both_spellings_of_the_node_label(prometheus, tmp_path, capsys) -> None:
    """`hostname` (dcgm-exporter since d5e5f51) and `Hostname` nodes, evaluated apart and together."""
    _, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("hostname"))
    assert gate(report, "throughput_per_gpu")["observed"]["trial"] == pytest.approx(12.0)
    assert gate(report, "xid_errors")["observed"] == {"baseline": pytest.approx(1 / 168, rel=0.05), "trial": 0.0}
    code, both = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("hostname"),
                          "--node", node("continue"))
    assert (code, gate(both, "dcgm_nodes")["status"]) == (0, "continue")
    assert gate(both, "throughput_per_gpu")["observed"]["trial"] == pytest.approx(12.0)  # 48 req/s on 4 GPUs


def test_no_xid_series_holds_unless_xid_is_not_collected(prometheus, tmp_path, capsys) -> None:
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("no-xid"))
    assert (code, gate(report, "xid_errors")["status"]) == (4, "hold")
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path, xid_required=False), "--node", node("no-xid"))
    assert (code, report["verdict"]) == (0, "continue")
    assert gate(report, "xid_errors")["reason"].startswith(
        "not judged: the thresholds say Xid errors are not collected (xid_required: false)")


def test_a_node_without_dcgm_series_holds(prometheus, tmp_path, capsys) -> None:
    """A --node without series would drop out of every sum: the gates hold (exit 4) and name it."""
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("continue"),
                            "--node", "gpu-elsewhere")
    assert (code, report["verdict"], gate(report, "dcgm_nodes")["status"]) == (4, "hold", "hold")
    assert gate(report, "dcgm_nodes")["reason"].startswith(
        "no DCGM series for gpu-elsewhere (in the trial and the baseline) (Hostname / hostname label)")


def test_a_uuid_scopes_the_dcgm_gates_to_that_card(prometheus, tmp_path, capsys) -> None:
    """The xid case's new Xid is on GPU 1 only: scoped to GPU 1 the gates roll back, to GPU 0 they continue,
    and throughput is per the one card counted."""
    thresholds = thresholds_file(tmp_path)
    code, on_one = run_gate(capsys, prometheus, thresholds, "--node", node("xid"), "--uuid", card("xid", 1))
    assert (code, gate(on_one, "xid_errors")["status"]) == (3, "rollback")
    assert on_one["source"]["uuids"] == [card("xid", 1)]
    code, on_zero = run_gate(capsys, prometheus, thresholds, "--node", node("xid"), "--uuid", card("xid", 0))
    assert (code, on_zero["verdict"], gate(on_zero, "xid_errors")["status"]) == (0, "continue", "continue")
    _, both = run_gate(capsys, prometheus, thresholds, "--node", node("xid"))
    per_gpu = "throughput_per_gpu"
    assert gate(on_zero, per_gpu)["observed"]["trial"] == pytest.approx(2 * gate(both, per_gpu)["observed"]["trial"])


def test_a_card_without_dcgm_series_holds(prometheus, tmp_path, capsys) -> None:
    """A well-formed UUID of no card of the node: its gates have no data and hold, never continue."""
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("continue"),
                            "--uuid", card("xid", 0))
    assert (code, report["verdict"]) == (4, "hold")
    assert statuses(report)["dcgm_nodes"] == statuses(report)["throughput_per_gpu"] == "hold"


def test_latency_windows_without_data_hold(prometheus, tmp_path, capsys) -> None:
    _, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("latency-gaps"))
    p99 = gate(report, "p99_ms")
    assert p99["observed"]["trial_windows"] == [None] * 9 + [pytest.approx(299.0)] * 3
    assert p99["reason"] == ("P99 has data in only 3 of 12 windows (25%, min_window_coverage 90%): the trial's "
                             "latency is not covered")


def test_several_nodes_are_evaluated_together(prometheus, tmp_path, capsys) -> None:
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path),
                            "--node", node("continue"), "--node", node("xid"))
    assert (code, gate(report, "xid_errors")["observed"]["trial"]) == (3, 1.0)
    assert gate(report, "dcgm_nodes")["status"] == "continue"
    assert gate(report, "throughput_per_gpu")["observed"]["trial"] == pytest.approx(12.0)  # 48 req/s on 4 GPUs


def test_no_data_in_the_window_holds_every_gate(prometheus, tmp_path, capsys) -> None:
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node("continue"),
                            "--trial-end", "2020-01-01T00:00:00Z")
    assert (code, set(statuses(report).values())) == (4, {"hold"})
    assert "queries.restarts returned no series" in gate(report, "restarts")["reason"]


def test_queries_are_overridable(prometheus, tmp_path, capsys) -> None:
    queries = {
        "throughput_per_gpu": "sum(rate(workload_requests_total[$window]) $on_nodes) / 4",
        "p99_ms": "histogram_quantile(0.99, rate(workload_request_duration_seconds_bucket[$window]) $on_nodes)",
        "restarts": "sum(rate(",
    }
    code, report = run_gate(capsys, prometheus, thresholds_file(tmp_path, queries=queries),
                            "--node", node("continue"))
    assert gate(report, "throughput_per_gpu")["observed"]["trial"] == pytest.approx(6.0)
    assert "returned 4 series; aggregate it to one" in gate(report, "p99_ms")["reason"]
    assert "queries.restarts: Prometheus answered HTTP 400" in gate(report, "restarts")["reason"]
    assert (code, statuses(report)["p99_ms"], statuses(report)["restarts"]) == (4, "hold", "hold")


@pytest.mark.parametrize(
    ("case", "trial_p99", "used", "spread"),
    [("latency-rise", 449.5, 0.5, 0.0), ("jitter", 449.25, 0.4975, 0.4975), ("near-slo", 499.5, 0.995, 0.0)],
)
def test_jitter_is_judged_against_the_headroom(prometheus, tmp_path, capsys, case, trial_p99, used, spread) -> None:
    _, report = run_gate(capsys, prometheus, thresholds_file(tmp_path), "--node", node(case))
    observed = gate(report, "queue_time_s")["observed"]
    assert (observed["baseline_p99_ms"], observed["trial_p99_ms"]) == pytest.approx((399.0, trial_p99))
    assert (observed["headroom_used"], observed["p99_spread"]) == pytest.approx((used, spread), abs=1e-3)


def test_a_stopped_prometheus_is_reported_once_and_holds(tmp_path, capsys) -> None:
    """A real Prometheus, stopped: one message with the URL and the error, every gate holds, exit 4."""
    with prometheus_server(tmp_path / "empty-tsdb", tmp_path) as url:
        pass
    code = main(["gate", "--prometheus", url, "--window", "1h", "--trial-end", str(TRIAL_END),
                 "--thresholds", thresholds_file(tmp_path)])
    captured = capsys.readouterr()
    assert code == 4 and captured.out.endswith("\nverdict: hold\n")
    assert captured.out.count(f"Prometheus at {url} did not answer") == 1
    assert captured.out.count("Connection refused") == 1 and "Connection refused" not in captured.err
    rows = [line.split(None, 2) for line in captured.out.splitlines() if line.split()[:1] and line.split()[0] in GATES]
    assert [name for name, _, _ in rows] == list(GATES)
    assert all(status == "hold" and reason.endswith("data: Prometheus did not answer") for _, status, reason in rows)


def test_a_prometheus_that_never_answers_times_out_once_and_holds(tmp_path, capsys) -> None:
    """A port that accepts connections but never answers (a hung server): one timeout, not one per query."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        code, report = run_gate(capsys, url, thresholds_file(tmp_path), "--timeout", "1")
    assert (code, report["verdict"]) == (4, "hold")
    assert report["error"].startswith(f"Prometheus at {url} did not answer (timed out)")
    assert {result["status"] for result in report["gates"]} == {"hold"}
