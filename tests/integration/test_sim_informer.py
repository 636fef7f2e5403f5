"""The simulator's informer against the embedded cluster's API server."""

from __future__ import annotations

from gpushare.kube import api_client
from gpushare_testbed.simulator.informer import Informer, namespaced_key
from gpushare_testbed.simulator.rest import Rest
from tests.integration.k8s_fixtures import namespace, session  # noqa: F401
from tests.support.cluster import Cluster


def test_a_relist_reports_an_object_the_cache_already_holds_at_the_listed_version(cluster: Cluster, namespace: str) -> None:
    """The simulator caches its own writes (Simulator.remember). When the watch breaks before their
    events arrive (an API server restart), the re-list finds them at the cached version: it reports
    every object, as client-go's informers do, or nfd-master never sees GFD's new NodeFeature."""
    rest = Rest(api_client(cluster.kubeconfig))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    written = rest.create(path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "remembered"},
                                 "data": {"a": "1"}})
    seen: list[str] = []
    informer = Informer(rest, path, namespaced_key, lambda key, old, new: seen.append(key))
    informer.cache[namespaced_key(written)] = written  # remembered; the watch never delivered it
    informer._relist()  # the re-list after a broken watch, driven directly
    assert namespaced_key(written) in seen
