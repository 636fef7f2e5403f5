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
from typing import Any

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


def cluster_cpu_s(state: Path) -> dict[str, float]:
    """CPU seconds (user + system) each embedded-cluster process has used since it started."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = {}
    for pid_file in (state / "pids").glob("*.pid"):
        pid = json.loads(pid_file.read_text())["pid"]
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        used[pid_file.stem] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return used


def bench_sim_up(fleet: Path | None, runs: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """`gpushare sim up` timed `runs` times; the last one's memory and, per process, the CPU its bring-up took."""
    samples = []
    memory, cpu = (0.0, 0.0), {}
    for _ in range(runs):
        sim("down")
        args = ["up", *extra] + (["--fleet", str(fleet)] if fleet else [])
        samples.append(timed(lambda: sim(*args)))
        memory, cpu = cluster_memory_mib(STATE), cluster_cpu_s(STATE)
    return {"up_median_s": statistics.median(samples), "up_min_s": min(samples), "up_max_s": max(samples),
            "rss_mib": memory[0], "peak_rss_mib": memory[1], "cpu_s": cpu}
