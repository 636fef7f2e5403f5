"""`gpushare sim ...`: the embedded cluster and the GPU Operator simulator."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from gpushare_testbed.binaries import BinaryError, nvidia_judge
from gpushare_testbed.controlplane import (
    COMPONENTS,
    GATED_COMPONENTS,
    OPTIONAL_COMPONENTS,
    RESTARTABLE,
    Launcher,
    NotAStateDir,
    StateDir,
    down,
    feature_gates,
    fleet_digest,
    recorded_info,
    restart,
    running,
    started_components,
)
from gpushare_testbed.dcgm_sim import cli as dcgm_sim_cli
from gpushare_testbed.fleet import FleetError, load_fleet
from gpushare_testbed.processes import ComponentError, alive, log_tail, recorded_pid
from gpushare_testbed.simulator.clusterpolicy import NEWEST_RELEASE, RELEASES
from gpushare.table import render_table

DEFAULT_STATE_DIR = ".gpushare"
KUBECONFIG_IDENTITIES = ("admin", "runbook")


def register(commands: argparse._SubParsersAction) -> None:
    sim = commands.add_parser("sim", help="the embedded cluster and the GPU Operator simulator", description=__doc__)
    sub = sim.add_subparsers(dest="sim_command", metavar="COMMAND")

    def with_state(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument(
            "--state-dir", type=Path, default=Path(os.environ.get("GPUSHARE_STATE_DIR", DEFAULT_STATE_DIR)),
            help="where state, logs and pid files live (default: $GPUSHARE_STATE_DIR or .gpushare)",
        )
        return parser

    up = with_state(sub.add_parser(
        "up", help="start the embedded cluster (idempotent)",
        description="Start the embedded cluster. On a running cluster: nothing to do when the options given "
                    "match the ones it was started with; otherwise a refusal that says how to restart it.",
    ))
    up.add_argument("--fleet", type=Path, help="fleet YAML file (default: the shipped default fleet)")
    up.add_argument("--without", action="append", default=[], choices=OPTIONAL_COMPONENTS, metavar="COMPONENT",
                    help=f"do not start this optional component ({', '.join(OPTIONAL_COMPONENTS)}); repeatable")
    up.add_argument("--operator-namespace", default="gpu-operator",
                    help="namespace of the simulated GPU Operator (default: gpu-operator)")
    up.add_argument("--apiserver-port", type=int, help="fixed API server port (default: a free one)")
    up.add_argument("--feature-gates", default="", metavar="GATE=BOOL,...",
                    help="feature gates of the API server, the scheduler and the controller-manager alike "
                         "(e.g. DRAExtendedResource=true)")
    up.add_argument("--component-feature-gates", action="append", default=[], metavar="COMPONENT:GATE=BOOL,...",
                    help=f"feature gates of one of {', '.join(GATED_COMPONENTS)} on top of --feature-gates "
                         "(e.g. kube-scheduler:DRAExtendedResource=true, a half-enabled gate); repeatable")
    up.add_argument("--dra-driver-gates", default="", metavar="GATE=BOOL,...",
                    help="the featureGates the simulated NVIDIA DRA driver is installed with (default: none, as its "
                         "chart's; the DRA pilot's sharing needs TimeSlicingSettings=true or MPSSupport=true)")
    _operator_version(up)
    up.set_defaults(handler=cmd_up)
    with_state(sub.add_parser("down", help="stop what `up` started and remove the state")).set_defaults(
        handler=cmd_down
    )
    with_state(sub.add_parser("status", help="components (pid, log) and nodes")).set_defaults(handler=cmd_status)
    restart = with_state(sub.add_parser(
        "restart", help="restart a control-plane component (a fault to test against)",
        description="Stop a running component and start it again with the same command line; wait until "
                    "the API server is ready again."))
    restart.add_argument("component", choices=RESTARTABLE, help="the component to restart")
    restart.set_defaults(handler=cmd_restart)
    kubeconfig = with_state(sub.add_parser("kubeconfig", help="print the path of a kubeconfig (admin by default)"))
    kubeconfig.add_argument("--as", dest="identity", choices=KUBECONFIG_IDENTITIES, default="admin",
                            help="admin (system:masters) or runbook (user gpushare-runbook, only what "
                                 "deploy/rbac grants)")
    kubeconfig.set_defaults(handler=cmd_kubeconfig)
    operator = sub.add_parser("gpu-operator", help="run the GPU Operator simulator against any cluster")
    operator.add_argument("--kubeconfig", type=Path, help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    operator.add_argument("--context", help="kubeconfig context (default: its current context)")
    operator.add_argument("--operator-namespace", default="gpu-operator",
                          help="namespace of the GPU Operator's DaemonSets and ConfigMaps (default: gpu-operator)")
    operator.add_argument("--ready-file", type=Path, help="touched once the simulator has synced")
    operator.add_argument(
        "--configmap-refresh-seconds", type=float, default=60.0,
        help="how long a running pod keeps its mounted ConfigMap snapshot before the kubelet refreshes it (default 60)")
    operator.add_argument(
        "--mig-reboot-seconds", type=float, default=5.0,
        help="how long a node annotated sim.gpushare.io/mig-reboot-required stays rebooting (default 5)")
    operator.add_argument(
        "--config-manager-label-seconds", type=float, default=0.5,
        help="device plugin v0.18.2 and later: how long after its start a config-manager is told the node label, "
             "serving the default config until then (default 0.5)")
    operator.add_argument(
        "--endpoint-stop-grace-seconds", type=float, default=300.0,
        help="the kubelet's endpointStopGracePeriod: how long a resource no plugin serves keeps its capacity "
             "(allocatable 0) before it drops to 0 (default 300, the kubelet's)")
    operator.add_argument(
        "--dra-driver-gates", default="", metavar="GATE=BOOL,...",
        help="the simulated NVIDIA DRA driver's featureGates, as its chart is installed with (default: none, as "
             "the chart's; e.g. TimeSlicingSettings=true,MPSSupport=true)")
    operator.add_argument(
        "--dra-wipe-seconds", type=float, default=30.0,
        help="how long after a node's DRA kubelet plugin stops the kubelet wipes its ResourceSlices (default 30)")
    operator.add_argument(
        "--nvidia-judge", type=Path,
        help="the nvidia-judge binary that decides which device-plugin configs the simulated operands accept "
             "(default: the one scripts/build-binaries.sh builds)")
    _operator_version(operator)
    operator.set_defaults(handler=cmd_gpu_operator)
    dcgm_sim_cli.register(sub, DEFAULT_STATE_DIR)


def _operator_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--operator-version", choices=tuple(RELEASES), default=NEWEST_RELEASE,
        help=f"the GPU Operator release whose chart installs the ClusterPolicy, with that release's operand images "
             f"(default {NEWEST_RELEASE}); every version-dependent behaviour follows the running operands' image tags")


def _restart_command(args: argparse.Namespace) -> str:
    up = ["gpushare", "sim", "up"]
    if args.fleet:
        up += ["--fleet", str(args.fleet)]
    for name in args.without:
        up += ["--without", name]
    if args.feature_gates:
        up += ["--feature-gates", args.feature_gates]
    for entry in args.component_feature_gates:
        up += ["--component-feature-gates", entry]
    if args.operator_version != NEWEST_RELEASE:
        up += ["--operator-version", args.operator_version]
    if args.dra_driver_gates:
        up += ["--dra-driver-gates", args.dra_driver_gates]
    state = [] if args.state_dir == Path(os.environ.get("GPUSHARE_STATE_DIR", DEFAULT_STATE_DIR)) else [
        "--state-dir", str(args.state_dir)]
    return f"{shlex.join(['gpushare', 'sim', 'down', *state])} && {shlex.join(up + state)}"


def _conflicts(state: StateDir, args: argparse.Namespace) -> list[str]:
    """The options given to `up` that the running cluster was not started with."""
    info = recorded_info(state)
    conflicts = []
    if args.fleet:
        fleet = load_fleet(args.fleet)
        started_with = info.get("fleet", {})
        if fleet_digest(fleet) != started_with.get("digest"):
            conflicts.append(f"it runs the fleet {started_with.get('source', 'unknown')}, not {args.fleet}")
    if args.without:
        wanted = tuple(name for name in COMPONENTS if name not in args.without)
        if wanted != started_components(state):
            conflicts.append(f"it runs {', '.join(started_components(state))}")
    gates = feature_gates(args.feature_gates, args.component_feature_gates)
    if gates != info.get("feature_gates", {}):
        conflicts.append(f"it runs with the feature gates {info.get('feature_gates') or 'as released'}")
    if args.dra_driver_gates != info.get("dra_driver_gates", ""):
        conflicts.append(f"its DRA driver was installed with the gates {info.get('dra_driver_gates') or 'of its chart (none)'}")
    started_release = info.get("operator_version", NEWEST_RELEASE)
    if args.operator_version != started_release:
        conflicts.append(f"its GPU Operator was installed as {started_release}, not {args.operator_version}")
    return conflicts


def cmd_up(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    try:
        gates = feature_gates(args.feature_gates, args.component_feature_gates)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        if running(state):
            conflicts = _conflicts(state, args)
            if conflicts:
                print(f"error: the embedded cluster in {state.root} is already running and {'; '.join(conflicts)}. "
                      f"To restart it with these options (its state is lost): {_restart_command(args)}",
                      file=sys.stderr)
                return 1
            print(f"embedded cluster already running; kubeconfig: {state.kubeconfig}")
            return 0
        fleet = load_fleet(args.fleet)
    except FleetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        if state.root.exists():
            _, left_alone = down(state)  # a half-started or crashed cluster: start clean
            _report_left_alone(left_alone)
    except NotAStateDir as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    components = tuple(name for name in COMPONENTS if name not in args.without)
    began = time.monotonic()
    print(f"starting the embedded cluster ({len(fleet.nodes)} nodes) in {state.root}", file=sys.stderr)
    state.root.mkdir(parents=True, exist_ok=True)
    try:
        Launcher(state, fleet, args.operator_namespace, args.apiserver_port, components,
                 str(args.fleet or "default"), gates, args.operator_version, args.dra_driver_gates).up()
    except (ComponentError, BinaryError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        print(f"the cluster was not started; logs stay in {state.root / 'logs'}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - began
    print(f"embedded cluster ready: {len(fleet.nodes)} nodes Ready in {elapsed:.1f}s")
    print(f"kubeconfig: {state.kubeconfig}")
    return 0


def _report_left_alone(left_alone: list[str]) -> None:
    for line in left_alone:
        print(f"left alone, not a process `gpushare sim up` started here: {line}", file=sys.stderr)


def cmd_down(args: argparse.Namespace) -> int:
    try:
        stopped, left_alone = down(StateDir(args.state_dir.resolve()))
    except NotAStateDir as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    _report_left_alone(left_alone)
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    try:
        seconds = restart(state, args.component)
    except (ComponentError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{args.component} restarted; the API server was not ready for {seconds:.1f}s")
    return 0


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    path = state.kubeconfig if args.identity == "admin" else state.component_kubeconfig(args.identity)
    if not path.exists():
        print(f"error: no embedded cluster in {state.root}; start one with `gpushare sim up`", file=sys.stderr)
        return 1
    print(path)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    started = started_components(state) if state.info.exists() else ()
    rows, dead = [], []
    for name in COMPONENTS:
        pid = recorded_pid(state.pid_file(name))
        if alive(state.pid_file(name)):
            rows.append([name, "running", pid, state.log(name)])
        elif name in started:
            rows.append([name, "stopped", "-", state.log(name)])
            dead.append(name)
        else:
            rows.append([name, "not started", "-", "-"])
    print(render_table(["component", "state", "pid", "log"], rows))
    for name in dead:
        print(f"\n{name} has stopped. Last lines of {state.log(name)}:\n{log_tail(state.log(name))}")
    if not running(state):
        print(f"\nthe embedded cluster in {state.root} is not running; restart it with "
              f"`gpushare sim down` then `gpushare sim up`" if dead else
              f"\nthe embedded cluster in {state.root} is not running; start it with `gpushare sim up`")
        return 1
    from gpushare_testbed.fleet_report import fleet_rows  # noqa: PLC0415 - only this command needs it

    print()
    print(render_table(*fleet_rows(state.kubeconfig)))
    return 0


def cmd_gpu_operator(args: argparse.Namespace) -> int:
    from gpushare_testbed.simulator.simulator import Options, run_simulator  # noqa: PLC0415 - only this command needs it

    if args.configmap_refresh_seconds <= 0 or min(args.mig_reboot_seconds, args.config_manager_label_seconds,
                                                   args.endpoint_stop_grace_seconds, args.dra_wipe_seconds) < 0:
        print("error: --configmap-refresh-seconds must be > 0, --mig-reboot-seconds, --config-manager-label-seconds "
              "--endpoint-stop-grace-seconds and --dra-wipe-seconds >= 0", file=sys.stderr)
        return 2
    options = Options(args.configmap_refresh_seconds, args.mig_reboot_seconds, args.config_manager_label_seconds,
                      args.endpoint_stop_grace_seconds, operator_release=args.operator_version,
                      dra_driver_gates=args.dra_driver_gates, dra_wipe_seconds=args.dra_wipe_seconds)
    try:
        judge = args.nvidia_judge or nvidia_judge()
    except BinaryError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not judge.is_file():
        print(f"error: --nvidia-judge {judge} does not exist; run `make binaries`", file=sys.stderr)
        return 2
    return run_simulator(args.kubeconfig, args.context, args.operator_namespace, args.ready_file, options, judge)
