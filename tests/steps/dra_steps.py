"""Steps of the DRA pilot's readiness: the checks it printed, and the clusters that fail them (a
GPUCluster beside the ClusterPolicy, an embedded control plane with a half-enabled feature gate)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then

from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from tests.steps.runbook_steps import RunbookRun
from tests.support.cluster import Cluster, embedded_cluster

GPUCLUSTER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gpuclusters.nvidia.com"},
    "spec": {"group": "nvidia.com", "scope": "Cluster",
             "names": {"kind": "GPUCluster", "plural": "gpuclusters", "singular": "gpucluster", "listKind": "GPUClusterList"},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def readiness_lines(run: RunbookRun) -> list[str]:
    """The check lines the run printed (PASS or FAIL first), whitespace folded."""
    said = [" ".join(line.split()).strip("\"', ") for line in run.run.stdout.splitlines()]
    return [line for line in said if line.startswith(("PASS ", "FAIL "))]


@pytest.fixture
def gpucluster(kube: Cluster) -> Iterator[str]:
    """A GPUCluster, removed afterwards, with its CRD when the cluster had none (the simulator installs
    it, as GPU Operator v26.7's chart does). Embedded cluster only: on another, it would stop the GPU
    Operator."""
    if not kube.embedded:
        pytest.skip("a GPUCluster stops a real GPU Operator; embedded cluster only")
    crds = client.ApiextensionsV1Api(kube.api)
    created_crd = False
    try:
        crds.create_custom_resource_definition(GPUCLUSTER_CRD)
        created_crd = True
    except ApiException as err:
        if err.status != 409:
            raise

    def established() -> bool:
        conditions = crds.read_custom_resource_definition("gpuclusters.nvidia.com").status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, 30, "the GPUCluster CRD to be established")
    kube.custom.create_cluster_custom_object("nvidia.com", "v1alpha1", "gpuclusters", {
        "apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"}})
    yield "gpu-cluster"
    try:
        if created_crd:
            crds.delete_custom_resource_definition("gpuclusters.nvidia.com")
        else:
            kube.custom.delete_cluster_custom_object("nvidia.com", "v1alpha1", "gpuclusters", "gpu-cluster")
    except ApiException as err:
        if err.status != 404:
            raise


@given(parsers.re("the GPU Operator is (?:also )?managed by a GPUCluster$"))
def a_gpucluster(gpucluster: str) -> None:
    assert gpucluster


@then(parsers.parse('the ClusterPolicy is notReady, saying "{message}"'))
def clusterpolicy_not_ready(kube: Cluster, message: str) -> None:
    """What the operator wrote on the ClusterPolicy (status.state and its Error condition)."""
    def said() -> bool:
        status = kube.custom.get_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY).get(
            "status") or {}
        errors = [c.get("message", "") for c in status.get("conditions") or [] if c.get("type") == "Error"
                  and c.get("status") == "True"]
        return status.get("state") == "notReady" and any(message in e for e in errors)

    wait_for(said, 60, f"ClusterPolicy {cp.CLUSTER_POLICY} notReady with an Error condition saying {message!r}")


@given("the embedded cluster, its feature gates as released", target_fixture="kube")
def embedded_as_released(clean_cluster: Cluster) -> Cluster:
    if not clean_cluster.embedded:
        pytest.skip("the gates as released are the embedded cluster's (another cluster's may differ)")
    return clean_cluster


@given(parsers.re(r"an embedded cluster whose (?P<gate>\w+) gate is on in (?P<where>kube-scheduler only|every component)$"),
       target_fixture="kube")
def gated(cluster: Cluster, gate: str, where: str, tmp_path_factory: pytest.TempPathFactory,
          request: pytest.FixtureRequest) -> Cluster:
    """A second embedded cluster, started for the scenario with the gate on where asked, and stopped after it."""
    if not cluster.embedded:
        pytest.skip("a cluster with chosen feature gates is an embedded one, started for the scenario")
    option = ("--component-feature-gates", f"kube-scheduler:{gate}=true") if where == "kube-scheduler only" else (
        "--feature-gates", f"{gate}=true")
    state_dir = tmp_path_factory.mktemp("gated") / "cluster"
    request.addfinalizer(lambda: subprocess.run(
        [sys.executable, "-m", "gpushare", "sim", "down", "--state-dir", str(state_dir)], check=False))
    return embedded_cluster(state_dir, "--without", "kueue", *option)


@then("every readiness check passed")
def every_check_passed(runbook_run: RunbookRun) -> None:
    lines = readiness_lines(runbook_run)
    assert lines, runbook_run.describe()
    assert all(line.startswith("PASS ") for line in lines), lines


@then(parsers.parse('the readiness printed "{text}"'))
def readiness_printed(runbook_run: RunbookRun, text: str) -> None:
    lines = readiness_lines(runbook_run)
    assert any(line.startswith(text) for line in lines), lines


@then(parsers.parse('the readiness check "{name}" fails with "{reason}"'))
def check_fails(runbook_run: RunbookRun, name: str, reason: str) -> None:
    run = runbook_run.run
    assert not run.ok, f"the run did not fail: {runbook_run.describe()}"
    lines = [line for line in readiness_lines(runbook_run) if line.startswith(f"FAIL {name}: ")]
    assert lines and reason in lines[0], readiness_lines(runbook_run)
    said = " ".join(" ".join(run.failure_messages()).split())
    assert f"FAIL {name}: {reason}" in said and said.endswith("Nothing was changed."), said
