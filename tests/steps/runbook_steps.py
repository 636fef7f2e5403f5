"""Steps about running the runbooks: what the operator types, and what the run reports and writes.

A run is driven through ansible-runner exactly as `ansible-playbook` would be typed: `-e key=value`
values are strings, as on the command line. Every run records what it wrote, so a scenario can say
"nothing was written": the mutating requests it sent, from the embedded cluster's audit log; on any
other cluster, what changed in the objects the runbooks may write (tests/support/written.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then, when

from gpushare_testbed.simulator import clusterpolicy as cp
from tests.steps.cluster_steps import Before, backups, clusterpolicy_spec, operand_pods
from tests.support import written
from tests.support.ansible import PlaybookRun, as_typed, inventory_limit, run_playbook
from tests.support.cluster import EMBEDDED_NAMESPACE, Cluster

ENABLE = "enable-timeslicing.yml"


@dataclasses.dataclass
class RunbookRun:
    """One playbook run and what it wrote: the mutating requests it sent (None when the cluster has no
    audit log), else the objects it changed (None when not recorded: a run in the background)."""

    run: PlaybookRun
    writes: list[dict[str, Any]] | None
    command: str
    changed_objects: list[str] | None = None
    elapsed_s: float | None = None  # its wall time
    audit: tuple[int, int] | None = None  # the audit log's offsets at its start and end (embedded cluster)

    def describe(self) -> str:
        return f"`{self.command}`: {self.run.describe()}"


@dataclasses.dataclass(frozen=True)
class Command:
    playbook: str
    limit: str | None
    extravars: dict[str, str]
    check: bool
    diff: bool
    verbose: bool = False


def parse_command(command: str) -> Command:
    """`enable-timeslicing.yml -l gpu-node -e timeslicing_replicas=4 --check --diff`, as typed."""
    words = shlex.split(command.removeprefix("ansible-playbook "))
    playbook, limit, extravars, check, diff, verbose = Path(words.pop(0)).name, None, {}, False, False, False
    while words:
        word = words.pop(0)
        if word in ("-l", "--limit"):
            limit = words.pop(0)
        elif word in ("-e", "--extra-vars"):
            key, _, value = words.pop(0).partition("=")
            extravars[key] = value
        elif word in ("-C", "--check"):
            check = True
        elif word in ("-D", "--diff"):
            diff = True
        elif word == "-v":
            verbose = True
        else:
            raise ValueError(f"unsupported ansible-playbook argument {word!r} in {command!r}")
    return Command(playbook, limit, extravars, check, diff, verbose)


def run_runbook(kube: Cluster, workdir: Path, command: str, *, inventory: Path | None = None,
                extravars: dict[str, Any] | None = None) -> RunbookRun:
    """Run `command` against `kube` and record what it wrote. `extravars` are typed (like -e @file)."""
    parsed = parse_command(command)
    target = kube if inventory in (None, kube.inventory) else dataclasses.replace(kube, inventory=inventory)
    return recorded(kube, command, lambda: run_playbook(
        target, parsed.playbook, workdir, limit=parsed.limit, extravars={**(extravars or {}), **parsed.extravars},
        check=parsed.check, diff=parsed.diff, arguments="-v" if parsed.verbose else ""))


def recorded(kube: Cluster, command: str, start: Callable[[], PlaybookRun]) -> RunbookRun:
    """Run `start` and record what it wrote: the runbook identity's requests in the embedded cluster's
    audit log; on any other cluster, the objects the runbooks may write, compared before and after."""
    began = time.monotonic()
    if kube.embedded:
        mark = kube.audit_mark()
        run = start()
        return RunbookRun(run, kube.audit_writes(mark, kube.runbook_user, dry_runs=True), command,
                          elapsed_s=time.monotonic() - began, audit=(mark, kube.audit_mark()))
    before = written.take(kube)
    run = start()
    elapsed = time.monotonic() - began
    return RunbookRun(run, None, command, written.differences(before, written.take(kube)), elapsed_s=elapsed)


# ---- what every run of a scenario shares -------------------------------------------------------------
@pytest.fixture
def runbook_inventory(kube: Cluster) -> Path:
    """The inventory the operator runs with; a situation step may replace it."""
    return kube.inventory


@pytest.fixture
def runbook_inputs(tmp_path: Path) -> dict[str, Any]:
    """Variables every run of the scenario gets (like -e @file): backups, change records and reports go
    to the scenario's folder, never to the repository's reports/."""
    return {"timeslicing_backup_dir": str(tmp_path / "backups"), "mig_report_dir": str(tmp_path / "reports"),
            "change_record_dir": str(tmp_path / "change-records")}


@pytest.fixture
def backup_dir(runbook_inputs: dict[str, Any]) -> Path:
    return Path(runbook_inputs["timeslicing_backup_dir"])


@pytest.fixture
def run_counter() -> Iterator[int]:
    return iter(range(1, 1000))


def _run(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
         runbook_inputs: dict[str, Any], command: str) -> RunbookRun:
    return run_runbook(kube, tmp_path / f"run-{next(run_counter)}", command,
                       inventory=runbook_inventory, extravars=runbook_inputs)


# ---- situations -------------------------------------------------------------------------------------
@given(parsers.re(r'the trial nodes? (?:is|are) (?P<nodes>"[^"]+"(?:(?:, | and )"[^"]+")*)$'),
       target_fixture="targeted")
def trial_nodes(nodes: str) -> list[str]:
    return re.findall(r'"([^"]+)"', nodes)


@given("the cluster is as the GPU Operator installed it")
def cluster_as_installed(kube: Cluster) -> None:
    assert kube.custom.get_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY)


@given(parsers.parse('the inventory lists "{node}" as a GPU node'), target_fixture="runbook_inventory")
def inventory_listing(tmp_path: Path, kube: Cluster, node: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {
        "vars": {"gpushare_kubeconfig": str(kube.runbook_kubeconfig), "ansible_connection": "local",
                 "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "gpu_operator_namespace": kube.operator_namespace},
        "children": {"gpu_nodes": {"hosts": {node: None}}},
    }}))
    return path


@pytest.fixture
def clusterpolicy_deleted(kube: Cluster) -> Iterator[None]:
    """Delete the ClusterPolicy; put the chart's instance back afterwards (the operator does not)."""
    if not kube.embedded:
        pytest.skip("deleting the ClusterPolicy removes every operand of a real GPU Operator; embedded cluster only")
    kube.custom.delete_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY)
    yield
    try:
        kube.custom.create_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.default_instance())
    except ApiException as err:
        if err.status != 409:
            raise


@given("the ClusterPolicy has been deleted")
def clusterpolicy_is_deleted(clusterpolicy_deleted: None) -> None:
    pass


def _unless_gone(delete: Callable[[], Any]) -> None:
    """A fixture's cleanup: the scenario may have deleted the object already."""
    try:
        delete()
    except ApiException as err:
        if err.status != 404:
            raise


@pytest.fixture
def lock_held_elsewhere(kube: Cluster) -> Iterator[str]:
    """A Lease held by another run (a rollback started from another laptop a moment ago)."""
    holder = "rollback-timeslicing@ops-laptop/20260101T000000Z-beef"
    coordination = client.CoordinationV1Api(kube.api)
    now = dt.datetime.now(dt.timezone.utc)
    coordination.create_namespaced_lease(kube.records_namespace, {
        "metadata": {"name": "gpushare-runbook-lock", "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
        "spec": {"holderIdentity": holder, "acquireTime": now, "renewTime": now, "leaseDurationSeconds": 1800},
    })
    yield holder
    _unless_gone(lambda: coordination.delete_namespaced_lease("gpushare-runbook-lock", kube.records_namespace))


@given("another run holds the runbook lock")
def another_run_holds_the_lock(lock_held_elsewhere: str) -> None:
    pass


@pytest.fixture
def stray_record(kube: Cluster) -> Iterator[str]:
    """A complete enable's run record where gpushare wrote them before they moved to their own namespace."""
    name = "gpushare-run-enable-timeslicing-20261101t090000z-0b0b"
    kube.core.create_namespaced_config_map(kube.operator_namespace, {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpushare",
                                              "gpushare.io/run": "enable-timeslicing"},
                     "annotations": {"gpushare.io/state": "complete", "gpushare.io/started-at": "2026-11-01T09:00:00Z"}},
        "data": {"intent.json": '{"runbook": "enable-timeslicing", "nodes": ["gpu-node"]}'}})
    yield name
    _unless_gone(lambda: kube.core.delete_namespaced_config_map(name, kube.operator_namespace))


@given("an earlier gpushare left its run record in the operator namespace")
def an_earlier_record_in_the_operator_namespace(stray_record: str) -> None:
    pass


@pytest.fixture
def foreign_shared_key(kube: Cluster) -> Iterator[None]:
    """Another team's ConfigMap, with its own `shared` key the runbook must not overwrite."""
    body = {"metadata": {"name": "time-slicing-config"},
            "data": {"shared": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                               "      - name: nvidia.com/gpu\n        replicas: 8\n"}}
    kube.core.create_namespaced_config_map(kube.operator_namespace, body)
    yield
    _unless_gone(lambda: kube.core.delete_namespaced_config_map("time-slicing-config", kube.operator_namespace))


@given('the device-plugin ConfigMap already has a "shared" key written by someone else')
def configmap_with_foreign_key(foreign_shared_key: None) -> None:
    pass


@given("the operator's own config puts renameByDefault under flags", target_fixture="runbook_inputs")
def misplaced_rename(runbook_inputs: dict[str, Any]) -> dict[str, Any]:
    config = ("version: v1\nflags:\n  migStrategy: none\n  renameByDefault: true\nsharing:\n  timeSlicing:\n"
              "    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n")
    return {**runbook_inputs, "timeslicing_config_override": config}


@given(parsers.re(r'MPS is enabled on (?:the trial node|"(?P<node>[^"]+)") with (?P<replicas>\d+) replicas$'))
def mps_enabled(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                runbook_inputs: dict[str, Any], request: pytest.FixtureRequest, node: str | None, replicas: str) -> None:
    nodes = [node] if node else request.getfixturevalue("targeted")
    done = _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"enable-mps.yml -l {','.join(nodes)} -e mps_replicas={replicas}")
    assert done.run.ok, done.describe()


@given(parsers.re(r'time-slicing is enabled on (?:the trial node|"(?P<node>[^"]+)") with (?P<replicas>\d+) replicas$'))
def timeslicing_enabled(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                        runbook_inputs: dict[str, Any], request: pytest.FixtureRequest, node: str | None,
                        replicas: str) -> None:
    nodes = [node] if node else request.getfixturevalue("targeted")
    done = _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"{ENABLE} -l {','.join(nodes)} -e timeslicing_replicas={replicas}")
    assert done.run.ok, done.describe()


# ---- what the operator does --------------------------------------------------------------------------
@when(parsers.parse('the operator runs "{command}"'), target_fixture="runbook_run")
def operator_runs(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                  runbook_inputs: dict[str, Any], command: str) -> RunbookRun:
    return _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, command)


@when(parsers.re(r"the operator (?P<mode>enables|previews enabling) time-slicing with (?P<replicas>\S+) replicas"
                 r"(?P<verbosely>, verbosely)?$"),
      target_fixture="runbook_run")
def operator_enables(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                     runbook_inputs: dict[str, Any], targeted: list[str], mode: str, replicas: str,
                     verbosely: str | None) -> RunbookRun:
    preview = " --check --diff" if mode == "previews enabling" else ""
    preview += " -v" if verbosely else ""
    return _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"{ENABLE} -l {','.join(targeted)} -e timeslicing_replicas={replicas}{preview}")


@when(parsers.re(r"the operator enables time-slicing with (?P<replicas>\d+) replicas for the whole cluster"
                 r"(?P<confirmed>, confirming that every GPU node changes| without confirming)$"),
      target_fixture="runbook_run")
def operator_enables_cluster_wide(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                                  runbook_inputs: dict[str, Any], targeted: list[str], replicas: str,
                                  confirmed: str) -> RunbookRun:
    confirm = " -e timeslicing_confirm_cluster_scope=true" if confirmed.startswith(", confirming") else ""
    return _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"{ENABLE} -l {','.join(targeted)} -e timeslicing_replicas={replicas} -e timeslicing_scope=cluster{confirm}")


# ---- what the run did --------------------------------------------------------------------------------
@then("the run succeeds")
def run_succeeds(runbook_run: RunbookRun) -> None:
    assert runbook_run.run.ok, runbook_run.describe()
    assert not runbook_run.run.stats.get("failures"), runbook_run.describe()


@then("the run reports changes on the trial node")
def run_reports_changes(kube: Cluster, runbook_inventory: Path, runbook_run: RunbookRun, targeted: list[str]) -> None:
    """Ansible counts changes by inventory host, which may be named differently from its node."""
    run_succeeds(runbook_run)
    host = inventory_limit(dataclasses.replace(kube, inventory=runbook_inventory), targeted[0])
    assert runbook_run.run.changed.get(host, 0) > 0, runbook_run.describe()


@then("the run reports no change")
def run_reports_no_change(runbook_run: RunbookRun) -> None:
    run_succeeds(runbook_run)
    assert not any(runbook_run.run.changed.values()), (runbook_run.run.changed_tasks(), runbook_run.describe())


@then(parsers.parse('the run is refused with "{message}"'))
def run_is_refused(request: pytest.FixtureRequest, runbook_run: RunbookRun, message: str) -> None:
    """A `-l <node>` in `message` as this inventory's operator types it (its host name for the node),
    an object in the embedded cluster's operator namespace as in this cluster's; only such a message
    needs the cluster (a scenario on its own cluster has no `kube`)."""
    run = runbook_run.run
    assert not run.ok, f"the run was not refused: {runbook_run.describe()}"
    if "-l " in message or f" {EMBEDDED_NAMESPACE}/" in message:
        kube, inventory = request.getfixturevalue("kube"), request.getfixturevalue("runbook_inventory")
        message = as_typed(dataclasses.replace(kube, inventory=inventory), message)
        message = message.replace(f" {EMBEDDED_NAMESPACE}/", f" {kube.operator_namespace}/")
    said = " ".join(run.failure_messages()) or run.stdout
    assert message in " ".join(said.split()), f"{message!r} not in what the run said: {said[-3000:]}"


def persisted(writes: list[dict[str, Any]]) -> list[str]:
    """Mutating requests that changed something: a server-side dry run (check mode) persists nothing."""
    return [f"{w['verb']} {w['requestURI']}" for w in writes if "dryRun=All" not in w.get("requestURI", "")]


def changed_objects(runbook_run: RunbookRun) -> list[str]:
    assert runbook_run.changed_objects is not None, f"`{runbook_run.command}` recorded nothing of what it wrote"
    return runbook_run.changed_objects


@then("nothing was written to the cluster")
def nothing_written(runbook_run: RunbookRun) -> None:
    if runbook_run.writes is None:
        assert changed_objects(runbook_run) == [], f"`{runbook_run.command}` wrote: {runbook_run.changed_objects}"
        return
    assert persisted(runbook_run.writes) == [], persisted(runbook_run.writes)


@then("the run sent no mutating request to the API server")
def no_mutating_request(runbook_run: RunbookRun) -> None:
    """Stricter than "nothing was written": not even a server-side dry run (a run with nothing to change).
    Without an audit log, what can be seen of that: nothing changed."""
    if runbook_run.writes is None:
        nothing_written(runbook_run)
        return
    assert runbook_run.writes == [], [f"{w['verb']} {w['requestURI']}" for w in runbook_run.writes]


@then(parsers.re(r'the run restarted the device plugin(?: and GFD)? on "(?P<node>[^"]+)"(?P<only> only)?$'))
def run_restarted_on(kube: Cluster, before: Before, node: str, only: str | None) -> None:
    now = operand_pods(kube)
    readers = ("nvidia-device-plugin-daemonset/", "gpu-feature-discovery/")
    restarted = sorted(name for uid, name in before.operand_pods.get(node, {}).items()
                       if name.startswith(readers) and uid not in now.get(node, {}))
    assert restarted, f"no device-plugin pod of {node} was restarted: {before.operand_pods.get(node)}"
    if only:
        elsewhere = {n: sorted(name for uid, name in pods.items() if uid not in now.get(n, {}))
                     for n, pods in before.operand_pods.items() if n != node}
        assert not any(elsewhere.values()), f"pods restarted elsewhere: {elsewhere}"


@then("the run leaves the ClusterPolicy as it was")
def clusterpolicy_untouched(kube: Cluster, before: Before) -> None:
    assert clusterpolicy_spec(kube) == before.clusterpolicy


@then("the preview shows the ConfigMap, the ClusterPolicy and the trial node changing")
def preview_shows_changes(kube: Cluster, runbook_run: RunbookRun, targeted: list[str]) -> None:
    changed = " | ".join(runbook_run.run.changed_tasks())
    for task in ("Write the device-plugin configs", "Point the ClusterPolicy", "Select the shared config and join"):
        assert task in changed, f"{task!r} not among the changes: {changed}"
    out = runbook_run.run.stdout
    for diff_line in (f"+ ConfigMap {kube.operator_namespace}/time-slicing-config", "  +       timeSlicing:",
                      "  + spec.devicePlugin.config.name: time-slicing-config",
                      "  + metadata.labels.nvidia.com/device-plugin.config: shared", "  + metadata.labels.gpu-mode: shared",
                      "  + spec.taints: [{effect: NoSchedule, key: nvidia.com/gpu, value: shared}]", f"~ Node {targeted[0]}"):
        assert diff_line in out.splitlines(), f"the diff does not show {diff_line.strip()!r}:\n{out[-3000:]}"


@then("the preview shows the run record, the ClusterPolicy backup file and the lock in one line each")
def preview_shows_bookkeeping_in_a_line(kube: Cluster, runbook_run: RunbookRun) -> None:
    out, records = runbook_run.run.stdout.splitlines(), re.escape(kube.records_namespace)
    for pattern in (rf"\+ ConfigMap {records}/gpushare-run-enable-\S+ \(run record with the ClusterPolicy backup, \d+ KiB\)",
                    r"\+ \S+/backups/clusterpolicy-\S+\.yaml \(file, mode 0600, \d+ KiB\)",
                    rf"\+ Lease {records}/gpushare-runbook-lock \(runbook lock, \d+ B\)"):
        assert sum(bool(re.fullmatch(pattern, line)) for line in out) == 1, f"no one line {pattern}:\n" + "\n".join(out)
    assert not any("clusterpolicy.yaml" in line or "holderIdentity" in line for line in out), "\n".join(out)


@then("the preview shows the run record whole, the ClusterPolicy backup in it, and the lock")
def preview_shows_bookkeeping_whole(kube: Cluster, runbook_run: RunbookRun) -> None:
    out, records = runbook_run.run.stdout, re.escape(kube.records_namespace)
    assert re.search(rf"^\+\+\+ after: ConfigMap {records}/gpushare-run-enable-\S+$", out, re.M), out[-3000:]
    assert "+  clusterpolicy.yaml: " in out and "+kind: ClusterPolicy" in out, out[-3000:]  # the record, and the file
    assert "+  holderIdentity: enable-timeslicing@" in out, out[-3000:]


@then(parsers.parse("the run printed at most {count:d} lines"))
def printed_at_most(runbook_run: RunbookRun, count: int) -> None:
    lines = [line for line in runbook_run.run.stdout.splitlines() if line.strip()]
    assert len(lines) <= count, f"{len(lines)} lines:\n" + "\n".join(lines)


@then(parsers.parse('the output says "{text}"'))
def output_says(kube: Cluster, runbook_inventory: Path, runbook_run: RunbookRun, text: str) -> None:
    expected = as_typed(dataclasses.replace(kube, inventory=runbook_inventory), text)
    assert expected in " ".join(runbook_run.run.stdout.split()), runbook_run.run.stdout[-3000:]


@then(parsers.parse('the run never says "{text}"'))
def run_never_says(runbook_run: RunbookRun, text: str) -> None:
    assert text.lower() not in runbook_run.run.stdout.lower(), runbook_run.run.stdout[-3000:]


@then(parsers.parse('the report shows node "{node}" with {gpus:d} physical GPUs, {replicas:d} replicas '
                    'and {shared:d} shared'))
def report_shows(runbook_run: RunbookRun, node: str, gpus: int, replicas: int, shared: int) -> None:
    row = next((line.split() for line in runbook_run.run.stdout.splitlines() if line.split()[:1] == [node]), None)
    assert row, f"no row for {node} in the report:\n{runbook_run.run.stdout[-2000:]}"
    assert row[1:4] == [str(gpus), str(replicas), str(shared)], row


@then("the ClusterPolicy was saved before the change")
def clusterpolicy_saved(kube: Cluster, backup_dir: Path, before: Before) -> None:
    files = backups(backup_dir)
    assert len(files) == 1, files
    assert files[0].stat().st_mode & 0o777 == 0o600, oct(files[0].stat().st_mode)
    assert files[0].parent.stat().st_mode & 0o777 == 0o700, oct(files[0].parent.stat().st_mode)
    saved = yaml.safe_load(files[0].read_text())
    assert saved["kind"] == "ClusterPolicy" and saved["spec"] == before.clusterpolicy
    records = [yaml.safe_load(c.data["clusterpolicy.yaml"])["spec"] for c in kube.core.list_namespaced_config_map(
        kube.records_namespace, label_selector="gpushare.io/run=enable-timeslicing").items]
    assert records == [before.clusterpolicy], "the run record holds another ClusterPolicy backup"
