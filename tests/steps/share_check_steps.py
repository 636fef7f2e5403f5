"""Steps about verifying sharing (playbooks/verify-sharing.yml): the four-pod share check on the
trial node, the release gates, and the change record the run leaves for the ticket.

Runs go through the same runner as every runbook (`run_runbook`), so the generic steps of
runbook_steps ("the run succeeds", "the run is refused with ...", "nothing was written to the
cluster") apply to them. Each scenario writes its change records to its own folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then, when

from gpushare.gates.evaluate import evaluate
from gpushare.gates.inputs import load_metrics
from gpushare.gates.model import Report
from gpushare.gates.thresholds import load_thresholds
from gpushare.kube import wait_for
from tests.prometheus_fixture import THRESHOLDS, TRIAL_END, serve_gate_cases
from tests.steps.runbook_steps import RunbookRun, run_runbook
from tests.support.cluster import REPO, TEST_NAMESPACE_LABEL, Cluster

VERIFY = "verify-sharing.yml"
NAMESPACE = "gpushare-share-check"
APP = "gpu-share-check"
EXAMPLES = REPO / "examples" / "gates"


@dataclass
class Verification:
    """What a scenario handed to verify-sharing.yml, to compare the run and its record with."""

    reports: Path
    metrics: Path | None = None
    thresholds: Path | None = None


@pytest.fixture
def verification(tmp_path: Path) -> Verification:
    return Verification(reports=tmp_path / "reports")


@pytest.fixture
def share_check_namespace_removed(kube: Cluster) -> Iterator[None]:
    """The check's namespace is gone after the scenario, whatever the run left (a kept check)."""
    yield
    try:
        kube.core.delete_namespace(NAMESPACE)
    except ApiException as err:
        if err.status != 404:
            raise

    def gone() -> bool:
        try:
            kube.core.read_namespace(NAMESPACE)
        except ApiException as err:
            return err.status == 404
        return False

    wait_for(gone, 60, f"namespace {NAMESPACE} to be deleted")


@pytest.fixture(scope="module")
def share_check_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_gate_cases(tmp_path_factory) as url:
        yield url


def _verify(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
            runbook_inputs: dict[str, Any], targeted: list[str], verification: Verification,
            preview: bool = False, **extravars: Any) -> RunbookRun:
    typed = {
        **runbook_inputs,
        "change_record_dir": str(verification.reports),
        # A check the scenario keeps is deleted with the scenario's namespaces.
        "share_check_namespace_labels": {TEST_NAMESPACE_LABEL: "share-check"},
        **extravars,
    }
    command = f"{VERIFY} -l {','.join(targeted)}{' --check --diff' if preview else ''}"
    return run_runbook(kube, tmp_path / f"run-{next(run_counter)}", command, inventory=runbook_inventory,
                       extravars=typed)


# ---- situations -------------------------------------------------------------------------------------
@given(parsers.parse('Prometheus holds the trial\'s metrics, its cards exported as node "{case}"'),
       target_fixture="prometheus_case")
def prometheus_case(share_check_prometheus: str, case: str) -> dict[str, str]:
    return {"url": share_check_prometheus, "node": case}


# ---- what the operator does --------------------------------------------------------------------------
@when(parsers.re(r"the operator (?P<mode>verifies|previews verifying) sharing on the trial node"
                 r"(?P<keep>, keeping the check pods)?$"),
      target_fixture="runbook_run")
def operator_verifies(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                      runbook_inputs: dict[str, Any], targeted: list[str], verification: Verification,
                      share_check_namespace_removed: None, mode: str, keep: str | None) -> RunbookRun:
    return _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification,
                   preview=mode == "previews verifying", share_check_keep=bool(keep))


@when(parsers.re(r'the operator verifies sharing on the trial node with the release gates on "(?P<metrics>[^"]+)"'
                 r"(?P<auto>, rolling back automatically)?$"),
      target_fixture="runbook_run")
def operator_verifies_with_gates(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inputs: dict[str, Any],
                                 runbook_inventory: Path, targeted: list[str], verification: Verification,
                                 share_check_namespace_removed: None, metrics: str, auto: str | None) -> RunbookRun:
    verification.metrics = EXAMPLES / metrics
    verification.thresholds = EXAMPLES / "thresholds.yaml"
    return _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification,
                   release_gates_metrics_file=str(verification.metrics),
                   release_gates_thresholds_file=str(verification.thresholds),
                   release_gates_auto_rollback=bool(auto))


@when("the operator verifies sharing on the trial node with the release gates read from that Prometheus",
      target_fixture="runbook_run")
def operator_verifies_with_prometheus(kube: Cluster, tmp_path: Path, run_counter: Iterator[int],
                                      runbook_inputs: dict[str, Any], runbook_inventory: Path, targeted: list[str],
                                      verification: Verification, share_check_namespace_removed: None,
                                      prometheus_case: dict[str, str]) -> RunbookRun:
    verification.thresholds = tmp_path / "thresholds.yaml"
    verification.thresholds.write_text(yaml.safe_dump(THRESHOLDS))
    return _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification,
                   release_gates_prometheus_url=prometheus_case["url"], release_gates_window="1h",
                   release_gates_trial_end=str(TRIAL_END), release_gates_nodes=[prometheus_case["node"]],
                   release_gates_thresholds_file=str(verification.thresholds))


# ---- what the check left in the cluster ---------------------------------------------------------------
def _check_pods(kube: Cluster, role: str) -> list[client.V1Pod]:
    selector = f"app={APP},gpushare.io/share-check={role}"
    return [p for p in kube.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


@then(parsers.parse('{count:d} pods of the share check run on "{node}"'))
def check_pods_run(kube: Cluster, count: int, node: str) -> None:
    pods = _check_pods(kube, "replica")
    where = [(p.metadata.name, p.status.phase, p.spec.node_name) for p in pods]
    assert len(pods) == count, where
    assert all(p.status.phase == "Running" and p.spec.node_name == node for p in pods), where
    for pod in pods:
        limits = pod.spec.containers[0].resources.limits
        assert limits == {"nvidia.com/gpu.shared": "1"}, limits
        assert pod.spec.node_selector == {"gpu-mode": "shared", "kubernetes.io/hostname": node}, pod.spec.node_selector
        assert any(t.key == "gpu-mode" and t.effect == "NoSchedule" for t in pod.spec.tolerations), pod.spec.tolerations


@then(parsers.parse('one more pod stays Pending because "{message}"'))
def overflow_pending(kube: Cluster, message: str) -> None:
    (pod,) = _check_pods(kube, "overflow")
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (pod.status.phase, pod.spec.node_name, scheduled.status, scheduled.reason) == (
        "Pending", None, "False", "Unschedulable"), pod.status
    assert message in scheduled.message, scheduled.message


@then(parsers.parse('the pod asking for 2 replicas failed with {reason} because "{message}"'))
def two_refused(kube: Cluster, reason: str, message: str) -> None:
    (pod,) = [p for p in kube.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={APP},gpushare.io/share-check=two").items]
    assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu.shared": "2"}
    assert (pod.status.phase, pod.status.reason) == ("Failed", reason), pod.status
    assert message in pod.status.message, pod.status.message


@then("nothing of the share check is left in the cluster")
def nothing_left(kube: Cluster) -> None:
    with pytest.raises(ApiException) as missing:
        kube.core.read_namespace(NAMESPACE)
    assert missing.value.status == 404
    leftovers = kube.core.list_pod_for_all_namespaces(label_selector=f"app={APP}").items
    assert not leftovers, [f"{p.metadata.namespace}/{p.metadata.name}" for p in leftovers]


# ---- what the run said ------------------------------------------------------------------------------
def _expected_report(verification: Verification) -> Report:
    assert verification.metrics and verification.thresholds
    return evaluate(load_metrics(verification.metrics), load_thresholds(verification.thresholds))


@then("the run fails with the reasons of the gates")
def run_fails_with_gate_reasons(runbook_run: RunbookRun, verification: Verification) -> None:
    run = runbook_run.run
    assert not run.ok, runbook_run.describe()
    said = " ".join(" ".join(run.failure_messages()).split())
    assert "Release gates say rollback" in said, said
    for gate in _expected_report(verification).gates:
        if gate.status == "rollback":
            assert f"{gate.name}: {gate.reason}" in said, (gate, said)


# ---- the change record ------------------------------------------------------------------------------
def _record(verification: Verification) -> str:
    records = sorted(verification.reports.glob("verify-sharing-*.md")) if verification.reports.is_dir() else []
    assert len(records) == 1, f"expected one change record in {verification.reports}, found {records}"
    return records[0].read_text()


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _table_rows(record: str, first_cell: str) -> list[list[str]]:
    return [_cells(line) for line in record.splitlines() if line.startswith("|") and _cells(line)[:1] == [first_cell]]


@then("no change record was written")
def no_record(verification: Verification) -> None:
    found = list(verification.reports.glob("*")) if verification.reports.exists() else []
    assert not found, found


@then(parsers.parse('the change record says the share check passed on "{node}"'))
def record_check_passed(verification: Verification, node: str) -> None:
    record = _record(verification)
    (row,) = _table_rows(record, node)
    assert row[1] == "**passed**", row
    assert row[3] == "4/4" and row[4].startswith("passed: Pending") and row[5].startswith("passed: Failed"), row
    assert "Insufficient nvidia.com/gpu.shared" in record and "UnexpectedAdmissionError" in record


@then(parsers.parse('the change record says "{text}"'))
def record_says(verification: Verification, text: str) -> None:
    record = " ".join(_record(verification).split())
    assert text in record, record


@then(parsers.parse('the change record shows "{node}" with "{before}" before and "{after}" after for "{row}"'))
def record_before_after(verification: Verification, node: str, before: str, after: str, row: str) -> None:
    record = _record(verification)
    section = record.split(f"### {node}\n", 1)[1].split("\n## ", 1)[0]
    (cells,) = _table_rows(section, row)
    assert cells[1:] == [before, after], cells


@then(parsers.parse('the change record gives the verdict "{verdict}" with every gate, its values and its reason'))
def record_gates(verification: Verification, verdict: str) -> None:
    record = _record(verification)
    assert f"Verdict: **{verdict}**" in record, record
    assert "ClusterPolicy backup | ConfigMap `" in record, record
    gates_section = record.split("## Release gates", 1)[1]
    expected = _expected_report(verification).gates if verification.metrics else None
    rows = [_cells(line) for line in gates_section.splitlines() if line.startswith("| ") and not line.startswith("| gate ")]
    assert len(rows) >= 6, gates_section
    for name, status, observed, threshold, reason in rows:
        assert observed and threshold and reason, (name, observed, threshold, reason)
        assert status.strip("*") in ("continue", "hold", "rollback"), status
    if expected is not None:
        assert [(r[0], r[1].strip("*"), r[3], r[4]) for r in rows] == [
            (g.name, g.status, g.threshold, g.reason) for g in expected], rows
