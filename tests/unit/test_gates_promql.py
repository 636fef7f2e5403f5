"""Query rendering, Prometheus answers and the collector's time plan, without a server."""

from __future__ import annotations

import re
import socket

import pytest

from gpushare.gates.model import GateInputError, Thresholds
from gpushare.gates.prometheus import PrometheusClient, QueryError, QueryPlan, Unreachable, collect, query_error, single_value
from gpushare.gates.queries import DEFAULT_QUERIES, GPU_UUID, render
from gpushare.prometheus import InputError
from gpushare.prometheus import client as prometheus
from gpushare.prometheus.timespec import format_duration, parse_duration, parse_time

THRESHOLDS = Thresholds(throughput_min_gain=0.1, p99_slo_ms=500, p99_breach_windows=3)
END = 1704672000.0


def _single_value(body: object) -> float | None:
    """The gates' reading of one decoded answer, as PrometheusClient.value reads it."""
    try:
        answer = prometheus.result(body)
    except prometheus.QueryFailure as err:
        raise query_error(err, "http://prometheus.test") from None
    return single_value(*answer)


class RecordingClient:
    """Answers every query with `answer(query, at)` (series: `nodes`, each as a Hostname series)
    and records what was asked."""

    url = "http://prometheus.test"
    unreachable: str | None = None

    def __init__(self, answer, nodes: tuple[str, ...] = ()) -> None:
        self.answer, self.nodes = answer, nodes
        self.calls: list[tuple[str, float]] = []

    def value(self, query: str, at: float) -> float | None:
        self.calls.append((query, at))
        return self.answer(query, at)

    def series(self, query: str, at: float) -> list:
        self.calls.append((query, at))
        return [({"Hostname": node}, [(at, 1.0)]) for node in self.nodes]


def _vector(*samples: list) -> dict:
    result = [{"metric": {}, "value": sample} for sample in samples]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_render_without_nodes_selects_everything() -> None:
    query = render(DEFAULT_QUERIES["xid_errors"], "1h", [])
    assert 'Hostname=~".*"' in query and "[1h]" in query and "$" not in query


def test_render_with_nodes_joins_pods_on_those_nodes() -> None:
    query = render(DEFAULT_QUERIES["restarts"], "5m", ["gpu-a", "gpu.b"])
    assert query == (
        "sum(increase(kube_pod_container_status_restarts_total[5m]) * on (namespace, pod) group_left () "
        'max by (namespace, pod) (max_over_time(kube_pod_info{node=~"gpu-a|gpu\\\\.b"}[5m])))'
    )


CARDS = ["GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51", "GPU-9e3c51d0-8a6e-1b7f-4c2d-7f0b1e6d3a92"]


def test_render_with_uuids_scopes_every_dcgm_selector_to_those_cards() -> None:
    query = render(DEFAULT_QUERIES["xid_errors"], "1h", ["gpu-a"], CARDS)
    matcher = f'UUID=~"{CARDS[0]}|{CARDS[1]}"'
    selectors = re.findall(r"DCGM_FI_DEV_XID_ERRORS\{([^}]*)\}", query)
    assert len(selectors) == 4  # two expressions, each under both spellings of the node label
    assert all(selector.endswith(f",{matcher}") for selector in selectors)
    assert query != render(DEFAULT_QUERIES["xid_errors"], "1h", ["gpu-a"])


@pytest.mark.parametrize("name", ["restarts", "p99_ms", "oom_kills"])
def test_render_with_uuids_leaves_the_workload_queries_per_node(name) -> None:
    assert render(DEFAULT_QUERIES[name], "1h", ["gpu-a"], CARDS) == render(DEFAULT_QUERIES[name], "1h", ["gpu-a"])


def test_render_without_uuids_is_unchanged_by_the_uuid_placeholder() -> None:
    query = render(DEFAULT_QUERIES["fb_peak_pct"], "1h", ["gpu-a"])
    assert "UUID=~" not in query and 'DCGM_FI_DEV_FB_USED{Hostname=~"gpu-a"}' in query


@pytest.mark.parametrize("uuid", ["GPU-1", "MIG-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51", f'{CARDS[0]}"', f"{CARDS[0]}|.*"])
def test_a_malformed_uuid_is_not_a_gpu_uuid(uuid) -> None:
    assert not GPU_UUID.fullmatch(uuid)
    assert all(GPU_UUID.fullmatch(card) for card in CARDS)


def test_collect_sends_the_uuid_scope_to_prometheus() -> None:
    client = RecordingClient(lambda query, at: 1.0, nodes=("gpu-a",))
    plan = QueryPlan(url=client.url, trial_end=END, window_s=3600, baseline_window_s=3600, nodes=("gpu-a",),
                     uuids=(CARDS[0],))
    observations = collect(plan, THRESHOLDS, client)
    dcgm = [query for query, _ in client.calls if "DCGM_FI_" in query]
    assert dcgm and all(f'UUID=~"{CARDS[0]}"' in query for query in dcgm)
    assert observations.source["uuids"] == [CARDS[0]]


@pytest.mark.parametrize("name", sorted(DEFAULT_QUERIES))
def test_every_default_query_renders_completely(name) -> None:
    # No placeholder is left; a `$1` is label_replace's own group reference.
    assert not re.search(r"\$(?!1\b)", render(DEFAULT_QUERIES[name], "7d", ["gpu-a"]))


@pytest.mark.parametrize(
    ("body", "value"),
    [
        (_vector([1, "12.5"]), 12.5),
        (_vector(), None),
        (_vector([1, "NaN"]), None),
        ({"status": "success", "data": {"resultType": "scalar", "result": [1, "3"]}}, 3.0),
    ],
    ids=["one-series", "no-series", "nan", "scalar"],
)
def test_single_value(body, value) -> None:
    assert _single_value(body) == value


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_vector([1, "1"], [1, "2"]), "returned 2 series; aggregate it to one"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "returned a matrix"),
        ({"status": "error", "error": "parse error"}, "Prometheus reported an error: parse error"),
    ],
    ids=["two-series", "range-vector", "error"],
)
def test_single_value_errors(body, message) -> None:
    with pytest.raises(QueryError, match=message):
        _single_value(body)


def test_collect_plans_trial_windows_and_baseline() -> None:
    client = RecordingClient(lambda query, at: 7.0, nodes=("gpu-a",))
    plan = QueryPlan(url=client.url, trial_end=END, window_s=3600, baseline_window_s=7 * 86400, nodes=("gpu-a",))
    observations = collect(plan, THRESHOLDS, client)
    trial_start = END - 3600
    p99_times = [at for query, at in client.calls if "histogram_quantile" in query]
    assert p99_times == [trial_start + 300 * k for k in range(1, 13)] + [trial_start]
    assert observations.trial.p99_ms == (7.0,) * 12 and observations.baseline.p99_ms == (7.0,)
    # Baseline counts are scaled to the trial's length; everything else is not.
    assert observations.baseline.restarts == pytest.approx(7.0 / 168)
    assert observations.baseline.throughput_per_gpu == 7.0
    assert observations.trial.correlated_failures == 7.0 and observations.baseline.correlated_failures is None
    assert observations.trial.fb_peak_pct == 7.0 and observations.baseline.fb_peak_pct is None
    assert observations.trial.context == {"gpu_util_pct": 7.0, "fb_used_mib": 7.0}
    # --node: which nodes have DCGM series, on both sides, over each side's window.
    assert (observations.trial.dcgm_nodes, observations.baseline.dcgm_nodes, observations.nodes) == (
        ("gpu-a",), ("gpu-a",), ("gpu-a",))
    node_calls = [at for query, at in client.calls if query.startswith("group by (Hostname, hostname)")]
    assert node_calls == [END, trial_start]
    assert observations.source == {
        "prometheus": client.url, "trial": "2024-01-07T23:00:00Z/2024-01-08T00:00:00Z",
        "baseline": "2023-12-31T23:00:00Z/2024-01-07T23:00:00Z", "nodes": ["gpu-a"],
    }


def test_collect_asks_which_cards_asked_for_have_dcgm_series() -> None:
    uuid = "GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51"

    class Cards(RecordingClient):
        def series(self, query: str, at: float) -> list:
            self.calls.append((query, at))
            return [({"UUID": uuid, "Hostname": "gpu-a"}, [(at, 1.0)])] if at == END else []

    client = Cards(lambda query, at: 7.0)
    plan = QueryPlan(url=client.url, trial_end=END, window_s=3600, baseline_window_s=7 * 86400, uuids=(uuid,))
    observations = collect(plan, THRESHOLDS, client)
    assert (observations.trial.dcgm_uuids, observations.baseline.dcgm_uuids, observations.uuids) == ((uuid,), (), (uuid,))
    card_calls = [query for query, at in client.calls if query.startswith("group by (UUID)")]
    assert len(card_calls) == 2 and all(f'UUID=~"{uuid}"' in query for query in card_calls), card_calls
    assert observations.trial.dcgm_nodes is None  # no --node: not asked


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": "12"}]}},
         "result[0].value is '12', not a [time, \"value\"] sample"),
        ({"status": "success"}, "data is None, not an object with resultType and result"),
        ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1]}]}},
         "result[0].value is [1]"),
        ({"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "2"]}]}},
         "not an object with a metric of string labels"),
        ({"status": "success", "data": {"resultType": "vector", "result": {}}}, "resultType 'vector' with result {}"),
        ([1, 2], "expected an object with status and data"),
        ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "many"]}]}},
         "not a [time"),
    ],
    ids=["value-a-string", "no-data", "sample-without-value", "no-metric", "result-not-a-list", "not-an-object",
         "value-not-a-number"],
)
def test_malformed_answers_are_query_errors_not_tracebacks(body, message) -> None:
    with pytest.raises(QueryError, match="the answer is not a Prometheus query result") as raised:
        _single_value(body)
    assert message in str(raised.value)


def test_collect_records_why_values_are_missing() -> None:
    def answer(query: str, at: float) -> float | None:
        if "histogram_quantile" in query:
            raise QueryError("Prometheus answered HTTP 400: parse error")
        return None if "DCGM_FI_DEV_XID_ERRORS" in query else 1.0

    plan = QueryPlan(url="http://p", trial_end=END, window_s=3600, baseline_window_s=86400)
    observations = collect(plan, THRESHOLDS, RecordingClient(answer))
    assert observations.trial.p99_ms == ()
    assert observations.trial.gaps == {
        "p99_ms": "queries.p99_ms: Prometheus answered HTTP 400: parse error",
        "xid_errors": "queries.xid_errors returned no series for 1h up to 2024-01-08T00:00:00Z: does the exporter "
                      "collect DCGM_FI_DEV_XID_ERRORS? If it does not, set xid_required: false",
    }


def test_collect_keeps_windows_without_data_as_missing() -> None:
    """A window without data is not dropped: it stays None and counts against min_window_coverage."""
    answers = iter([600.0, None, 700.0] + [None] * 20)
    plan = QueryPlan(url="http://p", trial_end=END, window_s=900, baseline_window_s=86400)
    client = RecordingClient(lambda query, at: next(answers) if "histogram_quantile" in query else 1.0)
    observations = collect(plan, THRESHOLDS, client)
    assert observations.trial.p99_ms == (600.0, None, 700.0) and "p99_ms" not in observations.trial.gaps
    assert observations.baseline.p99_ms == () and "returned no series in any of 1 window" in observations.baseline.gaps["p99_ms"]


@pytest.mark.parametrize(("mapped", "scope", "asked"), [(0.0, "node", "correlated_failures"),
                                                       (8.0, "card", "correlated_failures_per_card")])
def test_correlated_failures_per_card_where_the_exporter_maps_shares(mapped, scope, asked) -> None:
    def answer(query: str, at: float) -> float:
        if query == render(DEFAULT_QUERIES["shares_mapped"], "1h", []):
            return mapped
        return 3.0 if query == render(DEFAULT_QUERIES[asked], "1h", []) else 1.0

    plan = QueryPlan(url="http://p", trial_end=END, window_s=3600, baseline_window_s=86400)
    trial = collect(plan, THRESHOLDS, RecordingClient(answer)).trial
    assert (trial.correlated_failures, trial.correlated_scope) == (3.0, scope)


def test_shares_mapped_without_answer_holds_the_correlated_gate() -> None:
    def answer(query: str, at: float) -> float | None:
        return None if "vgpu" in query else 1.0

    plan = QueryPlan(url="http://p", trial_end=END, window_s=3600, baseline_window_s=86400)
    trial = collect(plan, THRESHOLDS, RecordingClient(answer)).trial
    assert trial.correlated_failures is None
    assert trial.gaps["correlated_failures"].startswith("queries.shares_mapped returned no series")


def test_dcgm_selectors_read_both_spellings_of_the_node_label() -> None:
    for name, text in DEFAULT_QUERIES.items():
        query = render(text, "1h", ["gpu-a"])
        if "DCGM_FI_" in query:
            assert query.count('Hostname=~"gpu-a"') == query.count('hostname=~"gpu-a"') > 0, name


def test_window_shorter_than_latency_window_is_bad_input() -> None:
    plan = QueryPlan(url="http://p", trial_end=END, window_s=120, baseline_window_s=86400)
    with pytest.raises(GateInputError, match="--window 2m is shorter than latency_window 5m"):
        collect(plan, THRESHOLDS, RecordingClient(lambda query, at: 1.0))


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_prometheus_is_asked_once(unused_port) -> None:
    url = f"http://127.0.0.1:{unused_port}"
    client = PrometheusClient(url, timeout_s=2)
    with pytest.raises(Unreachable, match="^Prometheus did not answer$"):
        client.value("up", END)
    assert client.unreachable.startswith(f"Prometheus at {url} did not answer (")
    assert "Connection refused" in client.unreachable
    first = client.unreachable
    with pytest.raises(Unreachable):
        client.value("up", END)
    assert client.unreachable == first


def test_collect_reports_an_unreachable_prometheus_once() -> None:
    client = RecordingClient(lambda query, at: None)

    def unreachable(query: str, at: float) -> float | None:
        client.calls.append((query, at))
        client.unreachable = "Prometheus at http://p did not answer (timed out): check the URL"
        raise Unreachable()

    client.value = unreachable
    plan = QueryPlan(url="http://p", trial_end=END, window_s=3600, baseline_window_s=86400)
    observations = collect(plan, THRESHOLDS, client)
    assert observations.error == "Prometheus at http://p did not answer (timed out): check the URL"
    gaps = {**observations.trial.gaps, **observations.baseline.gaps}
    assert set(gaps.values()) == {"Prometheus did not answer"}
    assert "p99_ms" in observations.trial.gaps and "queue_time_s" in observations.baseline.gaps


def test_collect_without_trouble_has_no_error() -> None:
    plan = QueryPlan(url="http://p", trial_end=END, window_s=3600, baseline_window_s=86400)
    assert collect(plan, THRESHOLDS, RecordingClient(lambda query, at: 1.0)).error is None


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), ("7d", 604800), ("1w", 604800)]
)
def test_durations(text, seconds) -> None:
    assert parse_duration(text, "--window") == seconds
    assert parse_duration(format_duration(seconds), "--window") == seconds


@pytest.mark.parametrize("text", ["", "5", "1.5h", "0m", "5 m", "-1h", "1y"])
def test_bad_durations(text) -> None:
    with pytest.raises(InputError, match="--window"):
        parse_duration(text, "--window")


@pytest.mark.parametrize(
    ("text", "unix"), [("1704672000", END), ("2024-01-08T00:00:00Z", END), ("2024-01-08T01:00:00+01:00", END)]
)
def test_times(text, unix) -> None:
    assert parse_time(text, "--trial-end") == unix


@pytest.mark.parametrize("text", ["yesterday", "2024-01-08T00:00:00", "nan", "inf"])
def test_bad_times(text) -> None:
    with pytest.raises(InputError, match="--trial-end"):
        parse_time(text, "--trial-end")
