"""Steps for features/mig.feature: the MIG runbooks (playbooks/enable-mig.yml, rollback-mig.yml)
against the cluster under test, the GPU workloads they drain, the MIG manager's paths (a reboot, a
stall, a config it cannot apply) and what the plan, the report and the records say. Runs go
through the same driver as the other runbooks (runbook_steps)."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from pytest_bdd import given, parsers, then, when

from gpushare_testbed.fleet import FleetNode
from gpushare.polling import wait_for
from tests.steps.cluster_steps import Before, _unchanged
from tests.steps.runbook_steps import RunbookRun, _run
from tests.support.cluster import TEST_NAMESPACE_LABEL, WORKLOAD_GRACE_S, Cluster

MIG_STATE = "nvidia.com/mig.config.state"
STALL = "sim.gpushare.io/mig-stall"
REBOOT = "sim.gpushare.io/mig-reboot-required"
CLIENT_TIMEOUT = "sim.gpushare.io/mig-client-timeout-seconds"
DISCOVERY = "sim.gpushare.io/mig-discovery"
LAYOUT = "sim.gpushare.io/mig-layout"  # the simulated cards' MIG devices (gpushare_testbed.simulator.mig_manager)
HOLD = "gpushare.test/hold"  # a finalizer that keeps a pod terminating
MIG_MANAGER = "nvidia-mig-manager"
WORKLOAD = "gpu-workload"
TIMEOUT_S = 60


@dataclass
class GpuWorkload:
    """The GPU pods a scenario runs on a node, as they were before the run."""

    namespace: str = ""
    node: str = ""
    pods: dict[str, str] = field(default_factory=dict)  # uid -> name


@pytest.fixture
def gpu_workload(kube: Cluster) -> Iterator[GpuWorkload]:
    workload = GpuWorkload()
    yield workload
    if workload.namespace:
        try:
            kube.core.delete_namespace(workload.namespace)
        except ApiException as err:
            if err.status != 404:
                raise


def _running(kube: Cluster, workload: GpuWorkload) -> list[client.V1Pod]:
    pods = kube.core.list_namespaced_pod(workload.namespace, label_selector=f"app={WORKLOAD}").items
    return [p for p in pods if p.status.phase == "Running" and p.spec.node_name == workload.node
            and not p.metadata.deletion_timestamp]


def _node_annotation(kube: Cluster, node: str, key: str, value: str | None) -> None:
    kube.core.patch_node(node, {"metadata": {"annotations": {key: value}}})


# ---- given --------------------------------------------------------------------------------------
@given(parsers.parse('the ClusterPolicy\'s MIG strategy is "{strategy}"'))
def mig_strategy(kube: Cluster, strategy: str) -> None:
    kube.custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy",
                                            {"spec": {"mig": {"strategy": strategy}}})

    def relabelled() -> bool:
        return all((kube.node(n).metadata.labels or {}).get("nvidia.com/mig.strategy") == strategy
                   for n in kube.gpu_nodes())

    wait_for(relabelled, TIMEOUT_S, f"GFD to label every GPU node nvidia.com/mig.strategy={strategy}")
    kube.wait_plugin_rolled_out(TIMEOUT_S)


WORKLOAD_ITEM = re.compile(r'"(?P<name>[^"]+)" needing (?P<memory>[\d.]+) GiB(?: with (?P<headroom>[\d.]+) headroom)?'
                           r'(?: in (?P<replicas>\d+) replicas?)?')


@given(parsers.re(r"the workloads are (?P<items>.+)$"), target_fixture="runbook_inputs")
def workloads_listed(runbook_inputs: dict[str, Any], items: str) -> dict[str, Any]:
    """Typed, as with -e @file: numbers stay numbers."""
    listed = []
    for match in WORKLOAD_ITEM.finditer(items):
        item: dict[str, Any] = {"name": match["name"], "memory_gib": yaml.safe_load(match["memory"])}
        if match["headroom"]:
            item["headroom"] = yaml.safe_load(match["headroom"])
        if match["replicas"]:
            item["replicas"] = int(match["replicas"])
        listed.append(item)
    assert listed, f"no workload in {items!r}"
    return {**runbook_inputs, "mig_workloads": listed}


@given(parsers.parse('{count:d} pods using a whole GPU run on "{node}"'))
def gpu_pods_run(kube: Cluster, gpu_workload: GpuWorkload, count: int, node: str) -> None:
    gpu_workload.namespace, gpu_workload.node = f"mig-{uuid.uuid4().hex[:8]}", node
    kube.core.create_namespace({"metadata": {"name": gpu_workload.namespace, "labels": {TEST_NAMESPACE_LABEL: "mig"}}})
    kube.apps.create_namespaced_deployment(gpu_workload.namespace, {
        "metadata": {"name": WORKLOAD},
        "spec": {"replicas": count, "selector": {"matchLabels": {"app": WORKLOAD}}, "template": {
            "metadata": {"labels": {"app": WORKLOAD}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": WORKLOAD_GRACE_S,
                     "containers": [{"name": "infer", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                                     "command": ["bash", "-lc", "nvidia-smi -L && sleep infinity"],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    })
    wait_for(lambda: len(_running(kube, gpu_workload)) == count, TIMEOUT_S, f"{count} GPU pods Running on {node}")
    gpu_workload.pods = {p.metadata.uid: p.metadata.name for p in _running(kube, gpu_workload)}


@given(parsers.parse('a pod using a whole GPU without a controller runs on "{node}"'))
def bare_gpu_pod(kube: Cluster, gpu_workload: GpuWorkload, node: str) -> None:
    gpu_workload.namespace, gpu_workload.node = f"bare-{uuid.uuid4().hex[:8]}", node
    kube.core.create_namespace({"metadata": {"name": gpu_workload.namespace, "labels": {TEST_NAMESPACE_LABEL: "bare"}}})
    wait_for(lambda: kube.core.read_namespaced_service_account("default", gpu_workload.namespace), TIMEOUT_S,
             "the default ServiceAccount")
    kube.core.create_namespaced_pod(gpu_workload.namespace, {
        "metadata": {"name": "notebook", "labels": {"app": WORKLOAD}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "lab", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    wait_for(lambda: len(_running(kube, gpu_workload)) == 1, TIMEOUT_S, f"the GPU pod Running on {node}")
    gpu_workload.pods = {p.metadata.uid: p.metadata.name for p in _running(kube, gpu_workload)}


@when("the operator deletes the GPU pod without a controller")
def delete_bare_pod(kube: Cluster, gpu_workload: GpuWorkload) -> None:
    kube.core.delete_namespaced_pod("notebook", gpu_workload.namespace)
    wait_for(lambda: not _running(kube, gpu_workload), TIMEOUT_S, "the GPU pod to go")


@then("the GPU pod without a controller still runs")
def bare_pod_runs(kube: Cluster, gpu_workload: GpuWorkload) -> None:
    running = {p.metadata.uid: p.metadata.name for p in _running(kube, gpu_workload)}
    assert running == gpu_workload.pods, f"GPU pods now {running}, before {gpu_workload.pods}"


@given("a PodDisruptionBudget allows no disruption of the GPU pods")
def budget_blocks(kube: Cluster, gpu_workload: GpuWorkload) -> None:
    policy = client.PolicyV1Api(kube.api)
    policy.create_namespaced_pod_disruption_budget(gpu_workload.namespace, {
        "metadata": {"name": f"{WORKLOAD}-budget"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": WORKLOAD}}}})
    wait_for(lambda: policy.read_namespaced_pod_disruption_budget(
        f"{WORKLOAD}-budget", gpu_workload.namespace).status.observed_generation, 30,
        "the disruption controller to observe the budget")


@given(parsers.parse('the ClusterPolicy names the team\'s mig-parted config, which adds "{config}" with {count:d} '
                     '"{profile}" per GPU'))
def custom_config(kube: Cluster, config: str, count: int, profile: str) -> None:
    """A ConfigMap of the platform team's (the reset removes it and puts the chart's ClusterPolicy back)."""
    configs = {"all-disabled": [{"devices": "all", "mig-enabled": False}],
               "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
               config: [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: count}}]}
    kube.core.create_namespaced_config_map(kube.operator_namespace, {
        "metadata": {"name": "team-mig-parted-config"},
        "data": {"config.yaml": yaml.safe_dump({"version": "v1", "mig-configs": configs})}})
    kube.custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy",
                                            {"spec": {"migManager": {"config": {"name": "team-mig-parted-config"}}}})


@pytest.fixture
def node_annotations(kube: Cluster) -> Iterator[list[tuple[str, str]]]:
    """(node, annotation) the scenario set on the simulated hardware; removed afterwards."""
    added: list[tuple[str, str]] = []
    yield added
    for node, key in added:
        _node_annotation(kube, node, key, None)


@given(parsers.parse('the MIG manager of "{node}" never finishes'))
def mig_manager_stalls(kube: Cluster, node_annotations: list[tuple[str, str]], node: str) -> None:
    if not kube.embedded:
        pytest.skip("a MIG manager that never finishes is a simulator annotation; embedded cluster only")
    _node_annotation(kube, node, STALL, "true")
    node_annotations.append((node, STALL))


@dataclass
class StateWatch:
    """Every value nvidia.com/mig.config.state of a node takes while the scenario runs."""

    states: list[str | None] = field(default_factory=list)
    stream: watch.Watch = field(default_factory=watch.Watch)
    stopped: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def mig_states(kube: Cluster) -> Iterator[dict[str, StateWatch]]:
    watches: dict[str, StateWatch] = {}
    yield watches
    for seen in watches.values():
        seen.stopped.set()
        seen.stream.stop()


@given(parsers.parse('a MIG mode change on "{node}" needs a reboot'))
def reboot_needed(kube: Cluster, node_annotations: list[tuple[str, str]], mig_states: dict[str, StateWatch],
                  node: str) -> None:
    if not kube.embedded:
        pytest.skip("a MIG change that needs a reboot is a simulator annotation; embedded cluster only")
    _node_annotation(kube, node, REBOOT, "true")
    node_annotations.append((node, REBOOT))
    seen = mig_states[node] = StateWatch()
    started = threading.Event()

    def record() -> None:
        version = kube.core.list_node(field_selector=f"metadata.name={node}").metadata.resource_version
        started.set()
        try:
            for event in seen.stream.stream(kube.core.list_node, field_selector=f"metadata.name={node}",
                                            resource_version=version, timeout_seconds=600):
                state = (event["object"].metadata.labels or {}).get(MIG_STATE)
                if not seen.states or seen.states[-1] != state:
                    seen.states.append(state)
        except Exception:
            if not seen.stopped.is_set():
                raise

    threading.Thread(target=record, name=f"mig-states-{node}", daemon=True).start()
    assert started.wait(10), "the watch of the node did not start"


@pytest.fixture
def deploy_labels(kube: Cluster) -> Iterator[list[tuple[str, str]]]:
    changed: list[tuple[str, str]] = []
    yield changed
    for node, key in changed:
        kube.core.patch_node(node, {"metadata": {"labels": {key: "true"}}})


@given(parsers.parse('the operator has turned off "{component}" on "{node}"'))
def component_off(kube: Cluster, deploy_labels: list[tuple[str, str]], component: str, node: str) -> None:
    key = f"nvidia.com/gpu.deploy.{component}"
    kube.core.patch_node(node, {"metadata": {"labels": {key: "false"}}})
    deploy_labels.append((node, key))


def _restart_device_plugin(kube: Cluster, node: str) -> None:
    for pod in kube.core.list_namespaced_pod(kube.operator_namespace, label_selector="app=nvidia-device-plugin-daemonset",
                                             field_selector=f"spec.nodeName={node}").items:
        kube.core.delete_namespaced_pod(pod.metadata.name, kube.operator_namespace)


@pytest.fixture
def mig_by_hand_nodes(kube: Cluster) -> Iterator[list[tuple[str, str]]]:
    """(node, its whole cards) a scenario put in MIG mode by hand: back to whole cards afterwards,
    the device plugin restarted onto them."""
    nodes: list[tuple[str, str]] = []
    yield nodes
    for node, gpus in nodes:
        _node_annotation(kube, node, LAYOUT, None)
        _restart_device_plugin(kube, node)
        wait_for(lambda: (kube.node(node).status.allocatable or {}).get("nvidia.com/gpu") == gpus, TIMEOUT_S,
                 f"{node} to advertise its {gpus} whole cards again")


@given(parsers.parse('MIG was enabled by hand on "{node}" with {count:d} "{profile}" per GPU'))
def mig_by_hand(kube: Cluster, mig_by_hand_nodes: list[tuple[str, str]], node: str, count: int, profile: str) -> None:
    """nvidia-smi on the node, no MIG manager (its label keeps saying all-disabled): the simulated
    hardware's layout, then the device plugin restarted onto it (a MIG mode change resets the cards)."""
    if not kube.embedded:
        pytest.skip("enabling MIG by hand changes the simulated hardware; embedded cluster only")
    gpus = int((kube.node(node).metadata.labels or {})["nvidia.com/gpu.count"])
    _node_annotation(kube, node, LAYOUT, json.dumps([[profile] * count] * gpus))
    mig_by_hand_nodes.append((node, str(gpus)))
    _restart_device_plugin(kube, node)
    wait_for(lambda: (kube.node(node).metadata.labels or {}).get("nvidia.com/gpu.product", "").endswith(f"-MIG-{profile}")
             and (kube.node(node).status.allocatable or {}).get("nvidia.com/gpu") == str(count * gpus), TIMEOUT_S,
             f"GFD to label {node}'s MIG devices and the device plugin to advertise them")


@pytest.fixture
def joined_nodes(kube: Cluster) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        try:
            kube.core.delete_node(name)
        except ApiException as err:
            if err.status != 404:
                raise
    wait_for(lambda: not [n for n in kube.core.list_node().items if n.metadata.name in names], TIMEOUT_S,
             f"nodes {names} to be gone")


@given(parsers.parse('a GPU node without MIG, "{node}" with an {product}, has joined'))
def node_without_mig(kube: Cluster, joined_nodes: list[str], node: str, product: str) -> None:
    if not kube.embedded:
        pytest.skip("adds a simulated node; embedded cluster only")
    kube.core.create_node(FleetNode(node, 1, product).manifest())
    joined_nodes.append(node)
    wait_for(lambda: (kube.node(node).metadata.labels or {}).get("nvidia.com/gpu.count") == "1", TIMEOUT_S,
             f"the GPU Operator to label {node}")


@given(parsers.parse('MIG config "{config}" was enabled on "{node}" by the runbook'))
def mig_enabled(kube: Cluster, tmp_path: Path, run_counter: Iterator[int], runbook_inventory: Path,
                runbook_inputs: dict[str, Any], config: str, node: str) -> None:
    done = _run(kube, tmp_path, run_counter, runbook_inventory, runbook_inputs,
                f"enable-mig.yml -l {node} -e mig_config={config}")
    assert done.run.ok, done.describe()


@given("the ClusterPolicy sets WITH_REBOOT for the MIG manager")
def with_reboot(kube: Cluster) -> None:
    """migManager.env (the operator sets no WITH_REBOOT of its own; the reset puts the chart's spec back)."""
    kube.custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy",
                                            {"spec": {"migManager": {"env": [{"name": "WITH_REBOOT", "value": "true"}]}}})

    def rendered() -> bool:
        pods = kube.core.list_namespaced_pod(kube.operator_namespace, label_selector=f"app={MIG_MANAGER}").items
        return bool(pods) and all(p.status.phase == "Running" and not p.metadata.deletion_timestamp and any(
            e.name == "WITH_REBOOT" for e in p.spec.containers[0].env or []) for p in pods)

    wait_for(rendered, TIMEOUT_S, "the MIG manager pods to run with WITH_REBOOT")


@pytest.fixture
def held_pods(kube: Cluster) -> Iterator[list[tuple[str, str]]]:
    """(namespace, pod) a scenario holds with a finalizer; released afterwards."""
    held: list[tuple[str, str]] = []
    yield held
    for namespace, name in held:
        _release(kube, namespace, name)


def _release(kube: Cluster, namespace: str, name: str) -> None:
    try:
        kube.core.patch_namespaced_pod(name, namespace, [{"op": "remove", "path": "/metadata/finalizers"}])
    except ApiException as err:
        if err.status not in (404, 422):
            raise


@given(parsers.parse('a GPU client pod on "{node}" never stops'))
def client_never_stops(kube: Cluster, node_annotations: list[tuple[str, str]], held_pods: list[tuple[str, str]],
                       node: str) -> None:
    """The DCGM exporter's pod held Terminating by a finalizer; the simulated MIG manager waits 3 s for
    its clients instead of 5 minutes (the runs say -e mig_manager_client_timeout=3 to match)."""
    if not kube.embedded:
        pytest.skip("holds an operand pod and shortens the simulated MIG manager's wait; embedded cluster only")
    [pod] = kube.core.list_namespaced_pod(kube.operator_namespace, label_selector="app=nvidia-dcgm-exporter",
                                          field_selector=f"spec.nodeName={node}").items
    kube.core.patch_namespaced_pod(pod.metadata.name, kube.operator_namespace, {"metadata": {"finalizers": [HOLD]}})
    held_pods.append((kube.operator_namespace, pod.metadata.name))
    _node_annotation(kube, node, CLIENT_TIMEOUT, "3")
    node_annotations.append((node, CLIENT_TIMEOUT))


@given(parsers.parse('the MIG manager of "{node}" discovers no MIG profile'))
def discovery_finds_nothing(kube: Cluster, node_annotations: list[tuple[str, str]], node: str) -> None:
    """As with an older driver: the MIG manager falls back to the operator's default-mig-parted-config
    (it decides at its start, so it restarts; its generated <node>-mig-config goes with its old pod)."""
    if not kube.embedded:
        pytest.skip("MIG profile discovery is the simulated hardware's; embedded cluster only")
    _node_annotation(kube, node, DISCOVERY, "none")
    node_annotations.append((node, DISCOVERY))
    _restart_mig_manager(kube, node)
    wait_for(lambda: not kube.core.list_namespaced_config_map(
        kube.operator_namespace, field_selector=f"metadata.name={node}-mig-config").items, TIMEOUT_S,
        f"{node}-mig-config to go with the MIG manager's old pod")


def _restart_mig_manager(kube: Cluster, node: str) -> None:
    pods = kube.core.list_namespaced_pod(kube.operator_namespace, label_selector=f"app={MIG_MANAGER}",
                                         field_selector=f"spec.nodeName={node}").items
    old = {p.metadata.uid for p in pods}
    for pod in pods:
        kube.core.delete_namespaced_pod(pod.metadata.name, kube.operator_namespace)

    def new_one_runs() -> bool:
        now = kube.core.list_namespaced_pod(kube.operator_namespace, label_selector=f"app={MIG_MANAGER}",
                                            field_selector=f"spec.nodeName={node}").items
        return any(p.metadata.uid not in old and p.status.phase == "Running" for p in now)

    wait_for(new_one_runs, TIMEOUT_S, f"a new MIG manager pod on {node}")


# ---- when ---------------------------------------------------------------------------------------
@when(parsers.parse('the operator reboots "{node}"'))
def reboot(kube: Cluster, node: str) -> None:
    """What a reboot does to the simulated node: the MIG mode set before it takes effect, and the
    MIG manager starts again, applying the node's label (its state leaves `failed`)."""
    if not kube.embedded:
        pytest.skip("reboots a simulated node; embedded cluster only")
    _node_annotation(kube, node, REBOOT, None)
    _restart_mig_manager(kube, node)
    wait_for(lambda: (kube.node(node).metadata.labels or {}).get(MIG_STATE) == "success", TIMEOUT_S,
             f"the MIG manager of {node} to apply its config after the reboot")


@when("the GPU client pod stops")
def client_stops(kube: Cluster, held_pods: list[tuple[str, str]]) -> None:
    for namespace, name in held_pods:
        _release(kube, namespace, name)
        wait_for(lambda name=name: not kube.core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}").items,
                 TIMEOUT_S, f"pod {namespace}/{name} to go")


@when(parsers.parse('the operator restarts the MIG manager of "{node}"'))
def restart_mig_manager(kube: Cluster, node: str) -> None:
    _restart_mig_manager(kube, node)
@when("the operator deletes the PodDisruptionBudget of the GPU pods")
def delete_budget(kube: Cluster, gpu_workload: GpuWorkload) -> None:
    client.PolicyV1Api(kube.api).delete_namespaced_pod_disruption_budget(f"{WORKLOAD}-budget", gpu_workload.namespace)


@when(parsers.parse('the MIG manager of "{node}" recovers'))
def mig_manager_recovers(kube: Cluster, node: str) -> None:
    _node_annotation(kube, node, STALL, None)


# ---- then ---------------------------------------------------------------------------------------
def _said(run: RunbookRun) -> str:
    return " ".join((" ".join(run.run.failure_messages()) + " " + run.run.stdout).split())


@then(parsers.parse('the run fails saying "{message}"'))
def run_fails(runbook_run: RunbookRun, message: str) -> None:
    """What the operator reads: the quiet callback's output."""
    assert not runbook_run.run.ok, f"the run did not fail: {runbook_run.describe()}"
    shown = " ".join(runbook_run.run.stdout.split())
    assert message in shown, f"{message!r} not in what the run printed: {shown[-3000:]}"


def _table_row(stdout: str, first: str) -> list[str] | None:
    """The cells of the first table line whose first cell is `first` (cells: 2+ spaces apart)."""
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] == first:
            return cells
    return None


@then(parsers.parse('the report shows "{node}" going from "{before}" to "{after}"'))
def report_shows(runbook_run: RunbookRun, node: str, before: str, after: str) -> None:
    out = runbook_run.run.stdout
    report = out[out.index("Done (") if "Done (" in out else 0:]
    assert _table_row(report, node), f"no table of {node} in the report:\n{report[-2000:]}"
    assert _table_row(report, "nvidia.com/mig.config") == ["nvidia.com/mig.config", before, after], report[-2000:]


def _change_records(runbook_inputs: dict[str, Any]) -> list[Path]:
    return sorted(Path(runbook_inputs["mig_report_dir"]).glob("*.md"), key=lambda p: p.stat().st_mtime)


@then(parsers.re(r"a change record of the run is in the reports folder, (?P<what>with the node before and after|"
                 r"saying it failed)$"))
def change_record_written(runbook_run: RunbookRun, runbook_inputs: dict[str, Any], what: str) -> None:
    records = _change_records(runbook_inputs)
    assert records, f"no change record in {runbook_inputs['mig_report_dir']}"
    text = records[-1].read_text()
    assert runbook_run.command.split()[0] in text, text[:500]
    assert "| nvidia.com/mig.config |" in text and "## Nodes before and after" in text, text
    if what == "saying it failed":
        assert "| Outcome | **failed**" in text, text
    else:
        assert "| Outcome | **done**" in text, text


@then(parsers.parse('the run record keeps the MIG config "{node}" had before'))
def run_record_keeps(kube: Cluster, before: Before, node: str) -> None:
    records = kube.core.list_namespaced_config_map(kube.records_namespace, label_selector="gpushare.io/run=enable-mig").items
    assert len(records) == 1, [r.metadata.name for r in records]
    saved = json.loads(records[0].data["intent.json"])["node_labels"][node]
    assert saved["nvidia.com/mig.config"] == before.nodes[node]["labels"]["nvidia.com/mig.config"], saved
    assert records[0].metadata.annotations["gpushare.io/state"] == "complete"
    assert records[0].metadata.annotations["gpushare.io/command"].startswith("ansible-playbook")


@then(parsers.parse('every GPU node but "{node}" is exactly as before'))
def others_unchanged(kube: Cluster, before: Before, node: str) -> None:
    _unchanged(kube, before, [n for n in before.nodes if n != node])


@then("the GPU pods were evicted after the cordon and before the MIG config changed")
def evicted_in_order(runbook_run: RunbookRun, gpu_workload: GpuWorkload) -> None:
    if runbook_run.writes is None:
        pytest.skip("the order of the requests is read from the embedded cluster's audit log")
    node_uri = f"/api/v1/nodes/{gpu_workload.node}"
    patches = [i for i, w in enumerate(runbook_run.writes) if w["verb"] == "patch" and w["requestURI"].startswith(node_uri)]
    evictions = [i for i, w in enumerate(runbook_run.writes) if w["requestURI"].endswith("/eviction")
                 and f"/namespaces/{gpu_workload.namespace}/" in w["requestURI"]]
    assert len(evictions) == len(gpu_workload.pods), [w["requestURI"] for w in runbook_run.writes]
    assert len(patches) == 3, f"cordon, MIG config, uncordon: {[runbook_run.writes[i]['requestURI'] for i in patches]}"
    assert patches[0] < min(evictions) and max(evictions) < patches[1], [w["requestURI"] for w in runbook_run.writes]


@then(parsers.parse("the GPU workload has its {count:d} pods running again"))
def workload_back(kube: Cluster, gpu_workload: GpuWorkload, count: int) -> None:
    wait_for(lambda: len(_running(kube, gpu_workload)) == count, TIMEOUT_S,
             f"{count} pods of {gpu_workload.namespace}/{WORKLOAD} Running on {gpu_workload.node}")
    assert not {p.metadata.uid for p in _running(kube, gpu_workload)} & set(gpu_workload.pods), "a pod was never evicted"


@then("the failure names the PodDisruptionBudget of the GPU pods")
def failure_names_budget(runbook_run: RunbookRun, gpu_workload: GpuWorkload) -> None:
    said = _said(runbook_run)
    assert f"PodDisruptionBudget {gpu_workload.namespace}/{WORKLOAD}-budget" in said, said[-2000:]
    assert all(f"{gpu_workload.namespace}/{name}" in said for name in gpu_workload.pods.values()), said[-2000:]


@then(parsers.parse('the plan placed "{workload}" on "{profile}" with {placed:d} of {wanted:d} replicas'))
def plan_placed(runbook_run: RunbookRun, workload: str, profile: str, placed: int, wanted: int) -> None:
    row = _table_row(runbook_run.run.stdout, workload)
    assert row, f"no row for {workload} in the plan:\n{runbook_run.run.stdout[-3000:]}"
    assert row[2] == profile and row[3].startswith(f"{placed} of {wanted}"), row


def _fragmentation(stdout: str, kind: str) -> dict[str, int]:
    row = _table_row(stdout, kind)
    assert row and len(row) == 6, f"no fragmentation row for {kind}:\n{stdout[-3000:]}"
    return dict(zip(("before", "after", "used", "free"), (int(c) for c in row[2:])))


@then(parsers.parse('the output shows the fragmentation table with {before:d} "{old}" before and {after:d} "{new}" after'))
def fragmentation_before_after(runbook_run: RunbookRun, before: int, old: str, after: int, new: str) -> None:
    assert _fragmentation(runbook_run.run.stdout, old)["before"] == before
    assert _fragmentation(runbook_run.run.stdout, new)["after"] == after


@then(parsers.parse('the output shows the fragmentation table with {free:d} "{kind}" left free'))
def fragmentation_free(runbook_run: RunbookRun, free: int, kind: str) -> None:
    assert _fragmentation(runbook_run.run.stdout, kind)["free"] == free


@then(parsers.parse('the MIG manager of "{node}" went through "{first}" before "{last}"'))
def went_through(mig_states: dict[str, StateWatch], node: str, first: str, last: str) -> None:
    states = mig_states[node].states
    assert first in states and last in states[states.index(first):], states
