"""`gpushare baseline`: a week of DCGM data per GPU turned into a sharing verdict, before any sharing."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from gpushare.baseline.evaluate import evaluate
from gpushare.baseline.model import (
    EXIT_ABSENT, EXIT_BAD_INPUT, EXIT_NO_DATA, EXIT_OK, BaselineInputError, PrometheusUnavailable, duration,
)
from gpushare.baseline.prometheus import Plan
from gpushare.baseline.report import to_dict, to_json, to_markdown, to_table
from gpushare.baseline.thresholds import load_thresholds
from gpushare.baseline.workloads import load_facts
from gpushare.prometheus.timespec import format_time, parse_duration, parse_time
from gpushare.output_dir import OutputDirError
from gpushare.prometheus import InputError

_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
EPILOG = ("exit status: 0 the baseline was computed (whatever the verdicts), 2 bad input, "
          "4 Prometheus did not answer, answered what is not a query result, or holds no DCGM series, "
          "5 the baseline was computed but a node or GPU asked for (--node, --gpus) has no series: "
          "its row says insufficient-data")


def register(commands: argparse._SubParsersAction) -> None:
    baseline = commands.add_parser(
        "baseline", help="per-GPU sharing verdict from a week of DCGM data", description=__doc__, epilog=EPILOG)
    baseline.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL, e.g. http://prometheus:9090")
    baseline.add_argument("--window", default="7d", metavar="DURATION", help="how far back to look (default 7d)")
    baseline.add_argument("--end", metavar="TIME",
                          help="end of the window: RFC 3339 or unix seconds (default: the last full hour)")
    baseline.add_argument("--thresholds", type=Path, metavar="FILE", help="thresholds YAML (default: the built-in ones)")
    baseline.add_argument("--workloads", type=Path, metavar="FILE",
                          help="workload facts, YAML or JSON (`-`: standard input); see baseline_workloads")
    baseline.add_argument("--node", action="append", default=[], metavar="NODE",
                          help="only these nodes (repeatable; default all); one without series is a row of its "
                               "own, insufficient-data, and the exit status is 5")
    baseline.add_argument("--gpus", action="append", default=[], metavar="NODE=COUNT",
                          help="the node holds COUNT GPUs, indices 0..COUNT-1 (repeatable; implies --node NODE): "
                               "each one without series is a row, insufficient-data, and the exit status is 5")
    baseline.add_argument("--format", choices=("table", "json", "markdown"), default="table",
                          help="table (default), json (the verdicts as data) or markdown (for a report)")
    baseline.add_argument("--plots", type=Path, metavar="DIR", help="write one PNG per GPU into DIR")
    baseline.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per query (default 30)")
    baseline.set_defaults(handler=cmd_baseline)


def cmd_baseline(args: argparse.Namespace) -> int:
    try:
        thresholds = load_thresholds(args.thresholds)
        facts = load_facts(args.workloads)
        plan = _plan(args, thresholds.min_history_s)
        gpu_counts = _gpu_counts(args.gpus)
        plots = _plots_dir(args.plots) if args.plots else None
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"querying {plan.url}: {duration(plan.window_s)} to {format_time(plan.end)}", file=sys.stderr)
    began = time.monotonic()
    try:
        report = evaluate(plan, thresholds, facts, tuple(args.node), gpu_counts=gpu_counts)
        if plots:
            from gpushare.baseline.plots import write_plots  # noqa: PLC0415 - matplotlib only when asked

            write_plots(report.gpus, thresholds, plots, (plan.end - plan.window_s, plan.end))
    except (InputError, OutputDirError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PrometheusUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_NO_DATA
    print(f"{len(report.gpus)} GPU(s) judged in {time.monotonic() - began:.1f}s", file=sys.stderr)
    document = to_dict(report)
    if args.format == "json":
        print(to_json(document))
    elif args.format == "markdown":
        print(to_markdown(document, link_base=str(Path.cwd())), end="")
    else:
        print(to_table(document))
    absent = [f"{g.series.key.node}" + (f" GPU {g.series.key.gpu}" if g.series.key.gpu else "")
              for g in report.gpus if g.absent]
    if absent:
        print(f"no series in the window for {', '.join(absent)}: reported as insufficient-data", file=sys.stderr)
        return EXIT_ABSENT
    return EXIT_OK


def _plan(args: argparse.Namespace, min_history_s: int) -> Plan:
    if not re.match(r"^https?://[^/\s]+", args.prometheus):
        raise BaselineInputError(f"--prometheus {args.prometheus!r}: give the base URL, e.g. http://prometheus:9090")
    window_s = parse_duration(args.window, "--window")
    if window_s % 3600:
        raise BaselineInputError(f"--window {args.window}: give whole hours (the baseline reads 1 h averages)")
    if window_s < min_history_s:
        raise BaselineInputError(
            f"--window {args.window} is shorter than min_history {duration(min_history_s)}: the seed asks "
            "for at least a week that covers releases, traffic peaks and checkpoints (or lower min_history)")
    bad_nodes = [node for node in args.node if not _NODE_NAME.fullmatch(node)]
    if bad_nodes:
        raise BaselineInputError(f"--node {', '.join(bad_nodes)}: not a Kubernetes node name")
    if args.timeout <= 0:
        raise BaselineInputError(f"--timeout {args.timeout}: give a positive number of seconds")
    # By default the window ends with the last full hour, so that its 1 h averages are clock hours.
    end = int(parse_time(args.end, "--end")) if args.end else int(time.time()) // 3600 * 3600
    return Plan(args.prometheus, end, window_s, args.timeout)


def _gpu_counts(values: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        node, _, count = value.partition("=")
        if not _NODE_NAME.fullmatch(node) or not count.isdigit() or not 0 < int(count) <= 64:
            raise BaselineInputError(f"--gpus {value}: give NODE=COUNT, a node name and 1 to 64 GPUs (e.g. gpu-a=8)")
        counts[node] = int(count)
    return counts


def _plots_dir(directory: Path) -> Path:
    """Checked before any query; created only once there is something to draw."""
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        raise BaselineInputError("--plots needs matplotlib: pip install -r requirements-dev.txt") from None
    if directory.is_symlink():
        raise BaselineInputError(f"--plots {directory} is a symbolic link: plots go only into a real directory, "
                                 f"never through a link; give {directory.resolve()} or remove the link")
    existing = next(p for p in (directory.resolve(), *directory.resolve().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise BaselineInputError(f"--plots {directory}: {existing} is not a writable directory")
    return directory
