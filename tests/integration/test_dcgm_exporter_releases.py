"""The baseline and the gates on the recorded output of real dcgm-exporter releases
(tests/fixtures/dcgm_exporter): 3.3.9-3.6.1 (`Hostname`, no DCGM_FI_DEV_FB_RESERVED), 4.4.2-4.7.1
(`Hostname`, FB_RESERVED), 4.6.0-4.8.3 (`hostname`) and 4.6.0-4.8.3 with KUBERNETES_VIRTUAL_GPUS
(shares mapped to cards, per-pod process series). Each recording is a node of its own in a real
Prometheus, its series as recorded over the week before and the hour of a trial
(tests/prometheus_fixture.py's times), with the workload's and kube-state-metrics' series of the
gate cases beside them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpushare.cli import main
from tests.dcgm_releases import add_history, load
from tests.prometheus_fixture import (
    BASELINE_START, BASELINE_STEP, THRESHOLDS, TRIAL_END, TRIAL_START, TRIAL_STEP, _add_pod, _Families, build_tsdb,
    prometheus_server, skip_without_prometheus,
)

pytestmark = pytest.mark.prometheus

PLAIN = ("3.3.9-3.6.1", "4.4.2-4.7.1", "4.6.0-4.8.3")
VIRTUAL = "4.6.0-4.8.3-virtual-gpus"
# node -> (recording, trial pods that restart at minute 30; the recording's pods share cards 0+1, 2+3)
NODES = {
    **{f"rel-{release.replace('.', '-')}": (release, ()) for release in PLAIN},
    "rel-virtual": (VIRTUAL, ()),
    "rel-virtual-one-card": (VIRTUAL, (0, 1)),
    "rel-virtual-two-cards": (VIRTUAL, (0, 2)),
}
FACTS = [{"namespace": "ml-batch", "retryable": True, "checkpointed": True, "latency_critical": False}]


def openmetrics() -> str:
    om = _Families()
    baseline = list(range(BASELINE_START, TRIAL_START, BASELINE_STEP))
    trial = list(range(TRIAL_START + TRIAL_STEP, TRIAL_END + 1, TRIAL_STEP))
    for node, (release, crashing) in NODES.items():
        recorded = load(release)
        add_history(om, recorded, node, baseline + [TRIAL_START] + trial)
        for index in (0, 1):
            _add_pod(om, node, f"{node}-base-{index}", baseline, rate=10.0, mode_at=lambda t: "base",
                     queue_wait_s=30.0, failure=None, latency_from=BASELINE_START)
        # The trial's four pods: the recording's sharing pods where it has them (their namespace and
        # names, as the exporter mapped them), else four of the gate cases' own.
        shared = sorted({pod for pods in recorded.pods().values() for pod in pods}) if release == VIRTUAL else []
        for index in range(4):
            namespace, pod = shared[index].split("/") if shared else ("ml", f"trial-{index}")
            failure = (TRIAL_START + 30 * 60, "Error") if index in crashing else None
            _add_pod(om, node, f"{node}-{pod}", trial, rate=6.0, mode_at=lambda t: "fast", queue_wait_s=10.0,
                     failure=failure, latency_from=TRIAL_START, namespace=namespace)
    return om.render()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    skip_without_prometheus()
    directory = tmp_path_factory.getbasetemp() / "dcgm-releases"
    directory.mkdir(exist_ok=True)
    with prometheus_server(build_tsdb(directory, openmetrics), tmp_path_factory.mktemp("prometheus")) as url:
        yield url


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def baseline(capsys, url: str, tmp_path: Path, node: str) -> tuple[int, dict]:
    facts = tmp_path / "facts.yaml"
    facts.write_text(yaml.safe_dump(FACTS))
    return cli(capsys, "baseline", "--prometheus", url, "--end", str(TRIAL_END), "--workloads", str(facts),
               "--format", "json", "--node", node)


def gates(capsys, url: str, tmp_path: Path, node: str) -> tuple[int, dict]:
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(yaml.safe_dump(THRESHOLDS))
    return cli(capsys, "gate", "--prometheus", url, "--window", "1h", "--trial-end", str(TRIAL_END),
               "--thresholds", str(thresholds), "--format", "json", "--node", node)


@pytest.mark.parametrize("release", PLAIN)
def test_baseline_of_each_release(prometheus, capsys, tmp_path, release) -> None:
    """GPU 0 runs a retryable batch pod at 8%: a candidate, sized by the card's memory read as the
    release exports it; GPU 1 runs nothing."""
    node = f"rel-{release.replace('.', '-')}"
    code, report = baseline(capsys, prometheus, tmp_path, node)
    busy, idle = report["gpus"]
    assert (code, [busy["gpu"], idle["gpu"]], busy["model"]) == (0, ["0", "1"], "NVIDIA H100 80GB HBM3")
    assert (busy["verdict"], busy["recommended_replicas"], busy["xid"]) == ("candidate", 4, 0)
    assert busy["workloads"] == [f"ml-batch/{node}-trainer-0"]
    assert busy["coverage"]["hours"] == 168
    reserved = release != "3.3.9-3.6.1"
    assert (busy["fb_total_mib"], busy["fb_reserved_exported"]) == (81559 if reserved else 80988, reserved)
    memory = next(reason for reason in busy["reasons"] if reason.startswith("memory peak 9815 of "))
    assert ("the exporter does not export DCGM_FI_DEV_FB_RESERVED" in memory) == (not reserved)
    assert (idle["verdict"], idle["reasons"][0][:35]) == ("not-candidate", "no workload ran on it in the window")


@pytest.mark.parametrize("node", sorted(NODES))
def test_gates_on_each_release(prometheus, capsys, tmp_path, node) -> None:
    """A trial with 20% more work per card and nothing else wrong continues on every release; pods
    that fail count together per card where the exporter maps shares to cards."""
    release, crashing = NODES[node]
    code, report = gates(capsys, prometheus, tmp_path, node)
    result = {gate["name"]: gate for gate in report["gates"]}
    failing = {name: gate["status"] for name, gate in result.items() if gate["status"] != "continue"}
    expected = {"restarts": "rollback"} if crashing else {}
    if crashing == (0, 1):
        expected["correlated_failures"] = "rollback"
    assert (failing, code) == (expected, 3 if crashing else 0)
    assert result["throughput_per_gpu"]["observed"]["gain"] == pytest.approx(0.2)
    # GPU 0 at 8%, GPU 1 idle: the cards' own series, not the pods' process values (4% each) beside them.
    assert result["throughput_per_gpu"]["observed"]["trial_gpu_util_pct"] == pytest.approx(4.0)
    assert result["dcgm_nodes"]["observed"]["trial"] == [node]
    correlated = result["correlated_failures"]["observed"]
    assert (correlated["scope"], correlated["trial"]) == ("card" if release == VIRTUAL else "node",
                                                          1.0 if crashing == (0, 1) else 0.0)
    memory = result["memory_headroom"]
    total = 80988 if release == "3.3.9-3.6.1" else 81559
    assert memory["observed"]["trial_peak_pct"] == pytest.approx(100 * 9815 / total)
    assert memory["reason"].endswith("counted as used + free: the exporter does not export DCGM_FI_DEV_FB_RESERVED") \
        == (release == "3.3.9-3.6.1")
    assert result["xid_errors"]["observed"]["trial"] == 0.0


def test_baseline_of_shared_cards_reads_each_card_once(prometheus, capsys, tmp_path) -> None:
    """4.6.0-4.8.3 with KUBERNETES_VIRTUAL_GPUS: GPU 0 at 8% (its two pods' processes 4% each) and
    9815 MiB used, GPU 1 idle; each card once, with its own values and its two pods."""
    code, report = baseline(capsys, prometheus, tmp_path, "rel-virtual")
    busy, idle = report["gpus"]
    assert (code, [busy["gpu"], idle["gpu"]]) == (0, ["0", "1"])
    assert (busy["util_1h_p50"], busy["fb_peak_mib"], idle["util_1h_p50"]) == (8.0, 9815, 0.0)
    assert busy["workloads"] == ["ml-serve/rel-virtual-serve-0", "ml-serve/rel-virtual-serve-1"]
