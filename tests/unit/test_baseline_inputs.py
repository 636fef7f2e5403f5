"""`gpushare baseline` inputs: the thresholds file, the workload facts, the options; bad input exits 2
before any query, a Prometheus that does not answer exits 4."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from gpushare.baseline.model import BaselineInputError, Thresholds, Workload
from gpushare.baseline.thresholds import load_thresholds, parse_thresholds
from gpushare.baseline.workloads import label_keys, load_facts, match, parse_facts
from gpushare.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_the_example_thresholds_are_the_defaults() -> None:
    assert load_thresholds(REPO / "examples" / "baseline" / "thresholds.yaml") == Thresholds()
    assert load_thresholds(None) == Thresholds()


def test_thresholds_values_and_overrides() -> None:
    thresholds = parse_thresholds({"min_history": "14d", "max_gap": "2h", "fb_margin": 0.3, "max_replicas": 8,
                                   "queries": {"xid": "max by (UUID) (DCGM_FI_DEV_XID_ERRORS)"}})
    assert (thresholds.min_history_s, thresholds.max_gap_s, thresholds.fb_margin, thresholds.max_replicas) == (
        14 * 86400, 7200, 0.3, 8)
    assert thresholds.queries == {"xid": "max by (UUID) (DCGM_FI_DEV_XID_ERRORS)"}
    assert (thresholds.xid_required, parse_thresholds({"xid_required": False}).xid_required) == (True, False)


@pytest.mark.parametrize(("document", "message"), [
    ([1], "expected a mapping"),
    ({"fb_marginn": 0.2}, "unknown key(s) fb_marginn"),
    ({"fb_margin": 1.5}, "fb_margin is 1.5; expected a fraction between 0 and 0.9"),
    ({"max_replicas": 1}, "max_replicas is 1; expected a whole number between 2"),
    ({"max_replicas": 2.5}, "max_replicas is 2.5"),
    ({"gap_util_pct": True}, "gap_util_pct is True"),
    ({"min_coverage": 10**400}, "expected a fraction between 0 and 1"),  # beyond any float: no OverflowError
    ({"min_coverage": float("nan")}, "min_coverage is nan; expected a fraction between 0 and 1"),
    ({"max_gap": "six hours"}, "thresholds: max_gap: 'six hours' is not a duration"),
    ({"queries": {"util": "x"}}, "unknown query key(s) util"),
    ({"queries": {"xid": ""}}, "queries.xid must be a non-empty PromQL string"),
    ({"queries": {"xid": "max_over_time(x[$windw])"}}, "queries.xid uses an unknown placeholder"),
    ({"xid_required": "yes"}, "thresholds: xid_required is 'yes'; expected true or false"),
    ({"queries": {"fb_total": "max by (UUID) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)"}},
     "thresholds: queries.fb_total is no longer used: the card's memory is read as fb_used_free + fb_reserved now"),
    ({"queries": {"fb_used_24h": "x"}}, "queries.fb_used_24h is no longer used: the daily peak is read from hourly"),
])
def test_bad_thresholds(document, message) -> None:
    with pytest.raises(BaselineInputError, match=None) as raised:
        parse_thresholds(document)
    assert message in str(raised.value)


FACT = {"namespace": "ml", "retryable": True, "checkpointed": True, "latency_critical": False}


def test_facts_match_by_namespace_and_sanitized_labels() -> None:
    facts = parse_facts([
        {**FACT, "namespace": "ml", "labels": {"app.kubernetes.io/name": "chat"}, "latency_critical": True,
         "owner": "serving"},
        {**FACT, "owner": "research"},
    ])
    assert label_keys(facts) == ["app_kubernetes_io_name"]
    chat = Workload("ml", "chat-1", {"app_kubernetes_io_name": "chat"})
    assert match(facts, chat).owner == "serving"
    assert match(facts, Workload("ml", "train-1")).owner == "research"
    assert match(facts, Workload("other", "x")) is None


@pytest.mark.parametrize(("entries", "message"), [
    ({"ml": {}}, "expected a list"),
    (["ml"], "workloads[1]: expected a mapping"),
    ([{"retryable": True, "checkpointed": True, "latency_critical": False}], "give namespace, labels or both"),
    ([{**FACT, "retryable": "yes"}], "workloads[1] (ml): retryable must be true or false"),
    ([{"namespace": "ml"}], "retryable, checkpointed, latency_critical must be true or false"),
    ([{**FACT, "team": "x"}], "unknown key(s) team"),
    ([{**FACT, "labels": {"app": 1}}], "labels must map pod label keys to string values"),
])
def test_bad_facts(entries, message) -> None:
    with pytest.raises(BaselineInputError) as raised:
        parse_facts(entries)
    assert message in str(raised.value)


def test_facts_from_the_sim_inventory_and_from_json(tmp_path) -> None:
    group_vars = yaml.safe_load((REPO / "inventories/sim/group_vars/all/baseline.yml").read_text())
    facts = parse_facts(group_vars["baseline_workloads"])
    assert {f.namespace for f in facts} >= {"dev-notebooks", "inference-prod", "research-long"}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"workloads": group_vars["baseline_workloads"]}))
    assert load_facts(path) == facts


def unanswered_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(("args", "message"), [
    (["--prometheus", "prometheus:9090"], "give the base URL, e.g. http://prometheus:9090"),
    (["--window", "3d"], "--window 3d is shorter than min_history 7d"),
    (["--window", "7d30m"], "give whole hours"),
    (["--end", "yesterday"], "--end: 'yesterday' is not a time"),
    (["--node", "Bad_Node"], "--node Bad_Node: not a Kubernetes node name"),
    (["--thresholds", "/nonexistent.yaml"], "cannot read the thresholds file /nonexistent.yaml"),
    (["--workloads", "/nonexistent.yaml"], "cannot read the workloads file /nonexistent.yaml"),
    (["--timeout", "0"], "--timeout 0.0: give a positive number of seconds"),
    (["--gpus", "gpu-a"], "--gpus gpu-a: give NODE=COUNT, a node name and 1 to 64 GPUs"),
    (["--gpus", "gpu-a=0"], "--gpus gpu-a=0: give NODE=COUNT"),
    (["--gpus", "Bad=2"], "--gpus Bad=2: give NODE=COUNT"),
])
def test_bad_input_exits_2_before_any_query(capsys, args, message) -> None:
    argv = ["baseline", "--prometheus", unanswered_url(), *args]
    if "--prometheus" in args:
        argv = ["baseline", *args]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert "querying" not in captured.err


def test_prometheus_down_exits_4(capsys) -> None:
    url = unanswered_url()
    assert main(["baseline", "--prometheus", url]) == 4
    err = capsys.readouterr().err
    assert f"error: Prometheus at {url} did not answer" in err
    assert "check --prometheus and that the server runs" in err
