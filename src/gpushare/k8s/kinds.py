"""The kinds the runbooks read and write, with their REST paths (no discovery round-trips)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


_KINDS = [
    Kind("Node", "", "v1", "nodes", False),
    Kind("Namespace", "", "v1", "namespaces", False),
    Kind("Pod", "", "v1", "pods", True),
    Kind("ConfigMap", "", "v1", "configmaps", True),
    Kind("Event", "", "v1", "events", True),
    Kind("Service", "", "v1", "services", True),
    Kind("DaemonSet", "apps", "v1", "daemonsets", True),
    Kind("Deployment", "apps", "v1", "deployments", True),
    Kind("ReplicaSet", "apps", "v1", "replicasets", True),
    Kind("StatefulSet", "apps", "v1", "statefulsets", True),
    Kind("Job", "batch", "v1", "jobs", True),
    Kind("Lease", "coordination.k8s.io", "v1", "leases", True),
    Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
    Kind("SelfSubjectReview", "authentication.k8s.io", "v1", "selfsubjectreviews", False),
    Kind("SelfSubjectAccessReview", "authorization.k8s.io", "v1", "selfsubjectaccessreviews", False),
    Kind("ClusterPolicy", "nvidia.com", "v1", "clusterpolicies", False),
    Kind("GPUCluster", "nvidia.com", "v1alpha1", "gpuclusters", False),  # GPU Operator v26.7's DRA stack
    Kind("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", False),
    Kind("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    Kind("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False),
    Kind("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True),
    Kind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True),
    Kind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False),
    Kind("ResourceFlavor", "kueue.x-k8s.io", "v1beta2", "resourceflavors", False),
    Kind("ClusterQueue", "kueue.x-k8s.io", "v1beta2", "clusterqueues", False),
    Kind("LocalQueue", "kueue.x-k8s.io", "v1beta2", "localqueues", True),
    Kind("Workload", "kueue.x-k8s.io", "v1beta2", "workloads", True),
    Kind("WorkloadPriorityClass", "kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", False),
    Kind("Cohort", "kueue.x-k8s.io", "v1beta2", "cohorts", False),
]
KINDS = {k.kind: k for k in _KINDS}


class UnknownKind(ValueError):
    pass


def kind_of(kind: str, api_version: str | None = None) -> Kind:
    """The Kind for `kind`; `api_version` (group/version) only checks or overrides the version."""
    known = KINDS.get(kind)
    if known is None:
        raise UnknownKind(f"unknown kind {kind!r}: the runbooks know {', '.join(sorted(KINDS))}")
    if not api_version or api_version == known.api_version:
        return known
    group, _, version = api_version.rpartition("/")
    if group != known.group:
        raise UnknownKind(f"{kind} belongs to API group {known.group or 'core'!r}, not {group or 'core'!r}")
    return Kind(known.kind, known.group, version, known.plural, known.namespaced)
