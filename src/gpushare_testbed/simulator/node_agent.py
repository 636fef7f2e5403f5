"""Everything that runs ON a simulated GPU node: the operator's node labels, the MIG manager, the
device plugin and GFD pods with their config-manager (as their kubelet reports them), GFD's labels
(on the node, or from v0.19 in its NFD NodeFeature object, which nfd_master copies to the node) and
the kubelet's extended resources. Decisions come from operator.node_labels, mig_manager,
config_manager, model.releases, plugin_version, node_view, nfd, kubelet and nvidia_judge (NVIDIA's code: which
configs the device plugin, GFD and the MPS control daemon accept); this module reads the
Simulator's caches and writes the results."""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from gpushare_testbed.fleet import HARDWARE_ANNOTATION
from gpushare.gpu_catalog import GpuProduct
from gpushare.gpu_catalog import product as lookup_product
from gpushare.k8s.session import ApiError
from gpushare_testbed.simulator.mps_daemon import LIMITS_ANNOTATION, ShareLimits, limits_annotation, replicas_refusal, share_limits
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import mig_manager, nfd, operands
from gpushare_testbed.simulator.config_manager import ManagedPod
from gpushare_testbed.simulator.kubelet import conditions_differ, managed_pod_status, node_resources
from gpushare_testbed.simulator.mig import Layout, generated_config
from gpushare_testbed.simulator.node_view import GPU, SHARED, gfd_labels, gfd_owns, node_ready, plugin_resources
from gpushare_testbed.simulator.nvidia_judge import DEVICE_PLUGIN, GFD, MPS_CONTROL_DAEMON, ConfigError, NvidiaJudge, PluginConfig
from gpushare_testbed.simulator.operator import node_labels
from gpushare_testbed.simulator.plugin_version import gfd_uses_node_feature_api, init_waits_for_label, signal_failure
from gpushare_testbed.simulator.rest import Obj

# A fault to test against: the device plugin on a node so annotated crashes with the annotation's
# message whenever its config shares (as a driver that rejects time-slicing would), and never
# becomes Ready until the node is back on a config that does not share.
PLUGIN_FAULT_ANNOTATION = "sim.gpushare.io/device-plugin-fault"
# A fault to test against: GPUs of the node hit an Xid (79: fallen off the bus), `{"gpus": [index, ...],
# "at": Unix seconds}`. A device plugin running since before `at` reports their devices unhealthy
# (its health check, internal/rm/health.go); one started or reloaded after has forgotten them, as
# upstream's does (the health state lives in the plugin process only).
XID_ANNOTATION = "sim.gpushare.io/xid-gpus"
# A fault to test against: the next N device-plugin starts on the node while it carries a config
# label (a pod's start, or the in-place restart of its plugins a SIGHUP causes) register 0 devices,
# the pod Running and Ready, until the pod restarts (NVIDIA/k8s-device-plugin#1645, open). Each
# start it hits takes one off the count and leaves a Warning event ZERO_DEVICES_REASON on its pod.
ZERO_START_ANNOTATION = "sim.gpushare.io/device-plugin-zero-starts"
ZERO_DEVICES_REASON = "SimulatedZeroDevices"
# A test's knob: the kubelet's endpointStopGracePeriod on this node, in seconds (the simulator's
# option, 5 minutes like the kubelet, elsewhere).
STOP_GRACE_ANNOTATION = "sim.gpushare.io/endpoint-stop-grace-seconds"

if TYPE_CHECKING:
    from gpushare_testbed.simulator.simulator import Simulator

log = logging.getLogger("gpushare_testbed.simulator.node")
# The operand pods this agent is the kubelet of (their status is written here, never by KWOK's
# pod stages, which leave these apps alone: data/kwok-stages.yaml)
CONFIG_MANAGED_APPS = (operands.MPS_CONTROL_DAEMON, operands.DEVICE_PLUGIN, operands.GFD)
MIG_CLIENT_APPS = (operands.DEVICE_PLUGIN, operands.GFD, "nvidia-dcgm-exporter", "nvidia-dcgm")
PluginLoad = tuple[PluginConfig, dict[str, int]]
MpsLoad = tuple[PluginConfig, dict[str, ShareLimits]]  # the MPS servers it started: resource -> limits per share
ENTRYPOINT_EXECS = {"nvidia-device-plugin": "nvidia-device-plugin"}  # main container -> what its entrypoint execs


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _env(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or [] if "name" in e}


def flag_env(pod: Obj, container: str) -> dict[str, str]:
    """The environment a container's flags read: its variables set by value (none from a field is a flag's)."""
    env = _container(pod, container).get("env") or []
    return {e["name"]: e.get("value", "") for e in env if "name" in e and "valueFrom" not in e}


def _container(pod: Obj, name: str) -> Obj:
    return next((c for c in pod["spec"].get("containers") or [] if c["name"] == name), {})


def config_source(pod: Obj) -> tuple[str | None, str, str]:
    """(ConfigMap, DEFAULT_CONFIG, image) of the pod's config-manager-init; (None, '', '') without one."""
    init = next((c for c in pod["spec"].get("initContainers") or [] if c["name"] == "config-manager-init"), None)
    if init is None:
        return None, "", ""
    mount = next((m["name"] for m in init.get("volumeMounts") or [] if m.get("mountPath") == "/available-configs"), None)
    volume = next((v for v in pod["spec"].get("volumes") or [] if v["name"] == mount), {})
    return (volume.get("configMap") or {}).get("name"), _env(init).get("DEFAULT_CONFIG", ""), init.get("image", "")


def mig_strategy_of(pod: Obj, main: str) -> str:
    """The strategy the plugin or GFD runs with: its MIG_STRATEGY, else the binary's default `none`."""
    return _env(_container(pod, main)).get("MIG_STRATEGY") or "none"


class NodeAgent:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.managed: dict[str, ManagedPod[Any]] = {}  # by pod uid
        self.mig_runs: dict[str, mig_manager.MigRun] = {}
        self.generated: dict[str, str] = {}  # node -> the mig-manager pod that wrote <node>-mig-config
        self.wakeups: dict[str, float] = {}
        self.stopped: dict[str, dict[str, float]] = {}  # node -> resource -> when no plugin served it any more
        self.zero_plugins: set[str] = set()  # device-plugin pods that registered 0 devices (ZERO_START_ANNOTATION)
        self.plugin_starts: dict[str, float] = {}  # device-plugin pod -> when it last started or reloaded its plugins

    def forget(self, uid: str) -> None:
        self.managed.pop(uid, None)
        self.zero_plugins.discard(uid)
        self.plugin_starts.pop(uid, None)

    def plugin_config(self, node: str) -> PluginConfig | None:
        """The config the device plugin on `node` serves with (None while it does not run)."""
        pod = self.sim.operand_pod(node, operands.DEVICE_PLUGIN)
        state = self.managed.get(pod["metadata"]["uid"]) if pod else None
        return state.loaded[0] if state is not None and state.running else None

    def reconcile(self, name: str) -> None:
        sim = self.sim
        node = sim.nodes.get(name)
        if node is None:
            self.mig_runs.pop(name, None)
            self.stopped.pop(name, None)
            self.generated.pop(name, None)
            return
        meta = node["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        policy = sim.policy()
        # the node labeller stops while a GPUCluster is beside the ClusterPolicy (nodelabeling_controller.go)
        label_patch: dict[str, str | None] = {} if sim.gpucluster() else dict(
            node_labels(labels, (policy or {}).get("spec") if policy else None))
        annotation_patch: dict[str, str | None] = {}
        mig_run = None
        if HARDWARE_ANNOTATION in annotations:
            hardware = json.loads(annotations[HARDWARE_ANNOTATION])
            product, gpus = lookup_product(hardware["product"]), int(hardware["count"])
            now = time.time()
            if product.mig_capable:
                mig_run = self._mig_manager(node, product, gpus, now, label_patch, annotation_patch)
            layout = mig_manager.applied_layout(annotations, gpus)
            fault = annotations.get(PLUGIN_FAULT_ANNOTATION)
            mps = self._config_managed(node, operands.MPS_CONTROL_DAEMON, "mps-control-daemon-ctr", now,
                                       lambda pod: _mps_loader(sim.judge, pod, product, layout))
            if mps is not None:
                self._annotate_limits(mps[1], mps[0].loaded[1] if mps[0].running else {})
            serving = bool(mps is not None and mps[0].running and mps[0].loaded[1])
            plugin = self._config_managed(node, operands.DEVICE_PLUGIN, "nvidia-device-plugin", now,
                                          lambda pod: self._plugin_loader(pod, layout, fault, serving))
            if plugin is not None and plugin[0].running and self.plugin_starts.get(plugin[0].uid) != plugin[0].started_at:
                self.plugin_starts[plugin[0].uid] = plugin[0].started_at
                if labels.get(cp.CONFIG_LABEL):
                    self._zero_start(name, annotations, plugin[1], annotation_patch)
            if plugin is not None and serving and _waits_for_daemon(plugin[0]):
                plugin[0].retry(now, self._plugin_loader(plugin[1], layout, fault, serving))
                self._write_pod_status(plugin[1], plugin[0], "nvidia-device-plugin")
            gfd = self._config_managed(node, operands.GFD, "gpu-feature-discovery", now,
                                       lambda pod: _gfd_loader(sim.judge, pod))
            self._kubelet_resources(node, plugin, now)
            if gfd is not None and gfd[0].running:
                state, pod = gfd
                wanted = gfd_labels(product, state.loaded, mig_strategy_of(pod, "gpu-feature-discovery"), layout,
                                    int(state.started_at))
                main = _container(pod, "gpu-feature-discovery")
                if gfd_uses_node_feature_api(main.get("image", ""), _env(main)):
                    self._publish_node_feature(name, pod, wanted)
                else:
                    label_patch.update({k: v for k, v in wanted.items() if labels.get(k) != v})
                    label_patch.update({k: None for k in labels if gfd_owns(k) and k not in wanted})
        label_patch = {k: v for k, v in label_patch.items() if labels.get(k) != v}
        annotation_patch = {k: v for k, v in annotation_patch.items() if annotations.get(k) != v}
        if label_patch or annotation_patch:
            sim.patch_node(name, {"metadata": {"labels": label_patch, "annotations": annotation_patch}})
        if mig_run is not None:
            self.mig_runs[name] = mig_run  # only once what it decided is written

    # ---- the MIG manager ------------------------------------------------------------------------
    def _mig_manager(self, node: Obj, product: GpuProduct, gpus: int, now: float, label_patch: dict[str, str | None],
                     annotation_patch: dict[str, str | None]) -> mig_manager.MigRun | None:
        """Add the MIG manager's writes to the patches; its run state to keep once they are written."""
        sim = self.sim
        name = node["metadata"]["name"]
        pod = sim.operand_pod(name, operands.MIG_MANAGER)
        if pod is None or pod.get("status", {}).get("phase") != "Running":
            return None
        driver = sim.operand_pod(name, operands.DRIVER)
        if driver is not None and sim.driver_manager.busy(name, driver):
            return None  # its toolkit-validation init container waits for the driver (KWOK ran the pod anyway)
        annotations = node["metadata"].get("annotations") or {}
        env = _env(_container(pod, "nvidia-mig-manager"))
        timeout = annotations.get(mig_manager.CLIENT_TIMEOUT_ANNOTATION)
        facts = mig_manager.NodeFacts(
            labels={**(node["metadata"].get("labels") or {}), **{k: v for k, v in label_patch.items() if v is not None}},
            annotations=annotations,
            product=product, gpus=gpus,
            config_text=self._mig_configs(name, pod, env, product, annotations),
            pod_uid=pod["metadata"]["uid"],
            # reconfigure.go waitForPodsToBeDeleted, waitForPodsWithNodeSelector
            clients_running=any(sim.pods_on(name, app) for app in MIG_CLIENT_APPS) or any(
                mig_manager.client_daemonset_pod(p) for p in sim.pods_on(name)),
            with_reboot=env.get("WITH_REBOOT", "") in ("1", "t", "T", "TRUE", "true", "True"),  # strconv.ParseBool
            client_timeout=float(timeout) if timeout else mig_manager.CLIENT_TIMEOUT_S,
        )
        run, decision = mig_manager.step(copy.deepcopy(self.mig_runs.get(name)), facts, now, sim.options.mig_reboot_seconds)
        if decision is None:
            return run
        label_patch.update(decision.labels)
        annotation_patch.update(decision.annotations)
        if decision.event:
            sim.event("Node", name, "", "Warning", "MigConfigFailed", decision.event)
        if decision.delete_validator:
            for validator in sim.pods_on(name, operands.VALIDATOR):
                try:
                    sim.rest.delete(f"/api/v1/namespaces/{sim.namespace}/pods/{validator['metadata']['name']}")
                except ApiError as err:
                    if err.status != 404:
                        raise
        if decision.wake_after is not None:
            sim.queue.add_after(f"node/{name}", decision.wake_after)
        return run

    def _mig_configs(self, node: str, pod: Obj, env: dict[str, str], product: GpuProduct,
                     annotations: dict[str, str]) -> str | None:
        """The config file of this MIG manager (cmd/nvidia-mig-manager/main.go setupMigConfig): the
        custom ConfigMap (CONFIG_FILE); else the one it generated from the GPUs at its start (from
        v0.14.0), kept in ConfigMap <node>-mig-config (owned by its pod); else, when discovery finds no
        MIG profile or it is older, the operator's default (DEFAULT_CONFIG_FILE). Both ConfigMaps are
        its `mig-parted-config` volume."""
        sim = self.sim
        image = _container(pod, "nvidia-mig-manager").get("image", "")
        if not env.get("CONFIG_FILE") and mig_manager.generates_node_config(image) and \
                annotations.get(mig_manager.DISCOVERY_ANNOTATION) != "none":
            text = generated_config(product)
            if self.generated.get(node) != pod["metadata"]["uid"]:
                self._write_generated(node, pod, text)
                self.generated[node] = pod["metadata"]["uid"]
            return text
        volume = next((v for v in pod["spec"].get("volumes") or [] if v["name"] == "mig-parted-config"), {})
        config_map = sim.configmaps.get((volume.get("configMap") or {}).get("name", ""))
        return (config_map.get("data") or {}).get("config.yaml") if config_map else None

    def _write_generated(self, node: str, pod: Obj, text: str) -> None:
        """createNodeConfigMap: create <node>-mig-config, or update it when it exists."""
        sim = self.sim
        name = f"{node}-mig-config"
        body = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"config.yaml": text}, "metadata": {
            "name": name, "namespace": sim.namespace,
            "labels": {"app.kubernetes.io/component": "nvidia-mig-manager", "nvidia.com/node-name": node},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                 "uid": pod["metadata"]["uid"]}]}}
        path = f"/api/v1/namespaces/{sim.namespace}/configmaps"
        try:
            sim.rest.create(path, body)
        except ApiError as err:
            if err.status != 409:
                raise
            body["metadata"]["resourceVersion"] = sim.rest.get(f"{path}/{name}")["metadata"]["resourceVersion"]
            sim.rest.replace(f"{path}/{name}", body)

    # ---- device plugin and GFD with their config-manager ------------------------------------------
    def _plugin_loader(self, pod: Obj, layout: Layout, fault: str | None, mps_serving: bool) -> Any:
        """`fault`: the message the plugin crashes with on this node whenever its config shares;
        `mps_serving`: the node's MPS control daemon runs an MPS server. Without one an MPS config
        starts no plugin: the process runs on, registers nothing and tries again (cmd/nvidia-device-plugin
        main.go: "Failed to start one or more plugins. Retrying in 30s...", after server.go Start's
        "error waiting for MPS daemon")."""
        strategy = mig_strategy_of(pod, "nvidia-device-plugin")
        env = flag_env(pod, "nvidia-device-plugin")

        def load(text: str) -> PluginLoad:
            try:
                config = self.sim.judge.load(DEVICE_PLUGIN, env, text)
                if fault and config.sharing.strategy != "none":
                    raise ConfigError(fault)
                if config.sharing.strategy == "mps" and not mps_serving:
                    return config, {}
                return config, plugin_resources(config, strategy, layout)
            except ConfigError as err:
                raise ConfigError(f"error starting plugins: {err}") from None
        return load

    def _config_managed(self, node: Obj, app: str, main: str, now: float, loader: Any) -> tuple[ManagedPod[Any], Obj] | None:
        sim = self.sim
        name = node["metadata"]["name"]
        pod = sim.operand_pod(name, app)
        if pod is None:
            return None
        uid = pod["metadata"]["uid"]
        state = self.managed.get(uid)
        first = state is None
        if state is None:
            config_map, default, image = config_source(pod)
            delay = None if init_waits_for_label(image) else sim.options.config_manager_label_seconds
            state = self.managed[uid] = ManagedPod(uid, config_map, default, label_delay=delay,
                                                   signal_error=_signal_error(pod, main))
        data = None
        if state.config_map is not None:
            config_map_obj = sim.configmaps.get(state.config_map)
            data = (config_map_obj.get("data") or {}) if config_map_obj is not None else None
        label = (node["metadata"].get("labels") or {}).get(cp.CONFIG_LABEL)
        was_mounted = state.mounted or first
        state.sync(label, data, now, sim.options.configmap_refresh_seconds, loader(pod))
        if state.visible() != state.reported or (
                node_ready(node) and int(pod["metadata"].get("resourceVersion") or 0) >= state.reported_version
                and conditions_differ(pod, state)):
            self._write_pod_status(pod, state, main)
        if was_mounted and not state.mounted:
            sim.event("Pod", pod["metadata"]["name"], sim.namespace, "Warning", "FailedMount",
                      f'MountVolume.SetUp failed for volume "{state.config_map}" : configmap "{state.config_map}" not found',
                      uid=uid, component="kubelet")
        for container, message in state.events:
            container_name = main if container == "main" else container
            sim.event("Pod", pod["metadata"]["name"], sim.namespace, "Warning", "BackOff",
                      f"Back-off restarting failed container {container_name} in pod "
                      f"{pod['metadata']['name']}_{sim.namespace}({uid}): {message}", uid=uid, component="kubelet")
        state.events.clear()
        self._wake(name, state.refresh_due(now, sim.options.configmap_refresh_seconds), now)
        return state, pod

    def _wake(self, name: str, due: float | None, now: float) -> None:
        """Reconcile the node again at `due`, unless a wake-up at or before it is pending."""
        if due is not None and not (now < self.wakeups.get(name, 0) <= due):
            self.wakeups[name] = due
            self.sim.queue.add_after(f"node/{name}", due - now + 0.05)

    def _write_pod_status(self, pod: Obj, state: ManagedPod[Any], main: str) -> None:
        """Report the pod's status as its kubelet; remember what was reported and the version it
        made, so that a cached pod older than the write is not taken for another writer's change."""
        meta = pod["metadata"]
        try:
            written = self.sim.rest.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                                          {"status": managed_pod_status(pod, state, main, _now_iso())}, "strategic")
            state.reported_version = int(written["metadata"]["resourceVersion"])
        except ApiError as err:
            if err.status != 404:
                raise
            state.reported_version = 0
        state.reported = state.visible()

    def _annotate_limits(self, pod: Obj, limits: dict[str, ShareLimits]) -> None:
        """The MPS daemon pod records the per-share limits it set (LIMITS_ANNOTATION; none while it
        runs no MPS server)."""
        wanted = limits_annotation(limits) if limits else None
        meta = pod["metadata"]
        if (meta.get("annotations") or {}).get(LIMITS_ANNOTATION) == wanted:
            return
        try:
            self.sim.rest.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                                {"metadata": {"annotations": {LIMITS_ANNOTATION: wanted}}}, "strategic")
        except ApiError as err:
            if err.status != 404:
                raise

    def _zero_start(self, node: str, annotations: dict[str, str], pod: Obj, annotation_patch: dict[str, str | None]) -> None:
        """A device-plugin start on a labelled node, which the ZERO_START_ANNOTATION fault may hit: it
        then registers 0 devices for the rest of its pod's life."""
        armed = int(annotations.get(ZERO_START_ANNOTATION) or 0)
        if armed <= 0:
            return
        meta = pod["metadata"]
        self.zero_plugins.add(meta["uid"])
        annotation_patch[ZERO_START_ANNOTATION] = str(armed - 1) if armed > 1 else None
        self.sim.event("Pod", meta["name"], self.sim.namespace, "Warning", ZERO_DEVICES_REASON,
                       f"{node}: the device plugin registers 0 devices until its pod restarts "
                       "(NVIDIA/k8s-device-plugin#1645)",
                       uid=meta["uid"])

    # ---- GFD's NodeFeature (v0.19 and later) ------------------------------------------------------------
    def _publish_node_feature(self, node: str, pod: Obj, labels: dict[str, str]) -> None:
        """nodeFeatureObject.Output: create GFD's NodeFeature, or update it when its labels or owners differ."""
        sim = self.sim
        meta = pod["metadata"]
        owners = [{"apiVersion": ref["apiVersion"], "kind": "DaemonSet", "name": ref["name"], "uid": ref["uid"],
                   "controller": True} for ref in meta.get("ownerReferences") or [] if ref.get("kind") == "DaemonSet"][:1]
        owners.append({"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]})
        wanted = nfd.gfd_object(node, sim.namespace, labels, owners)
        current = sim.node_features.get(f"{sim.namespace}/{nfd.gfd_object_name(node)}")
        path = f"/apis/{nfd.GROUP}/{nfd.VERSION}/namespaces/{sim.namespace}/{nfd.PLURAL}"
        if current is None:
            sim.remember(sim.node_features, sim.rest.create(path, wanted))
        elif (current.get("spec") or {}).get("labels") != labels or current["metadata"].get("ownerReferences") != owners:
            wanted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            sim.remember(sim.node_features, sim.rest.replace(f"{path}/{wanted['metadata']['name']}", wanted))

    # ---- the kubelet's extended resources ----------------------------------------------------------
    def _kubelet_resources(self, node: Obj, plugin: tuple[ManagedPod[Any], Obj] | None, now: float) -> None:
        status = node.get("status") or {}
        name = node["metadata"]["name"]
        registered = plugin[0].loaded[1] if plugin is not None and plugin[0].running else None
        if registered is not None and plugin is not None and plugin[0].uid in self.zero_plugins:
            registered = dict.fromkeys(registered, 0)
        annotations = node["metadata"].get("annotations") or {}
        grace = annotations.get(STOP_GRACE_ANNOTATION)
        sick = unhealthy_devices(annotations.get(XID_ANNOTATION), plugin[0]) if plugin is not None and registered else {}
        capacity, allocatable, due = node_resources(registered, status.get("capacity") or {},
                                                    self.stopped.setdefault(name, {}), now,
                                                    float(grace) if grace else self.sim.options.endpoint_stop_grace_seconds,
                                                    sick)
        self._wake(name, due, now)
        current_capacity = {k: v for k, v in (status.get("capacity") or {}).items() if k.startswith("nvidia.com/")}
        current_allocatable = {k: v for k, v in (status.get("allocatable") or {}).items() if k.startswith("nvidia.com/")}
        if capacity != current_capacity or allocatable != current_allocatable:
            self.sim.patch_node_status(name, {"capacity": capacity, "allocatable": allocatable})


def _waits_for_daemon(plugin: ManagedPod[Any]) -> bool:
    """The device plugin runs an MPS config and serves nothing: it waits for its MPS daemon."""
    return plugin.running and plugin.loaded[0].sharing.strategy == "mps" and not plugin.loaded[1]


def _main_argv0(pod: Obj, main: str) -> str:
    """argv[0] of the main container's process: its command's first word as written (the runtime
    execs it so), or, for a container that runs the operator's entrypoint script, the binary the
    script execs (assets/state-device-plugin/0400_configmap.yaml: `exec nvidia-device-plugin`)."""
    container = _container(pod, main)
    if (container.get("args") or []) == ["/bin/entrypoint.sh"]:
        return ENTRYPOINT_EXECS.get(main, "")
    return next(iter(container.get("command") or []), "")


def _signal_error(pod: Obj, main: str) -> str | None:
    """What the pod's config-manager sidecar exits with when it signals the main process (None: it
    arrives; no sidecar, nothing to signal)."""
    sidecar = _container(pod, "config-manager")
    if not sidecar:
        return None
    return signal_failure(sidecar.get("image", ""), _env(sidecar).get("PROCESS_TO_SIGNAL", ""), _main_argv0(pod, main),
                          bool(pod["spec"].get("hostPID")))


def unhealthy_devices(xid: str | None, plugin: ManagedPod[PluginLoad]) -> dict[str, int]:
    """The devices the running plugin reports unhealthy (resource -> count) after the Xid fault
    XID_ANNOTATION names: each faulted GPU's replicas of the whole-GPU resource it advertises, when
    the plugin started (or last reloaded) before the fault."""
    if not xid or plugin.loaded is None:
        return {}
    fault = json.loads(xid)
    if plugin.started_at > float(fault["at"]):
        return {}
    config, registered = plugin.loaded
    per_gpu = config.sharing.replicas if config.sharing.strategy != "none" else 1
    return {resource: len(fault["gpus"]) * per_gpu for resource in (GPU, SHARED) if registered.get(resource)}


def _gfd_loader(judge: NvidiaJudge, pod: Obj) -> Any:
    env = flag_env(pod, "gpu-feature-discovery")
    return lambda text: judge.load(GFD, env, text)


def _mps_loader(judge: NvidiaJudge, pod: Obj, product: GpuProduct, layout: Layout) -> Any:
    """The MPS control daemon's start (cmd/mps-control-daemon/main.go startDaemons, mps manager.go
    Daemons, daemon.go Start): the config as it loads it; no server unless the config shares with
    MPS; none for MIG devices; replicas beyond the card's client limit refused; each server's shares
    limited to memory/replicas and 100/replicas."""
    env = flag_env(pod, "mps-control-daemon-ctr")

    def load(text: str) -> MpsLoad:
        config = judge.load(MPS_CONTROL_DAEMON, env, text)
        sharing = config.sharing
        if sharing.strategy != "mps" or all(gpu is not None for gpu in layout):
            return config, {}  # nothing shared with MPS, or only MIG devices (skipped with a warning)
        problem = replicas_refusal(sharing.replicas)
        if problem:
            raise ConfigError(problem)
        resource = SHARED if sharing.rename_by_default else GPU
        return config, {resource: share_limits(product.memory_mib, sharing.replicas)}
    return load
