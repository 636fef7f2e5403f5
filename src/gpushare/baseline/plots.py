"""PNG plots per GPU (matplotlib): the window of 1 h utilisation, and the daily FB peak against
the card's memory and the ceiling the margin leaves. The figures' numbers are also written into
the PNG's text chunk ("Description", JSON) so a reader can check them against the report."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from matplotlib.dates import DateFormatter, DayLocator
from matplotlib.figure import Figure

from gpushare.baseline.model import GpuVerdict, Thresholds
from gpushare.baseline.verdict import daily_peaks
from gpushare.output_dir import make_dir


def plot_name(verdict: GpuVerdict) -> str:
    key = verdict.series.key
    name = f"{key.node}-gpu{key.gpu}" + (f"-mig{key.instance}" if key.instance else "")
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".png"


def write_plots(verdicts: list[GpuVerdict], thresholds: Thresholds, directory: Path, window: tuple[int, int]) -> None:
    """One PNG per GPU with series (none for a GPU asked for without any), drawn on every CPU (a
    figure takes a few hundred ms); sets each `plot`. Workers are spawned, not forked: the caller
    has threads (the queries), and a fork can copy a lock one of them held, leaving the worker stuck."""
    verdicts = [verdict for verdict in verdicts if not verdict.absent]
    if not verdicts:
        return
    make_dir(directory, 0o750)  # never a symbolic link, never chmodded (gpushare.output_dir)
    paths = [directory / plot_name(verdict) for verdict in verdicts]
    workers = min(len(verdicts), os.cpu_count() or 1)
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(_plot, verdicts, [thresholds] * len(verdicts), paths, [window] * len(verdicts), chunksize=8))
    else:
        for verdict, path in zip(verdicts, paths):
            _plot(verdict, thresholds, path, window)
    for verdict, path in zip(verdicts, paths):
        verdict.plot = str(path)


def _when(stamp: int) -> datetime:
    return datetime.fromtimestamp(stamp, timezone.utc)


def _plot(verdict: GpuVerdict, thresholds: Thresholds, path: Path, window: tuple[int, int]) -> None:
    """`window` (start, end) fixes the time axis: a series of a few points must not stretch it to years."""
    figure = Figure(figsize=(9, 4.2), dpi=80)
    series = verdict.series
    util, fb = sorted(series.util_1h.items()), sorted(daily_peaks(series.fb_used_1h, window[1]).items())
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1.3]})
    key = series.key
    title = f"{key.node} GPU {key.gpu}" + (f" MIG {series.mig_profile} #{key.instance}" if key.instance else "")
    figure.suptitle(f"{title} - {verdict.verdict}" + (
        f", {verdict.recommended_replicas} replicas" if verdict.verdict == "candidate" else ""), fontsize=11)
    if util:
        left.plot([_when(t - 1800) for t, _ in util], [v for _, v in util], lw=0.9, color="tab:blue",
                  label="1 h average utilisation")
    left.axhline(thresholds.gap_util_pct, color="tab:green", ls="--", lw=0.8,
                 label=f"idle enough ({thresholds.gap_util_pct:g}%)")
    left.set_xlim(_when(window[0]), _when(window[1]))
    left.set_ylim(0, 105)
    left.set_yticks([0, 25, 50, 75, 100])
    left.xaxis.set_major_locator(DayLocator())
    left.xaxis.set_major_formatter(DateFormatter("%m-%d"))
    left.set_ylabel("%")
    left.set_title("utilisation, 1 h averages", fontsize=9)
    left.legend(fontsize=7, loc="upper left")
    left.tick_params(axis="x", labelsize=7)
    total = series.fb_total_mib
    if fb:
        right.bar([_when(t - 86400).strftime("%m-%d") for t, _ in fb], [v / 1024 for _, v in fb],
                  color="tab:orange", label="daily FB peak")
    if total:
        right.axhline(total / 1024, color="black", lw=1, label=f"capacity {total / 1024:.0f} GiB")
        right.axhline(total * (1 - thresholds.fb_margin) / 1024, color="tab:red", ls="--", lw=0.8,
                      label=f"ceiling ({100 * (1 - thresholds.fb_margin):.0f}%)")
        right.set_ylim(0, total / 1024 * 1.45)
    right.set_ylabel("GiB")
    right.set_title("framebuffer, daily peak", fontsize=9)
    right.legend(fontsize=7, loc="upper right")
    right.tick_params(axis="x", labelsize=7, rotation=60)
    figure.subplots_adjust(left=0.07, right=0.98, bottom=0.2, top=0.86, wspace=0.25)
    description = {
        "uuid": key.uuid, "verdict": verdict.verdict, "util_hours": len(util),
        "util_max": max((v for _, v in util), default=None), "fb_days": len(fb),
        "fb_peak_mib": verdict.fb_peak_mib, "fb_total_mib": total,
    }
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
    with os.fdopen(descriptor, "wb") as png:  # never through a link
        figure.savefig(png, format="png", metadata={"Title": title, "Description": json.dumps(description)})
