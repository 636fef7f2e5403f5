"""The kubelet's part, with no I/O: the node's extended resources from what the device plugin
registers, the status of a config-managed pod (init containers, containers, conditions as kubectl
reads them), and the device plugin's Allocate check for shared replicas (k8s-device-plugin
internal/rm/rm.go).

Resources follow kubernetes pkg/kubelet/cm/devicemanager (manager.go GetCapacity,
markResourceUnhealthy; endpoint.go stopGracePeriodExpired) and pkg/kubelet/nodestatus/setters.go:
when no running plugin serves a resource any more (the plugin stopped, or restarted serving other
names), its devices turn unhealthy: allocatable 0, capacity kept for endpointStopGracePeriod
(5 minutes), then capacity 0; the resource is never removed from the node's status."""

from __future__ import annotations

from typing import Any

from gpushare_testbed.simulator.nvidia_judge import PluginConfig
from gpushare_testbed.simulator.config_manager import ManagedPod
from gpushare_testbed.simulator.node_view import GPU, SHARED

Obj = dict[str, Any]
EXTENDED = "nvidia.com/"
ENDPOINT_STOP_GRACE_S = 300.0  # devicemanager endpointStopGracePeriod


def node_resources(registered: dict[str, int] | None, capacity: dict[str, str], stopped: dict[str, float],
                   now: float, grace_s: float, unhealthy: dict[str, int] | None = None,
                   ) -> tuple[dict[str, str], dict[str, str], float | None]:
    """(capacity, allocatable, when it next changes on its own) of the nvidia.com/ resources;
    `registered` is None while no plugin runs; `unhealthy`: the devices of each it reports unhealthy
    (counted in capacity, not in allocatable: devicemanager's healthy set). `stopped` (resource ->
    when its plugin stopped serving it) is updated in place."""
    served = registered or {}
    sick = unhealthy or {}
    known = {k: v for k, v in capacity.items() if k.startswith(EXTENDED)}
    new_capacity, allocatable, due = {}, {}, None
    for name in sorted(known.keys() | served.keys()):
        if name in served:
            stopped.pop(name, None)
            new_capacity[name], allocatable[name] = str(served[name]), str(max(0, served[name] - sick.get(name, 0)))
            continue
        since = stopped.setdefault(name, now)
        unhealthy = known[name] != "0" and now < since + grace_s
        new_capacity[name], allocatable[name] = (known[name] if unhealthy else "0"), "0"
        if unhealthy:
            due = since + grace_s if due is None else min(due, since + grace_s)
    for name in set(stopped) - known.keys():
        del stopped[name]
    return new_capacity, allocatable, due


def _waiting(reason: str, message: str | None = None) -> Obj:
    waiting: Obj = {"reason": reason}
    if message:
        waiting["message"] = message
    return {"waiting": waiting}


def _status(container: Obj, ready: bool, state: Obj, restarts: int, error: str | None, started: str) -> Obj:
    status: Obj = {"name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": ready,
                   "restartCount": restarts, "started": "running" in state, "state": state}
    if restarts and error:
        status["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "message": error,
                                              "startedAt": started, "finishedAt": started}}
    return status


def pod_conditions(managed: ManagedPod[Any]) -> dict[str, str]:
    """The conditions the kubelet owns on a device-plugin or GFD pod in this state: type -> status."""
    ready = "True" if managed.ready else "False"
    return {"PodReadyToStartContainers": "True" if managed.mounted else "False",
            "Initialized": "True" if managed.selected is not None else "False",
            "Ready": ready, "ContainersReady": ready}


def conditions_differ(pod: Obj, managed: ManagedPod[Any]) -> bool:
    """The pod's status in the API server says otherwise than the kubelet's view (another writer
    changed a condition the kubelet owns: the node lifecycle controller sets Ready False on the pods
    of a node whose lease lapsed, MarkPodsNotReady), which the kubelet's status manager re-sends
    (pkg/kubelet/status/status_manager.go syncPod / needsReconcile)."""
    current = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or []}
    return any(current.get(kind) != status for kind, status in pod_conditions(managed).items())


def managed_pod_status(pod: Obj, managed: ManagedPod[Any], main: str, now: str) -> Obj:
    """The status a kubelet reports for a device-plugin or GFD pod in this state."""
    spec = pod["spec"]
    started = pod["metadata"]["creationTimestamp"]
    initialized = managed.selected is not None
    inits = []
    for container in spec.get("initContainers") or []:
        if container["name"] == "config-manager-init" and not initialized:
            state = _waiting("CrashLoopBackOff", managed.init_error) if managed.init_error else _waiting("PodInitializing")
            inits.append(_status(container, False, state, managed.init_restarts, managed.init_error, started))
        elif not managed.mounted:
            inits.append(_status(container, False, _waiting("PodInitializing"), 0, None, started))
        else:
            restarts = managed.init_restarts if container["name"] == "config-manager-init" else 0
            done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}}
            inits.append(_status(container, True, done, restarts, managed.init_error, started))
    containers = []
    for container in spec["containers"]:
        error, restarts = ((managed.main_error, managed.main_restarts) if container["name"] == main
                           else (managed.sidecar_error, managed.sidecar_restarts))
        if not initialized:
            state = _waiting("PodInitializing")
        elif error:
            state = _waiting("CrashLoopBackOff", error)
        else:
            state = {"running": {"startedAt": started}}
        containers.append(_status(container, "running" in state, state, restarts, error, started))
    conditions = [{"type": kind, "status": status, "lastTransitionTime": now}
                  for kind, status in pod_conditions(managed).items()]
    status = {"phase": "Running" if initialized else "Pending", "conditions": conditions, "startTime": started,
              "initContainerStatuses": inits, "containerStatuses": containers}
    if pod.get("status", {}).get("hostIP") is None:
        status["hostIP"] = "10.0.0.1"
        status["hostIPs"] = [{"ip": "10.0.0.1"}]
    return status


def admission_rejection(pod: Obj, config: PluginConfig | None) -> str | None:
    """The kubelet's rejection message when a container asks for more than one shared replica
    under failRequestsGreaterThanOne (the plugin validates each container's Allocate)."""
    if config is None or config.sharing.strategy == "none" or not config.sharing.fail_requests_greater_than_one:
        return None
    resource = SHARED if config.sharing.rename_by_default else GPU
    for container in [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]:
        limits = (container.get("resources") or {}).get("limits") or {}
        requested = int(limits.get(resource, 0) or 0)
        if requested > 1:
            return ("Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = "
                    f'invalid allocation request for "{resource}": invalid request: maximum request size '
                    f"for shared resources is 1; found {requested}, which is unexpected")
    return None
