"""The DRA driver's kubelet plugin and the kubelet's DRA manager on the simulated nodes (KWOK has
neither). The plugin's pods are real pods of the chart's DaemonSet, which kube-controller-manager places
on the nodes carrying its label and KWOK runs; while one runs on a node its pool is published, and
when it is gone the kubelet wipes the node's slices after WIPE_DELAY_S. A pod with claims starts only
once each claim is allocated (by kube-scheduler), reserved for it and prepared by the plugin; until
then it stays Pending with the kubelet's FailedPrepareDynamicResources event, retried."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import TYPE_CHECKING

from gpushare.k8s.session import ApiError
from gpushare_testbed.simulator import dra_driver as dra
from gpushare_testbed.simulator.informer import Informer, name_key
from gpushare_testbed.simulator.rest import Obj

if TYPE_CHECKING:
    from gpushare_testbed.simulator.simulator import Simulator

log = logging.getLogger(__name__)
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
PREPARE_RETRY_S = 2.0


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class DraKubelet:
    def __init__(self, sim: Simulator, gates: dict[str, bool], wipe_delay_s: float) -> None:
        self.sim = sim
        self.gates = gates
        self.wipe_delay_s = wipe_delay_s
        self.slices = Informer(sim.rest, SLICES, name_key, self._slice_changed)
        self._gone: dict[str, float] = {}  # node -> when its plugin stopped
        self._said: dict[str, str] = {}  # pod uid -> the last prepare failure reported
        self._lock = threading.Lock()

    # ---- the chart's install ---------------------------------------------------------------------
    def install(self) -> None:
        for path, body in (("/api/v1/namespaces", {"metadata": {"name": dra.NAMESPACE}}),
                           (f"/apis/apps/v1/namespaces/{dra.NAMESPACE}/daemonsets", dra.daemonset(self.gates)),
                           ("/apis/resource.k8s.io/v1/deviceclasses", dra.device_class())):
            try:
                self.sim.rest.create(path, body)
            except ApiError as err:
                if err.status != 409:
                    raise

    # ---- routing ---------------------------------------------------------------------------------
    def _slice_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        spec = (new or old or {}).get("spec") or {}
        if spec.get("driver") == dra.DRIVER and spec.get("nodeName"):
            self.sim.queue.add(f"dra/{spec['nodeName']}")

    @staticmethod
    def is_plugin(pod: Obj) -> bool:
        meta = pod["metadata"]
        return meta.get("namespace") == dra.NAMESPACE and all(
            (meta.get("labels") or {}).get(k) == v for k, v in dra.COMPONENT.items())

    @staticmethod
    def has_claims(pod: Obj) -> bool:
        return bool((pod.get("spec") or {}).get("resourceClaims")) or dra.extended_resource_claim(pod) is not None

    def forget(self, uid: str) -> None:
        self._said.pop(uid, None)

    # ---- the plugin: publish the node's pool, or wipe it once the plugin is gone -------------------
    def _plugin_pod(self, node: str) -> Obj | None:
        for pod in self.sim.pods_on(node):
            status = pod.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            if self.is_plugin(pod) and "deletionTimestamp" not in pod["metadata"] and status.get("phase") == "Running" and ready:
                return pod
        return None

    def gates_on(self, node: str) -> dict[str, bool] | None:
        """The gates of the plugin running on the node, None when none runs there."""
        pod = self._plugin_pod(node)
        return None if pod is None else dra.pod_gates(pod)

    def reconcile(self, node_name: str) -> None:
        mine = [s for s in self.slices.items() if (s.get("spec") or {}).get("driver") == dra.DRIVER
                and s["spec"].get("nodeName") == node_name]
        node = self.sim.nodes.get(node_name)
        if node is not None and self._plugin_pod(node_name) is not None:
            with self._lock:
                self._gone.pop(node_name, None)
            self._publish(node, mine)
            return
        if not mine:
            return
        with self._lock:
            since = self._gone.setdefault(node_name, time.monotonic())
        due = since + self.wipe_delay_s - time.monotonic()
        if due > 0 and node is not None:
            self.sim.queue.add_after(f"dra/{node_name}", due)
            return
        for stale in mine:
            self._delete(stale)
        with self._lock:
            self._gone.pop(node_name, None)

    def _delete(self, stale: Obj) -> None:
        name = stale["metadata"]["name"]
        try:
            self.sim.rest.delete(f"{SLICES}/{name}")
        except ApiError as err:
            if err.status != 404:
                raise
        with self.slices.lock:  # not seen again before the watch tells
            self.slices.cache.pop(name, None)

    def _publish(self, node: Obj, mine: list[Obj]) -> None:
        """The pool as the plugin's resourceslice controller keeps it: one slice of the node's GPUs at
        the top generation, a new generation when they change, other slices of the pool deleted."""
        devices = dra.devices(node)
        top = max((s["spec"]["pool"]["generation"] for s in mine), default=0)
        current = [s for s in mine if s["spec"]["pool"]["generation"] == top]
        if len(current) == 1 and current[0]["spec"].get("devices") == devices and \
                current[0]["spec"]["pool"].get("resourceSliceCount") == 1:
            keep = current
        else:
            created = self.sim.rest.create(SLICES, dra.resource_slice(node, devices, top + 1))
            self.sim.remember(self.slices, created)
            keep = [created]
        for stale in mine:
            if stale not in keep:
                self._delete(stale)

    # ---- the kubelet: prepare a pod's claims, then start it ---------------------------------------
    def prepare(self, key: str) -> None:
        pod = self.sim.pods.get(key)
        if pod is None or "deletionTimestamp" in pod["metadata"] or not pod["spec"].get("nodeName"):
            return
        meta, status = pod["metadata"], pod.get("status") or {}
        if status.get("phase") not in (None, "Pending"):
            return
        node = pod["spec"]["nodeName"]
        gates = self.gates_on(node)
        problems = []
        for name in dra.pod_claim_names(pod):
            claim = None
            if name:
                try:
                    claim = self.sim.rest.get(f"/apis/resource.k8s.io/v1/namespaces/{meta['namespace']}/resourceclaims/{name}")
                except ApiError as err:
                    if err.status != 404:
                        raise
            problem = dra.claim_problem(claim, name or "(not generated yet)", pod, gates)
            if problem:
                problems.append(f"NodePrepareResources failed for ResourceClaim {name}: {problem}" if claim else problem)
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        if not problems:
            host = ((self.sim.nodes.get(node) or {}).get("status") or {}).get("addresses") or [{}]
            self.sim.rest.patch(path, {"status": dra.running_status(pod, _now(), host[0].get("address", "10.0.0.1"))})
            self.forget(meta["uid"])
            return
        message = "Failed to prepare dynamic resources: " + "; ".join(problems)
        if self._said.get(meta["uid"]) != message:
            self._said[meta["uid"]] = message
            self.sim.rest.patch(path, {"status": dra.waiting_status(pod, _now())})
            self.sim.event("Pod", meta["name"], meta["namespace"], "Warning", "FailedPrepareDynamicResources", message,
                           uid=meta["uid"], component="kubelet")
        self.sim.queue.add_after(f"dra-pod/{key}", PREPARE_RETRY_S)
