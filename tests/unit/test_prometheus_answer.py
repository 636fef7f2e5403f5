"""Prometheus answers checked for shape, the client's failures told apart, and the DCGM node label in
both spellings: the pieces the baseline and the gates share. A wrong-shaped answer is missing data naming its query (the gates
hold, the baseline exits 4), never a traceback or a number read from the wrong field."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpushare.cli import main
from gpushare.dcgm_labels import host_of, on_hosts
from gpushare.prometheus import client as prometheus
from gpushare.prometheus.answer import MalformedAnswer, PrometheusError, read

THRESHOLDS = Path(__file__).resolve().parents[2] / "examples" / "gates" / "thresholds.yaml"


def test_query_results_of_every_type() -> None:
    vector = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"UUID": "GPU-a"}, "value": [1704672000, "12.5"]}, {"metric": {}, "value": [1704672000.5, "NaN"]}]}}
    kind, series = read(vector)
    assert kind == "vector" and series[0] == ({"UUID": "GPU-a"}, [(1704672000.0, 12.5)])
    assert str(series[1][1][0][1]) == "nan"
    matrix = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"gpu": "0"}, "values": [[1, "1"], [2, "+Inf"]]}]}}
    assert read(matrix) == ("matrix", [({"gpu": "0"}, [(1.0, 1.0), (2.0, float("inf"))])])
    assert read({"status": "success", "data": {"resultType": "scalar", "result": [3, "4"]}}) == ("scalar", [({}, [(3.0, 4.0)])])
    assert read({"status": "success", "data": {"resultType": "string", "result": [3, "x"]}}) == ("string", [])
    with pytest.raises(PrometheusError, match="^parse error$"):
        read({"status": "error", "errorType": "bad_data", "error": "parse error"})


@pytest.mark.parametrize(("body", "message"), [
    ({"status": "pending"}, "status is 'pending', neither success nor error"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": "x"}]}},
     "result[0].values is 'x', not a list of samples"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[True, "1"]]}]}},
     "result[0].values[0] is [True, '1']"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": 1}, "value": [1, "1"]}]}},
     "not an object with a metric of string labels"),
    ({"status": "success", "data": {"resultType": "histogram", "result": []}}, "resultType 'histogram'"),
])
def test_malformed_answers(body, message) -> None:
    with pytest.raises(MalformedAnswer) as raised:
        read(body)
    assert message in str(raised.value)


def test_either_spelling_of_the_node_label() -> None:
    assert (host_of({"Hostname": "a"}), host_of({"hostname": "b"}), host_of({"gpu": "0"})) == ("a", "b", "")
    assert on_hosts("max_over_time(X{<node>}[1h])", "a|b") == (
        '(max_over_time(X{Hostname=~"a|b"}[1h]) or max_over_time(X{hostname=~"a|b"}[1h]))')
    with pytest.raises(ValueError, match="has no <node> in a selector"):
        on_hosts("max_over_time(X[1h])", ".*")


@contextmanager
def answering(body: bytes, status: int = 200) -> Iterator[str]:
    """A loopback server that answers every request with `body` (JSON) and HTTP `status`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


WRONG_SHAPE = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                        "result": [{"metric": {}, "value": "12"}]}}).encode()


def test_a_wrong_shaped_answer_holds_every_gate(capsys) -> None:
    with answering(WRONG_SHAPE) as url:
        code = main(["gate", "--prometheus", url, "--window", "1h", "--thresholds", str(THRESHOLDS), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["verdict"], {gate["status"] for gate in report["gates"]}) == (4, "hold", {"hold"})
    throughput = next(gate for gate in report["gates"] if gate["name"] == "throughput_per_gpu")
    assert throughput["reason"] == (
        "no baseline data: queries.throughput_per_gpu: the answer is not a Prometheus query result (result[0].value "
        "is '12', not a [time, \"value\"] sample); check that the URL is Prometheus")


def test_a_wrong_shaped_answer_stops_the_baseline_with_exit_4(capsys) -> None:
    with answering(b'{"status": "success"}') as url:
        code = main(["baseline", "--prometheus", url])
    captured = capsys.readouterr()
    assert (code, captured.out) == (4, "")
    assert ("the answer of " + url + " is not a Prometheus query result (data is None, not an object with resultType "
            "and result); check that --prometheus is Prometheus's URL") in captured.err
    assert "error: queries." in captured.err


@pytest.mark.parametrize(
    ("status", "body", "failure", "refused"),
    [
        (400, b'{"status": "error", "error": "parse error"}', prometheus.HttpFailure, True),
        (422, b'{"status": "error", "error": "bad range"}', prometheus.HttpFailure, True),
        (503, b'{"status": "error", "error": "overloaded"}', prometheus.HttpFailure, False),
        (200, b"<html>a login page</html>", prometheus.NotJson, None),
        (200, b'{"status": "error", "error": "bad_data"}', prometheus.Reported, None),
        (200, b'{"status": "success"}', prometheus.Malformed, None),
    ],
    ids=["400", "422", "503", "not-json", "error-status", "no-data"],
)
def test_the_client_tells_failures_apart(status, body, failure, refused) -> None:
    with answering(body, status) as url, pytest.raises(failure) as raised:
        prometheus.Client(url, timeout_s=5).instant("up", 1704672000)
    if refused is not None:
        assert raised.value.refused is refused
        assert json.loads(body)["error"] in raised.value.detail


def test_the_client_says_when_nothing_answers() -> None:
    with answering(b"{}") as url:
        pass  # the server is gone: its port refuses connections now
    with pytest.raises(prometheus.Unanswered):
        prometheus.Client(url, timeout_s=5).range("up", 1704668400, 1704672000, 3600)
