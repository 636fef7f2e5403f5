"""The NVIDIA DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1) as the simulator plays
it, with no I/O: the chart's objects, the kubelet plugin's ResourceSlice and its prepare step.

- The chart (deployments/helm/dra-driver-nvidia-gpu): the DaemonSet `<name>-kubelet-plugin`, selected
  by `kubeletPlugin.nodeSelector` (the GPU Operator's DRA guide labels the pilot nodes
  `nvidia.com/dra-kubelet-plugin=true`), tolerating `nvidia.com/gpu`, its gates in the env
  FEATURE_GATES (`featureGates`, none by default); the DeviceClass `gpu.nvidia.com` and its CEL selector.
- The kubelet plugin (cmd/gpu-kubelet-plugin): one pool per node, named after it, the Node as owner;
  without DynamicMIG one slice of every full GPU, `gpu-<minor>` with the attributes type, uuid,
  productName, brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion and the
  capacity memory (deviceinfo.go, partitions.go); the generation goes up when the devices change.
- Prepare (device_state.go prepareDevices): the claim's opaque configs for the driver are decoded
  strictly (api/nvidia.com/resource/v1beta1 StrictDecoder), normalized and validated: a sharing
  strategy needs its alpha gate (TimeSlicingSettings, MPSSupport), else
  `"TimeSlicing" is selected as the GPU sharing strategy, but the "TimeSlicingSettings" feature gate is
  not enabled`.
"""

from __future__ import annotations

from typing import Any

from gpushare_testbed.gpu_identity import gpu_uuid, nvml_name

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
NAMESPACE = "nvidia-dra-driver-gpu"
PLUGIN = "nvidia-dra-driver-gpu-kubelet-plugin"
COMPONENT = {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}
PLUGIN_LABEL = "nvidia.com/dra-kubelet-plugin"
CONFIG_API = "resource.nvidia.com/v1beta1"
GATES = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}
INTERVALS = ("Default", "Short", "Medium", "Long")
WIPE_DELAY_S = 30.0  # the kubelet's DRA manager wipes a gone plugin's slices after this (defaultWipingDelay)
# The architecture GFD's nvidia.com/gpu.family names, as NVML reports it.
ARCHITECTURES = {"hopper": "Hopper", "ampere": "Ampere", "ada-lovelace": "Ada Lovelace", "turing": "Turing"}


def gates_text(gates: dict[str, bool]) -> str:
    """FEATURE_GATES as the chart renders `featureGates` (`k=v,` each)."""
    return "".join(f"{k}={str(v).lower()}," for k, v in sorted(gates.items()))


def parse_gates(text: str) -> dict[str, bool]:
    return {k.strip(): v.strip().lower() == "true" for k, _, v in
            (item.partition("=") for item in (text or "").split(",")) if k.strip()}


def daemonset(gates: dict[str, bool]) -> Obj:
    env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    if gates:
        env.append({"name": "FEATURE_GATES", "value": gates_text(gates)})
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": PLUGIN, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": "nvidia-dra-driver-gpu"}},
        "spec": {
            "selector": {"matchLabels": dict(COMPONENT)},
            "template": {
                "metadata": {"labels": dict(COMPONENT)},
                "spec": {
                    "nodeSelector": {PLUGIN_LABEL: "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "gpus", "image": "registry.k8s.io/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu:v0.4.1",
                                    "env": env}],
                },
            },
        },
    }


def device_class() -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}' && "
                                                          f"device.attributes['{DRIVER}'].type == 'gpu'"}}]}}


def pod_gates(pod: Obj) -> dict[str, bool]:
    """The gates a kubelet-plugin pod runs with (its container's FEATURE_GATES)."""
    gates: dict[str, bool] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == "FEATURE_GATES":
                gates.update(parse_gates(env.get("value") or ""))
    return gates


def semver(version: str) -> str:
    """A version as the plugin announces it (semver's String(): no leading zeros, three parts)."""
    parts = [str(int(p)) for p in version.split(".")[:3] if p.isdigit()]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def devices(node: Obj) -> list[Obj]:
    """The full GPUs the plugin announces on a node (GFD's labels stand for what NVML reports)."""
    labels = node["metadata"].get("labels") or {}
    name = node["metadata"]["name"]
    count = int(labels.get("nvidia.com/gpu.count") or 0)
    product = labels.get("nvidia.com/gpu.product", "").removesuffix("-SHARED")
    memory_mib = int(labels.get("nvidia.com/gpu.memory") or 0)
    major, minor = labels.get("nvidia.com/gpu.compute.major", "9"), labels.get("nvidia.com/gpu.compute.minor", "0")
    driver = labels.get("nvidia.com/cuda.driver-version.full", "580.95.05")
    found = []
    for index in range(count):
        attributes = {
            "type": {"string": "gpu"}, "uuid": {"string": gpu_uuid(name, index)}, "productName": {"string": nvml_name(product)},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": ARCHITECTURES.get(labels.get("nvidia.com/gpu.family", "hopper"), "Hopper")},
            "cudaComputeCapability": {"version": semver(f"{major}.{minor}")},
            "driverVersion": {"version": semver(driver)}, "cudaDriverVersion": {"version": "13.0.0"},
        }
        device: Obj = {"name": f"gpu-{index}", "attributes": attributes}
        if memory_mib:
            device["capacity"] = {"memory": {"value": f"{memory_mib}Mi"}}
        found.append(device)
    return found


def resource_slice(node: Obj, found: list[Obj], generation: int) -> Obj:
    name = node["metadata"]["name"]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"generateName": f"{name}-{DRIVER}-", "ownerReferences": [{
            "apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"], "controller": True}]},
        "spec": {"driver": DRIVER, "nodeName": name, "devices": found,
                 "pool": {"name": name, "generation": generation, "resourceSliceCount": 1}},
    }


def _strict(obj: Any, allowed: dict[str, Any], where: str) -> str | None:
    """The strict decoder's complaint about a field it does not know (json: unknown field "x")."""
    if not isinstance(obj, dict):
        return f"{where}: expected an object"
    for key, value in obj.items():
        if key not in allowed:
            return f'strict decoding error: unknown field "{where}{key}"'
        if isinstance(allowed[key], dict):
            problem = _strict(value, allowed[key], f"{where}{key}.")
            if problem:
                return problem
    return None


GPU_CONFIG_FIELDS: dict[str, Any] = {
    "apiVersion": str, "kind": str,
    "sharing": {"strategy": str, "timeSlicingConfig": {"interval": str},
                "mpsConfig": {"defaultActiveThreadPercentage": int, "defaultPinnedDeviceMemoryLimit": str,
                              "defaultPerDevicePinnedMemoryLimit": dict}},
}


def gpu_config_problem(parameters: Any, gates: dict[str, bool]) -> str | None:
    """Why the plugin refuses a GpuConfig at prepare, None when it applies it."""
    if not isinstance(parameters, dict) or parameters.get("apiVersion") != CONFIG_API:
        return f"error decoding config parameters: no kind is registered for {parameters!r:.80}"
    if parameters.get("kind") != "GpuConfig":
        return f'error decoding config parameters: no kind "{parameters.get("kind")}" is registered for version "{CONFIG_API}"'
    problem = _strict(parameters, GPU_CONFIG_FIELDS, "")
    if problem:
        return f"error decoding config parameters: {problem}"
    sharing = parameters.get("sharing")
    if sharing is None:
        return None
    strategy = sharing.get("strategy")
    if strategy not in GATES:
        return (f"error validating GPU config: unknown GPU sharing strategy: {strategy}, supported GPU sharing "
                "strategies: TimeSlicing, MPS")
    if not gates.get(GATES[strategy]):
        return (f'error validating GPU config: "{strategy}" is selected as the GPU sharing strategy, but the '
                f'"{GATES[strategy]}" feature gate is not enabled')
    interval = (sharing.get("timeSlicingConfig") or {}).get("interval", "Default")
    if strategy == "TimeSlicing" and interval not in INTERVALS:
        return (f"error validating GPU config: unknown time-slice interval: {interval}, supported time-slice "
                f"intervals: {', '.join(INTERVALS)}")
    if strategy == "TimeSlicing" and sharing.get("mpsConfig") is not None:
        return "error applying GPU config: cannot use MpsConfig with the 'TimeSlicing' strategy"
    percentage = (sharing.get("mpsConfig") or {}).get("defaultActiveThreadPercentage")
    if strategy == "MPS" and percentage is not None and not 0 <= int(percentage) <= 100:
        return "error validating GPU config: active thread percentage must be between 0 and 100"
    return None


def claim_problem(claim: Obj | None, name: str, pod: Obj, gates: dict[str, bool] | None) -> str | None:
    """Why the kubelet cannot prepare one claim of a pod on its node (None: prepared). `gates` is None
    while no plugin of the driver runs on the node."""
    node = pod["spec"]["nodeName"]
    if claim is None:
        return f"fetch ResourceClaim {name}: not found"
    status = claim.get("status") or {}
    if not status.get("allocation"):
        return f"ResourceClaim {name} is not allocated"
    if not any(r.get("uid") == pod["metadata"]["uid"] for r in status.get("reservedFor") or []):
        return f"pod {pod['metadata']['name']} is not reserved for ResourceClaim {name}"
    results = [r for r in (status["allocation"].get("devices") or {}).get("results") or [] if r.get("driver") == DRIVER]
    if not results:
        return None
    if gates is None:
        return f"DRA driver {DRIVER} is not registered"
    if any(r.get("pool") != node for r in results):
        return f"ResourceClaim {name} was allocated devices of pool {results[0].get('pool')}, not of node {node}"
    for config in (status["allocation"].get("devices") or {}).get("config") or []:
        opaque = config.get("opaque") or {}
        if opaque.get("driver") != DRIVER:
            continue
        problem = gpu_config_problem(opaque.get("parameters"), gates)
        if problem:
            ref = f"{claim['metadata']['namespace']}/{name}:{claim['metadata']['uid']}"
            return f"error preparing devices for claim {ref}: prepare devices failed: {problem}"
    return None


def extended_resource_claim(pod: Obj) -> str | None:
    """The special claim kube-scheduler created for the pod's extended-resource requests that a
    DeviceClass backs (KEP-5004; its DynamicResources PreBind records it in the pod's status)."""
    return ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName") or None


def pod_claim_names(pod: Obj) -> list[str]:
    """The ResourceClaims of a pod: named ones, those generated from its templates (status), and the
    scheduler's extended-resource claim, which the kubelet's DRA manager prepares with them
    (kubernetes pkg/kubelet/cm/dra/manager.go, DRAExtendedResource on)."""
    generated = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    names = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        names.append(entry.get("resourceClaimName") or generated.get(entry["name"]) or "")
    special = extended_resource_claim(pod)
    return names + [special] if special else names


def running_status(pod: Obj, now: str, host_ip: str) -> Obj:
    """What the kubelet reports once the claims are prepared and the containers started."""
    conditions = [{"type": kind, "status": "True", "lastTransitionTime": now}
                  for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")]
    containers = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "restartCount": 0,
                   "started": True, "state": {"running": {"startedAt": now}}} for c in pod["spec"]["containers"]]
    return {"phase": "Running", "conditions": conditions, "containerStatuses": containers, "startTime": now,
            "hostIP": host_ip, "hostIPs": [{"ip": host_ip}]}


def waiting_status(pod: Obj, now: str) -> Obj:
    """A pod whose claims the kubelet could not prepare: Pending, its containers not created."""
    containers = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
                   "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}} for c in pod["spec"]["containers"]]
    return {"phase": "Pending", "containerStatuses": containers, "startTime": now, "conditions": [
        {"type": "PodReadyToStartContainers", "status": "False", "lastTransitionTime": now},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now}]}
