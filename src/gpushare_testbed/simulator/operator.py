"""The GPU Operator's controllers: the ClusterPolicy reconciler (operand DaemonSets by their
last-applied hash, the objects they need, status.state), the node labeller and the driver upgrade
controller. Pure decisions live in operands, operator_objects and upgrade; this module does the
I/O against the cluster the Simulator watches."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from gpushare.k8s.session import ApiError
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operands, operator_objects, plugin_version, upgrade
from gpushare_testbed.simulator.pod_deletion import DELETE, SKIP, DeletionRules, deletion_refused, drain_verdict, is_gpu_pod, selected
from gpushare_testbed.simulator.node_view import node_ready
from gpushare_testbed.simulator.rest import Obj

if TYPE_CHECKING:
    from gpushare_testbed.simulator.simulator import Simulator

log = logging.getLogger("gpushare_testbed.simulator.operator")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
NFD_GPU_LABELS = ("feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/pci-0302_10de.present",
                  "feature.node.kubernetes.io/pci-0300_10de.present")
GPU_PRESENT = "nvidia.com/gpu.present"
# controllers/state_manager.go gpuStateLabels for the container workload
DEPLOY_COMPONENTS = ("driver", "gpu-feature-discovery", "container-toolkit", "device-plugin", "dcgm", "dcgm-exporter",
                     "node-status-exporter", "operator-validator", "client")
MIG_MANAGER_LABEL = "nvidia.com/gpu.deploy.mig-manager"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_CONFIG = "nvidia.com/mig.config"


def node_labels(labels: dict[str, str], spec: dict[str, Any] | None) -> dict[str, str]:
    """The labels the operator adds to a node (nodelabeling_controller.go, state_manager.go):
    gpu.present from NFD, the deploy labels not already set (a non-empty value is honoured), the
    MIG manager's on MIG-capable nodes and the default `nvidia.com/mig.config`."""
    patch: dict[str, str] = {}
    if labels.get(GPU_PRESENT) != "true":
        if not any(labels.get(k) == "true" for k in NFD_GPU_LABELS):
            return patch
        patch[GPU_PRESENT] = "true"
    for component in DEPLOY_COMPONENTS:
        if not labels.get(f"nvidia.com/gpu.deploy.{component}"):
            patch[f"nvidia.com/gpu.deploy.{component}"] = "true"
    product = labels.get("nvidia.com/gpu.product", "").lower()
    mig_capable = (labels[MIG_CAPABLE] == "true") if MIG_CAPABLE in labels else any(p in product for p in ("h100", "a100", "a30"))
    if mig_capable and MIG_MANAGER_LABEL not in labels:
        patch[MIG_MANAGER_LABEL] = "true"
    if spec is not None and cp.enabled(spec, "migManager") and mig_capable and not labels.get(MIG_CONFIG):
        if cp.section(cp.section(spec, "migManager"), "config").get("default", "all-disabled") == "all-disabled":
            patch[MIG_CONFIG] = "all-disabled"
    return patch


def _ready_condition(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod.get("status", {}).get("conditions") or [])


def containers_ready(pod: Obj) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return pod.get("status", {}).get("phase") == "Running" and bool(statuses) and all(s.get("ready") for s in statuses)


class Operator:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.eviction_started: dict[str, float] = {}

    @property
    def ns(self) -> str:
        return self.sim.namespace

    # ---- ClusterPolicy -> objects and DaemonSets ----------------------------------------------
    def reconcile_policy(self) -> None:
        sim = self.sim
        policy = sim.policy()
        if policy is None:
            return
        if gpucluster := sim.gpucluster():
            self._set_state(policy, "notReady", cp.gpucluster_conflict(gpucluster))
            return
        for name, account in operator_objects.service_accounts(policy, self.ns).items():
            if sim.service_accounts.get(name) is None:
                self._create(f"/api/v1/namespaces/{self.ns}/serviceaccounts", account)
        wanted_maps = operator_objects.config_maps(policy, self.ns)
        for name, manifest in wanted_maps.items():
            current = sim.configmaps.get(name)
            if current is None:
                self._create(f"/api/v1/namespaces/{self.ns}/configmaps", manifest)
            elif current.get("data") != manifest["data"]:
                sim.rest.replace(f"/api/v1/namespaces/{self.ns}/configmaps/{name}", manifest)
        for name in operator_objects.managed_config_map_names() - set(wanted_maps):
            if sim.configmaps.get(name) is not None:
                self._delete(f"/api/v1/namespaces/{self.ns}/configmaps/{name}")
        rendered = operands.render(policy, self.ns)
        ready = True
        for name, manifest in rendered.items():
            current = sim.daemonsets.get(name)
            if current is None:
                self._create(f"/apis/apps/v1/namespaces/{self.ns}/daemonsets", manifest)
                ready = False
            elif (current["metadata"].get("annotations") or {}).get(operands.HASH_ANNOTATION) != \
                    manifest["metadata"]["annotations"][operands.HASH_ANNOTATION]:
                log.info("DaemonSet %s is different, updating", name)
                sim.rest.replace(f"/apis/apps/v1/namespaces/{self.ns}/daemonsets/{name}", manifest)
                ready = False
            else:
                ready = self._daemonset_ready(current) and ready
        for name, *_ in operands.OPERANDS:
            if name not in rendered and sim.daemonsets.get(name) is not None:
                self._delete(f"/apis/apps/v1/namespaces/{self.ns}/daemonsets/{name}")
        self._set_state(policy, "ready" if ready else "notReady")

    def _set_state(self, policy: Obj, state: str, error: str = "") -> None:
        """status.state, and while `error` the Error condition the operator sets with it
        (internal/conditions/clusterpolicy.go SetConditionsError, reason ReconcileFailed)."""
        status = policy.get("status") or {}
        errors = [c for c in status.get("conditions") or [] if c.get("type") == "Error" and c.get("status") == "True"]
        if status.get("state") == state and [c.get("message") for c in errors] == ([error] if error else []):
            return
        body: Obj = {"state": state}
        if error or errors:
            body["conditions"] = [
                {"type": "Ready", "status": "False" if error else "True", "reason": "Error" if error else "Reconciled",
                 "message": "", "lastTransitionTime": _now()},
                {"type": "Error", "status": "True" if error else "False", "reason": "ReconcileFailed" if error else "Ready",
                 "message": error, "lastTransitionTime": _now()}]
        self.sim.rest.patch(f"/apis/{cp.GROUP}/{cp.VERSION}/{cp.PLURAL}/{policy['metadata']['name']}/status",
                            {"status": body})

    def _create(self, path: str, body: Obj) -> None:
        try:
            self.sim.rest.create(path, body)
        except ApiError as err:
            if err.status != 409:
                raise

    def _delete(self, path: str) -> None:
        try:
            self.sim.rest.delete(path)
        except ApiError as err:
            if err.status != 404:
                raise

    def _daemonset_ready(self, ds: Obj) -> bool:
        """isDaemonSetReady."""
        status = ds.get("status") or {}
        desired = status.get("desiredNumberScheduled", 0)
        if desired == 0:
            return True
        if status.get("numberUnavailable", 0):
            return False
        if (ds["spec"].get("updateStrategy") or {}).get("type") != "OnDelete":
            return (status.get("observedGeneration", 0) >= ds["metadata"].get("generation", 0)
                    and status.get("updatedNumberScheduled", 0) == desired == status.get("numberAvailable", 0))
        revision = operands.current_revision(self.sim.revisions.items(), ds)
        pods = operands.owned_by(self.sim.pods_of(ds["metadata"]["labels"]["app"]), ds)
        return bool(pods) and revision is not None and all(
            p["metadata"].get("labels", {}).get("controller-revision-hash") == revision and containers_ready(p)
            and not (ds["metadata"]["name"] == operands.DRIVER and self.sim.driver_manager.busy(p["spec"].get("nodeName", ""), p))
            for p in pods)

    # ---- driver upgrades ----------------------------------------------------------------------
    def reconcile_upgrades(self) -> None:
        sim = self.sim
        policy = sim.policy()
        driver = sim.daemonsets.get(operands.DRIVER)
        if policy is None or driver is None:
            return
        upgrade_policy = cp.section(cp.section(policy.get("spec") or {}, "driver"), "upgradePolicy")
        revision = operands.current_revision(sim.revisions.items(), driver)
        pods = operands.owned_by(sim.pods_of(operands.DRIVER), driver)
        if (revision is None or len(pods) != (driver.get("status") or {}).get("desiredNumberScheduled", 0)
                or not all(p["spec"].get("nodeName") for p in pods)):
            # BuildState: "driver DaemonSet should not have Unscheduled pods"; pod events bring us back.
            # (A new pod not bound yet would hide its node's upgrade and free its slot.)
            return
        states = []
        # the restart-only predicate, registered from v26.7.0: the operator's release is its validator's tag
        predicate = plugin_version.at_least(cp.image(policy.get("spec") or {}, "validator"), upgrade.RESTART_ONLY_SINCE)
        desired = ((driver.get("spec") or {}).get("template") or {}).get("spec") or {}
        for pod in pods:
            node = sim.nodes.get(pod["spec"].get("nodeName", ""))
            if node is not None:
                state = self._node_upgrade(node, pod, revision, upgrade_policy)
                states.append(dataclasses.replace(state, restart_only=predicate and not state.driver_in_sync
                                                  and upgrade.restart_only(pod.get("spec") or {}, desired)))
        rules = DeletionRules.of(upgrade_policy)
        for step in upgrade.plan(states, upgrade_policy):
            self._execute(step, rules)
        waiting = {s.name for s in states if s.state in (upgrade.POD_DELETION, upgrade.DRAIN)}
        self.eviction_started = {n: t for n, t in self.eviction_started.items() if n.split("/")[0] in waiting}
        if waiting:
            sim.queue.add_after("upgrade", 1.0)  # evictions refused by a PodDisruptionBudget are retried

    def _node_upgrade(self, node: Obj, driver_pod: Obj, revision: str, policy: dict[str, Any]) -> upgrade.NodeUpgrade:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        annotations = node["metadata"].get("annotations") or {}
        state = labels.get(upgrade.STATE_LABEL, "")
        # As in ApplyState, a node's pods are looked at only in the states that act on them: on a large
        # fleet this pass runs on every node event.
        on_node = self.sim.pods_on(name) if state in (upgrade.POD_DELETION, upgrade.DRAIN, upgrade.VALIDATION) else []
        validators = [p for p in on_node if (p["metadata"].get("labels") or {}).get("app") == operands.VALIDATOR]
        rules = DeletionRules.of(policy)
        gpu = [p for p in on_node if is_gpu_pod(p)] if state == upgrade.POD_DELETION else []
        drain = on_node if state == upgrade.DRAIN else []
        errors: dict[str, list[str]] = {}
        for pod in drain:
            verdict = drain_verdict(pod, rules.drain_force, rules.drain_empty_dir)
            if verdict not in (DELETE, SKIP) and selected(rules.drain_selector, pod["metadata"].get("labels") or {}):
                errors.setdefault(verdict, []).append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
        return upgrade.NodeUpgrade(
            name=name,
            state=state,
            unschedulable=bool(node["spec"].get("unschedulable")),
            ready=node_ready(node),
            driver_in_sync=(driver_pod["metadata"].get("labels") or {}).get("controller-revision-hash") == revision,
            driver_ready=containers_ready(driver_pod) and not self.sim.driver_manager.busy(name, driver_pod),
            driver_terminating="deletionTimestamp" in driver_pod["metadata"],
            gpu_pods=len(gpu),
            undeletable=sum(1 for p in gpu if deletion_refused(p, rules)),
            eviction_timed_out=self._timed_out(name, cp.section(policy, "podDeletion"), 300),
            drain_pods=len(self._drain_pods(drain, rules)),
            # kubectl's PodDeleteList.errors: `cannot delete <fatal>: <pods>` (unmanagedFatal says it already)
            drain_errors=tuple(f"{'' if fatal.startswith('cannot') else 'cannot delete '}{fatal}: {', '.join(pods)}"
                               for fatal, pods in sorted(errors.items())),
            drain_timed_out=self._timed_out(f"{name}/drain", cp.section(policy, "drain"), 0),
            validator_ready=any(_ready_condition(p) for p in validators),
            initial_unschedulable=upgrade.INITIAL_STATE_ANNOTATION in annotations,
            skip=labels.get(upgrade.SKIP_LABEL) == "true",
            requested=annotations.get(upgrade.REQUESTED_ANNOTATION) == "true",
        )

    def _timed_out(self, key: str, spec: dict[str, Any], default: int) -> bool:
        """drain.Helper's Timeout: `timeoutSeconds` since the first eviction (0: never)."""
        value = spec.get("timeoutSeconds")
        timeout = float(default if value is None else value)
        started = self.eviction_started.get(key)
        return bool(timeout) and started is not None and time.monotonic() - started > timeout

    @staticmethod
    def _drain_pods(pods: list[Obj], rules: DeletionRules) -> list[Obj]:
        """The pods the upgrade's drain evicts: those drain.podSelector selects that the filters let go."""
        return [p for p in pods if selected(rules.drain_selector, p["metadata"].get("labels") or {})
                and drain_verdict(p, rules.drain_force, rules.drain_empty_dir) == DELETE]

    def _execute(self, step: upgrade.Step, rules: DeletionRules) -> None:
        sim = self.sim
        if step.state is not None:
            sim.patch_node(step.node, {"metadata": {"labels": {upgrade.STATE_LABEL: step.state or None}}})
            if step.state:
                sim.event("Node", step.node, "", "Normal", upgrade.EVENT_REASON,
                          f"Successfully updated node state label to {step.state}")
        if step.event:
            sim.event("Node", step.node, "", "Warning", upgrade.EVENT_REASON, step.event)
        if step.action in ("cordon", "uncordon"):
            sim.patch_node(step.node, {"spec": {"unschedulable": True if step.action == "cordon" else None}})
        elif step.action in ("mark-initial", "clear-initial", "clear-requested"):
            key = upgrade.REQUESTED_ANNOTATION if step.action == "clear-requested" else upgrade.INITIAL_STATE_ANNOTATION
            sim.patch_node(step.node, {"metadata": {"annotations": {key: "true" if step.action == "mark-initial" else None}}})
        elif step.action == "restart-driver":
            for pod in sim.pods_on(step.node):
                if (pod["metadata"].get("labels") or {}).get("app") == operands.DRIVER:
                    self._delete(f"/api/v1/namespaces/{self.ns}/pods/{pod['metadata']['name']}")
        elif step.action == "evict":
            self._evict(step.node, step.node, [p for p in sim.pods_on(step.node) if is_gpu_pod(p)],
                        "Deleted workload pods on the node for the driver upgrade")
        elif step.action == "drain":
            self._evict(step.node, f"{step.node}/drain", self._drain_pods(sim.pods_on(step.node), rules),
                        "Successfully drained the node")

    def _evict(self, node: str, key: str, pods: list[Obj], done: str) -> None:
        """drain.Helper DeleteOrEvictPods: the Eviction API, retried while a PodDisruptionBudget refuses."""
        sim = self.sim
        first = key not in self.eviction_started
        self.eviction_started.setdefault(key, time.monotonic())
        refused = []
        for pod in pods:
            meta = pod["metadata"]
            if "deletionTimestamp" in meta:
                continue
            eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                        "metadata": {"name": meta["name"], "namespace": meta["namespace"]}}
            try:
                sim.rest.create(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction", eviction)
            except ApiError as err:
                if err.status == 429:
                    refused.append(f"{meta['namespace']}/{meta['name']}")
                elif err.status != 404:
                    raise
        if first and not refused:
            sim.event("Node", node, "", "Normal", upgrade.EVENT_REASON, done)
        elif refused and first:
            sim.event("Node", node, "", "Warning", upgrade.EVENT_REASON,
                      f"Cannot evict {', '.join(refused)} yet (PodDisruptionBudget); retrying")
