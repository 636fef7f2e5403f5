"""The simulated GPU Operator: one controller, driven by watches, that plays the operator
(ClusterPolicy -> DaemonSet, node labels), the device plugin with its config-manager and GFD
(node allocatable and labels), the kubelet's device admission, and the MIG manager."""

from __future__ import annotations

import datetime as dt
import json
import logging
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpushare.fleet import HARDWARE_ANNOTATION
from gpushare.gpu_catalog import product as lookup_product
from gpushare.kube import api_client, wait_for
from gpushare.simulator import clusterpolicy as cp
from gpushare.simulator.informer import Informer
from gpushare.simulator.mig import DISABLED, MigConfigError, layout
from gpushare.simulator.node_view import GPU, SHARED, compute
from gpushare.device_plugin_config import NO_SHARING, ConfigError, PluginConfig, parse
from gpushare.simulator.workqueue import WorkQueue

log = logging.getLogger("gpushare.simulator")

MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
MIG_APPLIED = "sim.gpushare.io/mig-applied"  # simulated hardware state: the config mig-parted applied
PAUSED = "paused-for-mig-change"
MIG_CLIENTS = ("device-plugin", "gpu-feature-discovery", "dcgm", "dcgm-exporter")
POLICY_KEY = "policy"
WORKERS = 8


@dataclass
class PluginState:
    """What the device plugin on one node has loaded."""

    pod_uid: str
    label_seen: str | None
    mig_strategy: str
    config: PluginConfig | None = None
    error: str | None = None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Simulator:
    def __init__(self, api: client.ApiClient, namespace: str):
        self.namespace = namespace
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.extensions = client.ApiextensionsV1Api(api)
        self.queue = WorkQueue()
        self.stop = threading.Event()
        self.plugins: dict[str, PluginState] = {}
        self.admitted: set[str] = set()
        # Status patches of the pods admission rejected, by UID: KWOK, which saw the pod Pending,
        # may still mark it Running after the rejection, and the kubelet never would.
        self.rejected: dict[str, dict[str, Any]] = {}
        self.nodes = Informer("nodes", self.core.list_node, lambda n: n.metadata.name, self._node_changed)
        self.pods = Informer("pods", self.core.list_pod_for_all_namespaces, self._pod_key, self._pod_changed)
        self.policies = Informer(
            "clusterpolicies",
            lambda **kw: self.custom.list_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, **kw),
            lambda o: o["metadata"]["name"], lambda *_: self.queue.add(POLICY_KEY),
        )
        self.daemonsets = Informer(
            "daemonsets", self.apps.list_namespaced_daemon_set, lambda d: d.metadata.name,
            lambda *_: self.queue.add(POLICY_KEY), namespace=namespace,
        )

    # ---- event routing -------------------------------------------------------------------
    @staticmethod
    def _pod_key(pod: Any) -> str:
        return f"{pod.metadata.namespace}/{pod.metadata.name}"

    def _node_changed(self, name: str, node: Any | None) -> None:
        if node is None:
            self.plugins.pop(name, None)
        else:
            self.queue.add(f"node/{name}")

    def _pod_changed(self, key: str, pod: Any | None) -> None:
        if pod is None or not pod.spec.node_name:
            return
        if self._is_plugin_pod(pod):
            self.queue.add(f"node/{pod.spec.node_name}")
        elif pod.metadata.uid in self.rejected:
            if pod.status.phase != "Failed":
                self.queue.add(f"pod/{key}")
        elif pod.metadata.uid not in self.admitted and pod.status.phase in ("Pending", "Running"):
            self.queue.add(f"pod/{key}")

    def _is_plugin_pod(self, pod: Any) -> bool:
        return pod.metadata.namespace == self.namespace and (pod.metadata.labels or {}).get("app") == cp.DAEMONSET

    # ---- start-up ------------------------------------------------------------------------
    def install(self) -> None:
        """The chart's install: CRD, namespace, ClusterPolicy instance (kept if present)."""
        try:
            self.extensions.create_custom_resource_definition(cp.crd())
        except ApiException as err:
            if err.status != 409:
                raise
        wait_for(lambda: any(c.type == "Established" and c.status == "True" for c in
                             self.extensions.read_custom_resource_definition(f"{cp.PLURAL}.{cp.GROUP}").status.conditions or []),
                 30, "the ClusterPolicy CRD to be established")
        for create in (
            lambda: self.core.create_namespace({"metadata": {"name": self.namespace}}),
            lambda: self.custom.create_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.default_instance()),
        ):
            try:
                create()
            except ApiException as err:
                if err.status != 409:
                    raise

    def run(self, ready_file: Path | None) -> None:
        self.install()
        informers = (self.policies, self.daemonsets, self.nodes, self.pods)
        for informer in informers:
            threading.Thread(target=informer.run, args=(self.stop,), name=informer.name, daemon=True).start()
        workers = [threading.Thread(target=self._work, name=f"worker-{i}", daemon=True) for i in range(WORKERS)]
        for worker in workers:
            worker.start()
        for informer in informers:
            informer.synced.wait()
        self.queue.add(POLICY_KEY)
        if ready_file:
            ready_file.write_text(_now())
        log.info("simulator running in namespace %s", self.namespace)
        self.stop.wait()
        self.queue.close()

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                if key == POLICY_KEY:
                    self.reconcile_policy()
                elif key.startswith("node/"):
                    self.reconcile_node(key.removeprefix("node/"))
                elif key.startswith("pod/"):
                    self.admit(key.removeprefix("pod/"))
            except ApiException as err:
                if err.status == 409:
                    self.queue.add(key)  # conflict: retry on fresh data
                elif err.status != 404:
                    log.warning("%s: API error %s %s: %s", key, err.status, err.reason, err.body)
            except Exception:  # noqa: BLE001 - one bad object must not stop the simulator
                log.exception("%s: reconcile failed", key)
            finally:
                self.queue.done(key)

    # ---- the operator: ClusterPolicy -> DaemonSet --------------------------------------------
    def reconcile_policy(self) -> None:
        policy = self.policies.get(cp.CLUSTER_POLICY)
        if policy is None:
            return
        rendered = cp.render_daemonset(policy, self.namespace)
        # Owned by the ClusterPolicy, as the operator does: deleting the policy removes the plugin.
        rendered["metadata"]["ownerReferences"] = [{
            "apiVersion": f"{cp.GROUP}/{cp.VERSION}", "kind": "ClusterPolicy", "name": cp.CLUSTER_POLICY,
            "uid": policy["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        current = self.daemonsets.get(cp.DAEMONSET)
        if current is None:
            self.apps.create_namespaced_daemon_set(self.namespace, rendered)
            current_ready = False
        else:
            applied = (current.metadata.annotations or {}).get(cp.HASH_ANNOTATION)
            if applied != rendered["metadata"]["annotations"][cp.HASH_ANNOTATION]:
                rendered["metadata"]["resourceVersion"] = current.metadata.resource_version
                self.apps.replace_namespaced_daemon_set(cp.DAEMONSET, self.namespace, rendered)
                current_ready = False
            else:
                status = current.status
                current_ready = (
                    (status.desired_number_scheduled or 0) == (status.number_ready or 0)
                    == (status.updated_number_scheduled or 0)
                    and status.observed_generation == current.metadata.generation
                )
        state = "ready" if current_ready else "notReady"
        if (policy.get("status") or {}).get("state") != state:
            self.custom.patch_cluster_custom_object_status(
                cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY, {"status": {"state": state}})

    # ---- per node: operator labels, MIG manager, device plugin + GFD ---------------------------
    def reconcile_node(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        annotations = node.metadata.annotations or {}
        if HARDWARE_ANNOTATION not in annotations:
            return
        hardware = json.loads(annotations[HARDWARE_ANNOTATION])
        gpu = lookup_product(hardware["product"])
        labels = node.metadata.labels or {}
        wanted = {f"nvidia.com/gpu.deploy.{c}": "true" for c in cp.DEPLOY_COMPONENTS
                  if f"nvidia.com/gpu.deploy.{c}" not in labels}
        if gpu.mig_capable and MIG_CONFIG not in labels:
            wanted[MIG_CONFIG] = DISABLED
        if wanted:
            self.core.patch_node(name, {"metadata": {"labels": wanted}})
            return  # the watch brings the node back with its labels
        if gpu.mig_capable and self._mig_manager(node, gpu, hardware["count"]):
            return
        self._device_plugin(node, gpu, hardware["count"])

    def _mig_manager(self, node: Any, gpu: Any, count: int) -> bool:
        """Apply a changed `nvidia.com/mig.config`; True when it wrote (the watch re-queues)."""
        labels = node.metadata.labels or {}
        annotations = node.metadata.annotations or {}
        desired = labels.get(MIG_CONFIG, DISABLED)
        applied = annotations.get(MIG_APPLIED, DISABLED)
        state = labels.get(MIG_STATE)
        if desired == applied and state in ("success", None) and not self._paused(labels):
            return False
        if state == "failed" and annotations.get("sim.gpushare.io/mig-failed") == desired:
            return False
        if state != "pending":
            paused = {f"nvidia.com/gpu.deploy.{c}": PAUSED for c in MIG_CLIENTS}
            self.core.patch_node(node.metadata.name, {"metadata": {"labels": {MIG_STATE: "pending", **paused}}})
            return True
        restored = {f"nvidia.com/gpu.deploy.{c}": "true" for c in MIG_CLIENTS}
        try:
            layout(gpu, desired, count)
        except MigConfigError as err:
            self._event(node, "Node", "", "MigConfigFailed", str(err))
            self.core.patch_node(node.metadata.name, {"metadata": {
                "labels": {MIG_STATE: "failed", **restored},
                "annotations": {"sim.gpushare.io/mig-failed": desired}}})
            return True
        self.core.patch_node(node.metadata.name, {"metadata": {
            "labels": {MIG_STATE: "success", **restored},
            "annotations": {MIG_APPLIED: desired, "sim.gpushare.io/mig-failed": None}}})
        return True

    @staticmethod
    def _paused(labels: dict[str, str]) -> bool:
        return any(labels.get(f"nvidia.com/gpu.deploy.{c}") == PAUSED for c in MIG_CLIENTS)

    def _plugin_pod(self, node_name: str) -> Any | None:
        for pod in self.pods.items():
            if (self._is_plugin_pod(pod) and pod.spec.node_name == node_name
                    and pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"):
                return pod
        return None

    def _device_plugin(self, node: Any, gpu: Any, count: int) -> None:
        name = node.metadata.name
        labels = node.metadata.labels or {}
        pod = self._plugin_pod(name)
        if pod is None:
            return
        label_value = labels.get(cp.CONFIG_LABEL)
        state = self.plugins.get(name)
        if state is None or state.pod_uid != pod.metadata.uid or state.label_seen != label_value:
            # A new plugin pod starts, or the config-manager sees its node label change: both read
            # the ConfigMap as it is now. A ConfigMap edit alone triggers neither.
            env = {e.name: e.value for c in pod.spec.containers for e in c.env or []}
            previous = state.config if state else None
            state = PluginState(pod.metadata.uid, label_value, env.get("MIG_STRATEGY", "single"), previous)
            self.plugins[name] = state
            try:
                state.config = self._load_config(pod, label_value)
                state.error = None
            except ConfigError as err:
                state.error = str(err)
        if state.error:
            self._set_pod_ready(pod, False, state.error)
            return
        mig_applied = (node.metadata.annotations or {}).get(MIG_APPLIED, DISABLED)
        try:
            view = compute(gpu, count, state.config or NO_SHARING, state.mig_strategy, layout(gpu, mig_applied, count))
        except (ConfigError, MigConfigError) as err:
            state.error = str(err)
            self._set_pod_ready(pod, False, state.error)
            return
        self._set_pod_ready(pod, True, None)
        self._publish(node, view)

    def _load_config(self, pod: Any, label_value: str | None) -> PluginConfig:
        config_map, default_key = cp.plugin_source(pod.spec)
        if not config_map:
            return NO_SHARING
        key = label_value or default_key
        try:
            data = self.core.read_namespaced_config_map(config_map, self.namespace).data or {}
        except ApiException as err:
            if err.status == 404:
                raise ConfigError(f'MountVolume.SetUp failed for volume "{config_map}": configmap "{config_map}" not found') from None
            raise
        if not key:
            return NO_SHARING
        if key not in data:
            raise ConfigError(f"Error: specified config {key} does not exist")
        return parse(data[key])

    def _publish(self, node: Any, view: Any) -> None:
        labels = node.metadata.labels or {}
        label_patch: dict[str, str | None] = {k: v for k, v in view.labels.items() if labels.get(k) != v}
        label_patch.update({k: None for k in labels if view.owns(k) and k not in view.labels})
        if label_patch:
            self.core.patch_node(node.metadata.name, {"metadata": {"labels": label_patch}})
        capacity = node.status.capacity or {}
        status_patch: dict[str, str | None] = {k: str(v) for k, v in view.resources.items() if capacity.get(k) != str(v)}
        status_patch.update({k: None for k in capacity if k.startswith("nvidia.com/") and k not in view.resources})
        allocatable = node.status.allocatable or {}
        drift = any(allocatable.get(k) != str(v) for k, v in view.resources.items())
        if status_patch or drift:
            full = {**status_patch, **{k: str(v) for k, v in view.resources.items()}}
            self.core.patch_node_status(node.metadata.name, {"status": {"capacity": full, "allocatable": full}})

    def _set_pod_ready(self, pod: Any, ready: bool, message: str | None) -> None:
        current = next((c.status == "True" for c in pod.status.conditions or [] if c.type == "Ready"), False)
        if current == ready:
            return
        value = "True" if ready else "False"
        conditions = [{"type": t, "status": value, "lastTransitionTime": _now()} for t in ("Ready", "ContainersReady")]
        statuses = []
        for container in pod.spec.containers:
            failing = not ready and container.name == ("config-manager" if len(pod.spec.containers) > 1 else container.name)
            state = ({"waiting": {"reason": "CrashLoopBackOff", "message": message}} if failing
                     else {"running": {"startedAt": _now()}})
            statuses.append({"name": container.name, "image": container.image, "ready": not failing,
                             "restartCount": 0, "state": state})
        self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {
            "status": {"conditions": conditions, "containerStatuses": statuses}})
        if message:
            self._event(pod, "Pod", pod.metadata.namespace, "FailedToLoadConfig", message)

    def _event(self, obj: Any, kind: str, namespace: str, reason: str, message: str) -> None:
        target_ns = namespace or "default"
        self.core.create_namespaced_event(target_ns, {
            "metadata": {"generateName": f"{obj.metadata.name}."},
            "involvedObject": {"kind": kind, "name": obj.metadata.name, "namespace": namespace,
                               "uid": obj.metadata.uid, "apiVersion": "v1"},
            "reason": reason, "message": message, "type": "Warning",
            "source": {"component": "gpushare-gpu-operator-sim"},
            "firstTimestamp": _now(), "lastTimestamp": _now(), "count": 1,
        })

    # ---- kubelet device admission -----------------------------------------------------------
    def admit(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return
        rejection = self.rejected.get(pod.metadata.uid)
        if rejection is not None:
            if pod.status.phase != "Failed":
                self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, rejection)
            return
        if pod.metadata.uid in self.admitted or pod.status.phase not in ("Pending", "Running"):
            return
        state = self.plugins.get(pod.spec.node_name)
        config = state.config if state else None
        self.admitted.add(pod.metadata.uid)
        if config is None or config.sharing.strategy == "none" or not config.sharing.fail_requests_greater_than_one:
            return
        resource = SHARED if config.sharing.rename_by_default else GPU
        # The kubelet calls Allocate once per container; the plugin validates each request.
        for container in [*(pod.spec.init_containers or []), *pod.spec.containers]:
            limits = (container.resources.limits or {}) if container.resources else {}
            requested = int(limits.get(resource, 0) or 0)
            if requested > 1:
                message = (
                    "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = "
                    f'invalid allocation request for "{resource}": invalid request: maximum request size '
                    f"for shared resources is 1; found {requested}, which is unexpected"
                )
                rejection = {"status": {
                    "phase": "Failed", "reason": "UnexpectedAdmissionError", "message": message,
                    "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": _now()}],
                    "containerStatuses": None}}
                self.rejected[pod.metadata.uid] = rejection
                self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, rejection)
                self._event(pod, "Pod", pod.metadata.namespace, "UnexpectedAdmissionError", message)
                return


def run_simulator(kubeconfig: Path | None, context: str | None, namespace: str, ready_file: Path | None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    simulator = Simulator(api_client(kubeconfig, context), namespace)
    signal.signal(signal.SIGTERM, lambda *_: simulator.stop.set())
    try:
        simulator.run(ready_file)
    except KeyboardInterrupt:
        simulator.stop.set()
    return 0
