"""Steps about the baseline before sharing (playbooks/baseline.yml): the run, its report, its JSON
and its plots. Runs go through the same runner as every runbook (`run_runbook`), so the generic
steps of runbook_steps ("the run succeeds", "the run is refused with ...", "nothing was written to
the cluster") apply. Each scenario writes its reports to its own folder.

The week of DCGM data comes from the embedded cluster's demo Prometheus (`gpushare sim
prometheus`: the simulated exporter plus a backfilled week); for another cluster, give its
Prometheus in GPUSHARE_TEST_PROMETHEUS_URL.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from gpushare.baseline.report import gpu_name
from gpushare_testbed.dcgm_sim.backfill import backfill
from gpushare_testbed.dcgm_sim.exposition import FAMILIES, Exporter
from gpushare_testbed.dcgm_sim.hardware import fleet_gpus, node_hardware
from tests.prometheus_fixture import prometheus_server, skip_without_prometheus
from tests.steps.runbook_steps import RunbookRun, run_runbook
from tests.support.cluster import Cluster

BASELINE = "baseline.yml"


@pytest.fixture(scope="session")
def fleet_prometheus(cluster: Cluster) -> str:
    url = os.environ.get("GPUSHARE_TEST_PROMETHEUS_URL")
    if url:
        return url
    if not cluster.embedded:
        pytest.skip("give the cluster's Prometheus in GPUSHARE_TEST_PROMETHEUS_URL")
    result = subprocess.run([sys.executable, "-m", "gpushare", "sim", "prometheus", "--state-dir",
                             str(cluster.state_dir)], capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        pytest.fail(f"gpushare sim prometheus failed: {result.stderr}")
    return result.stdout.strip().splitlines()[-1]


@given("Prometheus holds a week of the fleet's DCGM data", target_fixture="prometheus_url")
def prometheus_with_a_week(fleet_prometheus: str) -> str:
    return fleet_prometheus


@given(parsers.parse('Prometheus holds a week of the fleet\'s DCGM data from an exporter that writes its node as '
                     '"{host_label}" without "{field}"'), target_fixture="prometheus_url")
def prometheus_of_another_exporter(request: pytest.FixtureRequest, kube: Cluster, tmp_path: Path, host_label: str,
                                   field: str) -> str:
    """The embedded fleet's week as another exporter writes it (an older release, or a counters file
    without `field`), backfilled into a Prometheus of the scenario's own."""
    if not kube.embedded:
        pytest.skip("the week is generated from the embedded cluster's simulated GPUs")
    skip_without_prometheus()
    exporter = Exporter(host_label, frozenset(family.name for family in FAMILIES) - {field})
    epoch = json.loads((kube.state_dir / "dcgm-exporter.json").read_text())["epoch"]  # as the cluster's exporter
    now = int(time.time())
    gpus = fleet_gpus(node_hardware(kube.core.list_node().items))
    backfill(gpus, now - 7 * 86400 - 3600, now, 300, epoch, tmp_path / "tsdb", exporter=exporter)
    stack = ExitStack()
    request.addfinalizer(stack.close)
    return stack.enter_context(prometheus_server(tmp_path / "tsdb", tmp_path))


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    return tmp_path / "reports"


def _baseline(kube: Cluster, tmp_path: Path, reports: Path, command: str, **extravars: Any) -> RunbookRun:
    return run_runbook(kube, tmp_path / "run", f"{BASELINE} {command}".strip(),
                       extravars={"baseline_report_dir": str(reports), **extravars})


@when("the operator runs the baseline", target_fixture="runbook_run")
def operator_runs_baseline(kube: Cluster, tmp_path: Path, reports: Path, prometheus_url: str) -> RunbookRun:
    return _baseline(kube, tmp_path, reports, "", baseline_prometheus_url=prometheus_url)


@when(parsers.parse('the operator runs the baseline on "{node}"'), target_fixture="runbook_run")
def operator_runs_baseline_on(kube: Cluster, tmp_path: Path, reports: Path, prometheus_url: str,
                              node: str) -> RunbookRun:
    return _baseline(kube, tmp_path, reports, f"-l {node}", baseline_prometheus_url=prometheus_url)


@when("the operator runs the baseline against a Prometheus that does not answer", target_fixture="runbook_run")
def operator_runs_baseline_without_prometheus(kube: Cluster, tmp_path: Path, reports: Path) -> RunbookRun:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    return _baseline(kube, tmp_path, reports, "", baseline_prometheus_url=url, baseline_query_timeout=5)


@when(parsers.parse('the operator runs the baseline with facts for namespace "{namespace}" that do not say '
                    'whether it is retryable'), target_fixture="runbook_run")
def operator_runs_baseline_with_open_facts(kube: Cluster, tmp_path: Path, reports: Path, prometheus_url: str,
                                           namespace: str) -> RunbookRun:
    facts = [{"namespace": namespace, "checkpointed": True, "latency_critical": False}]
    return _baseline(kube, tmp_path, reports, "", baseline_prometheus_url=prometheus_url, baseline_workloads=facts)


# ---- the report --------------------------------------------------------------------------------------
def _report(reports: Path) -> tuple[str, dict]:
    written = sorted(reports.glob("baseline-*.md"))
    assert len(written) == 1, f"expected one report in {reports}, found {written}"
    return written[0].read_text(), json.loads(written[0].with_suffix(".json").read_text())


def _verdict_rows(markdown: str) -> list[list[str]]:
    table = markdown.split("## Verdicts", 1)[1].split("\n\n###", 1)[0]
    lines = [line for line in table.strip().splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


@then("the report lists every GPU of the targeted nodes with the verdicts of its JSON")
def report_lists_every_gpu(kube: Cluster, reports: Path) -> None:
    markdown, document = _report(reports)
    rows = _verdict_rows(markdown)
    assert [(r[0], r[1], r[8], r[9]) for r in rows] == [
        (g["node"], gpu_name(g), g["verdict"], "-" if g["recommended_replicas"] is None else str(g["recommended_replicas"]))
        for g in document["gpus"]]
    every_gpu = {(node, str(i)) for node in kube.gpu_nodes()
                 for i in range(int(kube.node(node).metadata.labels["nvidia.com/gpu.count"]))}
    # MIG instances that existed in the window are rows of their own ("0 MIG 1g.5gb #3").
    assert every_gpu <= {(r[0], r[1]) for r in rows}, rows
    assert {r[0] for r in rows} <= {node for node, _ in every_gpu}
    for gpu in document["gpus"]:
        assert f"### {gpu['node']} GPU {gpu_name(gpu)} - {gpu['verdict']}" in markdown
        assert all(f"- {reason}" in markdown for reason in gpu["reasons"])


@then("every GPU of the report has its plot, drawn from the same numbers as the JSON")
def every_gpu_has_a_plot(reports: Path) -> None:
    from PIL import Image

    markdown, document = _report(reports)
    for gpu in document["gpus"]:
        plot = Path(gpu["plot"])
        assert plot.is_file() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", plot
        assert f"]({plot.parent.name}/{plot.name})" in markdown
        drawn = json.loads(Image.open(plot).text["Description"])
        assert (drawn["uuid"], drawn["verdict"], drawn["fb_total_mib"]) == (gpu["uuid"], gpu["verdict"], gpu["fb_total_mib"])
        assert drawn["fb_peak_mib"] == pytest.approx(gpu["fb_peak_mib"], abs=1)
        assert drawn["util_hours"] == gpu["coverage"]["hours"]


@then("the report shows the Pending pods, the last events and each GPU node's capacity and allocatable")
def report_shows_readings(kube: Cluster, reports: Path) -> None:
    markdown, _ = _report(reports)
    assert re.search(r"^## Pending pods \(\d+\)$", markdown, re.M)
    assert re.search(r"^## Last \d+ events, oldest first$", markdown, re.M)
    nodes = markdown.split("## GPU nodes: capacity, allocatable, GPU labels", 1)[1].split("\n## ", 1)[0]
    for name in kube.gpu_nodes():
        count = kube.node(name).metadata.labels["nvidia.com/gpu.count"]
        assert re.search(rf"^\| {re.escape(name)} \| .*nvidia.com/gpu {count}\b.* \| .*nvidia.com/gpu.count={count}\b",
                         nodes, re.M), nodes


@then(parsers.parse('the report says nvidia-smi was skipped because "{reason}"'))
def nvidia_smi_skipped(kube: Cluster, reports: Path, reason: str) -> None:
    if not kube.embedded:
        pytest.skip("nvidia-smi runs in the driver pods of a real cluster")
    markdown, _ = _report(reports)
    section = markdown.split("## nvidia-smi", 1)[1]
    assert "Skipped:" in section and reason in section, section[:500]


@then("the verdicts are")
def verdicts_are(kube: Cluster, reports: Path, datatable: list[list[str]]) -> None:
    if not kube.embedded:
        pytest.skip("these verdicts follow the embedded cluster's simulated workloads")
    _, document = _report(reports)
    header, *rows = datatable
    by_gpu = {(g["node"], g["gpu"]): g for g in document["gpus"] if g["gpu_instance"] is None}
    for row in rows:
        expected = dict(zip(header, row))
        gpu = by_gpu[(expected["node"], expected["gpu"])]
        replicas = "-" if gpu["recommended_replicas"] is None else str(gpu["recommended_replicas"])
        assert (gpu["verdict"], replicas) == (expected["verdict"], expected["replicas"]), gpu
        assert any(expected["reason"] in reason for reason in gpu["reasons"]), gpu["reasons"]


@then(parsers.parse('every GPU\'s memory is read as used + free because "{why}"'))
def memory_read_as_used_plus_free(reports: Path, why: str) -> None:
    _, document = _report(reports)
    assert document["gpus"] and not any(gpu["fb_reserved_exported"] for gpu in document["gpus"])
    sized = [reason for gpu in document["gpus"] for reason in gpu["reasons"] if reason.startswith("memory peak")]
    assert sized and all(f"(used + free: {why})" in reason for reason in sized), sized


@then(parsers.parse('the report lists only the GPUs of "{node}"'))
def report_lists_only(reports: Path, node: str) -> None:
    markdown, document = _report(reports)
    assert {g["node"] for g in document["gpus"]} == {node} and document["nodes"] == [node]
    assert {row[0] for row in _verdict_rows(markdown)} == {node}


@then("no baseline report was written")
def no_report(reports: Path) -> None:
    assert not list(reports.glob("baseline-*")) if reports.exists() else True
