"""What a GPU node shows for a hardware, a loaded config and a MIG layout, with no I/O: the
resources the device plugin advertises (k8s-device-plugin internal/rm/device_map.go
updateDeviceMapWithReplicas: every shared resource replicated, nvidia.com/mig-* under the mixed
strategy too) and the labels GFD writes (internal/lm/resource.go, mig-strategy.go, nvml.go,
timestamp.go: `nvidia.com/gpu.count` counts every GPU of the model, MIG-enabled or not)."""

from __future__ import annotations

from gpushare_testbed.simulator.nvidia_judge import ConfigError, PluginConfig
from gpushare.gpu_catalog import GpuProduct
from gpushare_testbed.simulator.mig import Layout, instances

GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
TIMESTAMP = "nvidia.com/gfd.timestamp"
# Label keys GFD writes; one it no longer produces is removed from the node.
GFD_LABELS = frozenset({
    "nvidia.com/gpu.count", "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy", "nvidia.com/gpu.product",
    "nvidia.com/gpu.memory", "nvidia.com/gpu.slices.gi", "nvidia.com/gpu.slices.ci", "nvidia.com/mig.strategy",
    "nvidia.com/mig.capable", "nvidia.com/mps.capable", TIMESTAMP,
})
_DEVICE_MAP_ERROR = ("error getting plugins: unable to create plugins: failed to construct resource managers: "
                     "error building device map: error building device map from config.resources: ")


def node_ready(node: dict) -> bool:
    """The node's Ready condition is True (its kubelet reports)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])


def gfd_owns(label: str) -> bool:
    return label in GFD_LABELS or (label.startswith("nvidia.com/mig-") and "." in label.split("/", 1)[1])


def _replicate(resources: dict[str, int], config: PluginConfig) -> dict[str, int]:
    """Each shared resource the plugin registers R times, under `<name>.shared` when renamed."""
    sharing = config.sharing
    replicas = dict(sharing.mig)
    if sharing.strategy != "none":
        replicas[GPU] = sharing.replicas
    result: dict[str, int] = {}
    for name, count in resources.items():
        if name in replicas:
            result[name + ".shared" if sharing.rename_by_default else name] = count * replicas[name]
        else:
            result[name] = count
    return result


def _single_strategy_problem(layout: Layout) -> str | None:
    enabled = [(i, gpu) for i, gpu in enumerate(layout) if gpu is not None]
    empty = next((i for i, gpu in enabled if not gpu), None)
    if empty is not None:
        return ("invalid MIG configuration: at least one device with migEnabled=true was not configured correctly: "
                f"device {empty} has no MIG devices configured")
    if len(instances(layout)) > 1:
        return "invalid MIG configuration: more than one MIG device type present on node"
    if enabled and len(enabled) != len(layout):
        return "all devices on the node must be configured with the same migEnabled value"
    return None


def plugin_resources(config: PluginConfig, mig_strategy: str, layout: Layout) -> dict[str, int]:
    """Extended resources the plugin registers (resource -> devices); ConfigError with the text after
    `error starting plugins: ` when it refuses to start."""
    full = sum(1 for gpu in layout if gpu is None)
    if mig_strategy == "none" or full == len(layout):
        return _replicate({GPU: len(layout)}, config)
    if mig_strategy == "single":
        problem = _single_strategy_problem(layout)
        if problem:
            raise ConfigError(_DEVICE_MAP_ERROR + problem)
        return _replicate({GPU: sum(instances(layout).values())}, config)
    resources = {GPU: full} if full else {}
    resources.update({f"nvidia.com/mig-{p}": n for p, n in instances(layout).items()})
    return _replicate(resources, config)


def _base(product_name: str, count: int, replicas: int, strategy: str, memory: int, shared_suffix: bool) -> dict[str, str]:
    return {
        "product": product_name + ("-SHARED" if shared_suffix else ""),
        "count": str(count),
        "replicas": str(replicas),
        "sharing-strategy": strategy,
        "memory": str(memory),
    }


def gfd_labels(product: GpuProduct, config: PluginConfig, mig_strategy: str, layout: Layout, timestamp: int) -> dict[str, str]:
    sharing = config.sharing
    shared = sharing.strategy != "none"
    mig_enabled = [gpu for gpu in layout if gpu is not None]
    labels = {
        TIMESTAMP: str(timestamp),
        "nvidia.com/mig.capable": str(product.mig_capable).lower(),
        "nvidia.com/mps.capable": str(sharing.strategy == "mps" and not mig_enabled).lower(),
    }
    gpu: dict[str, str] = {}
    if mig_enabled:  # MIG-enabled cards are labelled without sharing; the count is every card of the model
        gpu = _base(product.name, len(layout), 0, "none", product.memory_mib, False)
    if len(mig_enabled) < len(layout):  # the full cards' labels override those of the MIG-enabled ones
        gpu = _base(product.name, len(layout), sharing.replicas, sharing.strategy,
                    product.memory_mib, shared and not sharing.rename_by_default)
    if mig_strategy != "none":
        labels["nvidia.com/mig.strategy"] = mig_strategy
    counts = instances(layout)
    if mig_strategy == "single" and mig_enabled:
        if _single_strategy_problem(layout):
            gpu = {"product": f"{product.name}-MIG-INVALID", "count": "0", "replicas": "0", "sharing-strategy": "", "memory": "0"}
        else:
            (name, total), = counts.items()
            profile = product.mig_profiles[name]
            gpu = _base(f"{product.name}-MIG-{name}", total, sharing.replicas, sharing.strategy, profile.memory_mib,
                        shared and not sharing.rename_by_default)
            gpu.update({"slices.gi": str(profile.compute_slices), "slices.ci": str(profile.compute_slices)})
    labels.update({f"{GPU}.{k}": v for k, v in gpu.items()})
    if mig_strategy == "mixed":
        shares = dict(sharing.mig)
        for name, total in counts.items():
            profile = product.mig_profiles[name]
            replicas = shares.get(f"nvidia.com/mig-{name}", 1)
            mig = _base(f"{product.name}-MIG-{name}", total, replicas, "time-slicing" if replicas > 1 else "none",
                        profile.memory_mib, replicas > 1 and not sharing.rename_by_default)
            mig.update({"slices.gi": str(profile.compute_slices), "slices.ci": str(profile.compute_slices)})
            labels.update({f"nvidia.com/mig-{name}.{k}": v for k, v in mig.items()})
    return labels
