"""The GPU Operator simulator on the embedded cluster, driven with the seed's own commands
(`kubectl apply -f` of its ConfigMap, `kubectl patch` of the ClusterPolicy, `kubectl rollout
restart`, `kubectl label node`). Each test traces to shared/reference/gpu-operator-contract.md.

The same tests run against kind with `gpushare sim gpu-operator` (see tests/conftest.py); the
nodes' physical GPU counts are read from the cluster, not assumed."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch

from gpushare.device_plugin_config import LOAD_ERROR
from gpushare.fleet import HARDWARE_ANNOTATION
from gpushare.gpu_catalog import product
from gpushare.kube import wait_for
from gpushare.simulator import clusterpolicy as cp
from tests.support.seed import seed_config
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(autouse=True)
def simulated_gpus(cluster: Cluster) -> None:
    """These tests reconfigure every GPU node the seed's way: only where our simulator plays the GPUs."""
    if not any(HARDWARE_ANNOTATION in (n.metadata.annotations or {}) for n in cluster.core.list_node().items):
        pytest.skip("needs the GPU Operator simulator (nodes annotated sim.gpushare.io/gpus); not run on real GPUs")

CONFIGMAP = "time-slicing-config"
POLICY = "clusterpolicies.nvidia.com/cluster-policy"
SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"
MIG_NODE = "gpu-node-mig"  # 4 x A100-SXM4-40GB in the default fleet
TIMEOUT_S = 30  # functional bound for anything the simulator does; it normally takes well under 1 s




# ---- the seed's commands ---------------------------------------------------------------------
def apply_configmap(cluster: Cluster, tmp_path: Path, data: dict[str, str]) -> None:
    """`kubectl apply -f time-slicing-config.yaml`, the seed's ConfigMap with these keys."""
    entries = "".join(f"  {key}: |-\n{textwrap.indent(value, '    ')}\n" for key, value in data.items())
    manifest = tmp_path / "time-slicing-config.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        f"  name: {CONFIGMAP}\n  namespace: {cluster.operator_namespace}\ndata:\n{entries}"
    )
    cluster.kubectl("apply", "-f", str(manifest))


def patch_policy(cluster: Cluster, spec: dict[str, Any]) -> None:
    """`kubectl patch clusterpolicies.nvidia.com/cluster-policy -n <ns> --type merge -p ...` (the
    seed's `-n` has no effect on the cluster-scoped object and is kept as the seed writes it)."""
    patch = json.dumps({"spec": spec})
    cluster.kubectl("patch", POLICY, "-n", cluster.operator_namespace, "--type", "merge", "-p", patch)


def patch_policy_and_wait(cluster: Cluster, spec: dict[str, Any]) -> None:
    """Patch the ClusterPolicy and wait until the operator has re-rendered the DaemonSet (its hash
    changes) and the DaemonSet has rolled out. Waiting for the rollout alone is not enough: right
    after the patch the operator has not reacted yet, and the old DaemonSet looks rolled out."""
    before = daemonset_hash(cluster)
    patch_policy(cluster, spec)
    wait_for(
        lambda: daemonset_hash(cluster) != before, TIMEOUT_S, "the operator to re-render the device-plugin DaemonSet"
    )
    cluster.wait_plugin_rolled_out(TIMEOUT_S)


def point_plugin_at(cluster: Cluster, default_key: str) -> None:
    patch_policy_and_wait(cluster, {"devicePlugin": {"config": {"name": CONFIGMAP, "default": default_key}}})


def rollout_restart(cluster: Cluster) -> None:
    cluster.kubectl("rollout", "restart", "-n", cluster.operator_namespace, f"daemonset/{cp.DAEMONSET}")


def label_node(cluster: Cluster, node: str, key: str, value: str) -> None:
    cluster.kubectl("label", "node", node, f"{key}={value}", "--overwrite")


# ---- observations ----------------------------------------------------------------------------
def advertised(cluster: Cluster, node: str) -> tuple[dict[str, str], dict[str, str]]:
    """(nvidia.com allocatable, nvidia.com labels) of a node."""
    obj = cluster.node(node)
    allocatable = {k: v for k, v in (obj.status.allocatable or {}).items() if k.startswith("nvidia.com/")}
    labels = {k: v for k, v in (obj.metadata.labels or {}).items() if k.startswith("nvidia.com/")}
    return allocatable, labels


def physical_counts(cluster: Cluster) -> dict[str, int]:
    return {node: int(advertised(cluster, node)[1]["nvidia.com/gpu.count"]) for node in cluster.gpu_nodes()}


def plugin_pods(cluster: Cluster) -> dict[str, Any]:
    """The live device-plugin pod of each node."""
    pods = cluster.core.list_namespaced_pod(cluster.operator_namespace, label_selector=f"app={cp.DAEMONSET}").items
    return {p.spec.node_name: p for p in pods if p.metadata.deletion_timestamp is None}


def plugin_uids(cluster: Cluster) -> dict[str, str]:
    return {node: pod.metadata.uid for node, pod in plugin_pods(cluster).items()}


def daemonset_hash(cluster: Cluster) -> str:
    ds = cluster.apps.read_namespaced_daemon_set(cp.DAEMONSET, cluster.operator_namespace)
    return ds.metadata.annotations[cp.HASH_ANNOTATION]


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def shows_replicas(cluster: Cluster, node: str, physical: int, replicas: int) -> bool:
    allocatable, labels = advertised(cluster, node)
    if replicas == 1:
        return (
            allocatable.get(GPU) == str(physical)
            and SHARED not in allocatable
            and labels["nvidia.com/gpu.replicas"] == "1"
        )
    return (
        allocatable.get(SHARED) == str(physical * replicas)
        and allocatable.get(GPU) == "0"
        and labels["nvidia.com/gpu.replicas"] == str(replicas)
    )


def wait_all_show(cluster: Cluster, counts: dict[str, int], replicas: int) -> None:
    wait_for(
        lambda: all(shows_replicas(cluster, n, c, replicas) for n, c in counts.items()),
        TIMEOUT_S,
        f"every GPU node to advertise {replicas} replica(s) per GPU",
    )


def stays(probe: Callable[[], bool], seconds: float, what: str) -> None:
    """Assert that `probe` holds on every look for `seconds`: the bounded wait for a non-event."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert probe(), f"{what} changed within {seconds:.0f}s"
        time.sleep(0.2)


def label_history(cluster: Cluster, node: str, keys: tuple[str, ...], before: Any, until: set[str]) -> list[tuple]:
    """The successive values of the labels `keys` on `node` after its `before` version, up to the
    first key moving to a value in `until`. A watch from `before`'s resourceVersion replays every
    intermediate state, so a state held for a few milliseconds is still seen."""

    def values(obj: Any) -> tuple:
        return tuple((obj.metadata.labels or {}).get(k) for k in keys)

    seen = [values(before)]
    stream = watch.Watch()
    for event in stream.stream(
        cluster.core.list_node,
        field_selector=f"metadata.name={node}",
        resource_version=before.metadata.resource_version,
        timeout_seconds=TIMEOUT_S,
    ):
        current = values(event["object"])
        if current != seen[-1]:
            seen.append(current)
            if current[0] in until and any(v[0] != seen[0][0] for v in seen[1:-1] + [current]):
                stream.stop()
                break
    return seen[1:]


@pytest.fixture
def workload_namespace(clean_cluster: Cluster) -> Iterator[str]:
    """A scenario namespace (the reset deletes it); its pods are deleted first, which halves the
    namespace controller's work at the reset."""
    name = "gpu-admission"
    clean_cluster.kubectl("create", "namespace", name)
    clean_cluster.kubectl("label", "namespace", name, f"{TEST_NAMESPACE_LABEL}={name}")
    yield name
    clean_cluster.kubectl("delete", "pods", "--all", "-n", name, "--wait=false", check=False)


def gpu_pod(name: str, namespace: str, node: str, *requests: int) -> dict[str, Any]:
    containers = [
        {
            "name": f"check-{i}",
            "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
            "resources": {"limits": {SHARED: str(count)}},
        }
        for i, count in enumerate(requests)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": containers},
    }


# ---- tests -----------------------------------------------------------------------------------
def test_operator_objects_as_the_chart_creates_them(clean_cluster: Cluster) -> None:
    """Contract ("GPU Operator"): a cluster-scoped `cluster-policy` with no device-plugin config and
    MIG strategy single; the device-plugin DaemonSet's name, label, nodeSelector, toleration and
    update strategy; the operator's node labels."""
    cluster = clean_cluster
    crd = json.loads(cluster.kubectl("get", "crd", f"{cp.PLURAL}.{cp.GROUP}", "-o", "json").stdout)
    assert crd["spec"]["scope"] == "Cluster"
    policy = json.loads(cluster.kubectl("get", POLICY, "-o", "json").stdout)
    assert policy["spec"]["devicePlugin"]["config"] == {"name": "", "default": ""}
    assert policy["spec"]["mig"]["strategy"] == "single"
    wait_for(
        lambda: cluster.kubectl("get", POLICY, "-o", "jsonpath={.status.state}").stdout == "ready",
        TIMEOUT_S,
        "the ClusterPolicy to be ready",
    )

    ds = cluster.apps.read_namespaced_daemon_set(cp.DAEMONSET, cluster.operator_namespace)
    assert ds.metadata.labels["app"] == cp.DAEMONSET
    assert ds.spec.template.spec.node_selector == {"nvidia.com/gpu.deploy.device-plugin": "true"}
    assert any(
        t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" and t.operator == "Exists"
        for t in ds.spec.template.spec.tolerations
    )
    assert ds.spec.update_strategy.type == "RollingUpdate"
    gpu_nodes = cluster.gpu_nodes()
    assert sorted(plugin_pods(cluster)) == gpu_nodes, "one plugin pod per GPU node, none elsewhere"

    components = (
        "driver",
        "gpu-feature-discovery",
        "container-toolkit",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "node-status-exporter",
        "operator-validator",
    )
    for node in gpu_nodes:
        labels = advertised(cluster, node)[1]
        assert labels["nvidia.com/gpu.present"] == "true"
        assert all(labels[f"nvidia.com/gpu.deploy.{c}"] == "true" for c in components), labels
        assert labels["nvidia.com/mig.strategy"] == "single"
        mig_capable = product(labels["nvidia.com/gpu.product"]).mig_capable  # H100 and A100: yes
        assert (labels.get("nvidia.com/mig.config") == "all-disabled") == mig_capable, node
    assert advertised(cluster, "cpu-node") == ({}, {})


def test_policy_patch_rolls_the_plugin_and_shares_every_gpu_node(clean_cluster: Cluster, tmp_path: Path) -> None:
    """Contract: patching `spec.devicePlugin.config` rolls the device-plugin pods (new hash) and,
    because it sets `default`, changes EVERY GPU node at once (the seed's trap)."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    before_uids, before_hash = plugin_uids(cluster), daemonset_hash(cluster)
    apply_configmap(cluster, tmp_path, {"shared": seed_config(4)})
    point_plugin_at(cluster, "shared")
    wait_all_show(cluster, counts, 4)

    assert daemonset_hash(cluster) != before_hash
    after_uids = plugin_uids(cluster)
    assert set(after_uids) == set(before_uids) == set(counts)
    assert not set(after_uids.values()) & set(before_uids.values()), "every plugin pod is replaced"
    for node, physical in counts.items():
        allocatable, labels = advertised(cluster, node)
        assert allocatable[SHARED] == str(physical * 4) and allocatable[GPU] == "0"
        assert cluster.node(node).status.capacity[SHARED] == str(physical * 4)
        assert labels["nvidia.com/gpu.count"] == str(physical)  # physical, not replicas
        assert labels["nvidia.com/gpu.replicas"] == "4"
        assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
        assert not labels["nvidia.com/gpu.product"].endswith("-SHARED")  # renamed: no suffix
    assert not advertised(cluster, "cpu-node")[0], "a node without GPUs advertises none"


def test_configmap_edit_changes_nothing_until_rollout_restart(clean_cluster: Cluster, tmp_path: Path) -> None:
    """Contract: the operator does not watch ConfigMaps; an edit changes nothing (no hash change,
    no new pods, same allocatable) until `kubectl rollout restart`."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"shared": seed_config(4)})
    point_plugin_at(cluster, "shared")
    wait_all_show(cluster, counts, 4)
    uids, spec_hash = plugin_uids(cluster), daemonset_hash(cluster)

    apply_configmap(cluster, tmp_path, {"shared": seed_config(2)})
    # Nothing is supposed to happen, so there is no condition to wait for: watch for a bounded
    # window several times the simulator's reaction time (well under 1 s) and require that no look
    # in it sees a change. A regression that reacts to the ConfigMap shows up inside the window.
    stays(
        lambda: plugin_uids(cluster) == uids and all(shows_replicas(cluster, n, c, 4) for n, c in counts.items()),
        3,
        "the plugin pods or the nodes' allocatable",
    )
    assert daemonset_hash(cluster) == spec_hash

    rollout_restart(cluster)
    cluster.wait_plugin_rolled_out(TIMEOUT_S)
    wait_all_show(cluster, counts, 2)
    assert not set(plugin_uids(cluster).values()) & set(uids.values())
    assert daemonset_hash(cluster) == spec_hash, "a restart is not a spec change: the operator leaves it alone"


def test_node_label_changes_that_node_only(
    clean_cluster: Cluster, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """Contract: `nvidia.com/device-plugin.config=<key>` makes that node use that key; the
    config-manager reloads the plugin in place (no pod restart); other nodes keep `default`.
    Also measures the reaction time (label write -> node updated), reported, not asserted."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "shared": seed_config(4)})
    point_plugin_at(cluster, "whole")
    wait_all_show(cluster, counts, 1)
    uids = plugin_uids(cluster)
    others = {n: advertised(cluster, n) for n in counts if n != "gpu-node"}

    reactions = []
    for key, replicas in (("shared", 4), ("whole", 1), ("shared", 4), ("whole", 1), ("shared", 4)):
        written = time.monotonic()
        label_node(cluster, "gpu-node", cp.CONFIG_LABEL, key)
        acknowledged = time.monotonic()
        wait_for(
            lambda r=replicas: shows_replicas(cluster, "gpu-node", counts["gpu-node"], r),
            TIMEOUT_S,
            f"gpu-node to advertise {replicas} replica(s) per GPU",
            interval_s=0.02,
        )
        seen = time.monotonic()
        reactions.append((seen - acknowledged, seen - written))

    assert {n: advertised(cluster, n) for n in others} == others, "other GPU nodes are untouched"
    assert plugin_uids(cluster) == uids, "the config-manager reloads in place; no pod restarts"
    after_write = sorted(r[0] for r in reactions)
    end_to_end = sorted(r[1] for r in reactions)
    record_property("reaction_after_write_s", after_write)
    record_property("reaction_including_kubectl_s", end_to_end)
    print(
        f"\nreaction time, per-node label -> node updated, {len(reactions)} samples: "
        f"after the API write median {after_write[len(after_write) // 2]:.3f}s max {after_write[-1]:.3f}s; "
        f"including kubectl median {end_to_end[len(end_to_end) // 2]:.3f}s max {end_to_end[-1]:.3f}s"
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        # "`replicas < 2` -> error 'number of replicas must be >= 2'"
        pytest.param("broken", LOAD_ERROR + "number of replicas must be >= 2", id="replicas-1"),
        # "A key that does not exist in the ConfigMap makes the config-manager exit with
        # `specified config <key> does not exist`"
        pytest.param("no-such-key", "specified config no-such-key does not exist", id="missing-key"),
    ],
)
def test_bad_node_config_leaves_the_node_and_reports_it(
    clean_cluster: Cluster, tmp_path: Path, key: str, message: str
) -> None:
    """Contract (issue 3, item 4): an invalid config or a label naming a missing key leaves the node
    as it was, marks that node's plugin pod not Ready and records an Event with the upstream text."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"whole": "version: v1", "broken": seed_config(1)})
    point_plugin_at(cluster, "whole")
    wait_all_show(cluster, counts, 1)
    before = {n: advertised(cluster, n) for n in counts}

    label_node(cluster, "gpu-node", cp.CONFIG_LABEL, key)
    pod = wait_for(
        lambda: next((p for n, p in plugin_pods(cluster).items() if n == "gpu-node" and not pod_ready(p)), None),
        TIMEOUT_S,
        "the plugin pod on gpu-node to become not Ready",
    )
    events = wait_for(
        lambda: [
            e
            for e in cluster.core.list_namespaced_event(
                cluster.operator_namespace, field_selector=f"involvedObject.name={pod.metadata.name}"
            ).items
            if e.type == "Warning" and message in (e.message or "")
        ],
        TIMEOUT_S,
        f"an Event saying {message!r}",
    )
    assert events[0].involved_object.kind == "Pod"
    after = {n: advertised(cluster, n) for n in counts}
    after["gpu-node"][1].pop(cp.CONFIG_LABEL)
    assert after == before, "no node changes"
    assert all(pod_ready(p) for n, p in plugin_pods(cluster).items() if n != "gpu-node")

    # removing the label (the way back) makes the plugin load `default` again and become Ready
    cluster.kubectl("label", "node", "gpu-node", f"{cp.CONFIG_LABEL}-")
    wait_for(
        lambda: pod_ready(plugin_pods(cluster)["gpu-node"]), TIMEOUT_S, "the plugin pod on gpu-node to be Ready again"
    )
    assert {n: advertised(cluster, n) for n in counts} == before


def test_request_for_two_shared_replicas_fails_admission(
    clean_cluster: Cluster, workload_namespace: str, tmp_path: Path
) -> None:
    """Contract: with `failRequestsGreaterThanOne`, a container asking for 2 shared replicas ends
    Failed / UnexpectedAdmissionError with the plugin's message; 1 per container runs, even when a
    pod's containers together need 2 (the plugin validates each container's Allocate)."""
    cluster = clean_cluster
    counts = physical_counts(cluster)
    apply_configmap(cluster, tmp_path, {"shared": seed_config(4)})
    point_plugin_at(cluster, "shared")
    wait_all_show(cluster, counts, 4)
    namespace = workload_namespace
    pods = [
        gpu_pod("asks-two", namespace, "gpu-node", 2),
        gpu_pod("asks-one", namespace, "gpu-node", 1),
        gpu_pod("two-containers-one-each", namespace, "gpu-node", 1, 1),
    ]
    cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(p) for p in pods))

    def phase(name: str) -> str | None:
        return cluster.core.read_namespaced_pod(name, namespace).status.phase

    wait_for(lambda: phase("asks-two") == "Failed", TIMEOUT_S, "the 2-replica pod to fail admission")
    status = cluster.core.read_namespaced_pod("asks-two", namespace).status
    assert status.reason == "UnexpectedAdmissionError"
    assert (
        f'invalid allocation request for "{SHARED}": invalid request: maximum request size for shared '
        "resources is 1; found 2"
    ) in status.message
    wait_for(
        lambda: phase("asks-one") == "Running" and phase("two-containers-one-each") == "Running",
        TIMEOUT_S,
        "the 1-replica pods to run",
    )
    stays(lambda: phase("asks-two") == "Failed" and phase("asks-one") == "Running", 1, "the pods' phases")


@pytest.mark.parametrize("strategy", ["single", "mixed"])
def test_mig_label_round_trip(clean_cluster: Cluster, strategy: str) -> None:
    """Contract ("MIG"): `nvidia.com/mig.config` drives `mig.config.state` pending -> success | failed,
    pausing the GPU clients' deploy labels meanwhile; resources follow `spec.mig.strategy`."""
    cluster = clean_cluster
    if strategy == "mixed":
        patch_policy_and_wait(cluster, {"mig": {"strategy": "mixed"}})
    gpus = int(advertised(cluster, MIG_NODE)[1]["nvidia.com/gpu.count"])
    devices = gpus * 7  # all-1g.5gb: 7 per A100-40GB

    def relabel(config: str) -> list[str]:
        """`kubectl label node ... nvidia.com/mig.config=<config> --overwrite`; the states it went through."""
        before = cluster.node(MIG_NODE)
        label_node(cluster, MIG_NODE, "nvidia.com/mig.config", config)
        history = label_history(
            cluster,
            MIG_NODE,
            ("nvidia.com/mig.config.state", "nvidia.com/gpu.deploy.device-plugin"),
            before,
            {"success", "failed"},
        )
        # "While it works it sets the GPU clients' nvidia.com/gpu.deploy.* labels to
        # paused-for-mig-change and restores them after."
        assert ("pending", "paused-for-mig-change") in history, history
        assert history[-1][1] == "true", history
        return [state for i, (state, _) in enumerate(history) if i == 0 or history[i - 1][0] != state]

    def shows(resource: str, count: int, *labels: tuple[str, str]) -> bool:
        allocatable, node_labels = advertised(cluster, MIG_NODE)
        return allocatable.get(resource) == str(count) and all(node_labels.get(k) == v for k, v in labels)

    assert relabel("all-1g.5gb") == ["pending", "success"]
    if strategy == "single":
        expected: tuple[str, int, tuple[str, str]] = (
            GPU,
            devices,
            ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
        )
    else:
        expected = ("nvidia.com/mig-1g.5gb", devices, ("nvidia.com/mig-1g.5gb.count", str(devices)))
    wait_for(lambda: shows(*expected), TIMEOUT_S, f"{MIG_NODE} to advertise its MIG devices ({strategy})")
    if strategy == "mixed":
        assert advertised(cluster, MIG_NODE)[0][GPU] == "0"
    mig_view = advertised(cluster, MIG_NODE)

    assert relabel("all-7g.80gb") == ["pending", "failed"]  # no 80gb instance on a 40GB card
    stays(lambda: advertised(cluster, MIG_NODE)[0] == mig_view[0], 1, "the resources after a failed MIG change")

    assert relabel("all-disabled") == ["pending", "success"]
    wait_for(
        lambda: shows(GPU, gpus, ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB")),
        TIMEOUT_S,
        f"{MIG_NODE} to advertise whole cards again",
    )
    allocatable, labels = advertised(cluster, MIG_NODE)
    assert not [
        k for k in (*allocatable, *labels) if k.startswith("nvidia.com/mig-")
    ], "no MIG resources or labels left"
