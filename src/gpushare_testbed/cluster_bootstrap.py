"""Registering the simulated fleet with the API server and waiting until the cluster is usable: every
node Ready, then (once the GPU Operator is installed) every operand rolled out, the ClusterPolicy
`ready` and every GPU node whole (GFD's labels, the device plugin's resources, MIG off, no driver
upgrade under way)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpushare_testbed.fleet import HARDWARE_ANNOTATION, Fleet
from gpushare.gpu_catalog import product as lookup_product
from gpushare.k8s.session import ApiError
from gpushare.kube import api_client
from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator.mig_manager import MIG_STATE
from gpushare_testbed.simulator.node_view import GPU, SHARED, node_ready
from gpushare_testbed.simulator.operands import current_revision, owned_by
from gpushare_testbed.simulator.rest import Rest
from gpushare_testbed.simulator.upgrade import DONE as UPGRADE_DONE, FAILED as UPGRADE_FAILED, STATE_LABEL as UPGRADE_STATE_LABEL


# The node status a kubelet sends with its registration (kubelet_node_status.go initialNode runs the
# status setters first), with the values KWOK's node-initialize stage writes (kwok v0.8.0
# pkg/utils/gotpl/funcs.go nodeConditions; --node-ip): a node registered Ready needs no status write
# from KWOK, nor the node lifecycle controller's not-ready taints and Unknown condition meanwhile.
NODE_CONDITIONS = (
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
)


def registered_status(manifest: dict, node_ip: str, kwok_version: str) -> dict:
    """`manifest`'s status as its kubelet registers it: Ready, addressed, described."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    version = f"kwok-{kwok_version}"
    return {
        **manifest["status"],
        "conditions": [{"type": kind, "status": status, "reason": reason, "message": message,
                        "lastHeartbeatTime": now, "lastTransitionTime": now}
                       for kind, status, reason, message in NODE_CONDITIONS],
        "addresses": [{"type": "InternalIP", "address": node_ip},
                      {"type": "Hostname", "address": manifest["metadata"]["name"]}],
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kernelVersion": version,
                     "containerRuntimeVersion": version, "kubeletVersion": version, "kubeProxyVersion": version,
                     "bootID": "", "machineID": "", "osImage": "", "systemUUID": ""},
        "phase": "Running",
    }


def register_nodes(kubeconfig: Path, fleet: Fleet, node_ip: str, kwok_version: str) -> None:
    """Create every fleet node that does not exist yet, as a kubelet registers itself (with its status)."""
    core = client.CoreV1Api(api_client(kubeconfig))
    existing = {n.metadata.name for n in core.list_node().items}

    def create(manifest: dict) -> None:
        try:
            core.create_node(manifest)
        except ApiException as err:
            if err.status != 409:
                raise

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(create, [{**m, "status": registered_status(m, node_ip, kwok_version)}
                               for m in (n.manifest() for n in fleet.nodes if n.name not in existing)]))


# Components of the embedded cluster that only read: their own identity (no group), with only this.
READERS_ROLE = "gpushare-sim-node-reader"


def grant_readers(kubeconfig: Path, users: list[str]) -> None:
    """A ClusterRole that reads nodes (get, list, watch) and DaemonSets (list) bound to `users` (the
    DCGM exporter simulator: it lists the GPU nodes' hardware and the exporter the operator deploys,
    and writes nothing)."""
    rbac = client.RbacAuthorizationV1Api(api_client(kubeconfig))
    labels = {"app.kubernetes.io/managed-by": "gpushare-sim"}
    role = {"metadata": {"name": READERS_ROLE, "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                      {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]}]}
    binding = {"metadata": {"name": READERS_ROLE, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READERS_ROLE},
               "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u} for u in users]}
    for create, update in ((lambda: rbac.create_cluster_role(role),
                            lambda: rbac.patch_cluster_role(READERS_ROLE, {"rules": role["rules"]})),
                           (lambda: rbac.create_cluster_role_binding(binding), None)):
        try:
            create()
        except ApiException as err:
            if err.status != 409:
                raise
            if update:  # a cluster started before the rules grew
                update()


def in_flight(labels: dict[str, str]) -> str | None:
    """A change the operator makes to a GPU node that is not over (its driver upgrade, a MIG
    reconfiguration: pending or rebooting), None when there is none or it ended (upgrade-failed and a
    failed MIG reconfiguration stay so); the labels a real node carries too."""
    upgrade = labels.get(UPGRADE_STATE_LABEL, UPGRADE_DONE)
    if upgrade not in (UPGRADE_DONE, UPGRADE_FAILED):
        return f"the driver upgrade to finish ({upgrade})"
    if labels.get(MIG_STATE) in ("pending", "rebooting"):
        return f"the MIG reconfiguration to finish ({labels[MIG_STATE]})"
    return None


def gpu_node_problem(node: dict[str, Any]) -> str | None:
    """What keeps a simulated GPU node from showing its whole cards, None when it does."""
    meta = node["metadata"]
    hardware = json.loads(meta["annotations"][HARDWARE_ANNOTATION])
    labels, allocatable = meta.get("labels") or {}, (node.get("status") or {}).get("allocatable") or {}
    if labels.get("nvidia.com/gpu.replicas") != "1" or labels.get("nvidia.com/gpu.count") != str(hardware["count"]):
        return "GFD labels (whole cards)"
    if allocatable.get(GPU) != str(hardware["count"]) or allocatable.get(SHARED, "0") != "0":
        return "the device plugin's nvidia.com/gpu allocatable"
    mig = (labels.get("nvidia.com/mig.config"), labels.get(MIG_STATE))
    if lookup_product(hardware["product"]).mig_capable and mig != ("all-disabled", "success"):
        return "MIG disabled (mig.config all-disabled, state success)"
    problem = in_flight(labels)
    if problem:
        return problem
    if labels.get(UPGRADE_STATE_LABEL) == UPGRADE_FAILED:
        return f"the driver upgrade to succeed ({UPGRADE_FAILED})"
    if (node.get("spec") or {}).get("unschedulable"):
        return "the node to be schedulable"
    return None


def rollout_problems(rest: Rest, namespace: str) -> list[str]:
    """Operand DaemonSets not rolled out: each until one live pod runs on each node it wants (its
    status lags the pods: a pod just deleted can still count as available), a RollingUpdate one
    until every pod is updated and available, the OnDelete driver until every pod runs the current
    ControllerRevision (pods and revisions are read only for a DaemonSet whose status is settled)."""
    problems, pods = [], None
    for ds in rest.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets").get("items") or []:
        meta, status = ds["metadata"], ds.get("status") or {}
        desired = status.get("desiredNumberScheduled", 0)
        on_delete = (ds["spec"].get("updateStrategy") or {}).get("type") == "OnDelete"
        if status.get("observedGeneration", 0) < meta.get("generation", 0) or status.get("numberUnavailable", 0) or (
                not on_delete and not status.get("updatedNumberScheduled", 0) == desired == status.get("numberAvailable", 0)):
            problems.append(f"DaemonSet {meta['name']} to roll out")
            continue
        if pods is None:
            pods = rest.get(f"/api/v1/namespaces/{namespace}/pods").get("items") or []
        owned = owned_by(pods, ds)
        if len(owned) != desired or any(p["metadata"].get("deletionTimestamp") for p in owned):
            problems.append(f"DaemonSet {meta['name']}: one live pod on each of its {desired} nodes")
        elif on_delete:
            selector = ",".join(f"{k}={v}" for k, v in ds["spec"]["selector"]["matchLabels"].items())
            revisions = rest.get(f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions", labelSelector=selector)
            current = current_revision(revisions.get("items") or [], ds)
            if any((p["metadata"].get("labels") or {}).get("controller-revision-hash") != current for p in owned):
                problems.append(f"DaemonSet {meta['name']}: every pod on the current template (OnDelete)")
    return problems


def settled_problems(rest: Rest, namespace: str) -> list[str]:
    """What the cluster still waits for, cheapest first (the first kind found is returned): the
    ClusterPolicy ready, every operand rolled out, every GPU node whole."""
    try:
        policy = rest.get(f"/apis/{cp.GROUP}/{cp.VERSION}/{cp.PLURAL}/{cp.CLUSTER_POLICY}")
        if (policy.get("status") or {}).get("state") != "ready":
            return ["ClusterPolicy cluster-policy to be ready"]
    except ApiError as err:
        if err.status != 404:
            raise
        return ["ClusterPolicy cluster-policy to exist"]
    problems = rollout_problems(rest, namespace)
    if problems:
        return problems
    for node in rest.get("/api/v1/nodes").get("items") or []:
        if HARDWARE_ANNOTATION in (node["metadata"].get("annotations") or {}):
            problem = gpu_node_problem(node)
            if problem:
                problems.append(f"{node['metadata']['name']}: {problem}")
    return problems


def wait_settled(rest: Rest, namespace: str, timeout_s: float, interval_s: float = 0.25) -> None:
    last: list[str] = []

    def settled() -> bool:
        nonlocal last
        last = settled_problems(rest, namespace)
        return not last

    try:
        wait_for(settled, timeout_s, "the GPU Operator to settle", interval_s=interval_s)
    except TimeoutError as err:
        shown = "; ".join(last[:5]) + (f" (and {len(last) - 5} more)" if len(last) > 5 else "")
        raise TimeoutError(f"{err}; still waiting for: {shown}") from None


def wait_nodes_ready(kubeconfig: Path, fleet: Fleet, timeout_s: float = 300) -> None:
    """Every fleet node Ready and the default ServiceAccount there."""
    rest = Rest(api_client(kubeconfig))
    wanted = {n.name for n in fleet.nodes}

    def nodes_ready() -> bool:
        ready = {node["metadata"]["name"] for node in rest.get("/api/v1/nodes").get("items") or [] if node_ready(node)}
        return wanted <= ready

    wait_for(nodes_ready, timeout_s, f"all {len(wanted)} nodes to be Ready", interval_s=0.25)
    wait_for(lambda: rest.get("/api/v1/namespaces/default/serviceaccounts/default"), timeout_s, "the default ServiceAccount")


def wait_gpu_operator(kubeconfig: Path, namespace: str, timeout_s: float = 600) -> None:
    """The GPU Operator settled: every operand rolled out, every GPU node whole."""
    wait_settled(Rest(api_client(kubeconfig)), namespace, timeout_s, interval_s=1.0)
