"""The NVIDIA DRA driver as its chart installs it, changed as an operator would (helm upgrade --set
featureGates...): on the embedded cluster and on any other whose driver its chart installed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpushare.polling import wait_for
from tests.support.cluster import Cluster

DRA_DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"
DRA_PLUGIN = "nvidia-dra-driver-gpu-kubelet-plugin"
# The gate each sharing of the pilot needs (the chart leaves every alpha gate off).
SHARING_GATES = {"timeslicing": "TimeSlicingSettings", "mps": "MPSSupport"}


def _gates_text(gates: dict[str, bool]) -> str:
    """FEATURE_GATES as the driver's chart renders featureGates (`k=v,` each; nothing for none)."""
    return "".join(f"{k}={str(v).lower()}," for k, v in sorted(gates.items()))


def set_driver_gates(kube: Cluster, gates: dict[str, bool] | None) -> Callable[[], None]:
    """As `helm upgrade --set featureGates.<gate>=...` does: the kubelet plugin DaemonSet's FEATURE_GATES changed
    (`gates` on top of the ones it has; None: the chart's default, none), its pods rolled. Any cluster whose DRA
    driver its chart installed. Returns what puts the DaemonSet back."""
    apps = client.AppsV1Api(kube.api)
    try:
        daemonset = apps.read_namespaced_daemon_set(DRA_PLUGIN, DRA_DRIVER_NAMESPACE)
    except ApiException as err:
        raise AssertionError(f"the DRA driver's DaemonSet {DRA_DRIVER_NAMESPACE}/{DRA_PLUGIN} cannot be read: {err.reason}")
    before = kube.api.sanitize_for_serialization(daemonset.spec.template.spec.containers)
    containers = []
    for container in before:
        env = container.get("env") or []
        wanted: dict[str, bool] = {}
        if gates is not None:
            for item in env:
                if item.get("name") == "FEATURE_GATES":
                    wanted |= {k: v == "true" for k, _, v in (g.partition("=") for g in item.get("value", "").split(","))
                               if k}
            wanted |= gates
        env = [e for e in env if e.get("name") != "FEATURE_GATES"]
        env += [{"name": "FEATURE_GATES", "value": _gates_text(wanted)}] if wanted else []
        containers.append({**container, "env": env})
    value = {c["name"]: {e["name"]: e.get("value") for e in c["env"]}.get("FEATURE_GATES") for c in containers}

    def set_containers(wanted: list[dict[str, Any]]) -> None:
        apps.patch_namespaced_daemon_set(DRA_PLUGIN, DRA_DRIVER_NAMESPACE, [
            {"op": "replace", "path": "/spec/template/spec/containers", "value": wanted}])

    set_containers(containers)

    def rolled() -> bool:
        """Every kubelet-plugin pod runs with the gates (none runs before a node is labelled for it)."""
        pods = [p for p in kube.core.list_namespaced_pod(DRA_DRIVER_NAMESPACE).items
                if any(o.name == DRA_PLUGIN for o in p.metadata.owner_references or [])]
        return all(p.metadata.deletion_timestamp is None and p.status.phase == "Running" and all(
            {e.name: e.value for e in c.env or []}.get("FEATURE_GATES") == value[c.name] for c in p.spec.containers)
            for p in pods)

    wait_for(rolled, 120, f"the DRA kubelet plugin's pods to run with FEATURE_GATES {value}")
    return lambda: set_containers(before)


def set_plugin_node_selector(kube: Cluster, label: str) -> Callable[[], None]:
    """As the chart installed with `kubeletPlugin.nodeSelector: {<label>: "true"}`: the kubelet plugin's DaemonSet
    selects nodes by `label`. Returns what puts it back."""
    apps = client.AppsV1Api(kube.api)
    before = apps.read_namespaced_daemon_set(DRA_PLUGIN, DRA_DRIVER_NAMESPACE).spec.template.spec.node_selector

    def select(selector: dict[str, str] | None) -> None:
        apps.patch_namespaced_daemon_set(DRA_PLUGIN, DRA_DRIVER_NAMESPACE, [
            {"op": "replace", "path": "/spec/template/spec/nodeSelector", "value": selector}])

    select({label: "true"})
    return lambda: select(before)
