"""Steps about the faults of a change window: the control plane restarted under a running runbook,
two runs started at once, a runbook killed mid-rollback, a device plugin that never becomes Ready.
Every runbook here is a real `ansible-playbook` process, started in the background as an operator's
terminal would."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from gpushare.k8s.session import Session
from gpushare.kube import wait_for
from tests.steps.runbook_steps import RunbookRun, parse_command
from tests.support.ansible import PlaybookRun, inventory_limit
from tests.support.cluster import REPO, Cluster

RUN_TIMEOUT_S = 600
MOMENT_TIMEOUT_S = 120
SHARE_CHECK_NAMESPACE = "gpushare-share-check"
PLUGIN_FAULT = "sim.gpushare.io/device-plugin-fault"


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
                             for c in s.list("ConfigMap", kube.operator_namespace, label_selector="gpushare.io/run"))
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
@when(parsers.re(r'the operator starts "(?P<command>[^"]+)" and (?P<component>etcd|the API server) restarts once '
                 r'(?P<moment>.+)$'), target_fixture="runbook_run")
def restarted_under_run(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                        command: str, component: str, moment: str) -> RunbookRun:
    _embedded_only(kube, "restarting the control plane")
    run = start_runbook(kube, tmp_path / "background", runbook_inventory, runbook_inputs, command)
    try:
        _wait_for_moment(kube, run, moment)
        name = "etcd" if component == "etcd" else "kube-apiserver"
        restarted = subprocess.run([sys.executable, "-m", "gpushare", "sim", "restart", name,
                                    "--state-dir", str(kube.state_dir)], capture_output=True, text=True, timeout=120)
        assert restarted.returncode == 0, restarted.stderr
    except BaseException:
        run.kill()
        raise
    return run.finish()


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
@when(parsers.parse('the rollback of "{node}" is killed right after it cordoned the node, holding a '
                    '{seconds:d}-second lock'))
def rollback_killed(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                    node: str, seconds: int) -> None:
    run = start_runbook(kube, tmp_path / "background", runbook_inventory, runbook_inputs,
                        f"rollback-timeslicing.yml -l {node}", gpu_operator_lock_duration=seconds)
    try:
        _wait_for_moment(kube, run, f'"{node}" is cordoned')
    finally:
        run.kill()
    labels = (Session(kube.kubeconfig).get("Node", node) or {})["metadata"].get("labels") or {}
    assert "nvidia.com/device-plugin.config" in labels, "killed too late: the node's config is restored already"


# ---- a device plugin that never becomes Ready ------------------------------------------------------
@given(parsers.parse('the device plugin on "{node}" crashes with "{message}" whenever its config shares'))
def plugin_fault(kube: Cluster, node: str, message: str) -> None:
    _embedded_only(kube, "a device-plugin fault")
    kube.core.patch_node(node, {"metadata": {"annotations": {PLUGIN_FAULT: message}}})


@then(parsers.parse('the run fails within its timeout naming "{node}", the container "{container}" and "{message}"'))
def fails_naming(runbook_run: RunbookRun, node: str, container: str, message: str) -> None:
    out = " ".join(runbook_run.run.stdout.split())
    assert not runbook_run.run.ok, runbook_run.describe()
    for text in (node, container, message):
        assert text in out, f"{text!r} not in the failure:\n{runbook_run.run.stdout[-3000:]}"
