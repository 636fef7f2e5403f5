"""The embedded cluster is real Kubernetes: the real scheduler places GPU pods, KWOK runs them,
drains go through the eviction API, and the audit log records every write."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import ansible_runner
import pytest
import yaml
from kubernetes import client

from gpushare_testbed.fleet import load_fleet
from gpushare.kube import api_client
from gpushare.polling import wait_for
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster

pytestmark = pytest.mark.cluster


@pytest.fixture
def namespace(clean_cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    clean_cluster.core.create_namespace({"metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: "embedded"}}})
    wait_for(lambda: clean_cluster.core.read_namespaced_service_account("default", name), 30, "default SA")
    yield name


def gpu_pod(name: str, gpus: int, node: str | None = None) -> dict:
    spec: dict = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        "terminationGracePeriodSeconds": 0,
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_binaries_report_their_real_versions(cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("checks the embedded cluster's own binaries")
    versions = (Path(__file__).resolve().parents[2] / "build" / "versions.env").read_text()
    pinned = dict(line.split("=", 1) for line in versions.splitlines() if "=" in line and not line.startswith("#"))
    run = lambda *a: subprocess.run(a, capture_output=True, text=True, check=True).stdout  # noqa: E731
    assert run(str(cluster.bin_dir / "kube-apiserver"), "--version").strip() == f"Kubernetes {pinned['KUBERNETES_VERSION']}"
    assert f"Client Version: {pinned['KUBERNETES_VERSION']}" in run(str(cluster.bin_dir / "kubectl"), "version", "--client")
    assert f"etcd Version: {pinned['ETCD_VERSION'].lstrip('v')}" in run(str(cluster.bin_dir / "etcd"), "--version")
    assert pinned["KWOK_VERSION"] in run(str(cluster.bin_dir / "kwok"), "--version")
    server = cluster.kubectl("version", "-o", "yaml").stdout
    assert yaml.safe_load(server)["serverVersion"]["gitVersion"] == pinned["KUBERNETES_VERSION"]


def test_every_fleet_node_is_ready_with_its_gpus(clean_cluster: Cluster) -> None:
    if not clean_cluster.embedded:
        pytest.skip("compares against the embedded cluster's fleet file")
    nodes = {n.metadata.name: n for n in clean_cluster.core.list_node().items}
    for expected in load_fleet().nodes:
        node = nodes[expected.name]
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
        assert node.status.allocatable.get("nvidia.com/gpu", "0") == str(expected.gpus)
        assert node.status.capacity.get("nvidia.com/gpu", "0") == str(expected.gpus)
        assert (node.metadata.labels or {}).get("nvidia.com/gpu.count", "0") == str(expected.gpus)


def test_fleet_nodes_register_with_the_status_a_kubelet_sends(cluster: Cluster) -> None:
    """A kubelet registers its node with its labels and status (Ready, addresses, node info): KWOK, which
    writes an empty Hostname, has nothing to initialize, and no node waits not-ready meanwhile."""
    if not cluster.embedded:
        pytest.skip("the embedded cluster's own registration")
    nodes = {n.metadata.name: n for n in cluster.core.list_node().items}
    for expected in load_fleet().nodes:
        status = nodes[expected.name].status
        assert [(a.type, a.address) for a in status.addresses] == [("InternalIP", "10.0.0.1"), ("Hostname", expected.name)]
        assert status.node_info.kubelet_version.startswith("kwok-") and status.node_info.operating_system == "linux"
        labels = nodes[expected.name].metadata.labels
        assert (labels["beta.kubernetes.io/os"], labels["beta.kubernetes.io/arch"]) == ("linux", "amd64")


def test_scheduler_places_a_gpu_deployment_on_a_gpu_node(clean_cluster: Cluster, namespace: str) -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-app"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gpu-app"}},
                 "template": {"metadata": {"labels": {"app": "gpu-app"}}, "spec": gpu_pod("x", 1)["spec"]}},
    }
    clean_cluster.apps.create_namespaced_deployment(namespace, deployment)

    def running_pod():
        pods = clean_cluster.core.list_namespaced_pod(namespace, label_selector="app=gpu-app").items
        return next((p for p in pods if p.status.phase == "Running"), None)

    pod = wait_for(running_pod, 30, "the GPU Deployment's pod to run")
    node = clean_cluster.node(pod.spec.node_name)
    assert node.metadata.labels.get("nvidia.com/gpu.present") == "true"


def test_ninth_gpu_pod_on_an_eight_gpu_node_stays_pending(clean_cluster: Cluster, namespace: str) -> None:
    for index in range(8):
        clean_cluster.core.create_namespaced_pod(namespace, gpu_pod(f"gpu-{index}", 1, "gpu-node-2"))
    wait_for(lambda: sum(p.status.phase == "Running" for p in clean_cluster.core.list_namespaced_pod(namespace).items) == 8,
             30, "8 one-GPU pods running on gpu-node-2")
    clean_cluster.core.create_namespaced_pod(namespace, gpu_pod("gpu-ninth", 1, "gpu-node-2"))

    def unschedulable_reason():
        pod = clean_cluster.core.read_namespaced_pod("gpu-ninth", namespace)
        cond = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
        return cond.message if cond is not None and cond.reason == "Unschedulable" else None

    message = wait_for(unschedulable_reason, 30, "the scheduler to report the ninth pod unschedulable")
    assert "Insufficient nvidia.com/gpu" in message
    assert clean_cluster.core.read_namespaced_pod("gpu-ninth", namespace).status.phase == "Pending"


DRAIN_PLAYBOOK = """
- name: Cordon and drain a node
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Drain the node through the eviction API
      kubernetes.core.k8s_drain:
        kubeconfig: "{{ kubeconfig }}"
        name: "{{ node }}"
        state: drain
        delete_options:
          ignore_daemonsets: true
          terminate_grace_period: 0
          wait_timeout: 60
"""


def pod_ready(cluster: Cluster, namespace: str, name: str) -> bool:
    conditions = cluster.core.read_namespaced_pod(name, namespace).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def test_a_pod_marked_not_ready_while_its_node_was_away_is_ready_again(clean_cluster: Cluster, namespace: str) -> None:
    """The node lifecycle controller marks a lapsed node's pods not Ready; the kubelet, reporting
    again, sets them back (a kube-apiserver or etcd restart can let the leases lapse)."""
    if not clean_cluster.embedded:
        pytest.skip("marks a pod not Ready as the node lifecycle controller would: embedded cluster only")
    clean_cluster.core.create_namespaced_pod(namespace, gpu_pod("steady", 1, "gpu-node"))
    wait_for(lambda: pod_ready(clean_cluster, namespace, "steady"), 60, "the pod to be Ready")
    clean_cluster.core.patch_namespaced_pod_status("steady", namespace, {"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "NodeNotReady"}]}})
    wait_for(lambda: pod_ready(clean_cluster, namespace, "steady"), 60, "the pod to be Ready again")


def test_drain_through_ansible_evicts_pods_and_is_audited(clean_cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "drained"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "drained"}},
                 "template": {"metadata": {"labels": {"app": "drained"}}, "spec": gpu_pod("x", 1, "gpu-node-2")["spec"]}},
    }
    clean_cluster.apps.create_namespaced_deployment(namespace, deployment)

    def running_names() -> set[str]:
        pods = clean_cluster.core.list_namespaced_pod(namespace).items
        return {p.metadata.name for p in pods if p.status.phase == "Running" and p.spec.node_name == "gpu-node-2"}

    drained = wait_for(lambda: (names := running_names()) and len(names) == 2 and names, 30, "2 pods running on gpu-node-2")
    mark = clean_cluster.audit_mark() if clean_cluster.embedded else 0
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "drain.yml").write_text(DRAIN_PLAYBOOK)
    result = ansible_runner.run(
        private_data_dir=str(tmp_path), playbook="drain.yml", quiet=True,
        extravars={"kubeconfig": str(clean_cluster.kubeconfig), "node": "gpu-node-2"},
        envvars={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                 "ANSIBLE_PYTHON_INTERPRETER": sys.executable},
    )
    assert (result.status, result.rc) == ("successful", 0), result.stdout.read()
    wait_for(lambda: not running_names(), 30, "no pod of the Deployment left running on gpu-node-2")
    assert clean_cluster.node("gpu-node-2").spec.unschedulable
    if not clean_cluster.embedded:
        return
    writes = clean_cluster.audit_writes(mark)
    evictions = [w for w in writes if w["objectRef"].get("subresource") == "eviction"]
    assert {e["objectRef"]["name"] for e in evictions} == drained
    assert any(w["verb"] == "patch" and w["objectRef"]["resource"] == "nodes" for w in writes)


def test_sim_up_is_idempotent(cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("embedded cluster command")
    env = {**os.environ, "GPUSHARE_STATE_DIR": str(cluster.state_dir)}
    again = subprocess.run([sys.executable, "-m", "gpushare", "sim", "up"], capture_output=True, text=True, env=env, check=True)
    assert "already running" in again.stdout
    status = subprocess.run([sys.executable, "-m", "gpushare", "sim", "status"], capture_output=True, text=True, env=env, check=True)
    assert "kube-scheduler           running" in status.stdout and "gpu-node-2" in status.stdout


def _argv(cluster: Cluster, component: str) -> list[str]:
    return json.loads((cluster.state_dir / "pids" / f"{component}.pid").read_text())["argv"]


def test_no_local_user_gets_past_rbac_and_the_audit_log(cluster: Cluster) -> None:
    """The API server refuses anonymous requests (401); etcd speaks TLS only and takes no client
    without a certificate of the cluster's CA (the API server's), so a local user of a shared CI
    host can neither read it over plain HTTP nor over TLS without that certificate."""
    if not cluster.embedded:
        pytest.skip("the embedded cluster's own processes")
    server = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    anonymous = ssl.create_default_context(cafile=str(cluster.state_dir / "pki" / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{server}/api/v1/namespaces", context=anonymous, timeout=5)  # noqa: S310
    assert refused.value.code == 401
    (etcd,) = [a.split("=", 1)[1] for a in _argv(cluster, "kube-apiserver") if a.startswith("--etcd-servers=")]
    assert etcd.startswith("https://127.0.0.1:"), etcd
    with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
        urllib.request.urlopen(etcd.replace("https://", "http://") + "/v3/kv/range", data=b'{"key":"Lw=="}', timeout=5)  # noqa: S310
    with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
        urllib.request.urlopen(f"{etcd}/v3/kv/range", data=b'{"key":"Lw=="}', context=anonymous, timeout=5)  # noqa: S310
    assert "--client-cert-auth=true" in _argv(cluster, "etcd")


def test_the_sim_inventory_runs_the_runbooks_as_the_runbook_identity(cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("the embedded cluster's inventory")
    script = Path(__file__).resolve().parents[2] / "inventories" / "sim" / "embedded_cluster.py"
    listed = subprocess.run([sys.executable, str(script), "--list"], capture_output=True, text=True, check=True, timeout=60,
                            env={**os.environ, "GPUSHARE_STATE_DIR": str(cluster.state_dir)})
    inventory = json.loads(listed.stdout)
    assert inventory["all"]["vars"]["gpushare_kubeconfig"] == str(cluster.state_dir / "kubeconfigs" / "runbook.yaml")
    assert inventory["gpu_nodes"]["hosts"] == cluster.gpu_nodes()


def test_the_dcgm_exporter_simulator_only_reads_nodes(cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("the embedded cluster's own components")
    api = client.AuthorizationV1Api(api_client(cluster.state_dir / "kubeconfigs" / "dcgm-exporter.yaml"))

    def may(verb: str, resource: str) -> bool:
        attributes = client.V1ResourceAttributes(verb=verb, resource=resource)
        return bool(api.create_self_subject_access_review(client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes))).status.allowed)

    assert may("list", "nodes") and may("watch", "nodes")
    assert not any(may(verb, resource) for verb, resource in (
        ("patch", "nodes"), ("create", "pods"), ("list", "secrets"), ("create", "clusterrolebindings")))
