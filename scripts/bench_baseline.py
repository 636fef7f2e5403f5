"""Baseline timing: `gpushare baseline` over one week x 500 GPUs, from a real Prometheus holding a
generated history (the simulated fleet's workload profiles, backfilled with promtool)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpushare_testbed.dcgm_sim.backfill import backfill
from gpushare_testbed.dcgm_sim.hardware import NodeHardware, fleet_gpus
from gpushare.polling import pauses
from tests.prometheus_fixture import prometheus_server

END = 1704672000  # 2024-01-08T00:00:00Z
NODES, GPUS_PER_NODE, STEP_S = 125, 4, 300  # 500 GPUs, a sample every 5 minutes


def _baseline(url: str, *args: str) -> float:
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "gpushare", "baseline", "--prometheus", url, "--end", str(END),
                             "--format", "json", *args], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"gpushare baseline failed: {result.stderr[-2000:]}")
    return elapsed


def _wait_compacted(tsdb: Path, quiet_s: float = 15.0, timeout_s: float = 600.0) -> None:
    """Prometheus compacts the 84 backfilled 2 h blocks after it starts: measure after it is done
    (the block count unchanged for quiet_s), as a long-running server would be."""
    deadline, last, since, pause = time.monotonic() + timeout_s, -1, time.monotonic(), pauses(1.0)
    while time.monotonic() < deadline:
        blocks = sum(1 for p in tsdb.iterdir() if p.is_dir() and len(p.name) == 26)
        if blocks != last:
            last, since = blocks, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(next(pause))
    raise TimeoutError(f"Prometheus still compacting {tsdb} after {timeout_s:.0f}s ({last} blocks)")


def bench_baseline(runs: int = 3) -> dict[str, dict[str, float]]:
    nodes = [NodeHardware(f"bench-{i:03d}", GPUS_PER_NODE, "NVIDIA-H100-80GB-HBM3") for i in range(NODES)]
    gpus = fleet_gpus(nodes)
    with tempfile.TemporaryDirectory(prefix="gpushare-bench-baseline-") as scratch:
        began = time.perf_counter()
        samples = backfill(gpus, END - 7 * 86400 - 3600, END, STEP_S, END, Path(scratch) / "tsdb")
        backfill_s = time.perf_counter() - began
        with prometheus_server(Path(scratch) / "tsdb", Path(scratch)) as url:
            _wait_compacted(Path(scratch) / "tsdb")
            _baseline(url)  # warm Prometheus' caches once, as a re-run would find them
            seconds = [_baseline(url) for _ in range(runs)]
            plots_s = _baseline(url, "--plots", str(Path(scratch) / "plots"))
    return {"baseline": {
        "gpus": float(len(gpus)), "samples": float(samples), "backfill_s": backfill_s,
        "median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds), "plots_s": plots_s,
    }}


if __name__ == "__main__":
    print(bench_baseline())
