"""Steps about the teams' workloads: pods asking for whole cards or shares, with or without the
shared pool's toleration, and where the scheduler puts them."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from kubernetes.client.exceptions import ApiException
from pytest_bdd import parsers, then, when

from gpushare.model.node import Pool
from gpushare.polling import wait_for
from tests.support.cluster import TEST_NAMESPACE_LABEL, WORKLOAD_GRACE_S, Cluster


SCHEDULING_TIMEOUT_S = 30


@pytest.fixture
def workload_namespace(kube: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "sep-" + re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower())[-50:].strip("-")
    kube.core.create_namespace({"metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: "resource-separation"}}})
    wait_for(lambda: kube.core.read_namespaced_service_account("default", name), 30,
             f"the default ServiceAccount of namespace {name}")
    yield name
    try:
        kube.core.delete_namespace(name)
    except ApiException as err:
        if err.status != 404:
            raise


def _pod(name: str, resource: str, count: int, pool: Pool | None, node: str | None) -> dict:
    spec: dict = {
        "terminationGracePeriodSeconds": WORKLOAD_GRACE_S,
        "containers": [{"name": "check", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                        "command": ["bash", "-lc", "nvidia-smi -L && sleep infinity"],
                        "resources": {"limits": {resource: str(count)}}}],
    }
    if pool:
        spec["tolerations"] = [{"key": pool.taint.key, "operator": "Exists", "effect": "NoSchedule"}] if pool.taint else []
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"metadata": {"name": name, "labels": {"app": "gpu-share-check"}}, "spec": spec}


@when(parsers.re(r'the team submits pods? (?P<names>"[^"]+"(?:(?:, | and )"[^"]+")*) asking for (?P<count>\d+) '
                 r'"(?P<resource>[^"]+)"(?P<tolerates>, tolerating the shared pool)?(?:, on node "(?P<node>[^"]+)")?$'))
def submit_pods(kube: Cluster, workload_namespace: str, pool: Pool, names: str, count: str, resource: str,
                tolerates: str | None, node: str | None) -> None:
    for pod in re.findall(r'"([^"]+)"', names):
        kube.core.create_namespaced_pod(workload_namespace, _pod(pod, resource, int(count), pool if tolerates else None, node))


def _pod_state(kube: Cluster, namespace: str, pod: str) -> tuple[str | None, str]:
    """(node it runs on, why it is not scheduled)."""
    current = kube.core.read_namespaced_pod(pod, namespace)
    if current.spec.node_name and current.status.phase == "Running":
        return current.spec.node_name, ""
    why = next((c.message or "" for c in current.status.conditions or []
                if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"), "")
    return None, why


@then(parsers.parse('pod "{pod}" is not scheduled because "{reason}"'))
def pod_not_scheduled(kube: Cluster, workload_namespace: str, pod: str, reason: str) -> None:
    wait_for(lambda: reason in _pod_state(kube, workload_namespace, pod)[1], SCHEDULING_TIMEOUT_S,
             f"pod {pod} to be unschedulable because {reason!r} (now {_pod_state(kube, workload_namespace, pod)})")
    assert _pod_state(kube, workload_namespace, pod)[0] is None


@then(parsers.parse('pod "{pod}" runs on a node other than "{node}"'))
def pod_runs_elsewhere(kube: Cluster, workload_namespace: str, pod: str, node: str) -> None:
    ran_on = wait_for(lambda: _pod_state(kube, workload_namespace, pod)[0], SCHEDULING_TIMEOUT_S,
                      f"pod {pod} to run (now {_pod_state(kube, workload_namespace, pod)})")
    assert ran_on != node, f"{pod} landed on {node}"


@then(parsers.re(r'(?P<count>\d+) of the pods (?P<names>"[^"]+"(?:(?:, | and )"[^"]+")*) run on node "(?P<node>[^"]+)"$'),
      target_fixture="left_over")
def pods_run_on(kube: Cluster, workload_namespace: str, count: str, names: str, node: str) -> list[str]:
    pods = re.findall(r'"([^"]+)"', names)

    def placed() -> dict[str, str | None] | None:
        states = {pod: _pod_state(kube, workload_namespace, pod) for pod in pods}
        running = {pod: n for pod, (n, _) in states.items() if n}
        waiting = [pod for pod, (n, why) in states.items() if not n and why]
        return states if len(running) == int(count) and len(running) + len(waiting) == len(pods) else None

    states = wait_for(placed, SCHEDULING_TIMEOUT_S, f"{count} of {pods} to run and the rest to be unschedulable")
    assert {n for n, _ in states.values() if n} == {node}, states
    return [pod for pod, (n, _) in states.items() if not n]


@then(parsers.parse('the other one is not scheduled because "{reason}"'))
def the_other_waits(kube: Cluster, workload_namespace: str, left_over: list[str], reason: str) -> None:
    assert len(left_over) == 1, left_over
    pod_not_scheduled(kube, workload_namespace, left_over[0], reason)
