"""`gpushare sim ...`: the embedded cluster and the GPU Operator simulator."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from gpushare.binaries import BinaryError
from gpushare.controlplane import COMPONENTS, Launcher, StateDir, down, running
from gpushare.fleet import FleetError, load_fleet
from gpushare.processes import ComponentError, alive
from gpushare.table import render_table

DEFAULT_STATE_DIR = ".gpushare"


def register(commands: argparse._SubParsersAction) -> None:
    sim = commands.add_parser("sim", help="the embedded cluster and the GPU Operator simulator")
    sub = sim.add_subparsers(dest="sim_command", required=True)

    def with_state(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument(
            "--state-dir", type=Path, default=Path(os.environ.get("GPUSHARE_STATE_DIR", DEFAULT_STATE_DIR)),
            help="where state, logs and pid files live (default: $GPUSHARE_STATE_DIR or .gpushare)",
        )
        return parser

    up = with_state(sub.add_parser("up", help="start the embedded cluster (idempotent)"))
    up.add_argument("--fleet", type=Path, help="fleet YAML file (default: the shipped default fleet)")
    up.add_argument("--operator-namespace", default="gpu-operator")
    up.add_argument("--apiserver-port", type=int, help="fixed API server port (default: a free one)")
    up.set_defaults(handler=cmd_up)
    with_state(sub.add_parser("down", help="stop what `up` started and remove the state")).set_defaults(
        handler=cmd_down
    )
    with_state(sub.add_parser("status", help="components and nodes")).set_defaults(handler=cmd_status)
    with_state(sub.add_parser("kubeconfig", help="print the admin kubeconfig path")).set_defaults(
        handler=cmd_kubeconfig
    )
    operator = sub.add_parser("gpu-operator", help="run the GPU Operator simulator against any cluster")
    operator.add_argument("--kubeconfig", type=Path, help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    operator.add_argument("--context")
    operator.add_argument("--operator-namespace", default="gpu-operator")
    operator.add_argument("--ready-file", type=Path, help="touched once the simulator has synced")
    operator.add_argument(
        "--configmap-refresh-seconds", type=float, default=60.0,
        help="how long a running pod keeps its mounted ConfigMap snapshot before the kubelet refreshes it (default 60)")
    operator.add_argument(
        "--mig-reboot-seconds", type=float, default=5.0,
        help="how long a node annotated sim.gpushare.io/mig-reboot-required stays rebooting (default 5)")
    operator.set_defaults(handler=cmd_gpu_operator)


def cmd_up(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    if running(state):
        print(f"embedded cluster already running; kubeconfig: {state.kubeconfig}")
        return 0
    if state.root.exists():
        down(state)  # a half-started or crashed cluster: start clean
    try:
        fleet = load_fleet(args.fleet)
    except FleetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    began = time.monotonic()
    print(f"starting the embedded cluster ({len(fleet.nodes)} nodes) in {state.root}", file=sys.stderr)
    state.root.mkdir(parents=True, exist_ok=True)
    try:
        Launcher(state, fleet, args.operator_namespace, args.apiserver_port).up()
    except (ComponentError, BinaryError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        print(f"the cluster was not started; logs stay in {state.root / 'logs'}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - began
    print(f"embedded cluster ready: {len(fleet.nodes)} nodes Ready in {elapsed:.1f}s")
    print(f"kubeconfig: {state.kubeconfig}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    stopped = down(StateDir(args.state_dir.resolve()))
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    if not state.kubeconfig.exists():
        print(f"error: no embedded cluster in {state.root}; start one with `gpushare sim up`", file=sys.stderr)
        return 1
    print(state.kubeconfig)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    rows = [[name, "running" if alive(state.pid_file(name)) else "stopped"] for name in COMPONENTS]
    print(render_table(["component", "state"], rows))
    if not running(state):
        print(f"\nthe embedded cluster in {state.root} is not running")
        return 1
    from gpushare.fleet_report import fleet_rows

    print()
    print(render_table(*fleet_rows(state.kubeconfig)))
    return 0


def cmd_gpu_operator(args: argparse.Namespace) -> int:
    from gpushare.simulator.simulator import Options, run_simulator

    if args.configmap_refresh_seconds <= 0 or args.mig_reboot_seconds < 0:
        print("error: --configmap-refresh-seconds must be > 0 and --mig-reboot-seconds >= 0", file=sys.stderr)
        return 2
    options = Options(args.configmap_refresh_seconds, args.mig_reboot_seconds)
    return run_simulator(args.kubeconfig, args.context, args.operator_namespace, args.ready_file, options)
