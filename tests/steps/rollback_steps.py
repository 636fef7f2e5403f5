"""Steps for features/rollback.feature: enable with the real enable runbook, run shared pods,
roll back with playbooks/rollback-timeslicing.yml, and check what the operator cares about. Every
run goes through the same driver as the other runbooks (runbook_steps.run_runbook)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then, when

from gpushare.clock import parse_time
from gpushare.k8s.patch import resolve
from gpushare.kube import api_client
from gpushare.model.node import Pool
from gpushare.polling import wait_for
from tests.steps.cluster_steps import Before, backups, clusterpolicy_spec
from tests.steps.runbook_steps import ENABLE, RunbookRun, _run
from tests.support.cluster import TEST_NAMESPACE_LABEL, WORKLOAD_GRACE_S, Cluster

ROLLBACK = "rollback-timeslicing.yml"
SHARED = "nvidia.com/gpu.shared"
RECORDS = "gpushare.io/run"
CONFIGMAP = "time-slicing-config"
WORKLOAD = "gpu-share-check"
KWOK_USER = "system:kwok"  # the fake kubelets' identity (gpushare_testbed.controlplane IDENTITIES)


@dataclass
class Workloads:
    """What a scenario set up, for the steps that check it afterwards (one per scenario)."""

    namespace: str | None = None
    enabled_policy: dict[str, Any] | None = None
    records: list[str] | None = None


@pytest.fixture
def workloads() -> Workloads:
    return Workloads()


def _records(kube: Cluster) -> list[str]:
    return sorted(c.metadata.name for c in kube.core.list_namespaced_config_map(
        kube.records_namespace, label_selector=RECORDS).items)


def _shared_pods_on(kube: Cluster, node: str) -> list[str]:
    from gpushare.model.pods import Pod

    pods = kube.api.sanitize_for_serialization(
        kube.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items)
    return sorted(Pod(p).ref for p in pods if not Pod(p).finished and Pod(p).holds((SHARED,)))


def _rollback(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
              runbook_inputs: dict[str, Any], node: str, options: str = "") -> RunbookRun:
    return _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, f"{ROLLBACK} -l {node}{options}")


# ---- given --------------------------------------------------------------------------------------
@given(parsers.parse('time-slicing was enabled on "{nodes}" with {replicas:d} replicas by the enable runbook'),
       target_fixture="targeted")
def enabled(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
            runbook_inputs: dict[str, Any], workloads: Workloads, nodes: str, replicas: int) -> list[str]:
    """`nodes`: one node, or several separated by commas (one enable run, -l with all of them)."""
    done = _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"{ENABLE} -l {nodes} -e timeslicing_replicas={replicas}")
    assert done.run.ok, done.describe()
    return _enabled_state(kube, workloads, nodes.split(","))


@given(parsers.parse('time-slicing was enabled cluster-wide from "{node}" with {replicas:d} replicas by the enable runbook'),
       target_fixture="targeted")
def enabled_cluster_wide(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                         runbook_inputs: dict[str, Any], workloads: Workloads, node: str, replicas: int) -> list[str]:
    done = _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"{ENABLE} -l {node} -e timeslicing_replicas={replicas} -e timeslicing_scope=cluster "
                "-e timeslicing_confirm_cluster_scope=true")
    assert done.run.ok, done.describe()
    return _enabled_state(kube, workloads, kube.gpu_nodes())


def _enabled_state(kube: Cluster, workloads: Workloads, nodes: list[str]) -> list[str]:
    workloads.enabled_policy = clusterpolicy_spec(kube)
    workloads.records = _records(kube)
    return nodes


@given(parsers.parse('{count:d} shared pods run on "{node}"'))
def shared_pods_run(kube: Cluster, workloads: Workloads, pool: Pool, count: int, node: str) -> None:
    _shared_deployment(kube, workloads, pool, count, node, {pool.label_key: pool.label_value},
                       [{"key": pool.taint.key, "operator": "Exists", "effect": "NoSchedule"}] if pool.taint else [])


@given(parsers.parse('{count:d} shared pods that take {seconds:d} seconds to stop run on "{node}"'))
def slow_shared_pods_run(kube: Cluster, workloads: Workloads, pool: Pool, count: int, seconds: int, node: str) -> None:
    """Their shell ignores SIGTERM: each evicted pod stays its whole terminationGracePeriodSeconds."""
    _shared_deployment(kube, workloads, pool, count, node, {pool.label_key: pool.label_value},
                       [{"key": pool.taint.key, "operator": "Exists", "effect": "NoSchedule"}] if pool.taint else [],
                       grace_s=seconds)


@given(parsers.parse('{count:d} shared pods that tolerate every taint run on "{node}", selecting the shared pool'))
def tolerant_pool_pods(kube: Cluster, workloads: Workloads, pool: Pool, count: int, node: str) -> None:
    _shared_deployment(kube, workloads, pool, count, node, {pool.label_key: pool.label_value}, [{"operator": "Exists"}])


@given(parsers.parse('{count:d} shared pods that tolerate every taint run on "{node}", pinned to it by hostname'))
def tolerant_pinned_pods(kube: Cluster, workloads: Workloads, pool: Pool, count: int, node: str) -> None:
    _shared_deployment(kube, workloads, pool, count, node, {"kubernetes.io/hostname": node}, [{"operator": "Exists"}])


def _shared_deployment(kube: Cluster, workloads: Workloads, pool: Pool, count: int, node: str,
                       selector: dict[str, str], tolerations: list[dict[str, str]], grace_s: int = WORKLOAD_GRACE_S) -> None:
    namespace = f"rollback-{uuid.uuid4().hex[:8]}"
    workloads.namespace = namespace
    kube.core.create_namespace({"metadata": {"name": namespace, "labels": {TEST_NAMESPACE_LABEL: "rollback"}}})
    kube.apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": WORKLOAD},
        "spec": {
            "replicas": count,
            "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": {
                "metadata": {"labels": {"app": WORKLOAD}},
                "spec": {
                    "nodeSelector": selector,
                    "tolerations": tolerations,
                    "terminationGracePeriodSeconds": grace_s,
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
def budget_blocks(kube: Cluster, workloads: Workloads) -> None:
    policy = client.PolicyV1Api(kube.api)
    policy.create_namespaced_pod_disruption_budget(workloads.namespace, {
        "metadata": {"name": f"{WORKLOAD}-budget"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": WORKLOAD}}},
    })
    wait_for(lambda: policy.read_namespaced_pod_disruption_budget(
        f"{WORKLOAD}-budget", workloads.namespace).status.observed_generation, 30,
        "the disruption controller to observe the budget")


def _restore(intent: dict[str, Any], spec: dict[str, Any], path: str, before: Any) -> None:
    """The record says the enable changed `path` (of `spec`, the ClusterPolicy's now) from `before`:
    what a rollback would write back."""
    changes = [c for c in intent["clusterpolicy"] if c["path"] == path]
    for change in changes:
        change["before"] = before
    if not changes:
        now = resolve({"spec": spec}, path, None)
        intent["clusterpolicy"].append({"path": path, "before": before, "after": now})


def _created(intent: dict[str, Any], configmap: str) -> None:
    intent["configmap"] = {"name": configmap, "created": True, "keys_added": []}


# What a holder of the runbook identity writes into a run record (its intent, with the ClusterPolicy's
# spec now), for the next rollback (often an administrator's) to carry out.
FORGERIES: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "a driver repository to restore": lambda i, s: _restore(i, s, "/spec/driver/repository", "evil.example.com/driver"),
    "the MIG parted config as created by the enable": lambda i, _: _created(i, "default-mig-parted-config"),
    "the device plugin's entrypoint as its ConfigMap": lambda i, _: _created(i, "nvidia-device-plugin-entrypoint"),
    "a device-plugin config of the attacker's": lambda i, s: _restore(i, s, "/spec/devicePlugin/config",
                                                                      {"name": "evil-config", "default": "any"}),
    "operand tolerations of every taint": lambda i, s: _restore(i, s, "/spec/daemonsets/tolerations",
                                                                [{"operator": "Exists"}]),
}


@given(parsers.parse("someone with the runbook identity edits the enable run's record to name {forgery}"))
def record_forged(kube: Cluster, workloads: Workloads, forgery: str) -> None:
    """The record lives in the runbooks' namespace, where the runbook identity may patch ConfigMaps."""
    (name,) = [r for r in workloads.records or [] if r.startswith("gpushare-run-enable-")]
    record = kube.core.read_namespaced_config_map(name, kube.records_namespace)
    intent = json.loads(record.data["intent.json"])
    FORGERIES[forgery](intent, clusterpolicy_spec(kube))
    client.CoreV1Api(api_client(kube.runbook_kubeconfig)).patch_namespaced_config_map(
        name, kube.records_namespace, {"data": {"intent.json": json.dumps(intent)}})


# ---- when ---------------------------------------------------------------------------------------
@pytest.fixture
def rollback_driver(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                    runbook_inputs: dict[str, Any]):
    return lambda node, options="": _rollback(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs, node, options)


@when(parsers.re(r'the operator rolls back time-slicing on "(?P<node>[^"]+)"(?: again)?$'), target_fixture="runbook_run")
def rolls_back(rollback_driver, node: str) -> RunbookRun:
    return rollback_driver(node)


@when(parsers.parse('the operator rolls back time-slicing on "{node}" with a drain timeout of {seconds:d} seconds'),
      target_fixture="runbook_run")
def rolls_back_with_timeout(rollback_driver, node: str, seconds: int) -> RunbookRun:
    return rollback_driver(node, f" -e timeslicing_rollback_drain_timeout={seconds} -e timeslicing_rollback_drain_retry_delay=1")


@when(parsers.parse('the operator rolls back time-slicing on "{node}" confirming the cluster scope'),
      target_fixture="runbook_run")
def rolls_back_confirmed(rollback_driver, node: str) -> RunbookRun:
    return rollback_driver(node, " -e timeslicing_confirm_cluster_scope=true")


@when(parsers.parse('the rollback of "{node}" is interrupted right after the {step}'), target_fixture="runbook_run")
def interrupted(rollback_driver, node: str, step: str) -> RunbookRun:
    return rollback_driver(node, f" -e timeslicing_rollback_stop_after={step}")


@when("the operator deletes the PodDisruptionBudget")
def delete_budget(kube: Cluster, workloads: Workloads) -> None:
    client.PolicyV1Api(kube.api).delete_namespaced_pod_disruption_budget(f"{WORKLOAD}-budget", workloads.namespace)


@when("the team scales the shared workload to 0")
def scale_to_zero(kube: Cluster, workloads: Workloads) -> None:
    kube.apps.patch_namespaced_deployment_scale(WORKLOAD, workloads.namespace, {"spec": {"replicas": 0}})
    wait_for(lambda: not kube.core.list_namespaced_pod(workloads.namespace).items, 60, "the workload's pods to go")


@when(parsers.parse('time-slicing is enabled on "{node}" with {replicas:d} replicas and rolled back, twice'),
      target_fixture="cycle")
def enable_rollback_twice(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                          runbook_inputs: dict[str, Any], rollback_driver, node: str, replicas: int) -> list[RunbookRun]:
    runs = []
    for _ in range(2):
        done = _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                    f"{ENABLE} -l {node} -e timeslicing_replicas={replicas}")
        assert done.run.ok, done.describe()
        runs.append(rollback_driver(node))
    return runs


# ---- then ---------------------------------------------------------------------------------------
@then("the rollback succeeds")
def rollback_succeeds(runbook_run: RunbookRun) -> None:
    assert runbook_run.run.ok, runbook_run.describe()


@then("the rollback succeeds with nothing to do")
def nothing_to_do(runbook_run: RunbookRun) -> None:
    assert runbook_run.run.ok, runbook_run.describe()
    assert "Nothing to do" in runbook_run.run.stdout, runbook_run.describe()
    assert not any(runbook_run.run.changed.values()), f"changed: {runbook_run.run.changed_tasks()}"


@then(parsers.parse('no pod on "{node}" holds a shared replica'))
def no_shared_pod(kube: Cluster, node: str) -> None:
    assert _shared_pods_on(kube, node) == []


@then("the report says where each evicted pod went, with the scheduler's reason when Pending")
def report_whereabouts(kube: Cluster, runbook_run: RunbookRun, workloads: Workloads) -> None:
    pods = kube.core.list_namespaced_pod(workloads.namespace, label_selector=f"app={WORKLOAD}").items
    assert pods, "the Deployment has no pod"
    stdout = runbook_run.run.stdout
    assert f"Deployment {workloads.namespace}/{WORKLOAD}:" in stdout, stdout[-3000:]
    for pod in pods:
        assert pod.metadata.name in stdout, f"{pod.metadata.name} not in the report:\n{stdout[-3000:]}"
        if not pod.spec.node_name:
            assert f"{pod.metadata.name} Pending: 0/" in stdout, stdout[-3000:]


@then("the ClusterPolicy is as before the first enable")
def policy_as_first(kube: Cluster, before: Before) -> None:
    assert clusterpolicy_spec(kube) == before.clusterpolicy


@then("the time-slicing ConfigMap is gone and every run record and backup is kept")
def configmap_gone_records_kept(kube: Cluster, workloads: Workloads, backup_dir: Path) -> None:
    with pytest.raises(ApiException) as missing:
        kube.core.read_namespaced_config_map(CONFIGMAP, kube.operator_namespace)
    assert missing.value.status == 404
    now = _records(kube)
    assert set(workloads.records or []) <= set(now), (workloads.records, now)
    assert backups(backup_dir), "the ClusterPolicy backup file is gone"


@then("the rollback fails naming the PodDisruptionBudget and the blocked pods")
def fails_naming_budget(kube: Cluster, runbook_run: RunbookRun, workloads: Workloads) -> None:
    assert not runbook_run.run.ok, runbook_run.describe()
    message = " ".join(runbook_run.run.failure_messages())
    assert f"PodDisruptionBudget {workloads.namespace}/{WORKLOAD}-budget" in message, message
    blocked = [p for p in _shared_pods_on(kube, "gpu-node") if p.startswith(f"{workloads.namespace}/")]
    assert blocked, "no pod is left on the node"
    for pod in blocked:
        assert pod in message, f"{pod} not named in: {message}"


@then(parsers.parse('the rollback fails naming the workload that comes back to "{node}", its toleration and selector'))
def fails_naming_comeback(runbook_run: RunbookRun, workloads: Workloads, node: str) -> None:
    assert not runbook_run.run.ok, runbook_run.describe()
    message = " ".join(runbook_run.run.failure_messages())
    for part in (f"Deployment {workloads.namespace}/{WORKLOAD} re-created", f"on {node} right after its eviction",
                 '{"operator": "Exists"}', f'nodeSelector {{"kubernetes.io/hostname": "{node}"}}', "Scale the workload down"):
        assert part in message, f"{part!r} not in: {message}"
    assert "disruption budget" not in message.lower(), message


@then("the plan warned that the shared pods will come back")
def plan_warned(runbook_run: RunbookRun, workloads: Workloads) -> None:
    assert f"WARNING: Deployment {workloads.namespace}/{WORKLOAD}" in runbook_run.run.stdout, runbook_run.run.stdout[-3000:]
    assert "will come back" in runbook_run.run.stdout


@then(parsers.parse('the report says the ClusterPolicy was left as it is because "{other}" still uses the shared config'))
def policy_left_for(runbook_run: RunbookRun, other: str) -> None:
    assert f"ClusterPolicy and ConfigMap stay: {other} still use(s) the shared config" in runbook_run.run.stdout, \
        runbook_run.describe()


@then("the failure says the ClusterPolicy is untouched")
def failure_policy_untouched(runbook_run: RunbookRun) -> None:
    assert "The ClusterPolicy is untouched" in " ".join(runbook_run.run.failure_messages()), runbook_run.describe()


@then("the ClusterPolicy is as the enable runbook left it")
def policy_as_enabled(kube: Cluster, workloads: Workloads) -> None:
    assert clusterpolicy_spec(kube) == workloads.enabled_policy


@then(parsers.parse('the rollback stopped saying that "{done}" are done'))
def stopped_saying(runbook_run: RunbookRun, done: str) -> None:
    assert not runbook_run.run.ok, runbook_run.describe()
    message = " ".join(" ".join(runbook_run.run.failure_messages()).split())
    assert f"Done: {done}." in message, message
    assert "Re-run the same command to finish" in message, message


@then(parsers.parse("the shared workload still has its {count:d} pods"))
def workload_kept(kube: Cluster, workloads: Workloads, count: int) -> None:
    pods = kube.core.list_namespaced_pod(workloads.namespace, label_selector=f"app={WORKLOAD}").items
    assert len([p for p in pods if not p.metadata.deletion_timestamp]) == count, [p.metadata.name for p in pods]


@then("every rollback succeeded")
def every_rollback_ok(cycle: list[RunbookRun]) -> None:
    for run in cycle:
        assert run.run.ok, run.describe()


@then(parsers.parse("there are {count:d} run records"))
def record_count(kube: Cluster, count: int) -> None:
    assert len(_records(kube)) == count, _records(kube)


@then(parsers.re(r"the drain went on only once the evicted pods were gone"
                 r"(?:, (?P<seconds>\d+) seconds or more after their eviction)?$"))
def drain_waited(kube: Cluster, runbook_run: RunbookRun, seconds: str | None) -> None:
    """From the audit log: the kubelet (KWOK) deleted each pod the run evicted (`seconds` after at
    least: its grace period), and the run's next write came after the last of those deletions."""
    if runbook_run.audit is None:
        pytest.skip("the order of the requests is read from the embedded cluster's audit log")
    events = [e for e in kube.audit_events(runbook_run.audit[0]) if e.get("stage") == "ResponseComplete"]
    evictions = {(e["objectRef"].get("namespace"), e["objectRef"]["name"]): e for e in events
                 if e.get("verb") == "create" and e["objectRef"].get("subresource") == "eviction"
                 and (e.get("user") or {}).get("username") == kube.runbook_user and e.get("responseStatus", {}).get("code") == 201}
    assert evictions, "the run evicted no pod"
    deleted = {(e["objectRef"].get("namespace"), e["objectRef"]["name"]): e for e in events
               if e.get("verb") == "delete" and e["objectRef"].get("resource") == "pods" and not e["objectRef"].get("subresource")
               and (e.get("user") or {}).get("username") == KWOK_USER and (e["objectRef"].get("namespace"), e["objectRef"]["name"]) in evictions}
    assert deleted.keys() == evictions.keys(), f"pods evicted but not deleted by their kubelet: {sorted(evictions.keys() - deleted.keys())}"
    for pod, eviction in evictions.items():
        waited = _at(deleted[pod]["stageTimestamp"]) - _at(eviction["stageTimestamp"])
        # the deletionTimestamp the kubelet acts on is in whole seconds
        assert seconds is None or waited >= int(seconds) - 1, f"{pod} was deleted {waited:.1f} s after its eviction"
    gone = max(_at(e["stageTimestamp"]) for e in deleted.values())
    last_eviction = max(_at(e["requestReceivedTimestamp"]) for e in evictions.values())
    writes = [e for e in events if (e.get("user") or {}).get("username") == kube.runbook_user
              and e.get("verb") in ("create", "update", "patch", "delete") and _at(e["requestReceivedTimestamp"]) > last_eviction
              and e["objectRef"].get("subresource") != "eviction"]
    assert writes, "the run wrote nothing after its evictions"
    first = min(writes, key=lambda e: _at(e["requestReceivedTimestamp"]))
    assert _at(first["requestReceivedTimestamp"]) >= gone, (
        f"the run went on ({first['verb']} {first['requestURI']}) before the evicted pods were gone")


def _at(stamp: str) -> float:
    parsed = parse_time(stamp)
    assert parsed is not None, stamp
    return parsed.timestamp()
