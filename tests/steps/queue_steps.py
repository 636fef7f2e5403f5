"""Steps about queue backfill with Kueue: the teams' queues set up by playbooks/queue-backfill.yml,
Jobs submitted as a team would (suspended, with the queue-name label), and what Kueue did with them.

Job pods run on KWOK nodes for as long as their annotation pod-complete.stage.kwok.x-k8s.io/delay
says (the embedded cluster's stages; a real cluster runs the container instead)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then, when

from gpushare_testbed import kueue as kueue_embedded
from gpushare.kueue.kinds import GROUP, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, VERSION, condition
from gpushare.polling import WaitTimeout, wait_for
from gpushare_testbed.processes import Component, alive, start, stop, wait_ready
from tests.steps.runbook_steps import RunbookRun, run_runbook
from tests.support.cluster import REPO, Cluster
from tests.support.namespaces import delete_namespaces

PLAYBOOK = "queue-backfill.yml"
DURATION_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
LONG_RUNNING = "600s"  # outlives every scenario; the cleanup deletes it
WAIT_S = 90
COHORT = "gpu-teams-test"
SHARED_POOL = {"name": "shared", "nodeLabels": {"gpu-mode": "shared"},
               "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}]}


@dataclasses.dataclass
class QueueScenario:
    """What a scenario described and submitted, so that it can clean up after itself."""

    kube: Cluster
    flavors: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    teams: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    priority_classes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    namespaces: set[str] = dataclasses.field(default_factory=set)

    def inputs(self) -> dict[str, Any]:
        return {"queue_backfill_cohort": COHORT, "queue_backfill_flavors": self.flavors,
                "queue_backfill_teams": self.teams, "queue_backfill_priority_classes": self.priority_classes}

    def team(self, name: str) -> dict[str, Any]:
        return next(t for t in self.teams if t["name"] == name)

    def delete_jobs(self) -> None:
        batch = client.BatchV1Api(self.kube.api)
        for namespace in self.namespaces:
            try:
                batch.delete_collection_namespaced_job(namespace, propagation_policy="Foreground")
            except ApiException as err:
                if err.status != 404:
                    raise

    def clean_up(self) -> None:
        """Jobs and namespaces first (their workloads hold the queues' finalizers), then the queues."""
        self.delete_jobs()
        delete_namespaces(self.kube, sorted(self.namespaces))
        described = {"clusterqueues": [t["name"] for t in self.teams], "cohorts": [COHORT] if self.teams else [],
                     "resourceflavors": [f["name"] for f in self.flavors],
                     "workloadpriorityclasses": [p["name"] for p in self.priority_classes]}
        for plural, names in described.items():  # only what the scenario described: never an operator's queues
            for name in names:
                try:
                    self.kube.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
                except ApiException as err:
                    if err.status != 404:
                        raise

        def gone() -> bool:
            namespaces = {ns.metadata.name for ns in self.kube.core.list_namespace().items}
            queues = {q["metadata"]["name"] for q in
                      self.kube.custom.list_cluster_custom_object(GROUP, VERSION, "clusterqueues")["items"]}
            return not (self.namespaces & namespaces) and not (queues & set(described["clusterqueues"]))

        wait_for(gone, WAIT_S, f"the scenario's namespaces {sorted(self.namespaces)} and queues to be deleted")


def kueue_served(kube: Cluster) -> bool:
    try:
        kube.custom.list_cluster_custom_object(GROUP, VERSION, "clusterqueues", limit=1)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


@pytest.fixture
def queue_scenario(clean_cluster: Cluster) -> Iterator[QueueScenario]:
    if not kueue_served(clean_cluster):
        if clean_cluster.embedded:
            pytest.fail("the embedded cluster runs without Kueue: restart it with `gpushare sim down --state-dir "
                        f"{clean_cluster.state_dir}` then `gpushare sim up --state-dir {clean_cluster.state_dir}`")
        pytest.skip("this cluster serves no kueue.x-k8s.io/v1beta2 API: install Kueue (v0.17 to v0.19) to run these scenarios")
    scenario = QueueScenario(clean_cluster)
    yield scenario
    scenario.clean_up()


@given("a cluster with Kueue", target_fixture="kube")
def cluster_with_kueue(queue_scenario: QueueScenario) -> Cluster:
    return queue_scenario.kube


@given(parsers.parse('the GPU pool "{pool}" is node "{node}"'))
def gpu_pool(queue_scenario: QueueScenario, pool: str, node: str) -> None:
    queue_scenario.flavors.append({"name": pool, "nodeLabels": {"kubernetes.io/hostname": node}})


# ---- the description --------------------------------------------------------------------------------
def _team(row: dict[str, str], flavor: str, resource: str, nominal_column: str) -> dict[str, Any]:
    limits: dict[str, Any] = {"nominalQuota": int(row[nominal_column])}
    for column, key in (("borrowing limit", "borrowingLimit"), ("lending limit", "lendingLimit")):
        if row.get(column, "").strip():
            limits[key] = int(row[column])
    preemption = {key: row[column] for column, key in (("reclaim within cohort", "reclaimWithinCohort"),
                                                       ("within cluster queue", "withinClusterQueue"))
                  if row.get(column, "").strip()}
    return {"name": row["team"], "namespace": row["team"], "quotas": {flavor: {resource: limits}},
            "preemption": preemption}


def _rows(datatable: list[list[str]]) -> list[dict[str, str]]:
    header, *rows = datatable
    return [dict(zip(header, (cell.strip() for cell in row))) for row in rows]


def describe_teams(scenario: QueueScenario, datatable: list[list[str]], *, shared: bool = False) -> None:
    if shared:
        scenario.flavors.append(SHARED_POOL)
    flavor, resource, column = (("shared", "nvidia.com/gpu.shared", "nominal shared") if shared
                                else (scenario.flavors[0]["name"], "nvidia.com/gpu", "nominal"))
    scenario.teams = [_team(row, flavor, resource, column) for row in _rows(datatable)]
    scenario.namespaces |= {t["namespace"] for t in scenario.teams}


def apply(scenario: QueueScenario, tmp_path: Path) -> None:
    done = run_runbook(scenario.kube, tmp_path / f"setup-{len(list(tmp_path.glob('setup-*')))}", PLAYBOOK,
                       extravars=scenario.inputs())
    assert done.run.ok, done.describe()


@given("the teams are described")
def teams_described(queue_scenario: QueueScenario, datatable: list[list[str]]) -> None:
    describe_teams(queue_scenario, datatable)


@given("the runbook has set up the teams")
def teams_set_up(queue_scenario: QueueScenario, datatable: list[list[str]], tmp_path: Path) -> None:
    describe_teams(queue_scenario, datatable)
    apply(queue_scenario, tmp_path)


@given("the runbook has set up the teams on the shared pool")
def teams_set_up_shared(queue_scenario: QueueScenario, datatable: list[list[str]], tmp_path: Path) -> None:
    describe_teams(queue_scenario, datatable, shared=True)
    apply(queue_scenario, tmp_path)


@given(parsers.parse('the priority classes "{low}" {low_value:d} and "{high}" {high_value:d} are described'))
def priority_classes(queue_scenario: QueueScenario, low: str, low_value: int, high: str, high_value: int) -> None:
    queue_scenario.priority_classes = [{"name": low, "value": low_value}, {"name": high, "value": high_value}]


# ---- bad descriptions (a valid base, then one mistake) ---------------------------------------------------
BASE = [["team", "nominal"], ["team-a", "4"], ["team-b", "4"]]


@given(parsers.re(r'team "(?P<team>[^"]+)" is described with a nominal quota of (?P<gpus>\d+) GPUs$'))
def quota_of(queue_scenario: QueueScenario, team: str, gpus: str) -> None:
    describe_teams(queue_scenario, BASE)
    queue_scenario.team(team)["quotas"][queue_scenario.flavors[0]["name"]]["nvidia.com/gpu"]["nominalQuota"] = int(gpus)


@given(parsers.re(r'team "(?P<team>[^"]+)" is described lending (?P<lent>\d+) of its (?P<gpus>\d+) GPUs$'))
def lending(queue_scenario: QueueScenario, team: str, lent: str, gpus: str) -> None:
    describe_teams(queue_scenario, BASE)
    limits = queue_scenario.team(team)["quotas"][queue_scenario.flavors[0]["name"]]["nvidia.com/gpu"]
    limits.update(nominalQuota=int(gpus), lendingLimit=int(lent))


@given(parsers.re(r'team "(?P<team>[^"]+)" is described with its quota on the flavor "(?P<flavor>[^"]+)"$'))
def quota_on_flavor(queue_scenario: QueueScenario, team: str, flavor: str) -> None:
    describe_teams(queue_scenario, BASE)
    queue_scenario.team(team)["quotas"] = {flavor: {"nvidia.com/gpu": {"nominalQuota": 4}}}


@given(parsers.re(r'team "(?P<team>[^"]+)" is described with (?P<count>\d+) "(?P<resource>[^"]+)"$'))
def quota_of_resource(queue_scenario: QueueScenario, team: str, count: str, resource: str) -> None:
    describe_teams(queue_scenario, BASE)
    queue_scenario.team(team)["quotas"] = {queue_scenario.flavors[0]["name"]: {resource: {"nominalQuota": int(count)}}}


@given(parsers.re(r'team "(?P<team>[^"]+)" is described$'))
def team_named(queue_scenario: QueueScenario, team: str) -> None:
    describe_teams(queue_scenario, BASE)
    queue_scenario.teams[0].update(name=team, namespace="team-a")


def _start_kueue(kube: Cluster) -> None:
    """Start the embedded cluster's Kueue controller with the configuration in its state, as `sim up` does."""
    state = kube.state_dir
    info = json.loads((state / "cluster.json").read_text())
    config = state / "kueue" / "config.yaml"
    argv = kueue_embedded.argv(Path(info["bin_dir"]) / "kueue", state / "kubeconfigs" / "kueue.yaml", config)
    component = Component("kueue", tuple(argv), state / "logs" / "kueue.log", state / "pids" / "kueue.pid")
    start(component)
    health = info["ports"]["kueue-health"]
    wait_ready(component, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 60)
    assert alive(component.pid_file)


@pytest.fixture
def kueue_stopped(queue_scenario: QueueScenario) -> Iterator[None]:
    """Stop the embedded cluster's Kueue controller; start it again afterwards, as `sim up` did."""
    kube = queue_scenario.kube
    if not kube.embedded:
        pytest.skip("stopping Kueue's controller is only done on the embedded cluster")
    stop(kube.state_dir / "pids" / "kueue.pid")
    yield
    _start_kueue(kube)


@pytest.fixture
def kueue_reconfigured(queue_scenario: QueueScenario) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Restart the embedded cluster's Kueue with more configuration (published in its ConfigMap, as
    `sim up` publishes it); afterwards restart it with the configuration `sim up` wrote."""
    kube = queue_scenario.kube
    if not kube.embedded:
        pytest.skip("reconfiguring Kueue's controller is only done on the embedded cluster")
    state = kube.state_dir
    config, bin_dir = state / "kueue" / "config.yaml", Path(json.loads((state / "cluster.json").read_text())["bin_dir"])
    original = config.read_text()

    def restart(text: str) -> None:
        stop(state / "pids" / "kueue.pid")
        config.write_text(text)
        kueue_embedded.publish(bin_dir / "kubectl", kube.kubeconfig, bin_dir, config)
        _start_kueue(kube)

    yield lambda extra: restart(yaml.safe_dump({**yaml.safe_load(original), **extra}, sort_keys=False))
    restart(original)


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback URL
            return response.status == 200
    except OSError:
        return False


@given(parsers.parse("Kueue evicts a job whose pods are not Ready within {timeout}"))
def kueue_wait_for_pods_ready(queue_scenario: QueueScenario, kueue_reconfigured: Callable[[dict[str, Any]], None],
                              timeout: str) -> None:
    kueue_reconfigured({"waitForPodsReady": {"timeout": timeout}})


@given("the Kueue controller is stopped")
def controller_stopped(queue_scenario: QueueScenario, kueue_stopped: None) -> None:
    describe_teams(queue_scenario, BASE)


# ---- the shared pool -----------------------------------------------------------------------------------
@pytest.fixture
def shared_node(queue_scenario: QueueScenario, tmp_path: Path) -> Iterator[str]:
    """gpu-node time-sliced by the enable runbook, rolled back by the rollback runbook afterwards."""
    node, backups = "gpu-node", {"timeslicing_backup_dir": str(tmp_path / "backups")}
    done = run_runbook(queue_scenario.kube, tmp_path / "enable", f"enable-timeslicing.yml -l {node} "
                       "-e timeslicing_replicas=2", extravars=backups)
    assert done.run.ok, done.describe()
    yield node
    queue_scenario.delete_jobs()  # the rollback drains the shared pods; ours go first
    done = run_runbook(queue_scenario.kube, tmp_path / "rollback", f"rollback-timeslicing.yml -l {node}",
                       extravars=backups)
    assert done.run.ok, done.describe()


@given(parsers.parse('node "{node}" shares its GPUs through time-slicing with 2 replicas'))
def node_shares(shared_node: str, node: str) -> None:
    assert shared_node == node


# ---- jobs ----------------------------------------------------------------------------------------------
def submit(scenario: QueueScenario, team: str, name: str, gpus: int, *, duration: str = LONG_RUNNING,
           priority: str | None = None, resource: str = "nvidia.com/gpu",
           node_selector: dict[str, str] | None = None) -> None:
    spec = scenario.team(team)
    labels = {QUEUE_NAME_LABEL: spec.get("localQueue", "gpu")}
    if priority:
        labels[PRIORITY_CLASS_LABEL] = priority
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": spec["namespace"], "labels": labels},
        "spec": {
            "suspend": True,  # Kueue unsuspends it when admitted (no webhook here to do it at creation)
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {DURATION_ANNOTATION: duration}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                         **({"nodeSelector": node_selector} if node_selector else {}), "containers": [
                    {"name": "work", "image": "busybox", "resources": {"limits": {resource: str(gpus)}}}]},
            },
        },
    }
    client.BatchV1Api(scenario.kube.api).create_namespaced_job(spec["namespace"], job)


def workload(scenario: QueueScenario, team: str, job: str) -> dict[str, Any] | None:
    namespace = scenario.team(team)["namespace"]
    items = scenario.kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "workloads")["items"]
    return next((w for w in items if any(o.get("kind") == "Job" and o.get("name") == job
                                         for o in w["metadata"].get("ownerReferences") or [])), None)


def _conditions(found: dict[str, Any]) -> str:
    return ", ".join(f"{c['type']}={c['status']} ({c.get('reason')})" for c in found.get("status", {}).get("conditions") or [])


def _state(scenario: QueueScenario, team: str, job: str) -> str:
    found = workload(scenario, team, job)
    return _conditions(found) if found else "no workload yet"


def is_true(obj: dict[str, Any] | None, kind: str, reason: str | None = None) -> bool:
    found = condition(obj, kind) if obj else None
    return bool(found) and found.get("status") == "True" and (reason is None or found.get("reason") == reason)


def waits_for_quota(obj: dict[str, Any] | None) -> bool:
    """Kueue looked at it and found no quota: QuotaReserved False with reason Pending."""
    found = condition(obj, "QuotaReserved") if obj else None
    return bool(found) and found.get("status") == "False" and found.get("reason") == "Pending"


def queued(obj: dict[str, Any]) -> bool:
    """Waiting in its queue: found no quota (waits_for_quota), or not looked at yet. Kueue v0.19 marks
    only the first of equivalent workloads that found no quota: the others with the same scheduling
    hash are moved to the inadmissible ones unevaluated, with no QuotaReserved condition until their
    turn (pkg/cache/queue/cluster_queue.go, hashToBulkMoveReason); v0.17 marked each."""
    return waits_for_quota(obj) or (condition(obj, "QuotaReserved") is None and condition(obj, "Finished") is None)


def wait_job(scenario: QueueScenario, team: str, job: str, check, what: str) -> None:
    wait_for(lambda: check(workload(scenario, team, job)), WAIT_S,
             f"job {job} of {team} to be {what} (now: {_state(scenario, team, job)})", interval_s=0.5)


@given(parsers.re(r'team "(?P<team>[^"]+)" runs a job "(?P<job>[^"]+)" of (?P<gpus>\d+) GPUs?'
                  r'(?: at priority "(?P<priority>[^"]+)")?$'))
def team_runs(queue_scenario: QueueScenario, team: str, job: str, gpus: str, priority: str | None) -> None:
    submit(queue_scenario, team, job, int(gpus), priority=priority)
    wait_job(queue_scenario, team, job, lambda w: is_true(w, "Admitted"), "admitted")
    pods = client.CoreV1Api(queue_scenario.kube.api)
    namespace = queue_scenario.team(team)["namespace"]
    wait_for(lambda: any(p.status.phase == "Running" for p in
                         pods.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items),
             WAIT_S, f"the pod of job {job} to run")


@when(parsers.re(r'team "(?P<team>[^"]+)" submits a job "(?P<job>[^"]+)" of (?P<gpus>\d+) (?P<shared>shared )?GPUs?'
                 r'(?: running for (?P<duration>\d+s))?(?: at priority "(?P<priority>[^"]+)")?$'))
def team_submits(queue_scenario: QueueScenario, team: str, job: str, gpus: str, shared: str | None,
                 duration: str | None, priority: str | None) -> None:
    submit(queue_scenario, team, job, int(gpus), duration=duration or LONG_RUNNING, priority=priority,
           resource="nvidia.com/gpu.shared" if shared else "nvidia.com/gpu")


@when(parsers.parse('team "{team}" submits a job "{job}" of {gpus:d} GPUs whose pods cannot start'))
def team_submits_stuck(queue_scenario: QueueScenario, team: str, job: str, gpus: int) -> None:
    """Its pods select a node label no node has: admitted, they stay Pending and never Ready."""
    submit(queue_scenario, team, job, gpus, node_selector={"gpushare.io/no-such-node": "true"})


@when(parsers.parse('team "{team}" submits {count:d} jobs of 1 GPU'))
def team_submits_many(queue_scenario: QueueScenario, team: str, count: int) -> None:
    for index in range(1, count + 1):
        submit(queue_scenario, team, f"job-{index}", 1)


@then(parsers.re(r'job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" runs to completion$'))
def runs_to_completion(queue_scenario: QueueScenario, job: str, team: str) -> None:
    wait_job(queue_scenario, team, job, lambda w: is_true(w, "Finished", "Succeeded"), "finished")


@then(parsers.re(r'job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" waits for quota$'))
def job_waits(queue_scenario: QueueScenario, job: str, team: str) -> None:
    wait_job(queue_scenario, team, job, waits_for_quota, "waiting for quota")
    found = client.BatchV1Api(queue_scenario.kube.api).read_namespaced_job(job, queue_scenario.team(team)["namespace"])
    assert found.spec.suspend, f"job {job} runs although Kueue did not admit it"


@then(parsers.re(r'job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" is admitted$'))
def job_admitted(queue_scenario: QueueScenario, job: str, team: str) -> None:
    wait_job(queue_scenario, team, job, lambda w: is_true(w, "Admitted"), "admitted")


@then(parsers.re(r'job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" is preempted with reason "(?P<reason>[^"]+)"$'))
def job_preempted(queue_scenario: QueueScenario, job: str, team: str, reason: str) -> None:
    wait_job(queue_scenario, team, job, lambda w: is_true(w, "Preempted", reason), f"preempted ({reason})")
    batch = client.BatchV1Api(queue_scenario.kube.api)
    namespace = queue_scenario.team(team)["namespace"]
    wait_for(lambda: batch.read_namespaced_job(job, namespace).spec.suspend, WAIT_S, f"job {job} to be suspended again")


@then(parsers.re(r'job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" is evicted with reason "(?P<reason>[^"]+)" '
                 r'and requeued$'))
def job_evicted_and_requeued(queue_scenario: QueueScenario, job: str, team: str, reason: str) -> None:
    """Evicted (its quota given back, the Job suspended again) and counted for a requeue after a backoff."""
    wait_job(queue_scenario, team, job, lambda w: is_true(w, "Evicted", reason)
             and ((w.get("status") or {}).get("requeueState") or {}).get("count", 0) >= 1, f"evicted ({reason})")
    batch = client.BatchV1Api(queue_scenario.kube.api)
    namespace = queue_scenario.team(team)["namespace"]
    wait_for(lambda: batch.read_namespaced_job(job, namespace).spec.suspend, WAIT_S, f"job {job} to be suspended again")


@then(parsers.re(r'job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" is admitted after job "(?P<other>[^"]+)" '
                 r'is preempted with reason "(?P<reason>[^"]+)"$'))
def admitted_after_preemption(queue_scenario: QueueScenario, job: str, team: str, other: str, reason: str) -> None:
    job_preempted(queue_scenario, other, team, reason)
    job_admitted(queue_scenario, job, team)


@then(parsers.parse('{count:d} jobs of team "{team}" are admitted and the others wait for quota'))
def admitted_count(queue_scenario: QueueScenario, count: int, team: str) -> None:
    namespace = queue_scenario.team(team)["namespace"]
    jobs = len(client.BatchV1Api(queue_scenario.kube.api).list_namespaced_job(namespace).items)

    def workloads() -> list[dict[str, Any]]:
        return queue_scenario.kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "workloads")["items"]

    def settled() -> bool:
        items = workloads()
        return (len(items) == jobs and sum(is_true(w, "Admitted") for w in items) == count
                and all(is_true(w, "Admitted") or queued(w) for w in items))

    try:
        wait_for(settled, WAIT_S, f"{count} of the {jobs} workloads of {team} admitted, the others waiting", interval_s=0.5)
    except WaitTimeout as err:
        now = "; ".join(f"{w['metadata']['name']}: {_conditions(w)}" for w in workloads())
        raise WaitTimeout(f"{err}; now: {now}") from err


@then(parsers.parse('the queue status shows team "{team}" borrowing {amount:d} "{resource}" on "{flavor}"'))
def status_shows_borrowing(kube: Cluster, team: str, amount: int, resource: str, flavor: str) -> None:
    expected = f"{amount} {resource} on {flavor}"

    def row() -> list[str] | None:
        out = subprocess.run([sys.executable, "-m", "gpushare", "queue", "status", "--kubeconfig", str(kube.kubeconfig)],
                             capture_output=True, text=True, check=True, cwd=REPO).stdout
        found = next((re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.startswith(f"{team} ")), None)
        return found if found and found[4] == expected else None

    wait_for(row, WAIT_S, f"`gpushare queue status` to show {team} borrowing {expected}", interval_s=0.5)


@then(parsers.re(r'job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" is admitted to flavor "(?P<flavor>[^"]+)"$'))
def admitted_to_flavor(queue_scenario: QueueScenario, job: str, team: str, flavor: str) -> None:
    job_admitted(queue_scenario, job, team)
    assignments = workload(queue_scenario, team, job)["status"]["admission"]["podSetAssignments"]
    assert {f for a in assignments for f in a["flavors"].values()} == {flavor}, assignments


@then(parsers.re(r'the pod of job "(?P<job>[^"]+)" of team "(?P<team>[^"]+)" runs on node "(?P<node>[^"]+)"$'))
def pod_runs_on(queue_scenario: QueueScenario, job: str, team: str, node: str) -> None:
    pods = client.CoreV1Api(queue_scenario.kube.api)
    namespace = queue_scenario.team(team)["namespace"]

    def placed() -> client.V1Pod | None:
        found = pods.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
        return next((p for p in found if p.spec.node_name), None)

    pod = wait_for(placed, WAIT_S, f"the pod of job {job} to be scheduled")
    assert pod.spec.node_name == node, f"the pod runs on {pod.spec.node_name}"
    # Kueue wrote the flavor's node labels into the pod: it can only land on shared nodes.
    assert (pod.spec.node_selector or {}).get("gpu-mode") == "shared", pod.spec.node_selector


# ---- the runbook itself ------------------------------------------------------------------------------------
@when(parsers.re(r"the operator (?P<mode>runs|previews) the queue-backfill runbook$"), target_fixture="runbook_run")
def operator_runs_queue_backfill(queue_scenario: QueueScenario, tmp_path: Path, mode: str) -> RunbookRun:
    preview = " --check --diff" if mode == "previews" else ""
    workdir = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    return run_runbook(queue_scenario.kube, workdir, PLAYBOOK + preview, extravars=queue_scenario.inputs())


@then(parsers.parse('the plan printed before the first write says "{text}"'))
def plan_says(runbook_run: RunbookRun, text: str) -> None:
    events = runbook_run.run.events
    shown = [e for e in events if e.get("event") == "runner_on_ok"
             and (e["event_data"].get("task") or "").endswith("Show the plan")]
    assert shown, runbook_run.describe()
    said = " ".join(" ".join(str(line).split()) for line in shown[0]["event_data"]["res"]["msg"])
    assert text in said, said
    writes = [e["counter"] for e in events if e.get("event") == "runner_on_ok"
              and e["event_data"].get("task_action", "").endswith("gpushare_apply")]
    assert all(shown[0]["counter"] < counter for counter in writes), "the plan was printed after a write"


@then("the run reports changes")
def run_reports_changes_anywhere(runbook_run: RunbookRun) -> None:
    assert runbook_run.run.ok, runbook_run.describe()
    assert any(runbook_run.run.changed.values()), runbook_run.describe()


@then(parsers.parse('the preview shows the ClusterQueues "{first}" and "{second}" being created'))
def preview_shows(runbook_run: RunbookRun, first: str, second: str) -> None:
    out = runbook_run.run.stdout
    assert f"ClusterQueue {first}, ClusterQueue {second}" in out, out[-3000:]
    for name in (first, second):
        assert re.search(rf"^\+ ClusterQueue {name}$", out, re.MULTILINE), f"the diff does not show {name} created"


@then(parsers.parse('the report shows queue "{team}" with nominal {nominal}, borrowing limit {borrowing} '
                    'and lending limit {lending}'))
def report_shows_queue(runbook_run: RunbookRun, team: str, nominal: str, borrowing: str, lending: str) -> None:
    row = next((re.split(r"\s{2,}", line.strip()) for line in runbook_run.run.stdout.splitlines()
                if line.strip().startswith(f"{team} ")), None)
    assert row, f"no row for {team} in the report:\n{runbook_run.run.stdout[-2000:]}"
    assert row[4:7] == [nominal, borrowing, lending], row


@then("every ClusterQueue is active and every LocalQueue bound")
def queues_active(queue_scenario: QueueScenario) -> None:
    kube = queue_scenario.kube
    for team in queue_scenario.teams:
        cq = kube.custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", team["name"])
        lq = kube.custom.get_namespaced_custom_object(GROUP, VERSION, team["namespace"], "localqueues", "gpu")
        assert is_true(cq, "Active") and is_true(lq, "Active"), (cq.get("status"), lq.get("status"))
