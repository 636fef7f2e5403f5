"""What a run wrote, on a cluster without the embedded one's audit log: the objects the runbooks may
write (deploy/rbac) are read before and after the run and compared by content, leaving out what
their controllers change on their own. It sees net changes only: an object created and deleted
within the run, or a write of what was already there (a server-side dry run), leaves no trace;
the embedded cluster's audit log, which sees those, stays the check there."""

from __future__ import annotations

from typing import Any

from gpushare.k8s.kinds import KINDS, Kind
from gpushare.k8s.session import ApiError
from gpushare_testbed.simulator.node_view import gfd_owns
from gpushare_testbed.simulator.rest import Rest
from tests.support.cluster import TEST_NAMESPACE_LABEL, Cluster

State = dict[str, dict[str, Any]]  # "Kind namespace/name" -> its content

SHARE_CHECK_NAMESPACE = "gpushare-share-check"
KUEUE_KINDS = ("WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")
# Node labels and annotations written by others: GFD (gfd_owns), NFD, the MIG manager's state, the
# driver upgrade controller, the TTL controller; taints the node lifecycle controller sets (the
# unschedulable one follows spec.unschedulable, which is compared).
OTHERS_LABELS = ("feature.node.kubernetes.io/", "nvidia.com/mig.config.state", "nvidia.com/gpu-driver-upgrade-state")
OTHERS_ANNOTATIONS = ("node.alpha.kubernetes.io/ttl", "nfd.node.kubernetes.io/",
                      "nvidia.com/gpu-driver-upgrade-requested",
                      "nvidia.com/gpu-driver-upgrade.node-initial-state.")
LIFECYCLE_TAINTS = "node.kubernetes.io/"
KEPT_METADATA = ("uid", "labels", "annotations", "finalizers", "ownerReferences")
IDENTITY_ONLY = ("Pod", "Deployment", "Namespace")  # created or deleted, never patched by the runbooks


def _node(obj: dict[str, Any]) -> dict[str, Any]:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    return {
        "uid": meta.get("uid"),
        "labels": {k: v for k, v in (meta.get("labels") or {}).items()
                   if not gfd_owns(k) and not k.startswith(OTHERS_LABELS)},
        "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(OTHERS_ANNOTATIONS)},
        "taints": [t for t in spec.get("taints") or [] if not t["key"].startswith(LIFECYCLE_TAINTS)],
        "unschedulable": bool(spec.get("unschedulable")),
    }


def content(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What of `obj` (as the API server serves it) a runbook's write would change: never status,
    resourceVersion, managedFields, generation, heartbeats (a Lease's renewTime) or GFD's labels."""
    if kind == "Node":
        return _node(obj)
    meta = obj["metadata"]
    if kind in IDENTITY_ONLY:
        return {"uid": meta.get("uid")}
    kept = {k: meta[k] for k in KEPT_METADATA if meta.get(k)}
    body = {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}
    if kind == "Lease":
        body["spec"] = {k: v for k, v in (body.get("spec") or {}).items() if k != "renewTime"}
    return {"metadata": kept, **body}


def _paths(before: Any, after: Any, path: str) -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        return [line for key in sorted({*before, *after}, key=str)
                for line in _paths(before.get(key), after.get(key), f"{path}.{key}" if path else str(key))]
    return [] if before == after else [f"{path or '(whole)'}: {before!r} -> {after!r}"]


def differences(before: State, after: State) -> list[str]:
    """Each object created, deleted or changed between the two states, with the fields that differ."""
    lines = []
    for key in sorted({*before, *after}):
        if key not in after:
            lines.append(f"{key} was deleted")
        elif key not in before:
            lines.append(f"{key} was created")
        else:
            lines += [f"{key}: {change}" for change in _paths(before[key], after[key], "")]
    return lines


def _items(rest: Rest, kind: Kind, namespace: str | None = None) -> list[dict[str, Any]]:
    """The objects of `kind` (in `namespace`), none where the API is not installed (Kueue)."""
    try:
        return rest.get(kind.path(namespace))["items"]
    except ApiError as err:
        if err.status == 404:
            return []
        raise


def _read(rest: Rest, kind: str, namespace: str | None = None) -> State:
    """One kind's objects by key; those being deleted already are left out (they go on their own)."""
    state = {}
    for obj in _items(rest, KINDS[kind], namespace):
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            where = f"{meta['namespace']}/" if meta.get("namespace") else ""
            state[f"{kind} {where}{meta['name']}"] = content(kind, obj)
    return state


def take(cluster: Cluster) -> State:
    """The objects the runbooks may write: nodes, the ClusterPolicy, namespaces, Kueue's objects; the
    operator namespace's ConfigMaps, Leases and pods (a restart deletes them), the runbooks' own
    namespace's ConfigMaps and Leases (records, the lock); the pods and
    Deployments of the share check and of the scenarios' namespaces (a drain evicts them)."""
    rest, ns = Rest(cluster.api), cluster.operator_namespace
    state = {**_read(rest, "Node"), **_read(rest, "ClusterPolicy"), **_read(rest, "Namespace")}
    for kind in KUEUE_KINDS:
        state.update(_read(rest, kind))
    for kind in ("ConfigMap", "Lease", "Pod"):
        state.update(_read(rest, kind, ns))
    for kind in ("ConfigMap", "Lease"):
        state.update(_read(rest, kind, cluster.records_namespace))
    scenario = [n.metadata.name for n in cluster.core.list_namespace(label_selector=TEST_NAMESPACE_LABEL).items]
    for namespace in {SHARE_CHECK_NAMESPACE, *scenario}:
        state.update({**_read(rest, "Pod", namespace), **_read(rest, "Deployment", namespace)})
    return state
