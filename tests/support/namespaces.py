"""Removing the scenarios' namespaces between scenarios without the namespace controller's fixed
wait: it acts on a deleted namespace only 5 s after the deletion (namespaceDeletionGracePeriod in
kubernetes pkg/controller/namespace/namespace_controller.go), even an empty one. Here the test
empties each deleted (so Terminating: nothing new can be created in it) namespace itself, as that
controller does, and finalizes it once every namespaced kind the API serves lists nothing in it.
Whatever does not empty in time (an object a controller still holds by a finalizer, a kind this
identity may not delete) is left to the namespace controller: the caller's wait covers it.
On the embedded cluster, whose pods are KWOK fakes, pods are deleted with grace 0. On any other
cluster each pod keeps its own grace period, as the namespace controller gives it: a pod deleted
with grace 0 is gone from the API while its container may still hold the GPU, whereas one deleted
the ordinary way stays listed (so the namespace is not finalized) until its kubelet has stopped it."""

from __future__ import annotations

import functools
from typing import Any

from kubernetes import client

from gpushare.k8s.session import ApiError
from gpushare.polling import wait_for
from gpushare_testbed.simulator.rest import Rest

EMPTY_TIMEOUT_S = 10
DELETE_NOW = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Background"}
DELETE_GRACEFULLY = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}


@functools.cache
def _collections(api: client.ApiClient) -> tuple[str, ...]:
    """The REST path (with {namespace}) of every namespaced kind the server lets one delete by collection."""
    rest = Rest(api)

    def namespaced(group_version_path: str) -> list[str]:
        return [f"{group_version_path}/namespaces/{{namespace}}/{r['name']}"
                for r in rest.get(group_version_path).get("resources", [])
                if r.get("namespaced") and "/" not in r["name"] and "deletecollection" in r.get("verbs", [])]

    paths = namespaced("/api/v1")
    for group in rest.get("/apis").get("groups", []):
        paths += namespaced(f"/apis/{group['preferredVersion']['groupVersion']}")
    return tuple(paths)


def _left_in(rest: Rest, namespace: str) -> list[str]:
    left = []
    for path in _collections(rest.api):
        try:
            if rest.get(path.format(namespace=namespace), limit=1).get("items"):
                left.append(path.rsplit("/", 1)[1])
        except ApiError:
            left.append(path.rsplit("/", 1)[1])  # not readable: not known to be empty
    return left


def delete_test_namespaces(cluster: Any, label: str) -> None:
    """Delete the namespaces labelled `label` (see delete_namespaces)."""
    rest = Rest(cluster.api)
    delete_namespaces(cluster, [n["metadata"]["name"] for n in rest.get("/api/v1/namespaces", labelSelector=label)["items"]])


def delete_namespaces(cluster: Any, names: list[str]) -> None:
    """Delete these namespaces, emptied and finalized here when that is quick."""
    rest = Rest(cluster.api)
    for name in names:
        _ignoring(lambda n=name: rest.delete(f"/api/v1/namespaces/{n}"), 404)
    options = DELETE_NOW if cluster.embedded else DELETE_GRACEFULLY
    for name in names:
        for path in _collections(rest.api):
            _ignoring(lambda p=path.format(namespace=name): rest.delete(p, options), 403, 404, 405)
    for name in names:
        try:
            wait_for(lambda n=name: not _left_in(rest, n), EMPTY_TIMEOUT_S, f"namespace {name} to be empty")
        except TimeoutError:
            continue  # the namespace controller finishes it
        _ignoring(lambda n=name: rest.replace(f"/api/v1/namespaces/{n}/finalize", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}, "spec": {"finalizers": []}}), 403, 404, 409)


def _ignoring(call: Any, *statuses: int) -> None:
    try:
        call()
    except ApiError as err:
        if err.status not in statuses:
            raise
