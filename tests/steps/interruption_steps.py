"""Steps about interrupted runs: the rehearsal switch (`timeslicing_stop_after`) and a real SIGKILL
of ansible-playbook in the middle of an enable, and what the run records say afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_bdd import parsers, then, when

from gpushare.k8s.session import Session
from gpushare.polling import wait_for
from tests.steps.cluster_steps import Before, operator_configmaps
from tests.steps.fault_steps import start_runbook
from tests.steps.runbook_steps import ENABLE, RunbookRun, _run
from tests.support.cluster import Cluster

RECORDS = "gpushare.io/run"
LOCK = "gpushare-runbook-lock"


def _records(kube: Cluster, runbook: str) -> list[dict[str, Any]]:
    return sorted(Session(kube.kubeconfig).list("ConfigMap", kube.records_namespace,
                                                label_selector=f"{RECORDS}={runbook}"),
                  key=lambda c: c["metadata"]["name"])


@when(parsers.parse('the enable of "{node}" is interrupted right after the {step}'), target_fixture="runbook_run")
def enable_interrupted(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                       runbook_inputs: dict[str, Any], node: str, step: str) -> RunbookRun:
    return _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"{ENABLE} -l {node} -e timeslicing_stop_after={step}")


@when(parsers.parse('the enable of "{node}" is killed right after it changed the ClusterPolicy'))
def enable_killed(kube: Cluster, tmp_path: Path, runbook_inventory: Path, runbook_inputs: dict[str, Any],
                  node: str) -> None:
    """A real `ansible-playbook` killed with SIGKILL (a lost session) once the ClusterPolicy points at
    the ConfigMap and before the node is labelled."""
    run = start_runbook(kube, tmp_path / "background", runbook_inventory, runbook_inputs, f"{ENABLE} -l {node}")
    session = Session(kube.kubeconfig)

    def policy_changed() -> bool:
        config = ((session.get("ClusterPolicy", "cluster-policy") or {}).get("spec", {}).get("devicePlugin") or {}).get(
            "config") or {}
        return bool(config.get("name")) or run.process.poll() is not None

    try:
        wait_for(policy_changed, 120, "the enable to change the ClusterPolicy", interval_s=0.02)
    finally:
        ended_by_itself = run.process.poll() is not None
        run.kill()
    assert not ended_by_itself, f"the enable ended by itself: {run.log.read_text()}"
    labels = (session.get("Node", node) or {})["metadata"].get("labels") or {}
    assert "nvidia.com/device-plugin.config" not in labels, "killed too late: the node is labelled already"


@then(parsers.parse("the runbook lock is released within {seconds:d} seconds"))
def lock_released(kube: Cluster, seconds: int) -> None:
    session = Session(kube.kubeconfig)
    wait_for(lambda: session.get("Lease", LOCK, kube.records_namespace) is None, seconds,
             "the killed run's renewer to release the runbook lock")


@then(parsers.parse('the runbook lock is still held by "{holder}"'))
def lock_still_held(kube: Cluster, holder: str) -> None:
    lease = Session(kube.kubeconfig).get("Lease", LOCK, kube.records_namespace)
    assert lease and lease["spec"]["holderIdentity"].startswith(holder), lease


@then(parsers.parse("the interrupted run's record says \"{state}\""))
def record_state(kube: Cluster, state: str) -> None:
    records = _records(kube, "enable-timeslicing")
    assert records, "no enable run record"
    assert records[0]["metadata"]["annotations"]["gpushare.io/state"] == state, records[0]["metadata"]["annotations"]


@then("there is one enable run record")
def one_record(kube: Cluster) -> None:
    assert len(_records(kube, "enable-timeslicing")) == 1, [r["metadata"]["name"] for r in _records(kube, "enable-timeslicing")]


@then("the operator namespace's ConfigMaps are as before, but for the run records")
def configmaps_as_before(kube: Cluster, before: Before) -> None:
    assert operator_configmaps(kube) == before.configmaps
