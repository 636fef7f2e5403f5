"""What every benchmark shares: running a command, timing it, and the embedded cluster it measures
(`gpushare sim` in its own state directory, its memory). Imports no other bench script."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / ".gpushare-bench"


def sh(*argv: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})})
    if check and done.returncode:  # say why: the output is captured
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return done


def timed(action: Callable[[], object]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def sim(*args: str, state: Path = STATE) -> subprocess.CompletedProcess:
    return sh(sys.executable, "-m", "gpushare", "sim", *args, "--state-dir", str(state))


def cluster_memory_mib(state: Path) -> tuple[float, float]:
    """(current RSS, peak RSS) summed over the embedded cluster's processes, in MiB."""
    current = peak = 0
    for pid_file in (state / "pids").glob("*.pid"):
        pid = json.loads(pid_file.read_text())["pid"]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current += int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak += int(line.split()[1])
    return current / 1024, peak / 1024


def bench_sim_up(fleet: Path | None, runs: int, extra: tuple[str, ...] = ()) -> dict[str, float]:
    samples = []
    memory = (0.0, 0.0)
    for _ in range(runs):
        sim("down")
        args = ["up", *extra] + (["--fleet", str(fleet)] if fleet else [])
        samples.append(timed(lambda: sim(*args)))
        memory = cluster_memory_mib(STATE)
    return {"up_median_s": statistics.median(samples), "up_min_s": min(samples), "up_max_s": max(samples),
            "rss_mib": memory[0], "peak_rss_mib": memory[1]}
