"""Steps for features/rollback.feature: enable with the real enable runbook, run shared pods,
roll back with playbooks/rollback-timeslicing.yml, and check what the operator cares about."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then, when

from gpushare.kube import wait_for
from tests.steps.cluster_steps import node_fingerprint
from tests.support.ansible import PlaybookRun, run_playbook
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster

ENABLE = "enable-timeslicing.yml"
ROLLBACK = "rollback-timeslicing.yml"
SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"
BACKUP_SELECTOR = "gpushare.io/backup=clusterpolicy"
CONFIGMAP = "time-slicing-config"
POOL_KEY = "gpu-mode"
WORKLOAD = "gpu-share-check"


@dataclass
class RollbackRun:
    """One rollback run and the mutating requests it sent (embedded cluster only)."""

    run: PlaybookRun
    writes: list[dict[str, Any]] | None

    def describe(self) -> str:
        return self.run.describe()


@dataclass
class Scenario:
    """What a scenario set up, for the steps that check it afterwards (one per scenario)."""

    workdir: Path
    runs: int = 0
    namespace: str | None = None
    enabled_policy_spec: dict[str, Any] | None = None
    backups: list[str] = field(default_factory=list)

    def next_dir(self, name: str) -> Path:
        self.runs += 1
        return self.workdir / f"{self.runs:02d}-{name}"

    @property
    def backup_dir(self) -> Path:
        return self.workdir / "backups"


@pytest.fixture
def rollback_scenario(tmp_path: Path) -> Scenario:
    return Scenario(tmp_path)


# ---- helpers ------------------------------------------------------------------------------------
def _policy_spec(kube: Cluster) -> dict[str, Any]:
    return kube.custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")["spec"]


def _backups(kube: Cluster) -> list[Any]:
    items = kube.core.list_namespaced_config_map(kube.operator_namespace, label_selector=BACKUP_SELECTOR).items
    return sorted(items, key=lambda cm: ((cm.metadata.annotations or {}).get("gpushare.io/created-at", ""), cm.metadata.name))


def _shared_pods_on(kube: Cluster, node: str) -> list[str]:
    pods = kube.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    held = []
    for pod in pods:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            limits = (container.resources.limits or {}) if container.resources else {}
            if int(limits.get(SHARED, 0) or 0) > 0:
                held.append(f"{pod.metadata.namespace}/{pod.metadata.name}")
                break
    return held


def _enable(kube: Cluster, scenario: Scenario, node: str, replicas: int, **extravars: Any) -> PlaybookRun:
    run = run_playbook(kube, ENABLE, scenario.next_dir("enable"), limit=node, extravars={
        "timeslicing_replicas": replicas, "timeslicing_backup_dir": str(scenario.backup_dir),
        "gpu_operator_namespace": kube.operator_namespace, **extravars})
    assert run.ok, f"the enable runbook failed: {run.describe()}"
    return run


def _rollback(kube: Cluster, scenario: Scenario, node: str, **extravars: Any) -> RollbackRun:
    mark = kube.audit_mark() if kube.embedded else 0
    run = run_playbook(kube, ROLLBACK, scenario.next_dir("rollback"), limit=node,
                       extravars={"gpu_operator_namespace": kube.operator_namespace, **extravars})
    return RollbackRun(run, kube.audit_writes(mark) if kube.embedded else None)


# ---- given --------------------------------------------------------------------------------------
@given(parsers.parse('time-slicing was enabled on "{nodes}" with {replicas:d} replicas by the enable runbook'),
       target_fixture="targeted")
def enabled(kube: Cluster, rollback_scenario: Scenario, nodes: str, replicas: int) -> list[str]:
    """`nodes`: one node, or several separated by commas (one enable run, -l with all of them)."""
    _enable(kube, rollback_scenario, nodes, replicas)
    return _enabled_state(kube, rollback_scenario, nodes.split(","), replicas)


@given(parsers.parse('time-slicing was enabled cluster-wide from "{node}" with {replicas:d} replicas by the enable runbook'),
       target_fixture="targeted")
def enabled_cluster_wide(kube: Cluster, rollback_scenario: Scenario, node: str, replicas: int) -> list[str]:
    _enable(kube, rollback_scenario, node, replicas, timeslicing_scope="cluster", timeslicing_confirm_cluster_scope=True)
    return _enabled_state(kube, rollback_scenario, kube.gpu_nodes(), replicas)


def _enabled_state(kube: Cluster, scenario: Scenario, nodes: list[str], replicas: int) -> list[str]:
    for node in nodes:
        wait_for(lambda node=node: int((kube.node(node).status.allocatable or {}).get(SHARED, "0")) == replicas
                 * int(kube.node(node).metadata.labels["nvidia.com/gpu.count"]), 30, f"{node} to advertise {SHARED}")
    scenario.enabled_policy_spec = _policy_spec(kube)
    scenario.backups = [cm.metadata.name for cm in _backups(kube)]
    return nodes


@given(parsers.parse('{count:d} shared pods run on "{node}"'))
def shared_pods_run(kube: Cluster, rollback_scenario: Scenario, count: int, node: str) -> None:
    namespace = f"rollback-{uuid.uuid4().hex[:8]}"
    rollback_scenario.namespace = namespace
    kube.core.create_namespace({"metadata": {"name": namespace, "labels": {TEST_NAMESPACE_LABEL: "rollback"}}})
    kube.apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": WORKLOAD},
        "spec": {
            "replicas": count,
            "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": {
                "metadata": {"labels": {"app": WORKLOAD}},
                "spec": {
                    "nodeSelector": {POOL_KEY: "shared"},
                    "tolerations": [{"key": POOL_KEY, "operator": "Equal", "value": "shared", "effect": "NoSchedule"}],
                    "containers": [{
                        "name": "check", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                        "command": ["bash", "-lc"], "args": ["nvidia-smi -L && sleep infinity"],
                        "resources": {"limits": {SHARED: "1"}},
                    }],
                },
            },
        },
    })

    def running() -> bool:
        pods = kube.core.list_namespaced_pod(namespace, label_selector=f"app={WORKLOAD}").items
        return sum(1 for p in pods if p.status.phase == "Running" and p.spec.node_name == node) == count

    wait_for(running, 60, f"{count} shared pods Running on {node}")


@given(parsers.parse('the operator has cordoned "{node}"'))
def operator_cordoned(kube: Cluster, node: str) -> None:
    kube.core.patch_node(node, {"spec": {"unschedulable": True}})


@given("a PodDisruptionBudget allows no disruption of the shared pods")
def budget_blocks(kube: Cluster, rollback_scenario: Scenario) -> None:
    from kubernetes import client  # noqa: PLC0415

    policy = client.PolicyV1Api(kube.api)
    policy.create_namespaced_pod_disruption_budget(rollback_scenario.namespace, {
        "metadata": {"name": f"{WORKLOAD}-budget"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": WORKLOAD}}},
    })
    wait_for(lambda: policy.read_namespaced_pod_disruption_budget(
        f"{WORKLOAD}-budget", rollback_scenario.namespace).status.observed_generation, 30,
        "the disruption controller to observe the budget")


@given("the ClusterPolicy and the operator namespace's ConfigMaps are recorded", target_fixture="recorded")
def recorded(kube: Cluster) -> dict[str, Any]:
    return {"policy": _policy_spec(kube), "configmaps": _configmaps(kube)}


def _configmaps(kube: Cluster) -> dict[str, dict[str, str]]:
    return {cm.metadata.name: dict(cm.data or {}) for cm in kube.core.list_namespaced_config_map(kube.operator_namespace).items
            if BACKUP_SELECTOR.split("=")[0] not in (cm.metadata.labels or {})}


# ---- when ---------------------------------------------------------------------------------------
@when(parsers.re(r'the operator rolls back time-slicing on "(?P<node>[^"]+)"(?: again)?$'), target_fixture="rollback")
def rolls_back(kube: Cluster, rollback_scenario: Scenario, node: str) -> RollbackRun:
    return _rollback(kube, rollback_scenario, node)


@when(parsers.parse('the operator rolls back time-slicing on "{node}" with a drain timeout of {seconds:d} seconds'),
      target_fixture="rollback")
def rolls_back_with_timeout(kube: Cluster, rollback_scenario: Scenario, node: str, seconds: int) -> RollbackRun:
    return _rollback(kube, rollback_scenario, node, timeslicing_rollback_drain_timeout=seconds,
                     timeslicing_rollback_drain_retry_delay=1)


@when(parsers.parse('the operator rolls back time-slicing on "{node}" confirming the cluster scope'),
      target_fixture="rollback")
def rolls_back_confirmed(kube: Cluster, rollback_scenario: Scenario, node: str) -> RollbackRun:
    return _rollback(kube, rollback_scenario, node, timeslicing_confirm_cluster_scope=True)


@when(parsers.parse('the rollback of "{node}" is interrupted right after the {step}'), target_fixture="rollback")
def interrupted(kube: Cluster, rollback_scenario: Scenario, node: str, step: str) -> RollbackRun:
    return _rollback(kube, rollback_scenario, node, timeslicing_rollback_stop_after=step)


@when("the operator deletes the PodDisruptionBudget")
def delete_budget(kube: Cluster, rollback_scenario: Scenario) -> None:
    from kubernetes import client  # noqa: PLC0415

    client.PolicyV1Api(kube.api).delete_namespaced_pod_disruption_budget(f"{WORKLOAD}-budget", rollback_scenario.namespace)


@when(parsers.parse('time-slicing is enabled on "{node}" with {replicas:d} replicas and rolled back, twice'),
      target_fixture="cycle")
def enable_rollback_twice(kube: Cluster, rollback_scenario: Scenario, node: str, replicas: int) -> list[RollbackRun]:
    runs = []
    for _ in range(2):
        _enable(kube, rollback_scenario, node, replicas)
        runs.append(_rollback(kube, rollback_scenario, node))
    return runs


# ---- then ---------------------------------------------------------------------------------------
@then("the rollback succeeds")
def rollback_succeeds(rollback: RollbackRun) -> None:
    assert rollback.run.ok, rollback.describe()


@then("the rollback succeeds with nothing to do")
def nothing_to_do(rollback: RollbackRun) -> None:
    assert rollback.run.ok, rollback.describe()
    assert "Nothing to do" in rollback.run.stdout, rollback.describe()
    assert not rollback.run.changed, f"changed: {rollback.run.changed_tasks()}"


@then("the rollback sent no write to the API server")
def no_write(kube: Cluster, rollback: RollbackRun) -> None:
    if not kube.embedded:
        pytest.skip("the audit log is only read on the embedded cluster")
    assert rollback.writes == [], [f"{w['verb']} {w['requestURI']}" for w in rollback.writes or []]


@then(parsers.parse('no pod on "{node}" holds a shared replica'))
def no_shared_pod(kube: Cluster, node: str) -> None:
    assert _shared_pods_on(kube, node) == []


@then("the report says where each evicted pod went, with the scheduler's reason when Pending")
def report_whereabouts(kube: Cluster, rollback: RollbackRun, rollback_scenario: Scenario) -> None:
    pods = kube.core.list_namespaced_pod(rollback_scenario.namespace, label_selector=f"app={WORKLOAD}").items
    assert pods, "the Deployment has no pod"
    stdout = rollback.run.stdout
    for pod in pods:
        assert pod.metadata.name in stdout, f"{pod.metadata.name} not in the report:\n{stdout[-3000:]}"
        if not pod.spec.node_name:
            assert "Pending: Unschedulable" in stdout, stdout[-3000:]


@then(parsers.parse('node "{node}" carries no shared-pool taint and no gpushare.io annotation'))
def no_taint_no_mark(kube: Cluster, node: str) -> None:
    current = kube.node(node)
    taints = [t.key for t in current.spec.taints or []]
    assert POOL_KEY not in taints, taints
    marks = [k for k in (current.metadata.annotations or {}) if k.startswith("gpushare.io/")]
    assert marks == [], marks


@then(parsers.parse('node "{node}" is schedulable'))
def schedulable(kube: Cluster, node: str) -> None:
    assert not kube.node(node).spec.unschedulable, f"{node} is cordoned"


@then(parsers.parse('node "{node}" is cordoned'))
def cordoned(kube: Cluster, node: str) -> None:
    assert kube.node(node).spec.unschedulable, f"{node} is schedulable"


@then("the ClusterPolicy spec equals the newest backup")
def policy_equals_backup(kube: Cluster) -> None:
    backups = _backups(kube)
    assert backups, "no ClusterPolicy backup"
    saved = yaml.safe_load(backups[-1].data["clusterpolicy.yaml"])
    assert _policy_spec(kube) == saved["spec"]


@then("the time-slicing ConfigMap is gone and every backup is kept")
def configmap_gone_backups_kept(kube: Cluster, rollback_scenario: Scenario) -> None:
    with pytest.raises(ApiException) as missing:
        kube.core.read_namespaced_config_map(CONFIGMAP, kube.operator_namespace)
    assert missing.value.status == 404
    assert [cm.metadata.name for cm in _backups(kube)] == rollback_scenario.backups
    assert len(list(rollback_scenario.backup_dir.glob("clusterpolicy-*.yaml"))) == len(rollback_scenario.backups)


@then("the rollback fails naming the PodDisruptionBudget and the blocked pods")
def fails_naming_budget(kube: Cluster, rollback: RollbackRun, rollback_scenario: Scenario) -> None:
    assert not rollback.run.ok, rollback.describe()
    message = " ".join(rollback.run.failure_messages())
    assert f"PodDisruptionBudget {rollback_scenario.namespace}/{WORKLOAD}-budget" in message, message
    blocked = [p for p in _shared_pods_on(kube, "gpu-node") if p.startswith(f"{rollback_scenario.namespace}/")]
    assert blocked, "no pod is left on the node"
    for pod in blocked:
        assert pod in message, f"{pod} not named in: {message}"


@then(parsers.parse('the report says the ClusterPolicy was left as it is because "{other}" still uses the shared config'))
def policy_left_for(rollback: RollbackRun, other: str) -> None:
    assert f"ClusterPolicy: left as it is, because other nodes still use the shared config ({other})" in rollback.run.stdout, \
        rollback.describe()


@then("the rollback is refused because the whole cluster would change, and nothing was written")
def refused_cluster_scope(kube: Cluster, rollback: RollbackRun) -> None:
    assert not rollback.run.ok, rollback.describe()
    message = " ".join(rollback.run.failure_messages())
    assert "timeslicing_confirm_cluster_scope=true" in message and "Nothing was changed" in message, message
    if kube.embedded:
        assert rollback.writes == [], [f"{w['verb']} {w['requestURI']}" for w in rollback.writes or []]


@then("the failure says the ClusterPolicy is untouched")
def failure_policy_untouched(rollback: RollbackRun) -> None:
    assert "The ClusterPolicy is untouched" in " ".join(rollback.run.failure_messages()), rollback.describe()


@then("the ClusterPolicy is as the enable runbook left it")
def policy_as_enabled(kube: Cluster, rollback_scenario: Scenario) -> None:
    assert _policy_spec(kube) == rollback_scenario.enabled_policy_spec


@then(parsers.parse('the rollback stopped saying that "{done}" are done'))
def stopped_saying(rollback: RollbackRun, done: str) -> None:
    assert not rollback.run.ok, rollback.describe()
    message = " ".join(rollback.run.failure_messages())
    assert f"Done: {done}." in message, message
    assert "Re-run the same command to finish" in message, message


@then(parsers.parse("the shared workload still has its {count:d} pods"))
def workload_kept(kube: Cluster, rollback_scenario: Scenario, count: int) -> None:
    pods = kube.core.list_namespaced_pod(rollback_scenario.namespace, label_selector=f"app={WORKLOAD}").items
    assert len([p for p in pods if not p.metadata.deletion_timestamp]) == count, [p.metadata.name for p in pods]


@then("every rollback succeeded")
def every_rollback_ok(cycle: list[RollbackRun]) -> None:
    for run in cycle:
        assert run.run.ok, run.describe()


@then("every GPU node is exactly as before")
def all_nodes_unchanged(kube: Cluster, nodes_before: dict[str, dict]) -> None:
    for name, before in nodes_before.items():
        after = node_fingerprint(kube, name)
        assert after == before, f"{name} changed:\n{json.dumps(before, sort_keys=True)}\n{json.dumps(after, sort_keys=True)}"


@then("the ClusterPolicy and the operator namespace's ConfigMaps are as recorded, plus 2 backups")
def as_recorded(kube: Cluster, recorded: dict[str, Any]) -> None:
    assert _policy_spec(kube) == recorded["policy"]
    assert _configmaps(kube) == recorded["configmaps"]
    assert len(_backups(kube)) == 2
