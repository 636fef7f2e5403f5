"""A real Prometheus over a generated TSDB: one node per gate case, a week of whole-card baseline.

Each case is a node `gpu-<case>` with two GPUs. The baseline week runs two whole-card pods (one
per GPU, 10 requests/s each); the trial hour runs four time-sliced pods, two per GPU. Series follow
the real exporters: DCGM per GPU (node label `Hostname`, or `hostname` as since dcgm-exporter
d5e5f51; with KUBERNETES_VIRTUAL_GPUS each GPU's series copied to the pods sharing it, with their
replica in `vgpu`), kube-state-metrics per pod/container, and the workload's own request counter,
latency histogram and queue-wait summary. Cases differ only in the trial (and the few named
otherwise), so each one trips exactly the gate it is named for. Queries select a case with
`--node gpu-<case>` and `--trial-end TRIAL_END`.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from gpushare.polling import pauses
from gpushare_testbed.controlplane import free_port
from gpushare_testbed.dcgm_sim.backfill import PROMTOOL, TSDB_CACHE, cached_blocks
from gpushare_testbed.gpu_identity import gpu_uuid

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"

TRIAL_END = 1704672000  # 2024-01-08T00:00:00Z
TRIAL_START = TRIAL_END - 3600
BASELINE_START = TRIAL_START - 7 * 86400
BASELINE_STEP, TRIAL_STEP = 3600, 60  # a sample every hour over the week, every minute in the trial
NAMESPACE = "ml"
BUCKETS = ("0.2", "0.3", "0.4", "0.45", "0.5", "0.6", "+Inf")
# Latency modes: every request of a minute falls in one bucket, so the P99 is known exactly:
# fast 0.2-0.3 s -> 299 ms, base 0.3-0.4 s -> 399 ms, rise 0.4-0.45 s -> 449.5 ms,
# mid 0.45-0.5 s -> 499.5 ms, slow 0.5-0.6 s -> 599 ms. Mode -> (its bucket's index, its middle in s).
MODES = {"fast": (1, 0.25), "base": (2, 0.35), "rise": (3, 0.425), "mid": (4, 0.475), "slow": (5, 0.55)}
LATENCY_WINDOWS = 12  # 5-minute windows in the trial hour

# The thresholds every case is evaluated with: SLO 500 ms, so every mode but slow is within; the
# baseline's 399 ms leaves 101 ms of headroom, of which rise uses 50% and mid 99.5%.
THRESHOLDS = {
    "throughput_min_gain": 0.10,
    "p99_slo_ms": 500,
    "p99_breach_windows": 3,
    "max_new_xid": 0,
    "jitter_max_headroom_used": 0.75,
    "jitter_max_spread": 0.25,
    "latency_window": "5m",
}


@dataclass(frozen=True)
class GateCase:
    """What happens during one trial hour; the defaults pass every gate."""

    trial_rate: float = 6.0  # requests/s per shared pod: 4 pods on 2 GPUs = 12/GPU, +20% over 10
    latency: tuple[str, ...] = ("fast",) * LATENCY_WINDOWS  # one mode per 5-minute window
    latency_metrics: bool = True  # False: the trial pods export no latency histogram
    latency_from: int = 0  # the first 5-minute window with a latency histogram
    queue_wait_s: float = 10.0
    baseline_queue_wait_s: float = 30.0
    oom_pods: tuple[int, ...] = ()  # trial pods OOMKilled at minute 30
    crash_pods: tuple[int, ...] = ()  # trial pods that restart (reason Error) at minute 30; 0, 1 on GPU 0
    xid: int | None = 0  # Xid code raised on GPU 1 at minute 20; None: the exporter collects no Xid
    host_label: str = "Hostname"
    shares_mapped: bool = False  # KUBERNETES_VIRTUAL_GPUS=true: per-card attribution
    trial_fb_used_mib: float = 61000.0  # of 81920 (74.5%)
    uuids: tuple[str, str] | None = None  # the two cards' UUIDs (default: the host's simulated GPUs 0 and 1)


CASES: dict[str, GateCase] = {
    "continue": GateCase(),
    "no-gain": GateCase(trial_rate=5.0),
    "small-gain": GateCase(trial_rate=5.25),
    "p99-breach": GateCase(latency=("fast",) * 9 + ("slow",) * 3),
    "p99-blip": GateCase(latency=("fast",) * 10 + ("slow",) * 2),
    "oom": GateCase(oom_pods=(1,)),
    "restart": GateCase(crash_pods=(2,)),
    "correlated": GateCase(crash_pods=(0, 1), shares_mapped=True),
    "correlated-two-cards": GateCase(crash_pods=(0, 2), shares_mapped=True),
    "correlated-unmapped": GateCase(crash_pods=(0, 2)),
    "xid": GateCase(xid=79),
    "queue-flat": GateCase(queue_wait_s=35.0),
    "latency-rise": GateCase(latency=("rise",) * LATENCY_WINDOWS),
    "jitter": GateCase(latency=("base", "mid") * (LATENCY_WINDOWS // 2)),
    "near-slo": GateCase(latency=("mid",) * LATENCY_WINDOWS),
    "no-latency": GateCase(latency_metrics=False),
    "no-queue": GateCase(trial_rate=10.0, queue_wait_s=0.0, baseline_queue_wait_s=0.0),  # twice the work per GPU
    "hostname": GateCase(host_label="hostname"),
    "no-xid": GateCase(xid=None),
    "latency-gaps": GateCase(latency_from=9),
    "memory-full": GateCase(trial_fb_used_mib=78000.0),
}
FB_TOTAL_MIB, FB_RESERVED_MIB = 81920.0, 571.0


def node(case: str) -> str:
    return f"gpu-{case}"


def card(case: str, gpu: int) -> str:
    """The UUID of a case's GPU, as NVML writes it (the simulated cluster's GPUs have the same form)."""
    return gpu_uuid(node(case), gpu)


@dataclass
class _Families:
    """OpenMetrics lines grouped by metric family, as the format requires."""

    types: dict[str, str] = field(default_factory=dict)
    lines: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, family: str, kind: str, sample: str, labels: dict[str, str], points: list[tuple[int, float]]) -> None:
        self.types[family] = kind
        text = ",".join(f'{key}="{value}"' for key, value in labels.items())
        self.lines[family].extend(f"{sample}{{{text}}} {value!r} {ts}" for ts, value in points)

    def render(self) -> str:
        out = []
        for family, kind in self.types.items():
            out.append(f"# TYPE {family} {kind}")
            out.extend(self.lines[family])
        out.append("# EOF")
        return "\n".join(out) + "\n"


def openmetrics() -> str:
    families = _Families()
    for name, case in CASES.items():
        _add_case(families, node(name), case)
    return families.render()


def one_case(host: str, case: GateCase) -> str:
    """The OpenMetrics text of one trial on `host` (a real node's name: the DRA pilot's cards)."""
    families = _Families()
    _add_case(families, host, case)
    return families.render()


def _add_case(om: _Families, host: str, case: GateCase) -> None:
    baseline = list(range(BASELINE_START, TRIAL_START, BASELINE_STEP))
    trial = list(range(TRIAL_START + TRIAL_STEP, TRIAL_END + 1, TRIAL_STEP))
    everything = baseline + [TRIAL_START] + trial
    for gpu in (0, 1):
        labels = {"gpu": str(gpu), "UUID": case.uuids[gpu] if case.uuids else gpu_uuid(host, gpu), "device": f"nvidia{gpu}",
                  "modelName": "NVIDIA A100-SXM4-80GB", case.host_label: host}
        util = [(t, 55.0 if t <= TRIAL_START else 85.0) for t in everything]
        fb_used = [(t, 30000.0 if t <= TRIAL_START else case.trial_fb_used_mib) for t in everything]
        families = {
            "DCGM_FI_DEV_GPU_UTIL": util, "DCGM_FI_DEV_FB_USED": fb_used,
            "DCGM_FI_DEV_FB_FREE": [(t, FB_TOTAL_MIB - FB_RESERVED_MIB - used) for t, used in fb_used],
            "DCGM_FI_DEV_FB_RESERVED": [(t, FB_RESERVED_MIB) for t in everything],
        }
        if case.xid is not None:
            families["DCGM_FI_DEV_XID_ERRORS"] = [(t, _xid(gpu, t, case.xid)) for t in everything]
        for family, points in families.items():
            om.add(family, "gauge", family, labels, points)
            if case.shares_mapped:  # the trial's sharing pods, two per GPU
                for share in (0, 1):
                    pod = {"container": "worker", "namespace": NAMESPACE, "pod": f"{host}-trial-{2 * gpu + share}",
                           "vgpu": str(share)}
                    om.add(family, "gauge", family, labels | pod, [(t, v) for t, v in points if t > TRIAL_START])
    # Whole-card week: one restart (day 2) and one OOM kill (day 4), Xid 13 on GPU 0 (day 3).
    for index in (0, 1):
        failure = (BASELINE_START + (2 + 2 * index) * 86400, "Error" if index == 0 else "OOMKilled")
        _add_pod(om, host, f"{host}-base-{index}", baseline, rate=10.0, mode_at=lambda t: "base",
                 queue_wait_s=case.baseline_queue_wait_s, failure=failure, latency_from=BASELINE_START)
    for index in range(4):
        failure = None
        if index in case.oom_pods or index in case.crash_pods:
            failure = (TRIAL_START + 30 * 60, "OOMKilled" if index in case.oom_pods else "Error")
        _add_pod(om, host, f"{host}-trial-{index}", trial, rate=case.trial_rate, mode_at=partial(_trial_mode, case),
                 queue_wait_s=case.queue_wait_s, failure=failure,
                 latency_from=TRIAL_START + case.latency_from * 300 if case.latency_metrics else None)


def _trial_mode(case: GateCase, t: int) -> str:
    """The mode of requests served in the minute before sample t: its 5-minute window's."""
    return case.latency[(t - TRIAL_START - 1) // 300]


def _xid(gpu: int, t: int, trial_code: int) -> float:
    if gpu == 0 and t >= BASELINE_START + 3 * 86400:
        return 13.0  # a week-old Xid stays in the gauge; it is not new in the trial
    return float(trial_code) if gpu == 1 and trial_code and t >= TRIAL_START + 20 * 60 else 0.0


def _add_pod(
    om: _Families, host: str, pod: str, times: list[int], *, rate: float, mode_at: Callable[[int], str],
    queue_wait_s: float, failure: tuple[int, str] | None, latency_from: int | None, namespace: str = NAMESPACE,
) -> None:
    """One pod's series: `rate` requests/s, each minute's latency in mode_at(t)'s bucket (exported
    from latency_from on; None: never), a failure (time, reason) that restarts its container."""
    pod_labels = {"namespace": namespace, "pod": pod}
    om.add("kube_pod_info", "gauge", "kube_pod_info", {**pod_labels, "node": host}, [(t, 1.0) for t in times])
    container = {**pod_labels, "container": "worker"}
    restarts = [(t, 1.0 if failure and t >= failure[0] else 0.0) for t in times]
    om.add("kube_pod_container_status_restarts", "counter", "kube_pod_container_status_restarts_total",
           container, restarts)
    if failure:
        om.add("kube_pod_container_status_last_terminated_reason", "gauge",
               "kube_pod_container_status_last_terminated_reason", {**container, "reason": failure[1]},
               [(t, 1.0) for t in times if t >= failure[0]])
    requests, buckets = [], defaultdict(list)
    total = latency_sum = 1_000_000.0  # counters that started long ago
    bucket_counts = dict.fromkeys(BUCKETS, total)
    step = times[1] - times[0]
    for i, t in enumerate(times):
        if i:
            served = rate * step
            bucket, middle = MODES[mode_at(t)]
            for upper in BUCKETS[bucket:]:
                bucket_counts[upper] += served
            total += served
            latency_sum += served * middle
        requests.append((t, total))
        for upper in BUCKETS:
            buckets[upper].append((t, bucket_counts[upper]))
    om.add("workload_requests", "counter", "workload_requests_total", pod_labels, requests)
    om.add("workload_queue_wait_seconds", "summary", "workload_queue_wait_seconds_sum", pod_labels,
           [(t, value * queue_wait_s) for t, value in requests])
    om.add("workload_queue_wait_seconds", "summary", "workload_queue_wait_seconds_count", pod_labels, requests)
    if latency_from is None:
        return
    family = "workload_request_duration_seconds"
    for upper in BUCKETS:
        om.add(family, "histogram", f"{family}_bucket", {**pod_labels, "le": upper},
               [(t, v) for t, v in buckets[upper] if t >= latency_from])
    om.add(family, "histogram", f"{family}_sum", pod_labels, [(t, latency_sum) for t, _ in requests if t >= latency_from])
    om.add(family, "histogram", f"{family}_count", pod_labels, [(t, v) for t, v in requests if t >= latency_from])


def build_tsdb(directory: Path, text: Callable[[], str] = openmetrics) -> Path:
    """Blocks of `text()` (default: every gate case) under directory/tsdb, built once per directory.
    The server writes into its TSDB, so each directory gets a copy of the blocks, which promtool
    builds once per machine (cached_blocks): the gate cases' week takes it 15 CPU-s, and each pytest
    process of `make test` serves them."""
    tsdb = directory / "tsdb"
    if tsdb.is_dir():
        return tsdb
    cached = cached_blocks(text(), TSDB_CACHE)
    partial = directory / "tsdb.partial"
    shutil.rmtree(partial, ignore_errors=True)  # an interrupted copy's
    shutil.copytree(cached, partial)
    partial.rename(tsdb)
    return tsdb


@contextmanager
def serve_gate_cases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The gate-case TSDB (built once per session) behind a fresh server; skips without Prometheus."""
    skip_without_prometheus()
    directory = tmp_path_factory.getbasetemp() / "gates-prometheus"
    directory.mkdir(exist_ok=True)
    with prometheus_server(build_tsdb(directory), tmp_path_factory.mktemp("prometheus")) as url:
        yield url


def skip_without_prometheus() -> None:
    missing = [path for path in (PROMETHEUS, PROMTOOL) if not Path(path).is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: run scripts/install-prometheus.sh (or make setup)")


@contextmanager
def prometheus_server(tsdb: Path, workdir: Path, ready_timeout_s: float = 60.0,
                      scrape: str | None = None) -> Iterator[str]:
    """Serve `tsdb` on a free loopback port; yields the base URL, stops the server afterwards.
    `scrape`: a host:port whose /metrics it scrapes every second."""
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n" if scrape is None else (
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: dcgm-exporter\n"
        f"    static_configs:\n      - targets: ['{scrape}']\n"), encoding="utf-8")
    url = f"http://127.0.0.1:{free_port()}"
    log = workdir / "prometheus.log"
    command = [
        PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
        "--storage.tsdb.retention.time=3650d", f"--web.listen-address={url.removeprefix('http://')}",
        "--log.level=warn",
    ]
    with log.open("w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        _wait_ready(url, process, log, ready_timeout_s)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline, pause = time.monotonic() + timeout_s, pauses(0.1)
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:  # noqa: S310 - our own server
                if response.status == 200:
                    return
        except OSError as err:
            last_error = str(err)
        time.sleep(next(pause))
    raise TimeoutError(f"prometheus at {url} not ready after {timeout_s:.0f}s ({last_error}); log: {log}")
