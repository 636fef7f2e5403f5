"""Steps of the DRA pilot: its readiness (the checks it printed, and the clusters that fail them: a
GPUCluster beside the ClusterPolicy, an embedded control plane with a half-enabled feature gate), and
its enable and verify (the shared claim, the pool, the switched node, a driver gate turned off)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
import yaml
from pytest_bdd import given, parsers, then, when

from gpushare.dra.pool import Pool
from gpushare.polling import wait_for
from gpushare_testbed.gpu_identity import gpu_uuid
from gpushare_testbed.simulator import clusterpolicy as cp
from tests.prometheus_fixture import THRESHOLDS, TRIAL_END, GateCase, build_tsdb, one_case, prometheus_server, \
    skip_without_prometheus
from tests.steps.runbook_steps import RunbookRun, run_runbook
from tests.support.cluster import DRA_CHECK_LABEL, Cluster, embedded_cluster
from tests.support.dra_driver import set_driver_gates, set_plugin_node_selector

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


def gated_cluster(cluster: Cluster, gate: str, where: str, tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest, *, kueue: bool = False) -> Cluster:
    """A second embedded cluster, started for the scenario with the gate on where asked (and Kueue
    only when asked), and stopped after it."""
    if not cluster.embedded:
        pytest.skip("a cluster with chosen feature gates is an embedded one, started for the scenario")
    option = ("--component-feature-gates", f"kube-scheduler:{gate}=true") if where == "kube-scheduler only" else (
        "--feature-gates", f"{gate}=true")
    state_dir = tmp_path_factory.mktemp("gated") / "cluster"
    request.addfinalizer(lambda: subprocess.run(
        [sys.executable, "-m", "gpushare", "sim", "down", "--state-dir", str(state_dir)], check=False))
    return embedded_cluster(state_dir, *(() if kueue else ("--without", "kueue")), *option)


@given(parsers.re(r"an embedded cluster whose (?P<gate>\w+) gate is on in (?P<where>kube-scheduler only|every component)$"),
       target_fixture="kube")
def gated(cluster: Cluster, gate: str, where: str, tmp_path_factory: pytest.TempPathFactory,
          request: pytest.FixtureRequest) -> Cluster:
    return gated_cluster(cluster, gate, where, tmp_path_factory, request)


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


# ---- the pilot ----------------------------------------------------------------------------------------
CHECK_NAMESPACE = "gpushare-share-check"
PILOT_TAINT = ("nvidia.com/gpu", "dra-pilot", "NoSchedule")
PILOT_MARK = "gpushare.io/dra-pilot"


def _pilot_pods(kube: Cluster, node: str) -> list[Any]:
    return kube.core.list_namespaced_pod(CHECK_NAMESPACE, label_selector=f"{DRA_CHECK_LABEL}={node}").items


@then(parsers.parse('4 pods share one ResourceClaim on "{node}" with the GpuConfig strategy "{strategy}"'))
def pods_share_a_claim(kube: Cluster, node: str, strategy: str) -> None:
    pods = [p for p in _pilot_pods(kube, node) if p.spec.resource_claims is not None]
    assert len(pods) == 4 and all(p.status.phase == "Running" and p.spec.node_name == node for p in pods), [
        (p.metadata.name, p.status.phase, p.spec.node_name) for p in pods]
    claims = {c.resource_claim_name for p in pods for c in p.spec.resource_claims}
    assert len(claims) == 1, claims
    claim = kube.custom.get_namespaced_custom_object("resource.k8s.io", "v1", CHECK_NAMESPACE, "resourceclaims",
                                                     claims.pop())
    allocation = claim["status"]["allocation"]["devices"]
    assert [(r["driver"], r["pool"]) for r in allocation["results"]] == [("gpu.nvidia.com", node)], allocation
    assert allocation["results"][0]["device"].startswith("gpu-"), allocation
    assert sorted(r["uid"] for r in claim["status"]["reservedFor"]) == sorted(p.metadata.uid for p in pods)
    strategies = [c["opaque"]["parameters"]["sharing"]["strategy"] for c in allocation["config"]]
    assert strategies == [strategy], allocation["config"]


def claims_card(kube: Cluster, node: str) -> str:
    """The UUID of the card the pilot's claim got: its device's uuid attribute in the node's pool."""
    claims = {c.resource_claim_name for p in _pilot_pods(kube, node) for c in p.spec.resource_claims or []}
    assert len(claims) == 1, f"the pilot's check pods on {node} name claims {claims}"
    claim = kube.custom.get_namespaced_custom_object("resource.k8s.io", "v1", CHECK_NAMESPACE, "resourceclaims",
                                                     claims.pop())
    slices = kube.custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                                    field_selector=f"spec.nodeName={node}")["items"]
    card = Pool.of(slices, "gpu.nvidia.com", node).devices[claim["status"]["allocation"]["devices"]["results"][0]["device"]]
    assert card.startswith("GPU-"), card
    return card


@then(parsers.parse('the release gates are handed the card the claim got on "{node}"'))
def gates_get_the_claims_card(kube: Cluster, runbook_run: RunbookRun, node: str) -> None:
    """The verify names the card for release_gates_uuids: the uuid of the claim's device in the node's pool."""
    card = claims_card(kube, node)
    assert f"card {card};" in " ".join(runbook_run.run.stdout.split()), runbook_run.run.stdout[-3000:]


# Another card's UUIDs (no node of any cluster has them): its series must not count for the pilot's card.
OTHER_CARDS = ("GPU-00000000-0000-4000-8000-0000000000a1", "GPU-00000000-0000-4000-8000-0000000000a2")
# What the pilot's trial looks like in Prometheus: the trial's two cards and which of them raises Xid 79 (the second).
PILOT_TRIALS = {
    "runs well while another card raises an Xid error": lambda card: GateCase(uuids=(card, OTHER_CARDS[0]), xid=79),
    "raises an Xid error": lambda card: GateCase(uuids=(OTHER_CARDS[0], card), xid=79),
    "has no series": lambda card: GateCase(uuids=OTHER_CARDS, xid=0),
}


@given(parsers.re(r'Prometheus holds a trial where the card the claim got on "(?P<node>[^"]+)" '
                  r"(?P<trial>runs well while another card raises an Xid error|raises an Xid error|has no series)$"),
       target_fixture="pilot_prometheus")
def pilot_prometheus(request: pytest.FixtureRequest, kube: Cluster, tmp_path: Path, node: str,
                     trial: str) -> dict[str, str]:
    """A week of whole-card baseline and an hour of trial on the node (tests/prometheus_fixture.py), its cards
    the claim's and another, backfilled into a Prometheus of the scenario's own: any cluster's pilot can be judged."""
    skip_without_prometheus()
    card = claims_card(kube, node)
    directory = tmp_path / f"prometheus-{len(list(tmp_path.glob('prometheus-*')))}"
    directory.mkdir()
    tsdb = build_tsdb(directory, lambda: one_case(node, PILOT_TRIALS[trial](card)))
    stack = ExitStack()
    request.addfinalizer(stack.close)
    return {"url": stack.enter_context(prometheus_server(tsdb, directory)), "card": card}


@when(parsers.parse('the operator verifies the DRA pilot on "{node}" with the release gates read from that Prometheus'),
      target_fixture="runbook_run")
def verify_with_gates(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                      runbook_inputs: dict[str, Any], pilot_prometheus: dict[str, str], node: str) -> RunbookRun:
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(yaml.safe_dump(THRESHOLDS))
    return run_runbook(kube, tmp_path / f"run-{next(run_counter)}", f"verify-dra-pilot.yml -l {node}",
                       inventory=runbook_inventory, extravars={
                           **runbook_inputs, "release_gates_prometheus_url": pilot_prometheus["url"],
                           "release_gates_window": "1h", "release_gates_trial_end": str(TRIAL_END),
                           "release_gates_thresholds_file": str(thresholds)})


@then(parsers.parse('the release gates judged the card the claim got and say "{verdict}"'))
def gates_judged_the_card(runbook_run: RunbookRun, pilot_prometheus: dict[str, str], verdict: str) -> None:
    said = " ".join(runbook_run.run.stdout.split())
    assert f"uuids [{pilot_prometheus['card']}]" in said, runbook_run.run.stdout[-3000:]
    assert not any(card in said for card in OTHER_CARDS), runbook_run.run.stdout[-3000:]
    assert f"verdict: {verdict}" in said, runbook_run.run.stdout[-3000:]


@then("the release gates name the card the claim got as without DCGM series, and what to check")
def gates_name_the_card_without_series(runbook_run: RunbookRun, pilot_prometheus: dict[str, str]) -> None:
    said = " ".join(runbook_run.run.stdout.split())
    expected = (f"no DCGM series for {pilot_prometheus['card']} (in the trial and the baseline) (UUID label): is the DCGM "
                "exporter running and scraped on the node of that card, and is it the UUID of the card the claim got")
    assert expected in said, runbook_run.run.stdout[-3000:]


@then(parsers.parse('the pool of "{node}" is complete with the node\'s GPUs'))
def pool_complete(kube: Cluster, node: str) -> None:
    slices = kube.custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                                    field_selector=f"spec.nodeName={node}")["items"]
    gpus = int(kube.node(node).metadata.labels["nvidia.com/gpu.count"])
    pool = Pool.of(slices, "gpu.nvidia.com", node)
    assert pool.problems(gpus) == [], pool.line()
    if kube.embedded:  # the simulated driver announces the GPUs DCGM reports
        assert sorted(pool.devices.values()) == sorted(gpu_uuid(node, i) for i in range(gpus)), pool.line()


@then(parsers.parse('node "{node}" no longer advertises nvidia.com/gpu and carries the pilot taint'))
def node_switched(kube: Cluster, node: str) -> None:
    found = kube.node(node)
    assert (found.status.allocatable or {}).get("nvidia.com/gpu", "0") == "0", found.status.allocatable
    assert found.metadata.labels.get("nvidia.com/gpu.deploy.device-plugin") == "false"
    assert PILOT_TAINT in [(t.key, t.value, t.effect) for t in found.spec.taints or []], found.spec.taints
    assert not found.spec.unschedulable


@given(parsers.re(r"the DRA driver runs with its (?P<gates>\w+(?: and \w+)?) gates? on$"))
def driver_gates_on(kube: Cluster, request: pytest.FixtureRequest, gates: str) -> None:
    """The sharing's alpha gate, which the chart leaves off (its values.yaml: featureGates none)."""
    request.addfinalizer(set_driver_gates(kube, dict.fromkeys(gates.split(" and "), True)))


@given("the DRA driver runs with its chart's default gates (none)")
def driver_gates_default(kube: Cluster, request: pytest.FixtureRequest) -> None:
    request.addfinalizer(set_driver_gates(kube, None))


@given(parsers.parse('the DRA driver\'s chart selects the nodes of its kubelet plugin by "{label}"'))
def driver_selects_by(kube: Cluster, request: pytest.FixtureRequest, label: str) -> None:
    request.addfinalizer(set_plugin_node_selector(kube, label))


@given("the DRA driver's kubelet plugin runs without its TimeSlicingSettings gate")
def driver_gate_off(kube: Cluster, request: pytest.FixtureRequest) -> None:
    """As `helm upgrade --set featureGates.TimeSlicingSettings=false` would."""
    request.addfinalizer(set_driver_gates(kube, {"TimeSlicingSettings": False}))


@given("the pilot's check pods and claim are gone")
def check_objects_gone(kube: Cluster) -> None:
    """As the verify's owner would delete them; the claim goes once deallocated (its finalizer)."""
    for pod in kube.core.list_namespaced_pod(CHECK_NAMESPACE, label_selector=DRA_CHECK_LABEL).items:
        kube.core.delete_namespaced_pod(pod.metadata.name, CHECK_NAMESPACE, grace_period_seconds=0)
    kube.custom.delete_collection_namespaced_custom_object("resource.k8s.io", "v1", CHECK_NAMESPACE, "resourceclaims",
                                                           label_selector=DRA_CHECK_LABEL)

    def gone() -> bool:
        return not kube.core.list_namespaced_pod(CHECK_NAMESPACE, label_selector=DRA_CHECK_LABEL).items and not \
            kube.custom.list_namespaced_custom_object("resource.k8s.io", "v1", CHECK_NAMESPACE, "resourceclaims",
                                                      label_selector=DRA_CHECK_LABEL)["items"]

    wait_for(gone, 60, "the pilot's check pods and claim to be gone")


@given(parsers.parse('a team\'s pod "{pod}" runs on "{node}" with its own claim "{claim}"'))
def team_claim(kube: Cluster, workload_namespace: str, pod: str, node: str, claim: str) -> None:
    """A claim of the driver's own DeviceClass, allocated by the scheduler from the pilot node's pool."""
    kube.custom.create_namespaced_custom_object("resource.k8s.io", "v1", workload_namespace, "resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
    kube.core.create_namespaced_pod(workload_namespace, {"metadata": {"name": pod}, "spec": {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": [{"key": PILOT_TAINT[0], "operator": "Exists", "effect": PILOT_TAINT[2]}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}]}})
    wait_for(lambda: kube.core.read_namespaced_pod(pod, workload_namespace).status.phase == "Running", 60,
             f"pod {pod} to run on {node} with claim {claim}")


@given(parsers.parse('the team\'s pod "{pod}" and its claim "{claim}" are gone'))
def team_claim_gone(kube: Cluster, workload_namespace: str, pod: str, claim: str) -> None:
    kube.core.delete_namespaced_pod(pod, workload_namespace, grace_period_seconds=0)
    kube.custom.delete_namespaced_custom_object("resource.k8s.io", "v1", workload_namespace, "resourceclaims", claim)

    def gone() -> bool:
        return not kube.core.list_namespaced_pod(workload_namespace, field_selector=f"metadata.name={pod}").items and \
            not kube.custom.list_namespaced_custom_object("resource.k8s.io", "v1", workload_namespace, "resourceclaims",
                                                          field_selector=f"metadata.name={claim}")["items"]

    wait_for(gone, 60, f"pod {pod} and claim {claim} to be gone")


@then(parsers.parse('node "{node}" is served by the device plugin again, without the pilot\'s marks'))
def node_back(kube: Cluster, node: str) -> None:
    found = kube.node(node)
    labels, annotations = found.metadata.labels, found.metadata.annotations or {}
    assert found.status.allocatable.get("nvidia.com/gpu") == labels["nvidia.com/gpu.count"], found.status.allocatable
    assert labels.get("nvidia.com/gpu.deploy.device-plugin") == "true" and "nvidia.com/dra-kubelet-plugin" not in labels
    assert "gpushare.io/dra-pilot" not in annotations and not found.spec.unschedulable
    assert PILOT_TAINT not in [(t.key, t.value, t.effect) for t in found.spec.taints or []], found.spec.taints
    slices = kube.custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                                    field_selector=f"spec.nodeName={node}")["items"]
    assert not slices, [s["metadata"]["name"] for s in slices]
    assert not _pilot_pods(kube, node)


@given(parsers.parse('node "{node}" carries a DRA pilot mark that no run of the runbooks wrote: {mark}'))
def forged_pilot_mark(kube: Cluster, request: pytest.FixtureRequest, node: str, mark: str) -> None:
    """Someone holding the runbook identity (or an administrator) wrote the annotation by hand; removed after."""
    kube.core.patch_node(node, {"metadata": {"annotations": {PILOT_MARK: mark}}})
    request.addfinalizer(lambda: kube.core.patch_node(node, {"metadata": {"annotations": {PILOT_MARK: None}}}))
