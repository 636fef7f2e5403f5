"""REST paths of the kinds the runbooks use (gpushare.k8s.kinds); that the API server answers
them is tests/integration/test_k8s_session.py."""

from __future__ import annotations

import pytest

from gpushare.k8s.kinds import UnknownKind, kind_of


@pytest.mark.parametrize(("kind", "namespace", "name", "subresource", "path"), [
    ("Pod", "team-a", "p", "eviction", "/api/v1/namespaces/team-a/pods/p/eviction"),
    ("Pod", None, None, None, "/api/v1/pods"),
    ("ConfigMap", "gpu-operator", None, None, "/api/v1/namespaces/gpu-operator/configmaps"),
    ("Node", "ignored-for-cluster-scoped", "gpu-node", None, "/api/v1/nodes/gpu-node"),
    ("DaemonSet", "gpu-operator", "x", None, "/apis/apps/v1/namespaces/gpu-operator/daemonsets/x"),
    ("Lease", "gpu-operator", "lock", None, "/apis/coordination.k8s.io/v1/namespaces/gpu-operator/leases/lock"),
    ("ClusterPolicy", None, "cluster-policy", None, "/apis/nvidia.com/v1/clusterpolicies/cluster-policy"),
])
def test_paths(kind: str, namespace: str | None, name: str | None, subresource: str | None, path: str) -> None:
    assert kind_of(kind).path(namespace, name, subresource) == path


def test_an_api_version_checks_the_group_and_may_choose_the_version() -> None:
    assert kind_of("DaemonSet", "apps/v1").api_version == "apps/v1"
    older = kind_of("ClusterQueue", "kueue.x-k8s.io/v1beta1")
    assert older.path(None, "q") == "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/q"
    assert kind_of("ConfigMap", "v1").api_version == "v1"
    with pytest.raises(UnknownKind, match="DaemonSet belongs to API group 'apps', not 'extensions'"):
        kind_of("DaemonSet", "extensions/v1beta1")
    with pytest.raises(UnknownKind, match="ConfigMap belongs to API group 'core', not 'apps'"):
        kind_of("ConfigMap", "apps/v1")


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(UnknownKind, match="unknown kind 'Secret': the runbooks know ClusterPolicy"):
        kind_of("Secret")
