"""Steps about the faults of a change window: the control plane restarted under a running runbook,
two runs started at once, a runbook killed mid-rollback, a device plugin that never becomes Ready.
Every runbook here is a real `ansible-playbook` process, started in the background as an operator's
terminal would. A restart is made to land under the run: the run is held (SIGSTOP) from the moment
named until the component is down, then goes on into the outage; the audit log then shows whether it
carried on once the component was back."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from gpushare.clock import parse_time
from gpushare.runbook import renewer
from gpushare.dcgm_labels import host_of
from gpushare_testbed.controlplane import StateDir
from gpushare.k8s.session import Session
from gpushare.polling import wait_for
from gpushare_testbed.processes import recorded_pid
from gpushare_testbed.simulator.operands import DEVICE_PLUGIN
from tests.steps.runbook_steps import RunbookRun, parse_command
from tests.prometheus_fixture import prometheus_server, skip_without_prometheus
from tests.support.ansible import PlaybookRun, inventory_limit
from tests.support.cluster import REPO, Cluster

RUN_TIMEOUT_S = 600
MOMENT_TIMEOUT_S = 120
# What a run does around its waits (plan, writes, Ansible's own time): its bound is the sum of the
# timeouts it was given plus this.
RUN_SLACK_S = 60
SHARE_CHECK_NAMESPACE = "gpushare-share-check"
PLUGIN_FAULT = "sim.gpushare.io/device-plugin-fault"
XID = "sim.gpushare.io/xid-gpus"  # gpushare_testbed.simulator.node_agent.XID_ANNOTATION
ZERO_STARTS = "sim.gpushare.io/device-plugin-zero-starts"  # gpushare_testbed.simulator.node_agent.ZERO_START_ANNOTATION
ZERO_DEVICES_REASON = "SimulatedZeroDevices"
GPU = "nvidia.com/gpu"


@dataclass
class Background:
    """A runbook started in the background: its process and where its output goes."""
    process: subprocess.Popen
    log: Path
    command: str

    def finish(self, timeout_s: float = RUN_TIMEOUT_S) -> RunbookRun:
        rc = self.process.wait(timeout=timeout_s)
        stdout = self.log.read_text()
        return RunbookRun(PlaybookRun("successful" if rc == 0 else "failed", rc, {}, stdout, []), None, self.command)

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def start_runbook(kube: Cluster, workdir: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                  command: str, **extravars: Any) -> Background:
    """`command` as in the features (`enable-timeslicing.yml -l gpu-node -e k=v`), as its own process."""
    parsed = parse_command(command)
    target = dataclasses.replace(kube, inventory=runbook_inventory)
    variables = {"gpushare_kubeconfig": str(kube.runbook_kubeconfig), "gpu_operator_namespace": kube.operator_namespace,
                 **runbook_inputs, **parsed.extravars, **extravars}
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO / "playbooks" / parsed.playbook),
            "-i", str(runbook_inventory), "-e", json.dumps(variables)]
    if parsed.limit:
        argv += ["-l", inventory_limit(target, parsed.limit) or ""]
    argv += [flag for flag, on in (("--check", parsed.check), ("--diff", parsed.diff)) if on]
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{parsed.playbook}.{len(list(workdir.iterdir()))}.log"
    env = {**os.environ, **kube.env(), "KUBECONFIG": str(kube.runbook_kubeconfig), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "ANSIBLE_NOCOLOR": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with log.open("w") as out:
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return Background(process, log, shlex.join(argv[1:]))


def _moment(kube: Cluster, moment: str) -> Callable[[Session], bool]:
    """What the cluster shows at the moment a fault is injected."""
    if moment == "the run has recorded its intent":
        return lambda s: any((c["metadata"].get("annotations") or {}).get("gpushare.io/state") == "in-progress"
                             for c in s.list("ConfigMap", kube.records_namespace, label_selector="gpushare.io/run"))
    cordoned = re.fullmatch(r'"([^"]+)" is cordoned', moment)
    if cordoned:
        return lambda s: bool(((s.get("Node", cordoned[1]) or {}).get("spec") or {}).get("unschedulable"))
    if moment == "the share check's pods exist":
        return lambda s: bool(s.list("Pod", SHARE_CHECK_NAMESPACE))
    raise ValueError(f"unknown moment {moment!r}")


def _wait_for_moment(kube: Cluster, run: Background, moment: str) -> None:
    session, seen = Session(kube.kubeconfig), _moment(kube, moment)

    def reached() -> bool:
        assert run.process.poll() is None, f"the run ended before {moment}:\n{run.log.read_text()[-3000:]}"
        return seen(session)

    wait_for(reached, MOMENT_TIMEOUT_S, moment, interval_s=0.05)


def _embedded_only(kube: Cluster, what: str) -> None:
    if not kube.embedded:
        pytest.skip(f"{what} needs the embedded cluster's own control plane")


# ---- the control plane restarted -------------------------------------------------------------------
@dataclass
class Fault:
    """A control-plane restart under a run: when the component went down and when the API server was
    ready again (Unix time), whether the run was still running when it went down, and the audit log's
    offset at the start."""
    component: str = ""
    down_at: float = 0.0
    back_at: float = 0.0
    run_running: bool = False
    audit_mark: int = 0


@pytest.fixture
def fault() -> Fault:
    return Fault()


@when(parsers.re(r'the operator starts "(?P<command>[^"]+)" and (?P<component>etcd|the API server) restarts once '
                 r'(?P<moment>.+)$'), target_fixture="runbook_run")
def restarted_under_run(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                        fault: Fault, command: str, component: str, moment: str) -> RunbookRun:
    _embedded_only(kube, "restarting the control plane")
    assert kube.state_dir is not None
    fault.component, fault.audit_mark = component, kube.audit_mark()
    run = start_runbook(kube, tmp_path / "background", runbook_inventory, runbook_inputs, command)
    try:
        _wait_for_moment(kube, run, moment)
        name = "etcd" if component == "etcd" else "kube-apiserver"
        pid_file = StateDir(kube.state_dir).pid_file(name)
        serving = recorded_pid(pid_file)
        os.killpg(run.process.pid, signal.SIGSTOP)  # held at the moment until the component is down
        try:
            restart = subprocess.Popen([sys.executable, "-m", "gpushare", "sim", "restart", name, "--state-dir",
                                        str(kube.state_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            wait_for(lambda: recorded_pid(pid_file) != serving, MOMENT_TIMEOUT_S, f"{name} to go down", interval_s=0.01)
            fault.down_at, fault.run_running = time.time(), run.process.poll() is None
        finally:
            os.killpg(run.process.pid, signal.SIGCONT)
        _, errors = restart.communicate(timeout=120)
        assert restart.returncode == 0, errors
        fault.back_at = time.time()
    except BaseException:
        run.kill()
        raise
    return run.finish()


def _received(event: dict[str, Any]) -> float:
    received = parse_time(event.get("requestReceivedTimestamp"))
    return received.timestamp() if isinstance(received, dt.datetime) else 0.0


@then(parsers.re(r"the run was still running when (?P<component>etcd|the API server) went down, and carried on "
                 r"once it was back$"))
def rode_the_fault_out(kube: Cluster, runbook_run: RunbookRun, fault: Fault, component: str) -> None:
    """From the audit log: the run had sent requests before the component went down, and sent more
    once the API server was ready again; so the fault overlapped the run, which lived through it."""
    assert fault.component == component and fault.run_running, f"the run had ended before {component} went down"
    requests = [e for e in kube.audit_events(fault.audit_mark)
                if (e.get("user") or {}).get("username") == kube.runbook_user and e.get("stage") == "ResponseComplete"]
    before = [e for e in requests if _received(e) < fault.down_at]
    after = [e for e in requests if _received(e) > fault.back_at]
    assert before, f"the run sent no request before {component} went down"
    assert after, (f"the run sent no request once {component} was back: it did not live through the restart\n"
                   f"{runbook_run.describe()}")


# ---- two runs at once ------------------------------------------------------------------------------
@when(parsers.parse('two runs of "{command}" start at the same moment'), target_fixture="concurrent_runs")
def two_at_once(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                command: str) -> list[RunbookRun]:
    runs = [start_runbook(kube, tmp_path / "background", runbook_inventory, runbook_inputs, command)
            for _ in range(2)]
    return [run.finish() for run in runs]


# Which refusal the other run gets depends on when it reads the Lease: both read it free and the
# other's create wins (the race), or the other already holds it.
LOCK_REFUSALS = ("another run started at the same moment holds it now", "Another runbook run holds the lock")


@then("exactly one of them succeeds and the runbook lock refuses the other", target_fixture="runbook_run")
def exactly_one(concurrent_runs: list[RunbookRun]) -> RunbookRun:
    succeeded = [r for r in concurrent_runs if r.run.ok]
    refused = [r for r in concurrent_runs if not r.run.ok]
    assert len(succeeded) == 1 and len(refused) == 1, "\n\n".join(r.describe() for r in concurrent_runs)
    text = " ".join(refused[0].run.stdout.split())
    assert any(message in text for message in LOCK_REFUSALS), refused[0].describe()
    assert "Nothing was changed." in refused[0].run.stdout, refused[0].describe()
    return succeeded[0]


# ---- a runbook killed ------------------------------------------------------------------------------
@when(parsers.parse('the rollback of "{node}" is killed with its lock\'s renewer right after it cordoned the node'))
def rollback_killed(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                    node: str) -> None:
    """A lost machine, as this one can play it: the run and the renewer of its Lease both SIGKILLed,
    so the Lease stays until it expires (the runbooks' 300 s) unless a run here sees its process gone."""
    run = start_runbook(kube, tmp_path / "background", runbook_inventory, runbook_inputs,
                        f"rollback-timeslicing.yml -l {node}")
    try:
        _wait_for_moment(kube, run, f'"{node}" is cordoned')
    finally:
        renewers = _renewers_of(run.process.pid)
        run.kill()
    assert renewers, "the run started no renewer of its Lease"
    for pid in renewers:
        os.kill(pid, signal.SIGKILL)
    labels = (Session(kube.kubeconfig).get("Node", node) or {})["metadata"].get("labels") or {}
    assert "nvidia.com/device-plugin.config" in labels, "killed too late: the node's config is restored already"


def _renewers_of(owner: int) -> list[int]:
    """The pids of the Lease renewers (gpushare.runbook.renewer) that watch process `owner`."""
    return [int(proc.name) for proc in Path("/proc").glob("[0-9]*") if renewer.argument(int(proc.name), "--owner") == str(owner)]


# ---- a device plugin that never becomes Ready ------------------------------------------------------
@given(parsers.parse('the device plugin on "{node}" crashes with "{message}" whenever its config shares'))
def plugin_fault(kube: Cluster, node: str, message: str) -> None:
    _embedded_only(kube, "a device-plugin fault")
    kube.core.patch_node(node, {"metadata": {"annotations": {PLUGIN_FAULT: message}}})


# ---- an unhealthy card ---------------------------------------------------------------------------------
def _unhealthy(kube: Cluster, node: str) -> tuple[str, str] | None:
    """(allocatable, capacity) of the node's nvidia.com/gpu while below it, else None."""
    status = kube.node(node).status
    found = ((status.allocatable or {}).get(GPU, "0"), (status.capacity or {}).get(GPU, "0"))
    return found if int(found[0]) < int(found[1]) else None


@given(parsers.parse('GPU {index:d} of "{node}" has fallen off the bus (Xid 79)'))
def gpu_off_the_bus(kube: Cluster, node: str, index: int) -> None:
    """The device plugin's health check marks the card's devices unhealthy: allocatable drops, the
    capacity stays (the simulator's Xid fault, on the plugin running now)."""
    _embedded_only(kube, "an Xid fault")
    kube.core.patch_node(node, {"metadata": {"annotations": {XID: json.dumps({"gpus": [index], "at": time.time()})}}})
    wait_for(lambda: _unhealthy(kube, node), MOMENT_TIMEOUT_S, f"the device plugin on {node} to report GPU {index} unhealthy")


@pytest.fixture
def dcgm_prometheus(kube: Cluster, tmp_path: Path) -> Iterator[str]:
    """A Prometheus scraping the embedded cluster's simulated DCGM exporter every second."""
    skip_without_prometheus()
    exporter = json.loads((kube.state_dir / "dcgm-exporter.json").read_text())["url"]
    workdir = tmp_path / "dcgm-prometheus"
    workdir.mkdir()
    with prometheus_server(workdir / "tsdb", workdir, scrape=urllib.parse.urlsplit(exporter).netloc) as url:
        yield url


def _last_xid(url: str, node: str, index: int) -> float | None:
    """The card's last DCGM_FI_DEV_XID_ERRORS in the hour, under whichever node label the release writes."""
    form = urllib.parse.urlencode({"query": f'last_over_time(DCGM_FI_DEV_XID_ERRORS{{gpu="{index}"}}[1h])'}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=form, timeout=10) as response:  # noqa: S310 - loopback
        result = json.load(response)["data"]["result"]
    return next((float(r["value"][1]) for r in result if host_of(r["metric"]) == node), None)


@given(parsers.parse('the runs read DCGM from a Prometheus that has seen Xid 79 on GPU {index:d} of "{node}"'))
def prometheus_saw_xid(kube: Cluster, dcgm_prometheus: str, runbook_inputs: dict[str, Any], node: str,
                       index: int) -> None:
    """The runbooks' timeslicing_prometheus_url is a Prometheus scraping the simulated DCGM exporter,
    which reports the simulator's Xid fault as DCGM_FI_DEV_XID_ERRORS 79 on that card."""
    _embedded_only(kube, "the simulated DCGM exporter")
    wait_for(lambda: _last_xid(dcgm_prometheus, node, index) == 79, MOMENT_TIMEOUT_S,
             f"Prometheus to scrape Xid 79 for GPU {index} of {node}")
    runbook_inputs["timeslicing_prometheus_url"] = dcgm_prometheus


@then(parsers.parse('DCGM still reported Xid 79 for GPU {index:d} of "{node}" after the run'))
def xid_held(dcgm_prometheus: str, node: str, index: int) -> None:
    """Reported before the run (the Given waited for it) and still after: the fault held while it ran."""
    assert _last_xid(dcgm_prometheus, node, index) == 79, f"GPU {index} of {node}: DCGM no longer reports Xid 79"


@then(parsers.parse('the card on "{node}" was unhealthy while the run acted'))
def unhealthy_throughout(kube: Cluster, node: str) -> None:
    """Unhealthy before the run (the Given waited for it) and still after: the fault held while it ran."""
    assert _unhealthy(kube, node), f"{node} advertises every GPU again: the fault did not last through the run"


@when(parsers.parse('the device plugin on "{node}" restarts'))
def plugin_restarts(kube: Cluster, node: str) -> None:
    [pod] = kube.core.list_namespaced_pod(kube.operator_namespace, field_selector=f"spec.nodeName={node}",
                                          label_selector=f"app={DEVICE_PLUGIN}").items
    kube.core.delete_namespaced_pod(pod.metadata.name, kube.operator_namespace)


@then(parsers.parse('node "{node}" advertises every GPU again: the restarted plugin forgot the fault'))
def every_gpu_again(kube: Cluster, node: str) -> None:
    wait_for(lambda: _unhealthy(kube, node) is None and int((kube.node(node).status.allocatable or {}).get(GPU, "0")),
             MOMENT_TIMEOUT_S, f"{node} to advertise every GPU")


# ---- a device plugin that advertises no GPU (NVIDIA/k8s-device-plugin#1645) ----------------------------
ZERO_STARTS_STEP = r'the next (?:(?P<count>\d+) )?device-plugin starts? on "(?P<node>[^"]+)" advertises? no GPU$'


@given(parsers.re(ZERO_STARTS_STEP))
def zero_device_starts(kube: Cluster, node: str, count: str | None) -> None:
    _embedded_only(kube, "a device plugin that registers no device")
    kube.core.patch_node(node, {"metadata": {"annotations": {ZERO_STARTS: count or "1"}}})


@then(parsers.parse('the fault hit a device-plugin start on "{node}" while the run acted'))
def zero_start_during_run(kube: Cluster, runbook_run: RunbookRun, node: str) -> None:
    """Armed before the run, spent by a start of the plugin on the node during it (its event is
    dated within the run, in whole seconds)."""
    assert runbook_run.elapsed_s is not None
    started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=runbook_run.elapsed_s + 1)
    assert ZERO_STARTS not in (kube.node(node).metadata.annotations or {}), "the fault is still armed: no start hit it"
    events = kube.core.list_namespaced_event(kube.operator_namespace, field_selector=f"reason={ZERO_DEVICES_REASON}").items
    hits = [e for e in events if e.involved_object.name.startswith(f"{DEVICE_PLUGIN}-") and e.message.startswith(f"{node}: ")
            and (e.last_timestamp or e.first_timestamp) >= started.replace(microsecond=0)]
    assert hits, f"no {ZERO_DEVICES_REASON} event of {node} since the run started: {[e.message for e in events]}"


@then(parsers.parse('the run fails within its timeouts naming "{node}", the container "{container}" and "{message}"'))
def fails_naming(runbook_run: RunbookRun, node: str, container: str, message: str) -> None:
    """It fails, and no later than the timeouts it was given (-e *_timeout=...) allow, plus RUN_SLACK_S."""
    out = " ".join(runbook_run.run.stdout.split())
    assert not runbook_run.run.ok, runbook_run.describe()
    for text in (node, container, message):
        assert text in out, f"{text!r} not in the failure:\n{runbook_run.run.stdout[-3000:]}"
    given = {k: int(v) for k, v in parse_command(runbook_run.command).extravars.items() if k.endswith("_timeout")}
    bound = sum(given.values()) + RUN_SLACK_S
    assert runbook_run.elapsed_s is not None and runbook_run.elapsed_s <= bound, (
        f"the run took {runbook_run.elapsed_s:.0f} s, more than its timeouts {given} allow (+{RUN_SLACK_S} s)")
