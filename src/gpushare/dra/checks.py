"""What the DRA pilot waits for, as problem lists (empty: done), polled by `gpushare_wait`.
`expected` is the plan's: {node, gpus, driver, driver_namespace, plugin_label, namespace, class_name,
gpu_config}; the verify's adds {claim, pods, bystander, check_namespace}."""

from __future__ import annotations

from typing import Any

from gpushare.dra import dcgm
from gpushare.dra.plan import CHECK_LABEL
from gpushare.dra.pool import Pool
from gpushare.k8s.session import Session
from gpushare.model.node import Node
from gpushare.model.operands import DEVICE_PLUGIN
from gpushare.polling import DeadEnd

PREPARE_FAILED = "FailedPrepareDynamicResources"


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def device_plugin_gone(session: Session, expected: dict[str, Any]) -> list[str]:
    """The device plugin has left the node and the node advertises no nvidia.com/gpu."""
    node, problems = expected["node"], []
    left = [p["metadata"]["name"] for p in session.pods_on([node], expected["namespace"])
            if (p["metadata"].get("labels") or {}).get("app") == DEVICE_PLUGIN]
    if left:
        problems.append(f"{node}: device-plugin pod {', '.join(left)} still there")
    raw = session.get("Node", node)
    allocatable = Node(raw).allocatable("nvidia.com/gpu") if raw else 0
    if allocatable:
        problems.append(f"{node}: allocatable nvidia.com/gpu is {allocatable}, expected 0")
    return problems


def _plugin_pods(session: Session, expected: dict[str, Any]) -> list[dict[str, Any]]:
    """The DRA driver's pods on the node that its label put there (a DaemonSet selecting that label)."""
    return [p for p in session.pods_on([expected["node"]], expected["driver_namespace"])
            if expected["plugin_label"] in ((p.get("spec") or {}).get("nodeSelector") or {})
            and not p["metadata"].get("deletionTimestamp")]


def kubelet_plugin_ready(session: Session, expected: dict[str, Any]) -> list[str]:
    pods = _plugin_pods(session, expected)
    if not pods:
        return [f"{expected['node']}: no DRA kubelet-plugin pod in {expected['driver_namespace']} yet (a DaemonSet "
                f"selecting {expected['plugin_label']}=true)"]
    if not any(_ready(p) for p in pods):
        return [f"{expected['node']}: DRA kubelet-plugin pod {pods[0]['metadata']['name']} is not Ready "
                f"({(pods[0].get('status') or {}).get('phase', 'Pending')})"]
    return []


def pool_complete(session: Session, expected: dict[str, Any]) -> list[str]:
    """The node's pool is complete: its GPUs, and with a Prometheus URL the UUIDs DCGM reports."""
    node, uuids = expected["node"], None
    if expected.get("prometheus_url"):
        uuids, problem = dcgm.uuids(expected["prometheus_url"], node)
        if problem:
            return [problem]
    slices = session.list("ResourceSlice", field_selector=f"spec.nodeName={node}")
    return Pool.of(slices, expected["driver"], node).problems(int(expected["gpus"]), uuids)


def _prepare_failures(session: Session, namespace: str, uids: set[str]) -> list[str]:
    """The kubelet's prepare failures of these pods (by UID: events of an earlier pod of that name stay for an hour)."""
    events = session.list("Event", namespace, field_selector=f"reason={PREPARE_FAILED}")
    return sorted({f"{e['involvedObject']['name']}: {e.get('message', '')}" for e in events
                   if e.get("involvedObject", {}).get("uid") in uids})


def claim_problems(claim: dict[str, Any] | None, expected: dict[str, Any], pod_uids: dict[str, str]) -> list[str]:
    """The verify's claim: exactly one result {driver, pool <node>, gpu-N}, reserved for the check pods
    (and only them), its allocation config carrying the GpuConfig."""
    name = expected["claim"]
    if claim is None:
        return [f"ResourceClaim {name} does not exist"]
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    if not allocation:
        return [f"ResourceClaim {name} is not allocated yet"]
    problems = []
    results = (allocation.get("devices") or {}).get("results") or []
    found = [(r.get("driver"), r.get("pool"), r.get("device")) for r in results]
    if len(results) != 1 or results[0].get("driver") != expected["driver"] or results[0].get("pool") != expected["node"] \
            or not str(results[0].get("device", "")).startswith("gpu-"):
        problems.append(f"ResourceClaim {name} has results {found}; expected one ({expected['driver']}, "
                        f"{expected['node']}, gpu-N)")
    reserved = sorted(r.get("uid", "") for r in status.get("reservedFor") or [])
    if reserved != sorted(pod_uids.values()):
        problems.append(f"ResourceClaim {name} is reserved for {len(reserved)} consumer(s), expected the "
                        f"{len(pod_uids)} check pods")
    configs = [(c.get("opaque") or {}).get("parameters") for c in (allocation.get("devices") or {}).get("config") or []]
    if expected["gpu_config"] not in configs:
        problems.append(f"ResourceClaim {name}'s allocation does not carry the GpuConfig "
                        f"{expected['gpu_config']['sharing']}")
    return problems


def verified(session: Session, expected: dict[str, Any]) -> list[str]:
    """The check pods share one claim on the node, Running; the bystander runs on the device plugin
    elsewhere. A prepare failure is a dead end: the kubelet retries, but the config will not change."""
    namespace, node = expected["check_namespace"], expected["node"]
    pods = {name: session.get("Pod", name, namespace) for name in expected["pods"]}
    failures = _prepare_failures(session, namespace, {p["metadata"]["uid"] for p in pods.values() if p})
    if failures:
        raise DeadEnd([f"the kubelet cannot prepare the claim on {node}: {failures[0]}"])
    problems = []
    for name, pod in pods.items():
        if pod is None:
            problems.append(f"check pod {name} does not exist")
        elif (pod.get("spec") or {}).get("nodeName") != node or not _ready(pod):
            problems.append(f"check pod {name} is {(pod.get('status') or {}).get('phase', 'Pending')} on "
                            f"{(pod.get('spec') or {}).get('nodeName') or 'no node'}, expected Running on {node}")
    if not problems:
        uids = {name: pod["metadata"]["uid"] for name, pod in pods.items() if pod}
        problems += claim_problems(session.get("ResourceClaim", expected["claim"], namespace), expected, uids)
    bystander = session.get("Pod", expected["bystander"], namespace)
    if bystander is None or not _ready(bystander):
        problems.append(f"pod {expected['bystander']} asking for nvidia.com/gpu is not Running on another node")
    elif bystander["spec"].get("nodeName") == node:
        problems.append(f"pod {expected['bystander']} landed on the pilot node {node}")
    return problems


def checks_released(session: Session, expected: dict[str, Any]) -> list[str]:
    """The verify's pods and claims are gone (the claim deallocated, its finalizer removed)."""
    left = [f"{kind} {o['metadata']['name']}" for kind in ("Pod", "ResourceClaim")
            for o in session.list(kind, expected["check_namespace"], label_selector=f"{CHECK_LABEL}={expected['node']}")]
    return [f"{expected['node']}: the verify's {', '.join(left)} still there"] if left else []


def slices_gone(session: Session, expected: dict[str, Any]) -> list[str]:
    slices = [s for s in session.list("ResourceSlice", field_selector=f"spec.nodeName={expected['node']}")
              if (s.get("spec") or {}).get("driver") == expected["driver"]]
    return [f"{expected['node']}: {len(slices)} ResourceSlice(s) of {expected['driver']} still there (the kubelet "
            "wipes them 30 s after the plugin stops)"] if slices else []


def device_plugin_back(session: Session, expected: dict[str, Any]) -> list[str]:
    raw = session.get("Node", expected["node"])
    allocatable = Node(raw).allocatable("nvidia.com/gpu") if raw else 0
    if allocatable != int(expected["gpus"]):
        return [f"{expected['node']}: allocatable nvidia.com/gpu is {allocatable}, expected {expected['gpus']}"]
    return []


CHECKS = {"dra_device_plugin_gone": device_plugin_gone, "dra_kubelet_plugin_ready": kubelet_plugin_ready,
          "dra_pool_complete": pool_complete, "dra_pilot_verified": verified, "dra_checks_released": checks_released,
          "dra_slices_gone": slices_gone, "dra_device_plugin_back": device_plugin_back}
