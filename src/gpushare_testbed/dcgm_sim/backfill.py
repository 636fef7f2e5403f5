"""A generated history of the simulated GPUs, written into a Prometheus TSDB with promtool.

`promtool tsdb create-blocks-from openmetrics` cuts its input into 2 h blocks and re-reads the
whole file for each block, so a week in one file costs 84 passes over it. The history is written
one 2 h window at a time instead (each window one promtool run, two at a time), which keeps the
cost linear in the number of samples.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpushare_testbed.dcgm_sim.exposition import Exporter, SimGpu, openmetrics

BLOCK_S = 7200  # promtool's block length, aligned to multiples of it
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


class BackfillError(RuntimeError):
    """promtool is missing or refused the generated input."""


def backfill(gpus: Sequence[SimGpu], start: int, end: int, step_s: int, epoch: int, tsdb: Path,
             workers: int = 2, relabel: Callable[[str], str] | None = None, exporter: Exporter = Exporter()) -> int:
    """Write samples every step_s seconds in [start, end], as `exporter` writes them, into blocks
    under `tsdb`; returns the number of samples written. `relabel` may rewrite each window's
    OpenMetrics text first."""
    if not Path(PROMTOOL).is_file():
        raise BackfillError(f"{PROMTOOL} not found: install Prometheus (scripts/install-prometheus.sh)")
    first = start - start % step_s
    windows = range(first - first % BLOCK_S, end + 1, BLOCK_S)
    tsdb.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpushare-backfill-") as scratch:

        def one_window(window_start: int) -> int:
            times = range(max(first, window_start), min(end, window_start + BLOCK_S - 1) + 1, step_s)
            source = Path(scratch) / f"{window_start}.om"
            text = openmetrics(gpus, times, epoch, exporter)
            if relabel:
                text = relabel(text)
            samples = text.count("\n") - text.count("\n#") - 1  # lines less HELP/TYPE/EOF
            if not samples:
                return 0
            source.write_text(text, encoding="utf-8")
            result = subprocess.run(
                [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(source), str(tsdb)],
                capture_output=True, text=True, timeout=600, check=False,
            )
            source.unlink()
            if result.returncode != 0:
                raise BackfillError(f"promtool refused the history for {window_start}: {result.stderr.strip()[-500:]}")
            return samples

        with ThreadPoolExecutor(max_workers=workers) as pool:
            return sum(pool.map(one_window, windows))
