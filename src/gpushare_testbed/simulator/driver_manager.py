"""The driver manager: `driver-manager uninstall_driver`, the k8s-driver-manager init container of
every driver pod (NVIDIA/k8s-driver-manager v0.12.0 cmd/driver-manager/main.go).

When a new driver pod starts on a node whose driver is loaded (a driver upgrade, or a driver pod
deleted by hand), it first takes every GPU Operator operand off the node
(evictAllGPUOperatorComponents): their `nvidia.com/gpu.deploy.*` labels become
`paused-for-driver-upgrade` (maybeSetPaused: "false" stays, an empty value stays empty, a value
paused otherwise gets the suffix), then it waits for their pods to go (waitForPodsToTerminate, 5
minutes; on a timeout it restores the labels and fails, and the kubelet restarts the init
container), unloads the driver and restores the labels (rescheduleGPUOperatorComponents:
maybeSetTrue). Only then does the driver container start: until the run is over the pod is not
ready for the upgrade controller, which waits for it (pod-restart-required).

Simulated apart: the pod's status is KWOK's (Ready at once; the upgrade controller asks `busy`), the
timeout runs from the pause rather than per component, and on a node whose driver was not loaded
(a fresh node) nothing is evicted and its relabelling, which only adds empty values, is left out.
The driver manager's own GPU-pod eviction and drain run only when `driver.upgradePolicy.autoUpgrade`
is off (the upgrade controller owns them otherwise) and are not simulated.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpushare_testbed.simulator import operands
from gpushare_testbed.simulator.mig_manager import client_daemonset_pod
from gpushare_testbed.simulator.operator import containers_ready
from gpushare_testbed.simulator.rest import Obj

if TYPE_CHECKING:
    from gpushare_testbed.simulator.simulator import Simulator

log = logging.getLogger("gpushare_testbed.simulator.driver_manager")
PAUSED = "paused-for-driver-upgrade"
DEPLOY = "nvidia.com/gpu.deploy."
# evictAllGPUOperatorComponents: always written; mig-manager and client only when the node has them.
LABELS = tuple(DEPLOY + c for c in (
    "operator-validator", "container-toolkit", "device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm",
    "sandbox-validator", "sandbox-device-plugin", "vgpu-device-manager", "dra-validator", "dcgm-dra", "dcgm-exporter-dra"))
OPTIONAL = (DEPLOY + "mig-manager", DEPLOY + "client")
RESTORED_ONLY = DEPLOY + "dra-driver"  # rescheduleGPUOperatorComponents restores it; its eviction is separate
# waitForPodsToTerminate: the operand pods waited for (app label, operator namespace), and those
# waited for only when the node has the component's label.
WAITED = ("nvidia-operator-validator", "nvidia-container-toolkit-daemonset", "nvidia-device-plugin-daemonset",
          "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-dcgm", "nvidia-dcgm-exporter-dra", "nvidia-dcgm-dra")
WAITED_IF = {DEPLOY + "mig-manager": "nvidia-mig-manager", DEPLOY + "sandbox-validator": "nvidia-sandbox-validator",
             DEPLOY + "sandbox-device-plugin": "nvidia-sandbox-device-plugin-daemonset",
             DEPLOY + "vgpu-device-manager": "nvidia-vgpu-device-manager"}
CLIENT = DEPLOY + "client"


def paused(value: str) -> str:
    """maybeSetPaused."""
    if value in ("", "false"):
        return value
    if value == "true":
        return PAUSED
    return value if PAUSED in value else f"{value}_{PAUSED}"


def restored(value: str) -> str:
    """maybeSetTrue."""
    if value == "false":
        return value
    if value == PAUSED:
        return "true"
    return re.sub(PAUSED + "_?", "", value).strip("_")


@dataclass
class Run:
    """One driver pod's init container on a node."""

    pod_uid: str
    previous: dict[str, str] = field(default_factory=dict)  # the labels when it started
    phase: str = "evict"  # evict | done
    deadline: float = 0.0


def pause_labels(labels: dict[str, str]) -> dict[str, str]:
    """fetchCurrentLabels + evictAllGPUOperatorComponents: the patch that takes the operands off."""
    patch = {key: paused(labels.get(key, "")) for key in LABELS}
    patch.update({key: paused(labels[key]) for key in OPTIONAL if labels.get(key)})
    return patch


def restore_labels(previous: dict[str, str]) -> dict[str, str]:
    """rescheduleGPUOperatorComponents over what fetchCurrentLabels read."""
    patch = {key: restored(previous.get(key, "")) for key in (*LABELS, RESTORED_ONLY)}
    patch.update({key: restored(previous[key]) for key in OPTIONAL if previous.get(key)})
    return patch


def waited_apps(labels: dict[str, str]) -> tuple[str, ...]:
    return WAITED + tuple(app for key, app in WAITED_IF.items() if labels.get(key))


class DriverManager:
    """The driver managers of every node, as the Simulator drives them (key `driver/<node>`)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.loaded: set[str] = set()  # nodes whose driver a driver pod has loaded
        self.runs: dict[str, Run] = {}  # by node

    def adopt(self) -> None:
        """At start: the driver pods already running have long finished their init container."""
        for pod in self.sim.pods_of(operands.DRIVER):
            node = pod["spec"].get("nodeName")
            if node and "deletionTimestamp" not in pod["metadata"]:
                self.runs[node] = Run(pod["metadata"]["uid"], phase="done")
                if containers_ready(pod):
                    self.loaded.add(node)

    def busy(self, node: str, driver_pod: Obj) -> bool:
        """The init container of this driver pod has not finished."""
        run = self.runs.get(node)
        return run is None or run.pod_uid != driver_pod["metadata"]["uid"] or run.phase != "done"

    def reconcile(self, node: str) -> None:
        sim = self.sim
        pod = sim.operand_pod(node, operands.DRIVER)
        current = sim.nodes.get(node)
        if pod is None or current is None:
            return
        uid = pod["metadata"]["uid"]
        labels = current["metadata"].get("labels") or {}
        run = self.runs.get(node)
        if run is None or run.pod_uid != uid:
            if node not in self.loaded:
                self.runs[node] = Run(uid, phase="done")
            else:
                deadline = time.monotonic() + sim.options.driver_manager_timeout_seconds
                self.runs[node] = Run(uid, dict(labels), deadline=deadline)
                log.info("%s: new driver pod, shutting down the GPU Operator components", node)
                sim.patch_node(node, {"metadata": {"labels": pause_labels(labels)}})
        run = self.runs[node]
        if run.phase == "done":
            if containers_ready(pod) and node not in self.loaded:
                self.loaded.add(node)
                sim.queue.add("policy")  # the ClusterPolicy's readiness waits for the driver pods' init
            return
        remaining = [app for app in waited_apps(run.previous) if sim.pods_on(node, app)]
        if run.previous.get(CLIENT):
            remaining += [p["metadata"]["name"] for p in sim.pods_on(node) if client_daemonset_pod(p)]
        if not remaining:
            sim.patch_node(node, {"metadata": {"labels": restore_labels(run.previous)}})
            run.phase = "done"
            sim.queue.add("upgrade")
            sim.queue.add("policy")
        elif time.monotonic() >= run.deadline:
            # cleanupOnFailure: the labels back, the init container fails and the kubelet restarts it
            sim.patch_node(node, {"metadata": {"labels": restore_labels(run.previous)}})
            sim.event("Pod", pod["metadata"]["name"], sim.namespace, "Warning", "BackOff",
                      f"Back-off restarting failed container k8s-driver-manager: failed to evict GPU operator components: "
                      f"{remaining[0]} did not shut down", uid=uid, component="kubelet")
            self.runs[node] = Run("")  # the next start of the init container is a new run
            sim.queue.add_after(f"driver/{node}", 10.0)
        else:
            sim.queue.add_after(f"driver/{node}", min(1.0, run.deadline - time.monotonic()))
