"""A generated history of the simulated GPUs, written into a Prometheus TSDB with promtool.

`promtool tsdb create-blocks-from openmetrics` cuts its input into 2 h blocks and re-reads the
whole file for each block, so a week in one file costs 84 passes over it. The history is written
one 2 h window at a time instead (each window one promtool run, two at a time), which keeps the
cost linear in the number of samples. A history with a fixed end (the tests') can keep each window's
blocks in a cache, keyed by the window's input and the promtool binary, and is then built once per
machine: promtool is nearly all of a backfill's CPU time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpushare_testbed.dcgm_sim.exposition import Exporter, SimGpu, openmetrics

BLOCK_S = 7200  # promtool's block length, aligned to multiples of it
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
# Built TSDB blocks, beside the binaries' cache (scripts/build-binaries.sh).
TSDB_CACHE = Path(os.environ.get("GPUSHARE_CACHE", Path.home() / ".cache" / "gpushare")) / "tsdb"


class BackfillError(RuntimeError):
    """promtool is missing or refused the generated input."""


def backfill(gpus: Sequence[SimGpu], start: int, end: int, step_s: int, epoch: int, tsdb: Path,
             workers: int = 2, relabel: Callable[[str], str] | None = None, exporter: Exporter = Exporter(),
             cache: Path | None = None) -> int:
    """Write samples every step_s seconds in [start, end], as `exporter` writes them, into blocks
    under `tsdb`; returns the number of samples written. `relabel` may rewrite each window's
    OpenMetrics text first. `cache`: keep each window's blocks there and reuse them (cached_blocks)."""
    if not Path(PROMTOOL).is_file():
        raise BackfillError(f"{PROMTOOL} not found: install Prometheus (scripts/install-prometheus.sh)")
    first = start - start % step_s
    windows = range(first - first % BLOCK_S, end + 1, BLOCK_S)
    tsdb.mkdir(parents=True, exist_ok=True)

    def one_window(window_start: int) -> int:
        times = range(max(first, window_start), min(end, window_start + BLOCK_S - 1) + 1, step_s)
        text = openmetrics(gpus, times, epoch, exporter)
        if relabel:
            text = relabel(text)
        samples = text.count("\n") - text.count("\n#") - 1  # lines less HELP/TYPE/EOF
        if not samples:
            return 0
        if cache is None:
            create_blocks(text, tsdb)
        else:
            for block in cached_blocks(text, cache).iterdir():
                if not (tsdb / block.name).exists():  # a window written twice the same: its samples once
                    shutil.copytree(block, tsdb / block.name)
        return samples

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return sum(pool.map(one_window, windows))


def create_blocks(text: str, tsdb: Path) -> None:
    """promtool's blocks of the OpenMetrics `text`, written under `tsdb`."""
    with tempfile.NamedTemporaryFile("w", suffix=".om", prefix="gpushare-backfill-", encoding="utf-8") as source:
        source.write(text)
        source.flush()
        result = subprocess.run(
            [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--quiet", source.name, str(tsdb)],
            capture_output=True, text=True, timeout=600, check=False,
        )
    if result.returncode != 0:
        raise BackfillError(f"promtool refused the history: {result.stderr.strip()[-500:]}")


def cached_blocks(text: str, cache: Path) -> Path:
    """The directory of promtool's blocks of `text` under `cache`, built there once per machine (keyed
    by the text and the promtool binary) and renamed into place in one step: where another process
    renamed the same blocks there first, theirs are kept. Blocks are copied out of it, never served
    from it: Prometheus writes into its TSDB."""
    promtool = Path(PROMTOOL).stat()
    key = hashlib.sha256(f"{PROMTOOL} {promtool.st_size} {promtool.st_mtime_ns}\n{text}".encode()).hexdigest()[:24]
    cached = cache / key
    if cached.is_dir():
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{key}.partial-", dir=cache))
    try:
        create_blocks(text, partial)
        partial.rename(cached)
    except OSError:
        if not cached.is_dir():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return cached
