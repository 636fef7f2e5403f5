"""Shared by the GPU Operator simulator's integration tests: the seed's own commands (`kubectl apply`,
`kubectl patch clusterpolicies...`, `kubectl label node`, `kubectl rollout restart`) and what the
tests observe (node resources and labels, operand pods by uid, DaemonSet hashes)."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch

from gpushare_testbed.fleet import HARDWARE_ANNOTATION
from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operands
from tests.support.cluster import Cluster

CONFIGMAP = "time-slicing-config"
POLICY = "clusterpolicies.nvidia.com/cluster-policy"
SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"
MIG_NODE = "gpu-node-mig"  # 4 x A100-SXM4-40GB in the default fleet
TIMEOUT_S = 60  # functional bound for anything the simulator does; it normally takes a few seconds
CHART_PLUGIN = cp.default_instance()["spec"]["devicePlugin"]["version"]  # the device plugin the chart renders
OLD_PLUGIN = "v0.17.4"  # before config-manager commit ab05acef5 (v0.18.2) and GFD's NodeFeature default (v0.19.0)
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"


@pytest.fixture(autouse=True)
def simulated_gpus(cluster: Cluster) -> None:
    """These tests reconfigure every GPU node the seed's way: only where our simulator plays the GPUs."""
    if not any(HARDWARE_ANNOTATION in (n.metadata.annotations or {}) for n in cluster.core.list_node().items):
        pytest.skip("needs the GPU Operator simulator (nodes annotated sim.gpushare.io/gpus); not run on real GPUs")


# ---- the seed's commands ---------------------------------------------------------------------
def apply_configmap(cluster: Cluster, tmp_path: Path, data: dict[str, str], name: str = CONFIGMAP) -> None:
    """`kubectl apply -f time-slicing-config.yaml`, the seed's ConfigMap with these keys."""
    entries = "".join(f"  {key}: |-\n{textwrap.indent(value, '    ')}\n" for key, value in data.items())
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        f"  name: {name}\n  namespace: {cluster.operator_namespace}\ndata:\n{entries}"
    )
    cluster.kubectl("apply", "-f", str(manifest))


def patch_policy(cluster: Cluster, spec: dict[str, Any]) -> None:
    """`kubectl patch clusterpolicies.nvidia.com/cluster-policy -n <ns> --type merge -p ...` (the
    seed's `-n` has no effect on the cluster-scoped object and is kept as the seed writes it)."""
    cluster.kubectl("patch", POLICY, "-n", cluster.operator_namespace, "--type", "merge", "-p", json.dumps({"spec": spec}))


def patch_policy_and_wait(cluster: Cluster, spec: dict[str, Any]) -> set[str]:
    """Patch the ClusterPolicy, wait until the operator has re-rendered what the patch changes and
    everything has rolled out; the DaemonSets whose hash changed."""
    before = daemonset_hashes(cluster)
    patch_policy(cluster, spec)
    policy = cluster.custom.get_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY)
    wanted = operands.expected_hashes(policy, cluster.operator_namespace)
    wait_for(lambda: daemonset_hashes(cluster) == wanted, TIMEOUT_S, "the operator to re-render its DaemonSets")
    wait_ready(cluster)
    return {name for name in wanted.keys() | before.keys() if wanted.get(name) != before.get(name)}


def point_plugin_at(cluster: Cluster, default_key: str) -> set[str]:
    return patch_policy_and_wait(cluster, {"devicePlugin": {"config": {"name": CONFIGMAP, "default": default_key}}})


def run_device_plugin(cluster: Cluster, version: str) -> None:
    """The ClusterPolicy names this k8s-device-plugin release for the plugin and GFD (as the chart's
    devicePlugin.version and gfd.version do); the operator rolls both to it."""
    if version != CHART_PLUGIN:
        patch_policy_and_wait(cluster, {"devicePlugin": {"version": version}, "gfd": {"version": version}})


def rollout_restart(cluster: Cluster, daemonset: str) -> None:
    cluster.kubectl("rollout", "restart", "-n", cluster.operator_namespace, f"daemonset/{daemonset}")
    cluster.kubectl("rollout", "status", "-n", cluster.operator_namespace, f"daemonset/{daemonset}", "--timeout=60s")


def label_node(cluster: Cluster, node: str, key: str, value: str | None) -> None:
    cluster.kubectl("label", "node", node, f"{key}={value}" if value is not None else f"{key}-", "--overwrite")


# ---- observations ----------------------------------------------------------------------------
def wait_ready(cluster: Cluster) -> None:
    """The ClusterPolicy `ready`: every operand rolled out (`kubectl get clusterpolicy` STATUS)."""
    wait_for(lambda: cluster.kubectl("get", POLICY, "-o", "jsonpath={.status.state}").stdout == "ready", TIMEOUT_S,
             "the ClusterPolicy to be ready")


def advertised(cluster: Cluster, node: str) -> tuple[dict[str, str], dict[str, str]]:
    """(nvidia.com allocatable, nvidia.com labels) of a node."""
    obj = cluster.node(node)
    allocatable = {k: v for k, v in (obj.status.allocatable or {}).items() if k.startswith("nvidia.com/")}
    labels = {k: v for k, v in (obj.metadata.labels or {}).items() if k.startswith("nvidia.com/")}
    return allocatable, labels


def sharing_view(cluster: Cluster, node: str) -> tuple[dict[str, str], dict[str, str]]:
    """What sharing changes on a node: its resources and GFD's sharing labels (no timestamp)."""
    allocatable, labels = advertised(cluster, node)
    keys = ("nvidia.com/gpu.count", "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy", "nvidia.com/gpu.product")
    return allocatable, {k: labels.get(k, "") for k in keys}


def physical_counts(cluster: Cluster) -> dict[str, int]:
    """GPUs per GPU node, from the simulated hardware (not from what the node advertises)."""
    return {n.metadata.name: json.loads(n.metadata.annotations[HARDWARE_ANNOTATION])["count"]
            for n in cluster.core.list_node().items if HARDWARE_ANNOTATION in (n.metadata.annotations or {})}


def operand_pods(cluster: Cluster, app: str) -> dict[str, Any]:
    """The live pod of an operand DaemonSet on each node."""
    pods = cluster.core.list_namespaced_pod(cluster.operator_namespace, label_selector=f"app={app}").items
    return {p.spec.node_name: p for p in pods if p.metadata.deletion_timestamp is None}


def pod_uids(cluster: Cluster) -> dict[str, str]:
    """`<app>/<node>` -> uid of every pod in the operator namespace."""
    pods = cluster.core.list_namespaced_pod(cluster.operator_namespace).items
    return {f"{p.metadata.labels.get('app')}/{p.spec.node_name}": p.metadata.uid for p in pods if p.metadata.deletion_timestamp is None}


def daemonset_hashes(cluster: Cluster) -> dict[str, str]:
    return {d.metadata.name: (d.metadata.annotations or {}).get(operands.HASH_ANNOTATION)
            for d in cluster.apps.list_namespaced_daemon_set(cluster.operator_namespace).items}


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def kubectl_status(cluster: Cluster, pod: Any) -> str:
    """The STATUS column of `kubectl get pod`, e.g. `Init:CrashLoopBackOff`."""
    out = cluster.kubectl("get", "pod", "-n", pod.metadata.namespace, pod.metadata.name, "--no-headers").stdout.split()
    return out[2] if len(out) > 2 else ""


def container_status(pod: Any, name: str) -> Any:
    return next(s for s in [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])] if s.name == name)


def shows_replicas(cluster: Cluster, node: str, physical: int, replicas: int) -> bool:
    allocatable, labels = advertised(cluster, node)
    if replicas == 1:
        return allocatable.get(GPU) == str(physical) and allocatable.get(SHARED, "0") == "0" and labels.get("nvidia.com/gpu.replicas") == "1"
    return (allocatable.get(SHARED) == str(physical * replicas) and allocatable.get(GPU, "0") == "0"
            and labels.get("nvidia.com/gpu.replicas") == str(replicas))


def wait_all_show(cluster: Cluster, counts: dict[str, int], replicas: int) -> None:
    wait_for(lambda: all(shows_replicas(cluster, n, c, replicas) for n, c in counts.items()), TIMEOUT_S,
             f"every GPU node to advertise {replicas} replica(s) per GPU")


def stays(probe: Callable[[], bool], seconds: float, what: str) -> None:
    """Assert that `probe` holds on every look for `seconds`: the bounded wait for a non-event."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert probe(), f"{what} changed within {seconds:.0f}s"
        time.sleep(0.2)


def node_history(cluster: Cluster, node: str, probe: Callable[[Any], tuple], before: Any, done: Callable[[tuple], bool],
                 timeout_s: float = TIMEOUT_S) -> list[tuple]:
    """The successive values of `probe(node)` after `before`'s version, up to the first that is
    `done`. A watch from `before`'s resourceVersion replays every intermediate state."""
    seen = [probe(before)]
    stream = watch.Watch()
    for event in stream.stream(cluster.core.list_node, field_selector=f"metadata.name={node}",
                               resource_version=before.metadata.resource_version, timeout_seconds=int(timeout_s)):
        current = probe(event["object"])
        if current != seen[-1]:
            seen.append(current)
            if done(current):
                stream.stop()
                break
    return seen[1:]


def node_events(cluster: Cluster, node: str, reason: str) -> list[str]:
    events = cluster.core.list_namespaced_event("default", field_selector=f"involvedObject.name={node},reason={reason}").items
    return [e.message for e in sorted(events, key=lambda e: e.metadata.creation_timestamp)]
