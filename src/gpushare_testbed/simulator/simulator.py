"""The simulated GPU Operator as one process: informers on what it watches, a work queue, and the
controllers (operator.Operator: ClusterPolicy, node labels, driver upgrades; node_agent.NodeAgent:
MIG manager, device plugin, GFD, kubelet; nfd_master.NfdMaster: NodeFeature labels onto nodes;
driver_manager.DriverManager: the driver pods' init container; plus the kubelet's device admission
of workload pods).
Operand pods are real pods of real DaemonSets: kube-controller-manager creates them and KWOK runs
them, except the device-plugin and GFD pods, whose status the simulator writes as their kubelet."""

from __future__ import annotations

import datetime as dt
import logging
import signal
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from gpushare.k8s.session import ApiError, Unreachable
from gpushare.kube import api_client
from gpushare.polling import wait_for
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import dra_driver, nfd, operands, operator_objects
from gpushare_testbed.simulator.informer import Informer, name_key, namespaced_key
from gpushare_testbed.simulator.dra_kubelet import DraKubelet
from gpushare_testbed.simulator.driver_manager import DriverManager
from gpushare_testbed.simulator.kubelet import ENDPOINT_STOP_GRACE_S, admission_rejection
from gpushare_testbed.simulator.nfd_master import NfdMaster
from gpushare_testbed.simulator.node_agent import NodeAgent
from gpushare_testbed.simulator.nvidia_judge import NvidiaJudge
from gpushare_testbed.simulator.operator import Operator
from gpushare_testbed.simulator.rest import Obj, Rest
from gpushare_testbed.simulator.workqueue import WorkQueue

log = logging.getLogger("gpushare_testbed.simulator")
POLICY, UPGRADE = "policy", "upgrade"
WORKERS = 8
OPERAND_APPS = frozenset(name for name, *_ in operands.OPERANDS)


@dataclass(frozen=True)
class Options:
    configmap_refresh_seconds: float = 60.0  # kubelet sync period + ConfigMap cache TTL
    mig_reboot_seconds: float = 5.0  # how long a simulated node takes to reboot for a MIG mode change
    # from device plugin v0.18.2: how long after a config-manager starts its informer tells it the node label
    config_manager_label_seconds: float = 0.5
    endpoint_stop_grace_seconds: float = ENDPOINT_STOP_GRACE_S  # the kubelet's endpointStopGracePeriod
    driver_manager_timeout_seconds: float = 300.0  # k8s-driver-manager defaultGracePeriod
    operator_release: str = cp.NEWEST_RELEASE  # the chart release that installs the ClusterPolicy (cp.RELEASES)
    dra_driver_gates: str = ""  # the DRA driver chart's featureGates: none, as the chart's values.yaml
    dra_wipe_seconds: float = dra_driver.WIPE_DELAY_S  # the kubelet's wipe of a gone DRA plugin's slices


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rv(obj: Obj) -> int:
    return int(obj["metadata"].get("resourceVersion") or 0)


class Simulator:
    def __init__(self, rest: Rest, namespace: str, options: Options, judge: NvidiaJudge) -> None:
        self.rest = rest
        self.namespace = namespace
        self.options = options
        self.judge = judge  # what the device plugin, GFD and the MPS daemon accept of a config
        self.queue = WorkQueue()
        self.stop = threading.Event()
        self.operator = Operator(self)
        self.agent = NodeAgent(self)
        self.nfd_master = NfdMaster(self)
        self.driver_manager = DriverManager(self)
        self.dra = DraKubelet(self, dra_driver.parse_gates(options.dra_driver_gates), options.dra_wipe_seconds)
        self.admitted: set[str] = set()
        # Status patches of the pods admission rejected, by UID: KWOK, which saw the pod Pending,
        # may still mark it Running after the rejection, and the kubelet never would.
        self.rejected: dict[str, Obj] = {}
        self._index_lock = threading.Lock()
        self._pods_by_node: dict[str, dict[str, Obj]] = defaultdict(dict)
        self._pods_by_app: dict[str, dict[str, Obj]] = defaultdict(dict)  # this namespace's pods, by app label
        ns = namespace
        self.policies = Informer(rest, f"/apis/{cp.GROUP}/{cp.VERSION}/{cp.PLURAL}", name_key, self._policy_changed)
        self.gpuclusters = (Informer(rest, f"/apis/{cp.GROUP}/{cp.GPUCLUSTER_VERSION}/{cp.GPUCLUSTER_PLURAL}", name_key,
                                     self._gpucluster_changed) if options.operator_release in cp.GPUCLUSTER_RELEASES else None)
        self.daemonsets = Informer(rest, f"/apis/apps/v1/namespaces/{ns}/daemonsets", name_key, self._daemonset_changed)
        self.revisions = Informer(rest, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions", name_key,
                                  lambda *_: self._queue(POLICY, UPGRADE))
        self.configmaps = Informer(rest, f"/api/v1/namespaces/{ns}/configmaps", name_key, self._configmap_changed)
        self.service_accounts = Informer(rest, f"/api/v1/namespaces/{ns}/serviceaccounts", name_key,
                                         lambda _, old, new: self._queue(POLICY) if new is None else None)
        self.nodes = Informer(rest, "/api/v1/nodes", name_key, self._node_changed)
        self.pods = Informer(rest, "/api/v1/pods", namespaced_key, self._pod_changed)
        self.node_features = Informer(rest, f"/apis/{nfd.GROUP}/{nfd.VERSION}/{nfd.PLURAL}", namespaced_key,
                                      self._node_feature_changed)

    # ---- caches ------------------------------------------------------------------------------------
    def pods_on(self, node: str, app: str | None = None) -> list[Obj]:
        with self._index_lock:
            pods = list(self._pods_by_node.get(node, {}).values())
        return pods if app is None else [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == app
                                         and p["metadata"].get("namespace") == self.namespace]

    def pods_of(self, app: str) -> list[Obj]:
        with self._index_lock:
            return list(self._pods_by_app.get(app, {}).values())

    def _app_of(self, pod: Obj) -> str | None:
        meta = pod["metadata"]
        return (meta.get("labels") or {}).get("app") if meta.get("namespace") == self.namespace else None

    def policy(self) -> Obj | None:
        """The ClusterPolicy the operator reconciles: the oldest, the lowest name among equals; the
        others it leaves alone, their status unwritten (v26.7 controllers/active_config.go
        getSingletonClusterPolicy; the `ignored` state it sets is never sent to the API server)."""
        return min(self.policies.items(), default=None,
                   key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))

    def gpucluster(self) -> str:
        """The GPUCluster beside the ClusterPolicies ("" for none): while there is one the operator
        reconciles no ClusterPolicy and labels no node (clusterpolicy_controller.go,
        nodelabeling_controller.go: "only one may be present at a time")."""
        return min((c["metadata"]["name"] for c in self.gpuclusters.items()), default="") if self.gpuclusters else ""

    def operand_pod(self, node: str, app: str) -> Obj | None:
        """The live (not terminating) pod of an operand DaemonSet on a node."""
        return next((p for p in self.pods_on(node, app) if "deletionTimestamp" not in p["metadata"]), None)

    def remember(self, informer: Informer, obj: Obj) -> None:
        """Put a write's response in the cache unless the watch already brought something newer."""
        key = informer.key(obj)
        with informer.lock:
            current = informer.cache.get(key)
            if current is None or _rv(current) < _rv(obj):
                informer.cache[key] = obj

    def patch_node(self, name: str, body: Obj) -> None:
        self.remember(self.nodes, self.rest.patch(f"/api/v1/nodes/{name}", body))

    def patch_node_status(self, name: str, status: Obj) -> None:
        self.remember(self.nodes, self.rest.patch(f"/api/v1/nodes/{name}/status", {"status": status}))

    def event(self, kind: str, name: str, namespace: str, event_type: str, reason: str, message: str,
              uid: str | None = None, component: str = "gpushare-gpu-operator-sim") -> None:
        involved: Obj = {"kind": kind, "name": name, "apiVersion": "v1"}
        if namespace:
            involved["namespace"] = namespace
        if uid:
            involved["uid"] = uid
        self.rest.create(f"/api/v1/namespaces/{namespace or 'default'}/events", {
            "metadata": {"generateName": f"{name}."}, "involvedObject": involved, "reason": reason,
            "message": message, "type": event_type, "source": {"component": component},
            "firstTimestamp": _now(), "lastTimestamp": _now(), "count": 1,
        })

    # ---- event routing -----------------------------------------------------------------------------
    def _queue(self, *keys: str) -> None:
        for key in keys:
            self.queue.add(key)

    def _all_nodes(self) -> None:
        for node in self.nodes.items():
            self.queue.add(f"node/{node['metadata']['name']}")

    def _policy_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._queue(POLICY, UPGRADE)
        if (old or {}).get("spec") != (new or {}).get("spec"):
            self._all_nodes()

    def _gpucluster_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._queue(POLICY)
        self._all_nodes()

    def _daemonset_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._queue(POLICY)
        if key == operands.DRIVER:
            self._queue(UPGRADE)

    def _configmap_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if key in operator_objects.managed_config_map_names():
            self._queue(POLICY)

    def _node_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._queue(f"node/{key}", UPGRADE)
        if (old or {}).get("metadata", {}).get("labels") != (new or {}).get("metadata", {}).get("labels"):
            self._queue(f"dra/{key}")

    def _node_feature_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for node in {nfd.node_of(o) for o in (old, new) if o is not None} - {""}:
            self.queue.add(f"nfd/{node}")

    def _pod_changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        pod = new or old
        assert pod is not None  # noqa: S101 - narrows the type: the informer passes one of them
        node = pod["spec"].get("nodeName")
        uid = pod["metadata"]["uid"]
        with self._index_lock:
            if old is not None and old["spec"].get("nodeName"):
                self._pods_by_node[old["spec"]["nodeName"]].pop(key, None)
            if new is not None and node:
                self._pods_by_node[node][key] = new
            if old is not None and (old_app := self._app_of(old)):
                self._pods_by_app[old_app].pop(key, None)
            if new is not None and (new_app := self._app_of(new)):
                self._pods_by_app[new_app][key] = new
        if new is None:
            self.agent.forget(uid)
            self.dra.forget(uid)
            self.admitted.discard(uid)
            self.rejected.pop(uid, None)
        if not node:
            return
        if self.dra.is_plugin(pod):
            self.queue.add(f"dra/{node}")
            return
        if self.dra.has_claims(pod):
            if new is not None:
                self.queue.add(f"dra-pod/{key}")
            return
        app = (pod["metadata"].get("labels") or {}).get("app")
        if pod["metadata"].get("namespace") == self.namespace and app in OPERAND_APPS:
            self.queue.add(f"node/{node}")
            if app == operands.DRIVER or new is None:
                self.queue.add(f"driver/{node}")
            if app in (operands.DRIVER, operands.VALIDATOR) or new is None:
                self.queue.add(UPGRADE)
            return
        if new is None:
            self.queue.add(UPGRADE)
        elif uid in self.rejected:
            if new.get("status", {}).get("phase") != "Failed":
                self.queue.add(f"pod/{key}")
        elif uid not in self.admitted and new.get("status", {}).get("phase") in ("Pending", "Running"):
            self.queue.add(f"pod/{key}")

    # ---- start-up ----------------------------------------------------------------------------------
    def install(self) -> None:
        """The chart's install: CRDs (ClusterPolicy, GPUCluster from v26.7; NodeFeature, from its NFD
        subchart), namespace, ClusterPolicy instance (kept if present); and the NVIDIA DRA driver's chart."""
        crds = [cp.crd(), nfd.crd()] + ([cp.gpucluster_crd()] if self.gpuclusters else [])
        for crd in crds:
            try:
                self.rest.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            except ApiError as err:
                if err.status != 409:
                    raise

        def established() -> bool:
            for name in (c["metadata"]["name"] for c in crds):
                crd = self.rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                if not any(c["type"] == "Established" and c["status"] == "True"
                           for c in crd.get("status", {}).get("conditions") or []):
                    return False
            return True

        wait_for(established, 30, "the chart's CRDs to be established")
        for path, body in (("/api/v1/namespaces", {"metadata": {"name": self.namespace}}),
                           (f"/apis/{cp.GROUP}/{cp.VERSION}/{cp.PLURAL}", cp.default_instance(self.options.operator_release))):
            try:
                self.rest.create(path, body)
            except ApiError as err:
                if err.status != 409:
                    raise
        self.dra.install()

    def run(self, ready_file: Path | None) -> None:
        self.install()
        informers = [informer for informer in (
            self.policies, self.gpuclusters, self.daemonsets, self.revisions, self.configmaps, self.service_accounts,
            self.nodes, self.pods, self.node_features, self.dra.slices) if informer is not None]
        for informer in informers:
            threading.Thread(target=informer.run, args=(self.stop,), name=informer.name, daemon=True).start()
        for informer in informers:
            informer.synced.wait()
        self.driver_manager.adopt()
        for i in range(WORKERS):
            threading.Thread(target=self._work, name=f"worker-{i}", daemon=True).start()
        self._queue(POLICY, UPGRADE)
        self._all_nodes()
        if ready_file:
            ready_file.write_text(_now())
        log.info("simulator running in namespace %s", self.namespace)
        self.stop.wait()
        self.queue.close()

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                if key == POLICY:
                    self.operator.reconcile_policy()
                elif key == UPGRADE:
                    self.operator.reconcile_upgrades()
                elif key.startswith("node/"):
                    self.agent.reconcile(key.removeprefix("node/"))
                elif key.startswith("nfd/"):
                    self.nfd_master.reconcile(key.removeprefix("nfd/"))
                elif key.startswith("driver/"):
                    self.driver_manager.reconcile(key.removeprefix("driver/"))
                elif key.startswith("pod/"):
                    self.admit(key.removeprefix("pod/"))
                elif key.startswith("dra/"):
                    self.dra.reconcile(key.removeprefix("dra/"))
                elif key.startswith("dra-pod/"):
                    self.dra.prepare(key.removeprefix("dra-pod/"))
            except Exception as err:
                if isinstance(err, ApiError) and not isinstance(err, Unreachable):
                    if err.status in (409, 429, 500, 503):
                        self.queue.add_after(key, 0.2)  # conflict or overload: retry on fresh data
                    elif err.status != 404:
                        log.warning("%s: API error %s %s: %s", key, err.status, err.reason, err.message)
                else:
                    log.exception("%s: reconcile failed", key)
                    self.queue.add_after(key, 1.0)
            finally:
                self.queue.done(key)

    # ---- the kubelet's device admission --------------------------------------------------------------
    def admit(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return
        meta, status = pod["metadata"], pod.get("status") or {}
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        rejection = self.rejected.get(meta["uid"])
        if rejection is not None:
            if status.get("phase") != "Failed":
                self.rest.patch(path, rejection)
            return
        if meta["uid"] in self.admitted or status.get("phase") not in ("Pending", "Running"):
            return
        message = admission_rejection(pod, self.agent.plugin_config(pod["spec"]["nodeName"]))
        self.admitted.add(meta["uid"])
        if message is None:
            return
        rejection = {"status": {
            "phase": "Failed", "reason": "UnexpectedAdmissionError", "message": message,
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": _now()}],
            "containerStatuses": None}}
        self.rejected[meta["uid"]] = rejection
        self.rest.patch(path, rejection)
        self.event("Pod", meta["name"], meta["namespace"], "Warning", "UnexpectedAdmissionError", message, uid=meta["uid"])


def run_simulator(kubeconfig: Path | None, context: str | None, namespace: str, ready_file: Path | None,
                  options: Options, judge_binary: Path) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    judge = NvidiaJudge(judge_binary)
    simulator = Simulator(Rest(api_client(kubeconfig, context)), namespace, options, judge)
    signal.signal(signal.SIGTERM, lambda *_: simulator.stop.set())
    try:
        simulator.run(ready_file)
    except KeyboardInterrupt:
        simulator.stop.set()
    finally:
        judge.close()
    return 0
