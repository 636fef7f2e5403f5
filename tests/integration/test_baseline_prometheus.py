"""`gpushare baseline` against a real Prometheus over generated weeks, one node per case.

Each case is one simulated GPU whose week comes from a workload profile (gpushare_testbed.dcgm_sim), with
the DCGM exporter's metric names and labels, backfilled with promtool; the window ends at END.
Most cases are written as the current exporter writes them (`hostname`); a few as other exporters
do: `Hostname` (up to 4.5.3-4.8.2), no DCGM_FI_DEV_FB_RESERVED (before 4.3.1-4.4.0, or a custom
counters file), no DCGM_FI_DEV_XID_ERRORS (a counters file without it), memory read for only the
last day; and one card shared by four pods as the exporter of each GPU Operator release writes it
with KUBERNETES_VIRTUAL_GPUS=true (per-pod process series beside the card's from 4.5.3-4.8.2 on).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from gpushare.cli import main
from gpushare_testbed.dcgm_sim.backfill import TSDB_CACHE, backfill
from gpushare_testbed.dcgm_sim.exposition import FAMILIES, Exporter, SimGpu, exporter_of
from gpushare_testbed.dcgm_sim.profiles import DAY, Profile
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operand_specs
from tests.prometheus_fixture import PROMETHEUS, PROMTOOL, THRESHOLDS, prometheus_server

pytestmark = pytest.mark.prometheus

END = 1704672000  # 2024-01-08T00:00:00Z
H100, TOTAL = "NVIDIA-H100-80GB-HBM3", 81559
BATCH = Profile("batch", "ml-batch", util_pct=6, fb_fraction=0.12)
CASES: dict[str, Profile] = {
    "steady-idle": BATCH,
    "checkpoints": replace(BATCH, util_pct=10, fb_fraction=0.30, checkpoint_every_h=6, checkpoint_minutes=10,
                           checkpoint_fb_fraction=0.97),
    "daily-peak": replace(BATCH, util_pct=5, busy_hours=(1, 5), busy_util_pct=90),
    "short-peak": replace(BATCH, util_pct=5, busy_hours=(2, 3), busy_util_pct=90),
    "three-days": replace(BATCH, history_s=3 * DAY),
    "xid": replace(BATCH, xid_code=79, xid_before_s=2 * DAY),
    "no-facts": replace(BATCH, namespace="unknown-team"),
    "latency": replace(BATCH, namespace="serving"),
    "servicemonitor": BATCH,  # behind the operator's ServiceMonitor: exported_namespace / exported_pod
    "memory-one-day": BATCH,  # DCGM_FI_DEV_FB_USED only in the last day
}
EVERY_FIELD = frozenset(family.name for family in FAMILIES)
# Cases written by other exporters than the current one: case -> exporter.
OTHER_EXPORTERS: dict[str, Exporter] = {
    "hostname-before-d5e5f51": Exporter("Hostname"),
    "no-reserved": Exporter("Hostname", EVERY_FIELD - {"DCGM_FI_DEV_FB_RESERVED"}),
    "no-xid": Exporter(fields=EVERY_FIELD - {"DCGM_FI_DEV_XID_ERRORS"}),
}
SPIKE = replace(BATCH, util_pct=10, spike_minute_of_day=12 * 60)  # sampled every minute
SHARED = replace(BATCH, util_pct=40, fb_fraction=0.40)  # four pods on one card, 10% each


def release_exporter(release: str) -> Exporter:
    """The dcgm-exporter the GPU Operator `release` deploys (its rendered DaemonSet's image), with
    KUBERNETES_VIRTUAL_GPUS=true."""
    image = operand_specs.dcgm_exporter(cp.default_instance(release)["spec"])[1]["containers"][0]["image"]
    return exporter_of(image, {"KUBERNETES_VIRTUAL_GPUS": "true"})


def release_node(release: str) -> str:
    return node(f"shared-{release.replace('.', '-')}")
FACTS = [
    {"namespace": "ml-batch", "owner": "research", "retryable": True, "checkpointed": True, "latency_critical": False},
    {"namespace": "serving", "owner": "web", "retryable": False, "checkpointed": True, "latency_critical": True},
]


def node(case: str) -> str:
    return f"case-{case}"


def gpus() -> list[SimGpu]:
    return [SimGpu(node(name), 0, H100, TOTAL, profile) for name, profile in CASES.items()] + [
        SimGpu("case-mig", 0, "NVIDIA-A100-SXM4-40GB", 9856, BATCH, "1g.10gb", 1),
        SimGpu("case-mig", 0, "NVIDIA-A100-SXM4-40GB", 9856, replace(BATCH, util_pct=25), "1g.10gb", 2),
    ]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = [path for path in (PROMETHEUS, PROMTOOL) if not Path(path).is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: run scripts/install-prometheus.sh (or make setup)")
    directory = tmp_path_factory.getbasetemp() / "baseline-prometheus"
    tsdb = directory / "tsdb"
    if not tsdb.is_dir():  # a fixed week: promtool builds each window's blocks once per machine (TSDB_CACHE)
        partial = directory / "tsdb.partial"
        shutil.rmtree(partial, ignore_errors=True)
        start = END - 7 * DAY - 3600
        backfill(gpus(), start, END, 300, END, partial, relabel=relabel, cache=TSDB_CACHE)
        backfill([SimGpu(node("spike"), 0, H100, TOTAL, SPIKE)], start, END, 60, END, partial, cache=TSDB_CACHE)
        for case, exporter in OTHER_EXPORTERS.items():
            backfill([SimGpu(node(case), 0, H100, TOTAL, BATCH)], start, END, 300, END, partial, exporter=exporter,
                     cache=TSDB_CACHE)
        for release in cp.RELEASES:
            backfill([SimGpu(release_node(release), 0, H100, TOTAL, SHARED, replicas=4)], start, END, 300, END, partial,
                     exporter=release_exporter(release), cache=TSDB_CACHE)
        partial.rename(tsdb)
    with prometheus_server(tsdb, tmp_path_factory.mktemp("prometheus")) as url:
        yield url


def relabel(text: str) -> str:
    """Behind the operator's ServiceMonitor, and memory read for one day only, applied to the
    generated OpenMetrics."""
    text = re.sub(
        rf'hostname="{node("servicemonitor")}",container="([^"]+)",namespace="([^"]+)",pod="([^"]+)"',
        rf'hostname="{node("servicemonitor")}",exported_container="\1",exported_namespace="\2",exported_pod="\3",'
        r'namespace="gpu-operator",pod="nvidia-dcgm-exporter-7xk2p",container="nvidia-dcgm-exporter"', text)
    one_day = f'DCGM_FI_DEV_FB_USED{{gpu="0",UUID="{SimGpu(node("memory-one-day"), 0, H100, TOTAL, BATCH).uuid}"'
    return "\n".join(line for line in text.split("\n")
                     if not line.startswith(one_day) or int(line.rsplit(" ", 1)[1]) > END - DAY)


def baseline(capsys, url: str, tmp_path: Path, *args: str, facts: list | None = None) -> tuple[int, dict | None, str]:
    workloads = tmp_path / "workloads.yaml"
    workloads.write_text(yaml.safe_dump(FACTS if facts is None else facts))
    code = main(["baseline", "--prometheus", url, "--end", str(END), "--workloads", str(workloads),
                 "--format", "json", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err


def gpu_of(report: dict, host: str, instance: str | None = None) -> dict:
    return next(g for g in report["gpus"] if g["node"] == host and g["gpu_instance"] == instance)


@pytest.fixture(scope="module")
def fleet(prometheus, tmp_path_factory) -> dict:
    """The baseline of every case at once, as the operator runs it over a whole fleet."""
    workloads = tmp_path_factory.mktemp("facts") / "workloads.yaml"
    workloads.write_text(yaml.safe_dump(FACTS))
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["baseline", "--prometheus", prometheus, "--end", str(END), "--workloads", str(workloads),
                     "--format", "json"]) == 0
    return json.loads(out.getvalue())


def test_steady_idle_gpu_with_small_memory_is_a_candidate_with_replicas(fleet) -> None:
    gpu = gpu_of(fleet, node("steady-idle"))
    assert (gpu["verdict"], gpu["recommended_replicas"]) == ("candidate", 4)
    assert gpu["util_1h_p95"] < 10 and gpu["fb_peak_mib"] < 0.13 * TOTAL
    assert gpu["fb_total_mib"] == TOTAL  # used + free + reserved
    assert (gpu["model"], gpu["workloads"], gpu["owners"]) == ("NVIDIA H100 80GB HBM3", [gpu["workloads"][0]], ["research"])
    assert gpu["coverage"] == {"hours": 168, "expected_hours": 168, "first": "2024-01-01T00:00:00Z",
                               "last": "2024-01-08T00:00:00Z", "longest_gap_h": 0}


def test_memory_peaking_near_full_during_checkpoints_is_not_a_candidate(fleet) -> None:
    gpu = gpu_of(fleet, node("checkpoints"))
    assert (gpu["verdict"], gpu["recommended_replicas"]) == ("not-candidate", 1)
    assert gpu["reasons"][0].startswith("memory peak leaves no headroom: ")
    assert gpu["fb_peak_mib"] > 0.95 * TOTAL
    assert gpu["util_1h_p95"] < 15  # the compute gap alone would have said candidate


def test_busy_only_during_a_daily_peak(fleet) -> None:
    """Four busy hours a day leave no stable gap; one busy hour a day does, and the peak is named."""
    four = gpu_of(fleet, node("daily-peak"))
    assert four["verdict"] == "not-candidate"
    assert "no stable compute gap: 17% of hours above 30%" in four["reasons"][0]
    assert "busy daily 01:00-05:00 UTC" in four["reasons"][0]
    one = gpu_of(fleet, node("short-peak"))
    assert one["verdict"] == "candidate"
    assert "busy daily 02:00-03:00 UTC, a peak to plan around" in one["reasons"][0]
    assert one["recommended_replicas"] == 4
    assert one["util_1h_p50"] < 10 and one["idle_hours_share"] == pytest.approx(161 / 168, abs=0.001)


def test_three_days_of_data_is_insufficient(fleet) -> None:
    gpu = gpu_of(fleet, node("three-days"))
    assert (gpu["verdict"], gpu["recommended_replicas"]) == ("insufficient-data", None)
    assert gpu["reasons"] == ["only 3.0 days of data (since 2024-01-05T00:00:00Z): the seed asks for at least 7d "
                              "that cover releases, traffic peaks and training checkpoints"]
    assert gpu["coverage"]["hours"] == 73  # [t - 1h, t] ranges: the hour before the first sample holds it too


def test_a_one_minute_spike_is_not_a_sustained_load(fleet, prometheus, capsys, tmp_path) -> None:
    gpu = gpu_of(fleet, node("spike"))
    assert (gpu["verdict"], gpu["recommended_replicas"]) == ("candidate", 4)
    assert gpu["util_1h_p95"] < 15  # each spike hour averages 10% + 90%/60
    # The raw samples do hit 100% once a day: judged on hourly maxima, the card would look busy.
    override = tmp_path / "thresholds.yaml"
    override.write_text(yaml.safe_dump({"queries": {"util_1h": (
        "max by (Hostname, hostname, gpu, UUID, modelName, GPU_I_PROFILE, GPU_I_ID) "
        "(max_over_time(DCGM_FI_DEV_GPU_UTIL[1h]))")}}))
    code, report, _ = baseline(capsys, prometheus, tmp_path, "--node", node("spike"), "--thresholds", str(override))
    raw = report["gpus"][0]
    assert (code, raw["util_1h_p95"], raw["verdict"]) == (0, 100.0, "not-candidate")
    assert raw["reasons"] == ["the compute gap leaves no room for a second copy: 1 h p95 100% against the 80% target"]


def test_a_gpu_with_xid_errors_is_not_a_candidate(fleet) -> None:
    gpu = gpu_of(fleet, node("xid"))
    assert (gpu["verdict"], gpu["xid"]) == ("not-candidate", 79)
    assert gpu["reasons"] == ["GPU Xid error 79 reported in the window: check the card (nvidia-smi -q, kernel log) "
                              "before sharing its fault domain"]


def test_workload_facts_feed_the_verdict(fleet) -> None:
    unknown = gpu_of(fleet, node("no-facts"))
    assert unknown["verdict"] == "insufficient-data"
    assert unknown["reasons"][0].startswith("no workload facts for unknown-team/batch-")
    latency = gpu_of(fleet, node("latency"))
    assert latency["verdict"] == "not-candidate" and latency["owners"] == ["web"]
    assert [r.split(": ", 1)[1] for r in latency["reasons"]] == [
        "not retryable - a single failure could corrupt data",
        "latency-critical (core online inference) - cannot take tail-latency jitter"]


def test_labels_as_every_exporter_sets_them(fleet) -> None:
    for case in ("steady-idle", "hostname-before-d5e5f51"):
        gpu = gpu_of(fleet, node(case))
        assert (gpu["verdict"], gpu["coverage"]["hours"], gpu["xid"]) == ("candidate", 168, 0)
    behind = gpu_of(fleet, node("servicemonitor"))
    assert behind["verdict"] == "candidate"
    assert behind["workloads"][0].startswith("ml-batch/batch-")  # not the exporter's own pod


def test_mig_instances_are_judged_from_the_profiling_metrics(fleet) -> None:
    first, second = gpu_of(fleet, "case-mig", "1"), gpu_of(fleet, "case-mig", "2")
    assert (first["mig_profile"], first["fb_total_mib"], first["coverage"]["hours"]) == ("1g.10gb", 9856, 168)
    assert first["util_1h_p50"] == pytest.approx(6, abs=1) and second["util_1h_p50"] == pytest.approx(25, abs=1)
    assert (first["verdict"], first["recommended_replicas"]) == ("candidate", 4)
    assert (second["verdict"], second["recommended_replicas"]) == ("candidate", 3)


def test_without_fb_reserved_the_card_is_used_plus_free(fleet) -> None:
    """An exporter before 4.3.1-4.4.0 (here with `Hostname`) exports no DCGM_FI_DEV_FB_RESERVED: the
    card is sized by used + free, and the reasons say so."""
    gpu = gpu_of(fleet, node("no-reserved"))
    assert (gpu["verdict"], gpu["recommended_replicas"], gpu["fb_reserved_exported"]) == ("candidate", 4, False)
    assert gpu["fb_total_mib"] == TOTAL - round(TOTAL * 0.007)  # used + free
    assert any("(used + free: the exporter does not export DCGM_FI_DEV_FB_RESERVED)" in r for r in gpu["reasons"])
    assert gpu_of(fleet, node("steady-idle"))["fb_reserved_exported"] is True


def test_no_xid_series_is_not_no_xid(fleet, prometheus, capsys, tmp_path) -> None:
    gpu = gpu_of(fleet, node("no-xid"))
    assert (gpu["verdict"], gpu["xid"]) == ("insufficient-data", None)
    assert gpu["reasons"] == ["no DCGM_FI_DEV_XID_ERRORS series in the window: Xid errors are unknown, not absent (if "
                              "the exporter does not collect them, say so with xid_required: false)"]
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(yaml.safe_dump({"xid_required": False}))
    code, report, _ = baseline(capsys, prometheus, tmp_path, "--node", node("no-xid"), "--thresholds", str(thresholds))
    assert (code, report["gpus"][0]["verdict"]) == (0, "candidate")
    assert "Xid errors not judged: the thresholds say the exporter does not collect them (xid_required: false)" in (
        report["gpus"][0]["reasons"])


def test_one_day_of_memory_in_a_week_is_insufficient(fleet) -> None:
    gpu = gpu_of(fleet, node("memory-one-day"))
    assert (gpu["verdict"], gpu["recommended_replicas"], gpu["coverage"]["hours"]) == ("insufficient-data", None, 168)
    assert gpu["reasons"] == ["only 1.0 days of memory data (DCGM_FI_DEV_FB_USED) (since 2024-01-07T01:00:00Z): the "
                              "seed asks for at least 7d that cover releases, traffic peaks and training checkpoints"]


def test_one_node_and_an_unknown_node(prometheus, capsys, tmp_path) -> None:
    code, report, _ = baseline(capsys, prometheus, tmp_path, "--node", node("xid"))
    assert code == 0 and [g["node"] for g in report["gpus"]] == [node("xid")]
    code, report, err = baseline(capsys, prometheus, tmp_path, "--node", node("xid"), "--node", "gpu-elsewhere")
    assert code == 5 and [(g["node"], g["verdict"], g["absent"]) for g in report["gpus"]] == [
        (node("xid"), "not-candidate", False), ("gpu-elsewhere", "insufficient-data", True)]
    reason = report["gpus"][1]["reasons"][0]
    assert reason.startswith("no DCGM series for node gpu-elsewhere in the window (Hostname / hostname label)")
    assert "case-checkpoints" in reason and report["summary"]["insufficient-data"] == 1
    assert err.endswith("no series in the window for gpu-elsewhere: reported as insufficient-data\n")


def test_a_gpu_the_node_holds_without_series(prometheus, capsys, tmp_path) -> None:
    code, report, err = baseline(capsys, prometheus, tmp_path, "--gpus", f"{node('steady-idle')}=2")
    assert code == 5 and [(g["gpu"], g["verdict"]) for g in report["gpus"]] == [
        ("0", "candidate"), ("1", "insufficient-data")]
    assert report["gpus"][1]["reasons"][0].startswith(
        f"no DCGM series for GPU 1 of node {node('steady-idle')} in the window (the node holds 2)")


def test_no_series_in_the_window_exits_4(prometheus, capsys, tmp_path) -> None:
    code, report, err = baseline(capsys, prometheus, tmp_path, "--end", "2020-01-08T00:00:00Z")
    assert (code, report) == (4, None)
    assert "holds no DCGM series" in err


def test_a_bad_query_override_exits_2(prometheus, capsys, tmp_path) -> None:
    override = tmp_path / "thresholds.yaml"
    override.write_text(yaml.safe_dump({"queries": {"xid": "max by (UUID) (rate("}}))
    code, _, err = baseline(capsys, prometheus, tmp_path, "--thresholds", str(override))
    assert code == 2
    assert "queries.xid: Prometheus refused the query (HTTP 400" in err


def test_prometheus_stopped_exits_4(capsys, tmp_path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    code, report, err = baseline(capsys, url, tmp_path)
    assert (code, report) == (4, None)
    assert f"Prometheus at {url} did not answer" in err


def test_table_markdown_and_plots_agree_with_json(fleet, prometheus, capsys, tmp_path) -> None:
    from PIL import Image

    code, report, _ = baseline(capsys, prometheus, tmp_path, "--node", node("checkpoints"), "--plots",
                               str(tmp_path / "plots"))
    gpu = report["gpus"][0]
    assert code == 0 and gpu["plot"] == str(tmp_path / "plots" / "case-checkpoints-gpu0.png")
    drawn = json.loads(Image.open(gpu["plot"]).text["Description"])
    assert drawn == {"uuid": gpu["uuid"], "verdict": "not-candidate", "util_hours": 168,
                     "util_max": pytest.approx(gpu["util_1h_p95"], abs=2), "fb_days": 7,
                     "fb_peak_mib": gpu["fb_peak_mib"], "fb_total_mib": TOTAL}
    assert main(["baseline", "--prometheus", prometheus, "--end", str(END), "--node", node("checkpoints"),
                 "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert re.search(rf"^{node('checkpoints')}\s+0\s+NVIDIA H100 80GB HBM3 .* not-candidate\s+1\s+memory peak",
                     table, re.M), table


@pytest.mark.parametrize("release", sorted(cp.RELEASES))
def test_a_shared_card_is_judged_by_its_own_series_on_every_release(fleet, release) -> None:
    """Four pods share a card at 40%: each release's exporter (its node label, and from 4.5.3-4.8.2 on
    the pods' own process series, 10% each, beside the card's) still gives the card's 40% and memory,
    one GPU, its four pods as its workloads."""
    gpus = [g for g in fleet["gpus"] if g["node"] == release_node(release)]
    assert len(gpus) == 1, gpus
    gpu = gpus[0]
    assert gpu["util_1h_p50"] == pytest.approx(40, abs=2.5)
    assert gpu["fb_peak_mib"] == pytest.approx(0.40 * (TOTAL - round(TOTAL * 0.007)), rel=0.02)
    assert (len(gpu["workloads"]), gpu["coverage"]["hours"], gpu["xid"]) == (4, 168, 0)


@pytest.mark.parametrize("release", sorted(cp.RELEASES))
def test_baseline_and_gates_find_the_node_under_each_release_s_label(prometheus, capsys, tmp_path, release) -> None:
    """--node finds the node's series whichever label the release's exporter writes it under: the
    baseline's one card, and the gates' DCGM node check and memory (the card's own FB_USED peak)."""
    code, report, _ = baseline(capsys, prometheus, tmp_path, "--node", release_node(release))
    assert code == 0 and [(g["node"], g["absent"]) for g in report["gpus"]] == [(release_node(release), False)]
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(yaml.safe_dump(THRESHOLDS))
    main(["gate", "--prometheus", prometheus, "--window", "1h", "--trial-end", str(END), "--thresholds",
          str(thresholds), "--format", "json", "--node", release_node(release)])
    out, err = capsys.readouterr()
    assert out, err
    gates = {gate["name"]: gate for gate in json.loads(out)["gates"]}
    assert gates["dcgm_nodes"]["observed"]["trial"] == [release_node(release)]
    assert gates["memory_headroom"]["observed"]["trial_peak_pct"] == pytest.approx(40, abs=1)
    assert gates["xid_errors"]["observed"]["trial"] == 0.0


def test_a_fixed_history_is_built_once_per_machine_and_reads_as_promtool_wrote_it(tmp_path: Path) -> None:
    """backfill's cache: the second build copies the first one's blocks (no new cache entry, none
    rewritten), and both hold what promtool writes straight into a TSDB."""
    if not Path(PROMTOOL).is_file():
        pytest.skip(f"{PROMTOOL} not installed: run scripts/install-prometheus.sh (or make setup)")
    gpus, cache = [SimGpu(node("cached"), 0, H100, TOTAL, BATCH)], tmp_path / "cache"

    def build(name: str, **cached: Path) -> tuple[int, list[dict]]:
        samples = backfill(gpus, END - 3 * 3600, END, 300, END, tmp_path / name, **cached)
        metas = [json.loads(meta.read_text()) for meta in sorted((tmp_path / name).glob("*/meta.json"))]
        return samples, sorted(((m["minTime"], m["maxTime"], m["stats"]["numSamples"], m["ulid"]) for m in metas))

    first = build("first", cache=cache)
    entries = {entry: entry.stat().st_mtime_ns for entry in cache.iterdir()}
    second = build("second", cache=cache)
    assert len(entries) == len(first[1]) and {entry: entry.stat().st_mtime_ns for entry in cache.iterdir()} == entries
    assert second == first
    assert build("second", cache=cache)[1] == first[1]  # the same window written again is kept once
    direct_samples, direct = build("direct")
    assert direct_samples == first[0] > 0
    assert [block[:3] for block in direct] == [block[:3] for block in first[1]]
