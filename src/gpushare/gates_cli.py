"""`gpushare gate`: the release gates of a time-slicing trial, from a metrics file or from Prometheus."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from gpushare.gates.evaluate import evaluate
from gpushare.gates.inputs import load_metrics
from gpushare.gates.model import EXIT_BAD_INPUT, GateInputError, Observations, Thresholds
from gpushare.gates.prometheus import QueryPlan, collect
from gpushare.gates.queries import GPU_UUID
from gpushare.gates.report import to_json, to_table
from gpushare.gates.thresholds import load_thresholds
from gpushare.prometheus import InputError
from gpushare.prometheus.timespec import format_duration, format_time, parse_duration, parse_time

_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
DESCRIPTION = """\
Evaluate the release gates of a time-slicing trial - throughput per physical
GPU, P99 latency, OOM kills, restarts, correlated failures (per card where the
exporter maps shares to cards, else per node), memory headroom, Xid errors,
queue time, and with --node DCGM series for every node - against the
operator's SLOs (with --uuid, the DCGM-based ones count only those cards).
Each gate says continue, hold (not enough data) or rollback, with its reason;
the most severe is the verdict. Missing data never continues."""
EPILOG = """\
examples:
  gpushare gate --metrics examples/gates/metrics-continue.json \\
      --thresholds examples/gates/thresholds.yaml
  gpushare gate --prometheus http://prometheus:9090 --window 1h --node gpu-a \\
      --thresholds examples/gates/thresholds.yaml --format json
  gpushare gate --prometheus http://prometheus:9090 --window 1h --node gpu-a \\
      --uuid GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51 \\
      --thresholds examples/gates/thresholds.yaml

exit status: 0 continue, 3 rollback, 4 hold (not enough data: a query without
series or with a wrong-shaped answer, a --node without DCGM series, latency
windows without data; or Prometheus did not answer), 2 bad input (nothing was
evaluated)"""


def register(commands: argparse._SubParsersAction) -> None:
    gate = commands.add_parser(
        "gate", help="evaluate the release gates: continue, hold or rollback", description=DESCRIPTION,
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = gate.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--metrics", type=Path, metavar="FILE",
        help='the trial\'s metrics as JSON {"baseline": {...}, "trial": {...}} (see examples/gates/metrics-*.json)',
    )
    source.add_argument(
        "--prometheus", metavar="URL",
        help="read the metrics from this Prometheus (DCGM, kube-state-metrics, the workload's own), "
        "e.g. http://prometheus:9090",
    )
    gate.add_argument(
        "--thresholds", type=Path, required=True, metavar="FILE",
        help="the operator's SLOs as YAML, every key explained in examples/gates/thresholds.yaml",
    )
    gate.add_argument(
        "--window", metavar="DURATION", help="with --prometheus (required): the trial's length, e.g. 30m, 1h, 1d"
    )
    gate.add_argument(
        "--baseline-window", metavar="DURATION",
        help="with --prometheus: the whole-card baseline's length, right before the trial (default 7d)",
    )
    gate.add_argument(
        "--trial-end", metavar="TIME",
        help="with --prometheus: the trial's end, RFC 3339 with a zone or unix seconds (default: now)",
    )
    gate.add_argument(
        "--node", action="append", default=[], metavar="NODE",
        help="with --prometheus: count only the pods and GPUs of this node (repeat for several; default all); "
        "a node without DCGM series holds",
    )
    gate.add_argument(
        "--uuid", action="append", default=[], metavar="UUID",
        help="with --prometheus: count only this card's DCGM series (GPU-<uuid> as DCGM's UUID label writes it; "
        "repeat for several; default all cards); the workload's and kube-state-metrics' queries stay per node",
    )
    gate.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS",
        help="with --prometheus: how long to wait for each query (default 10)",
    )
    gate.add_argument(
        "--format", choices=("table", "json"), default="table",
        help="table (default): one row per gate with its reason, threshold and values, at most 120 columns; "
        "json: {verdict, error, source, gates: [{name, status, observed, threshold, reason}]} for scripts",
    )
    gate.set_defaults(handler=cmd_gate)


def cmd_gate(args: argparse.Namespace) -> int:
    try:
        thresholds = load_thresholds(args.thresholds)
        observations = _observe(args, thresholds)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = evaluate(observations, thresholds)
    print(to_json(report) if args.format == "json" else to_table(report))
    return report.exit_code


def _observe(args: argparse.Namespace, thresholds: Thresholds) -> Observations:
    prometheus_only = {"--window": args.window, "--baseline-window": args.baseline_window,
                       "--trial-end": args.trial_end, "--node": args.node, "--uuid": args.uuid}
    if args.metrics:
        given = [flag for flag, value in prometheus_only.items() if value]
        if given:
            raise GateInputError(f"{', '.join(given)} only apply with --prometheus; drop them or use --prometheus")
        return load_metrics(args.metrics)
    if not args.window:
        raise GateInputError("--prometheus needs --window, the trial's length (e.g. --window 1h)")
    bad_nodes = [node for node in args.node if not _NODE_NAME.fullmatch(node)]
    if bad_nodes:
        raise GateInputError(f"--node {', '.join(bad_nodes)}: not a Kubernetes node name")
    bad_uuids = [uuid for uuid in args.uuid if not GPU_UUID.fullmatch(uuid)]
    if bad_uuids:
        raise GateInputError(f"--uuid {', '.join(bad_uuids)}: not a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, "
                             "as nvidia-smi -L and DCGM's UUID label write it)")
    if args.timeout <= 0:
        raise GateInputError(f"--timeout {args.timeout}: give a positive number of seconds")
    plan = QueryPlan(
        url=args.prometheus,
        trial_end=parse_time(args.trial_end, "--trial-end") if args.trial_end else time.time(),
        window_s=parse_duration(args.window, "--window"),
        baseline_window_s=parse_duration(args.baseline_window or "7d", "--baseline-window"),
        nodes=tuple(args.node),
        uuids=tuple(args.uuid),
        timeout_s=args.timeout,
    )
    print(
        f"querying {plan.url}: trial {format_duration(plan.window_s)} to {format_time(plan.trial_end)}, "
        f"baseline {format_duration(plan.baseline_window_s)} before it",
        file=sys.stderr,
    )
    return collect(plan, thresholds)
