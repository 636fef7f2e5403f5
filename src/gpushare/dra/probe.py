"""What the readiness decides on, read once from the cluster (the API server, and the scheduler's and
controller-manager's /metrics where their URLs are given). Nothing is written: the DeviceClass is a
server-side dry run. Every failure to read becomes a fact (`error`) the checks judge, not an exception."""

from __future__ import annotations

import re
from typing import Any

import urllib3

from gpushare.dra.settings import METRICS_COMPONENTS, Settings
from gpushare.k8s.session import ApiError, KindNotServed, Session

DRA_GROUP = "/apis/resource.k8s.io/v1"
GATE = "DRAExtendedResource"
PROBE_CLASS = "gpushare-readiness-"  # generateName of the dry-run DeviceClass
KUEUE_CONFIG = "kueue-manager-config"


def gate_enabled(metrics: str, gate: str) -> bool | None:
    """`kubernetes_feature_enabled{name="<gate>"}` of a component's /metrics: True, False, or None
    when the component does not report it."""
    pattern = re.compile(r'^kubernetes_feature_enabled\{[^}]*\bname="' + re.escape(gate) + r'"[^}]*\}\s+(\S+)', re.M)
    found = pattern.search(metrics)
    return None if found is None else float(found.group(1)) == 1.0


def _error(err: Exception) -> str:
    return str(getattr(err, "message", "") or err)


def _gates(session: Session, settings: Settings) -> dict[str, dict[str, Any]]:
    gates: dict[str, dict[str, Any]] = {}
    try:
        gates["kube-apiserver"] = {"enabled": gate_enabled(session.text("/metrics"), GATE)}
    except ApiError as err:
        gates["kube-apiserver"] = {"error": _error(err)}
    context = session.connection.ssl_context(settings.metrics_ca_file or None)
    headers = session.connection.headers()
    pool = urllib3.PoolManager(ssl_context=context, timeout=urllib3.Timeout(connect=5, read=15), retries=False)
    for name in METRICS_COMPONENTS:
        url = settings.metrics_urls.get(name)
        if not url:
            gates[name] = {"error": "no metrics URL given"}
            continue
        try:
            response = pool.request("GET", url, headers=headers)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            gates[name] = {"error": f"{url}: {err}"}
            continue
        if response.status != 200:
            gates[name] = {"error": f"{url} answered {response.status}"}
        else:
            gates[name] = {"enabled": gate_enabled(response.data.decode("utf-8", "replace"), GATE)}
    return gates


def _dry_run_class(session: Session, settings: Settings) -> dict[str, Any]:
    """A DeviceClass mapping the extended resource, created as a server-side dry run: what the API
    server kept of it (it drops extendedResourceName while its DRAExtendedResource gate is off)."""
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"generateName": PROBE_CLASS, "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
            "spec": {"extendedResourceName": settings.extended_resource_name,
                     "selectors": [{"cel": {"expression": f"device.driver == '{settings.device_class}'"}}]}}
    try:
        created = session.create(body, dry_run=True)
    except ApiError as err:
        return {"error": _error(err)}
    return {"extended_resource_name": (created.get("spec") or {}).get("extendedResourceName")}


def _gpuclusters(session: Session) -> list[str] | None:
    """The names of the GPUCluster objects, or None when no nvidia.com API serves that kind."""
    try:
        group = session.request("GET", "/apis/nvidia.com") or {}
    except ApiError:
        return None
    for version in group.get("versions") or []:
        path = f"/apis/{version['groupVersion']}"
        resources = (session.request("GET", path) or {}).get("resources") or []
        for resource in resources:
            if resource.get("kind") == "GPUCluster" and "/" not in resource["name"]:
                items = (session.request("GET", f"{path}/{resource['name']}") or {}).get("items") or []
                return [item["metadata"]["name"] for item in items]
    return None


def _list(session: Session, kind: str, namespace: str | None = None) -> list[dict[str, Any]] | None:
    try:
        return session.list(kind, namespace)
    except KindNotServed:
        return None


def read(session: Session, settings: Settings, nodes: list[str]) -> dict[str, Any]:
    """Every fact the readiness checks judge, as plain data."""
    facts: dict[str, Any] = {"targets": nodes}
    facts["version"] = (session.request("GET", "/version") or {}).get("gitVersion", "")
    try:
        facts["dra_resources"] = sorted(r["name"] for r in (session.request("GET", DRA_GROUP) or {}).get("resources") or [])
    except ApiError as err:
        facts["dra_resources"] = None if err.status == 404 else []
    facts["nodes"] = [node for name in nodes for node in session.list("Node", field_selector=f"metadata.name={name}")]
    facts["pods"] = session.pods_on(nodes)
    facts["clusterpolicies"] = _list(session, "ClusterPolicy")
    facts["gpuclusters"] = _gpuclusters(session)
    if settings.extended_resource:
        facts["gates"] = _gates(session, settings)
        facts["dry_run_class"] = _dry_run_class(session, settings) if facts["dra_resources"] else {
            "error": "resource.k8s.io/v1 is not served"}
        facts["clusterroles"] = session.list("ClusterRole")
        facts["clusterrolebindings"] = session.list("ClusterRoleBinding")
    facts["driver"] = [*session.list("DaemonSet", settings.driver_namespace),
                       *session.list("Deployment", settings.driver_namespace)]
    if settings.queue_namespace:
        facts["kueue"] = [*session.list("Deployment", settings.kueue_namespace)]
        facts["kueue_configmaps"] = session.list("ConfigMap", settings.kueue_namespace)
        facts["claim_templates"] = _list(session, "ResourceClaimTemplate", settings.queue_namespace)
    return facts
