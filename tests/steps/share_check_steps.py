"""Steps about verifying sharing (playbooks/verify-sharing.yml): the four-pod share check on the
trial node, the release gates, the summary the run ends with, and the change record it leaves.

Runs go through the same runner as every runbook (`run_runbook`), so the generic steps of
runbook_steps ("the run succeeds", "nothing was written to the cluster") apply to them. Each
scenario writes its change records to its own folder.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import getpass
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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
from gpushare.gates.prometheus import QueryPlan, collect
from gpushare.gates.report import to_table
from gpushare.gates.thresholds import load_thresholds
from gpushare.model.taints import Taint, tolerated
from gpushare.polling import wait_for
from tests.prometheus_fixture import THRESHOLDS, TRIAL_END, free_port, serve_gate_cases
from tests.steps.runbook_steps import RunbookRun, recorded, run_runbook
from tests.support.ansible import PlaybookRun, as_typed, inventory_limit, run_playbook
from tests.support.cluster import REPO, TEST_NAMESPACE_LABEL, Cluster

VERIFY = "verify-sharing.yml"
NAMESPACE = "gpushare-share-check"
APP = "gpu-share-check"
EXAMPLES = REPO / "examples" / "gates"
SCREEN = (40, 120)  # lines, columns


@dataclass
class Verification:
    """What a scenario handed to verify-sharing.yml, to compare the run, its summary and its record with."""

    reports: Path
    metrics: Path | None = None
    thresholds: Path | None = None
    prometheus: str = ""
    expected: Report | None = None
    started: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    pods: list[str] = field(default_factory=list)


@pytest.fixture
def verification(tmp_path: Path) -> Verification:
    return Verification(reports=tmp_path / "reports")


def _check_namespace(kube: Cluster) -> client.V1Namespace | None:
    try:
        return kube.core.read_namespace(NAMESPACE)
    except ApiException as err:
        if err.status != 404:
            raise
        return None


def _created_by_the_check(namespace: client.V1Namespace) -> bool:
    return (namespace.metadata.annotations or {}).get("gpushare.io/created-by") == "verify-sharing"


def _check_objects(kube: Cluster) -> list[str]:
    selector = f"app={APP}"
    return ([f"Pod {p.metadata.namespace}/{p.metadata.name}" for p in
             kube.core.list_pod_for_all_namespaces(label_selector=selector).items]
            + [f"Deployment {d.metadata.namespace}/{d.metadata.name}" for d in
               kube.apps.list_deployment_for_all_namespaces(label_selector=selector).items])


def _deleted(delete: Any, name: str, **options: Any) -> None:
    """Delete `name` in the check's namespace; one already gone (a Deployment's pod) is fine."""
    try:
        delete(name, NAMESPACE, **options)
    except ApiException as err:
        if err.status != 404:
            raise


@pytest.fixture
def share_check_namespace_removed(kube: Cluster) -> Iterator[None]:
    """Nothing of the check is left after the scenario, whatever the run left (a kept check): the
    namespace when the check created it; only its objects in one that was there before (deploy/rbac
    creates it, with the runbook's rights in it)."""
    yield
    namespace = _check_namespace(kube)
    if namespace is not None and _created_by_the_check(namespace):
        kube.core.delete_namespace(NAMESPACE)
        wait_for(lambda: _check_namespace(kube) is None, 60, f"namespace {NAMESPACE} to be deleted")
        return
    if namespace is not None:
        for deployment in kube.apps.list_namespaced_deployment(NAMESPACE, label_selector=f"app={APP}").items:
            _deleted(kube.apps.delete_namespaced_deployment, deployment.metadata.name)
        for pod in kube.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={APP}").items:
            _deleted(kube.core.delete_namespaced_pod, pod.metadata.name, grace_period_seconds=0)
    wait_for(lambda: not _check_objects(kube), 60, f"the share check's objects in {NAMESPACE} to be deleted")


@pytest.fixture(scope="module")
def share_check_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_gate_cases(tmp_path_factory) as url:
        yield url


def _verify(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
            runbook_inputs: dict[str, Any], targeted: list[str], verification: Verification,
            preview: bool = False, typed: dict[str, Any] | None = None, options: str = "") -> RunbookRun:
    extravars = {
        **runbook_inputs,
        "change_record_dir": str(verification.reports),
        # A check the scenario keeps is deleted with the scenario's namespaces.
        "share_check_namespace_labels": {TEST_NAMESPACE_LABEL: "share-check"},
        **(typed or {}),
    }
    verification.started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    command = f"{VERIFY} -l {','.join(targeted)}{options}{' --check --diff' if preview else ''}"
    return run_runbook(kube, tmp_path / f"run-{next(run_counter)}", command, inventory=runbook_inventory,
                       extravars=extravars)


# ---- situations -------------------------------------------------------------------------------------
@given(parsers.parse('Prometheus holds the trial\'s metrics, its cards exported as node "{case}"'),
       target_fixture="prometheus_case")
def prometheus_case(share_check_prometheus: str, case: str) -> dict[str, str]:
    return {"url": share_check_prometheus, "node": case}


@given(parsers.parse('the inventory lists host "{host}" for the Kubernetes node "{node}"'),
       target_fixture="runbook_inventory")
def inventory_naming_the_node(tmp_path: Path, kube: Cluster, host: str, node: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {
        "vars": {"gpushare_kubeconfig": str(kube.runbook_kubeconfig), "ansible_connection": "local",
                 "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "gpu_operator_namespace": kube.operator_namespace},
        "children": {"gpu_nodes": {"hosts": {host: {"gpushare_node_name": node}}}},
    }}))
    return path


@given(parsers.parse('the runs target host "{host}"'), target_fixture="targeted")
def runs_target_host(host: str) -> list[str]:
    return [host]


# ---- what the operator does --------------------------------------------------------------------------
@when(parsers.re(r"the operator (?P<mode>verifies|previews verifying) sharing on the trial node"
                 r"(?P<keep>, keeping the check pods)?$"),
      target_fixture="runbook_run")
def operator_verifies(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                      runbook_inputs: dict[str, Any], targeted: list[str], verification: Verification,
                      share_check_namespace_removed: None, mode: str, keep: str | None) -> RunbookRun:
    run = _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification,
                  preview=mode == "previews verifying", typed={"share_check_keep": bool(keep)})
    if keep:
        verification.pods = sorted(p.metadata.name for p in _check_pods(kube, "replica"))
    return run


@when(parsers.parse("the operator verifies sharing on the trial node with -e {option}"), target_fixture="runbook_run")
def operator_verifies_with_option(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                                  runbook_inputs: dict[str, Any], targeted: list[str], verification: Verification,
                                  share_check_namespace_removed: None, option: str) -> RunbookRun:
    return _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification,
                   options=f" -e {option}")


@when(parsers.re(r'the operator verifies sharing on the trial node with the release gates on "(?P<metrics>[^"]+)"'
                 r"(?P<auto>, rolling back automatically)?$"),
      target_fixture="runbook_run")
def operator_verifies_with_gates(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inputs: dict[str, Any],
                                 runbook_inventory: Path, targeted: list[str], verification: Verification,
                                 share_check_namespace_removed: None, metrics: str, auto: str | None) -> RunbookRun:
    verification.metrics = EXAMPLES / metrics
    verification.thresholds = EXAMPLES / "thresholds.yaml"
    verification.expected = evaluate(load_metrics(verification.metrics), load_thresholds(verification.thresholds))
    return _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification, typed={
        "release_gates_metrics_file": str(verification.metrics),
        "release_gates_thresholds_file": str(verification.thresholds),
        "release_gates_auto_rollback": bool(auto)})


@when("the operator verifies sharing on the trial node with the release gates read from that Prometheus",
      target_fixture="runbook_run")
def operator_verifies_with_prometheus(kube: Cluster, tmp_path: Path, run_counter: Iterator[int],
                                      runbook_inputs: dict[str, Any], runbook_inventory: Path, targeted: list[str],
                                      verification: Verification, share_check_namespace_removed: None,
                                      prometheus_case: dict[str, str]) -> RunbookRun:
    verification.thresholds = tmp_path / "thresholds.yaml"
    verification.thresholds.write_text(yaml.safe_dump(THRESHOLDS))
    verification.prometheus = prometheus_case["url"]
    return _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification, typed={
        "release_gates_prometheus_url": prometheus_case["url"], "release_gates_window": "1h",
        "release_gates_trial_end": str(TRIAL_END), "release_gates_nodes": [prometheus_case["node"]],
        "release_gates_thresholds_file": str(verification.thresholds)})


@when("the operator verifies sharing on the trial node with the release gates read from a Prometheus that does not answer",
      target_fixture="runbook_run")
def operator_verifies_without_prometheus(kube: Cluster, tmp_path: Path, run_counter: Iterator[int],
                                         runbook_inputs: dict[str, Any], runbook_inventory: Path, targeted: list[str],
                                         verification: Verification, share_check_namespace_removed: None) -> RunbookRun:
    verification.thresholds = EXAMPLES / "thresholds.yaml"
    verification.prometheus = f"http://127.0.0.1:{free_port()}"
    thresholds = load_thresholds(verification.thresholds)
    # What the gates make of a Prometheus nobody answers at (the same code the run's gate command runs).
    verification.expected = evaluate(collect(QueryPlan(verification.prometheus, TRIAL_END, 3600, 7 * 86400,
                                                       timeout_s=1), thresholds), thresholds)
    return _verify(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, targeted, verification, typed={
        "release_gates_prometheus_url": verification.prometheus, "release_gates_query_timeout": 1,
        "release_gates_thresholds_file": str(verification.thresholds)})


@when(parsers.parse("the operator runs the {role} role's {entry} entry point alone with -e {option}"),
      target_fixture="runbook_run")
def entry_point_alone(kube: Cluster, tmp_path: Path, targeted: list[str], role: str, entry: str,
                      option: str) -> RunbookRun:
    """A one-task playbook that imports only this entry point, the way verify-sharing.yml does."""
    playbook = tmp_path / f"{role}-{entry}.yml"
    imported = {"name": f"gpushare.gpu_sharing.{role}", **({"tasks_from": entry} if entry != "main" else {})}
    playbook.write_text(yaml.safe_dump([{
        "name": f"{role} {entry} alone", "hosts": "gpu_nodes", "gather_facts": False,
        "tasks": [{"name": "The entry point", "ansible.builtin.import_role": imported}]}], sort_keys=False))
    key, _, value = option.partition("=")
    return recorded(kube, f"{playbook.name} -l {','.join(targeted)} -e {option}", lambda: run_playbook(
        kube, str(playbook), tmp_path / "run", limit=",".join(targeted), extravars={key: value}))


# ---- what the check left in the cluster ---------------------------------------------------------------
def _check_pods(kube: Cluster, role: str) -> list[client.V1Pod]:
    selector = f"app={APP},gpushare.io/share-check={role}"
    return [p for p in kube.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


@then(parsers.parse('{count:d} pods of the share check run on "{node}", tolerating its pool taint'))
def check_pods_run(kube: Cluster, count: int, node: str) -> None:
    pods = _check_pods(kube, "replica")
    where = [(p.metadata.name, p.status.phase, p.spec.node_name) for p in pods]
    assert len(pods) == count, where
    assert all(p.status.phase == "Running" and p.spec.node_name == node for p in pods), where
    taints = [Taint.of(t.to_dict()) for t in kube.node(node).spec.taints or [] if t.effect == "NoSchedule"]
    assert taints, f"{node} carries no NoSchedule taint: the enable runbook taints the shared pool"
    for pod in pods:
        assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu.shared": "1"}
        assert pod.spec.node_selector == {"gpu-mode": "shared", "kubernetes.io/hostname": node}, pod.spec.node_selector
        tolerations = [client.ApiClient().sanitize_for_serialization(t) for t in pod.spec.tolerations or []]
        assert all(tolerated(tolerations, t) for t in taints), (tolerations, taints)


@then(parsers.parse('one more pod stays Pending because "{message}"'))
def overflow_pending(kube: Cluster, message: str) -> None:
    (pod,) = _check_pods(kube, "overflow")
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (pod.status.phase, pod.spec.node_name, scheduled.status, scheduled.reason) == (
        "Pending", None, "False", "Unschedulable"), pod.status
    assert message in scheduled.message, scheduled.message


@then(parsers.parse('the pod asking for 2 replicas failed with {reason} because "{message}"'))
def two_refused(kube: Cluster, reason: str, message: str) -> None:
    (pod,) = kube.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={APP},gpushare.io/share-check=two").items
    assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu.shared": "2"}
    assert (pod.status.phase, pod.status.reason) == ("Failed", reason), pod.status
    assert message in pod.status.message, pod.status.message


@then("nothing of the share check is left in the cluster")
def nothing_left(kube: Cluster) -> None:
    namespace = _check_namespace(kube)
    assert namespace is None or not _created_by_the_check(namespace), f"the check left its namespace {NAMESPACE}"
    assert not _check_objects(kube)


# ---- what the run said ------------------------------------------------------------------------------
def _flat(text: str) -> str:
    return " ".join(text.split())


def refusal(run: PlaybookRun) -> list[str]:
    """The refusal as the operator reads it: for an argument-spec failure its errors (Ansible's
    "Validation of arguments failed:" header says nothing), otherwise the message's lines."""
    for event in run.events:
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_failed" and not data.get("ignore_errors"):
            res = data.get("res") or {}
            return [str(e) for e in res.get("argument_errors") or []] or str(res.get("msg", "")).splitlines()
    return []


@then(parsers.parse('the first line of the refusal says "{message}"'))
def refusal_first_line(runbook_run: RunbookRun, message: str) -> None:
    assert not runbook_run.run.ok, f"the run was not refused: {runbook_run.describe()}"
    lines = refusal(runbook_run.run)
    assert lines and message in lines[0], (message, lines, runbook_run.describe())


@then(parsers.parse('the first line of the refusal ends with "{text}"'))
def refusal_ends(kube: Cluster, runbook_inventory: Path, runbook_run: RunbookRun, text: str) -> None:
    lines = refusal(runbook_run.run)
    expected = as_typed(dataclasses.replace(kube, inventory=runbook_inventory), text)
    assert lines and lines[0].endswith(expected), lines


@then("the run fails naming the gates that say rollback")
def run_fails_naming_gates(runbook_run: RunbookRun, verification: Verification) -> None:
    run = runbook_run.run
    assert not run.ok, runbook_run.describe()
    assert verification.expected
    failing = ", ".join(g.name for g in verification.expected.gates if g.status == "rollback")
    said = _flat(" ".join(run.failure_messages()))
    assert f"Release gates say rollback ({failing}): roll the trial back with ansible-playbook " in said, said


# ---- the summary the run ends with -------------------------------------------------------------------
def summary(run: PlaybookRun) -> list[str]:
    """The lines of the run's last debug message that names the change record: its summary."""
    found = [e["event_data"]["res"]["msg"] for e in run.events
             if e.get("event") == "runner_on_ok" and isinstance((e["event_data"].get("res") or {}).get("msg"), list)
             and any(str(line).startswith("Change record: ") for line in e["event_data"]["res"]["msg"])]
    assert found, f"the run printed no summary: {run.stdout[-3000:]}"
    return [str(line) for line in found[-1]]


@then(parsers.re(r'the summary says the share check passed on "(?P<node>[^"]+)" with (?P<those>those )?'
                 r'(?P<count>\d+) pods and (?P<free>\d+) "(?P<resource>[^"]+)" free$'))
def summary_check_passed(runbook_run: RunbookRun, verification: Verification, node: str, those: str | None, count: str,
                         free: str, resource: str) -> None:
    lines = summary(runbook_run.run)
    assert f"Share check on {node}: passed." in lines, lines
    text = _flat("\n".join(lines))
    assert f"{count} of {count} pods ran on {node}, 1 {resource} each ({free} allocatable, {free} free)" in text, text
    assert "The pod asking for 2 was refused by the kubelet: UnexpectedAdmissionError" in text, text
    assert "The pod beyond the free replicas stayed Pending: Unschedulable: " in text and f"Insufficient {resource}" in text
    if those:
        assert len(verification.pods) == int(count) and all(pod in text for pod in verification.pods), (
            verification.pods, text)


@then(parsers.parse('the summary names the change record and the next command "{text}"'))
def summary_record_and_next(kube: Cluster, runbook_inventory: Path, runbook_run: RunbookRun,
                            verification: Verification, text: str) -> None:
    text = as_typed(dataclasses.replace(kube, inventory=runbook_inventory), text, everywhere=True)
    lines = summary(runbook_run.run)
    (record,) = sorted(verification.reports.glob("verify-sharing-*.md"))
    assert f"Change record: {record}" in lines, lines
    following = _flat(" ".join(lines[lines.index(f"Change record: {record}") + 1:]))
    assert following.startswith("Next: ") and text in following, following


@then("the summary fits on one screen")
def summary_fits(runbook_run: RunbookRun) -> None:
    lines = summary(runbook_run.run)
    assert len(lines) <= SCREEN[0], f"{len(lines)} lines:\n" + "\n".join(lines)
    # The record's path is not wrapped, so that it can be copied.
    assert all(len(line) <= SCREEN[1] for line in lines if not line.startswith("Change record: ")), "\n".join(lines)


@then(parsers.parse('the summary begins with "{text}"'))
def summary_begins(runbook_run: RunbookRun, text: str) -> None:
    lines = summary(runbook_run.run)
    assert lines[0].startswith(text), lines


@then(parsers.parse("the summary gives the verdict \"{verdict}\" with each gate's verdict and reason"))
def summary_gates(runbook_run: RunbookRun, verification: Verification, verdict: str) -> None:
    lines = summary(runbook_run.run)
    assert any(line.startswith(f"Release gates: {verdict} (") for line in lines), lines
    assert verification.expected and verification.expected.verdict == verdict
    text = _flat("\n".join(lines))
    for gate in verification.expected.gates:
        assert f"{gate.name} {gate.status} {_flat(gate.reason)}" in text, (gate, text)


@then("the summary says once that Prometheus at that address did not answer")
def summary_prometheus_once(runbook_run: RunbookRun, verification: Verification) -> None:
    text = _flat("\n".join(summary(runbook_run.run)))
    assert text.count(f"Prometheus at {verification.prometheus} did not answer") == 1, text


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


@then("the change record names the exact command, the operator and when the run started and ended")
def record_header(verification: Verification, targeted: list[str], kube: Cluster, runbook_inventory: Path) -> None:
    record = _record(verification)
    (command,) = _table_rows(record, "Command")
    limit = inventory_limit(dataclasses.replace(kube, inventory=runbook_inventory), ",".join(targeted))
    assert "verify-sharing.yml" in command[1] and f"{limit} " in command[1] and " -e " in command[1], command
    (operator,) = _table_rows(record, "Operator")
    user = os.environ.get("USER") or getpass.getuser()
    assert operator[1].startswith(f"{user} as "), operator
    if kube.embedded:
        assert operator[1] == f"{user} as {kube.runbook_user}", operator
    (started,), (finished,) = (_table_rows(record, f"{when} (UTC)") for when in ("Started", "Finished"))
    times = [dt.datetime.strptime(row[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
             for row in (started, finished)]
    assert verification.started <= times[0] <= times[1] <= dt.datetime.now(dt.timezone.utc), times


@then(parsers.parse('the change record says "{text}"'))
def record_says(verification: Verification, text: str) -> None:
    record = _flat(_record(verification))
    assert text in record, record


@then(parsers.parse('the change record shows "{node}" with "{before}" before and "{after}" after for "{row}"'))
def record_before_after(verification: Verification, node: str, before: str, after: str, row: str) -> None:
    record = _record(verification)
    section = record.split(f"### {node}\n", 1)[1].split("\n## ", 1)[0]
    (cells,) = _table_rows(section, row)
    assert cells[1:] == [before, after], cells


@then(parsers.parse("the change record gives the verdict \"{verdict}\" with the gate command's own report"))
def record_gates(verification: Verification, verdict: str) -> None:
    record = _record(verification)
    assert f"Verdict: **{verdict}**" in record, record
    assert "ClusterPolicy backup | ConfigMap `" in record, record
    report = record.split("## Release gates", 1)[1].split("```\n", 1)[1].split("\n```", 1)[0]
    if verification.expected is not None:
        assert report == to_table(verification.expected), report
    lines = report.splitlines()
    assert lines[0].split() == ["GATE", "STATUS", "REASON,", "THRESHOLD,", "OBSERVED"] and lines[-1] == f"verdict: {verdict}"
    statuses = [line.split()[1] for line in lines[2:] if line[:1].isalpha() and not line.startswith(("source:", "verdict:", "error:"))]
    assert len(statuses) >= 6 and set(statuses) <= {"continue", "hold", "rollback"}, report
