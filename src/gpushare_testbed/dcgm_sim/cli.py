"""`gpushare sim dcgm-exporter` and `gpushare sim prometheus`: the embedded cluster's DCGM metrics."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

# Prometheus's duration (prometheus/common model.ParseDuration), in whole seconds: y, w, d, h, m, s.
_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_UNIT_S = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1)


def parse_duration(text: str, what: str) -> int:
    """Seconds in a duration such as `15s`, `5m`, `7d` or `1h30m`; ValueError naming `what` otherwise."""
    match = _DURATION.fullmatch(text.strip())
    seconds = sum(int(n) * unit for n, unit in zip(match.groups(), _UNIT_S) if n) if match else 0
    if seconds <= 0:
        raise ValueError(f"{what}: {text!r} is not a positive duration; write it like 15s, 5m, 1h, 7d or 1h30m")
    return seconds


def register(sub: argparse._SubParsersAction, default_state_dir: str) -> None:
    exporter = sub.add_parser("dcgm-exporter", help="serve DCGM-exporter-shaped /metrics for the simulated GPUs")
    exporter.add_argument("--kubeconfig", type=Path, help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    exporter.add_argument("--context", help="kubeconfig context (default: its current context)")
    exporter.add_argument("--port", type=int, default=9400, help="loopback port (default 9400, the exporter's)")
    exporter.add_argument("--ready-file", type=Path, help="written with the URL once serving")
    exporter.add_argument("--host-label", choices=("hostname", "Hostname"),
                          help="fix the node label: hostname (dcgm-exporter since d5e5f51, 4.6.0-4.8.3) or Hostname "
                               "(up to 4.5.3-4.8.2); default: the one of the version the operator deploys")
    exporter.add_argument("--collectors", type=Path, metavar="FILE",
                          help="a dcgm-exporter counters file (etc/default-counters.csv format): export only the "
                               "fields it lists (default: every field the simulator models)")
    exporter.set_defaults(handler=cmd_dcgm_exporter)
    prometheus = sub.add_parser(
        "prometheus", help="start a Prometheus scraping the simulated DCGM exporter, over a generated history")
    prometheus.add_argument(
        "--state-dir", type=Path, default=Path(os.environ.get("GPUSHARE_STATE_DIR", default_state_dir)),
        help="the embedded cluster's state directory (default: $GPUSHARE_STATE_DIR or .gpushare)")
    prometheus.add_argument("--history", default="7d", help="generated history before now (default 7d)")
    prometheus.add_argument("--step", default="5m", help="sample interval of the generated history (default 5m)")
    prometheus.add_argument("--scrape-interval", default="15s", help="live scrape interval (default 15s)")
    prometheus.set_defaults(handler=cmd_prometheus)


def cmd_dcgm_exporter(args: argparse.Namespace) -> int:
    from gpushare_testbed.dcgm_sim.exporter import serve  # noqa: PLC0415 - needs the Kubernetes client
    from gpushare_testbed.dcgm_sim.exposition import collectors  # noqa: PLC0415

    try:
        fields = collectors(args.collectors) if args.collectors else None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        print(f"error: --collectors {args.collectors}: {err}", file=sys.stderr)
        return 2
    return serve(args.kubeconfig, args.context, args.port, args.ready_file, args.host_label, fields)


def cmd_prometheus(args: argparse.Namespace) -> int:
    from gpushare_testbed.controlplane import StateDir  # noqa: PLC0415
    from gpushare_testbed.dcgm_sim.backfill import BackfillError  # noqa: PLC0415
    from gpushare_testbed.dcgm_sim.demo_prometheus import ensure_prometheus  # noqa: PLC0415
    from gpushare_testbed.processes import ComponentError  # noqa: PLC0415

    try:
        history_s, step_s = parse_duration(args.history, "--history"), parse_duration(args.step, "--step")
        parse_duration(args.scrape_interval, "--scrape-interval")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    state = StateDir(args.state_dir.resolve())
    if not state.kubeconfig.exists():
        print(f"error: no embedded cluster in {state.root}; start one with `gpushare sim up`", file=sys.stderr)
        return 1
    try:
        url, started = ensure_prometheus(state, history_s, step_s, args.scrape_interval)
    except (ComponentError, BackfillError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(("started" if started else "already running") + f": Prometheus at {url}", file=sys.stderr)
    print(url)
    return 0
