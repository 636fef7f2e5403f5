"""What a GPU node advertises (allocatable resources and GFD labels) for a given hardware,
device-plugin config and MIG layout — the arithmetic of the contract, with no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from gpushare.gpu_catalog import GpuProduct
from gpushare.simulator.mig import devices
from gpushare.device_plugin_config import ConfigError, PluginConfig

GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
# Label keys this module owns; any of them not in a new view is removed from the node.
OWNED_LABELS = (
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.memory",
    "nvidia.com/mig.strategy",
)


@dataclass(frozen=True)
class NodeView:
    resources: dict[str, int]  # every nvidia.com/* extended resource the node advertises
    labels: dict[str, str]

    def owns(self, label: str) -> bool:
        return label in OWNED_LABELS or (label.startswith("nvidia.com/mig-") and "." in label.split("/", 1)[1])


def _shared(resources: dict[str, int], config: PluginConfig) -> dict[str, int]:
    sharing = config.sharing
    if sharing.strategy == "none" or GPU not in resources:
        return resources
    total = resources[GPU] * sharing.replicas
    if sharing.rename_by_default:
        return {**resources, GPU: 0, SHARED: total}
    return {**resources, GPU: total}


def compute(
    product: GpuProduct, gpus: int, config: PluginConfig, mig_strategy: str, mig_layout: list[list[str]] | None
) -> NodeView:
    sharing = config.sharing
    suffix = "-SHARED" if sharing.strategy != "none" and not sharing.rename_by_default else ""
    labels = {
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.replicas": str(sharing.replicas),
        "nvidia.com/gpu.sharing-strategy": sharing.strategy,
        "nvidia.com/gpu.product": product.name + suffix,
        "nvidia.com/gpu.memory": str(product.memory_mib),
    }
    if mig_strategy != "none":
        labels["nvidia.com/mig.strategy"] = mig_strategy  # GFD sets it on every GPU node, MIG or not
    if mig_layout is None:
        return NodeView(_shared({GPU: gpus}, config), labels)
    counts = devices(mig_layout)
    if mig_strategy == "single":
        if len(counts) > 1:
            raise ConfigError(
                "error building device map: error building device map from config.resources: "
                "invalid MIG configuration: more than one MIG device type present on node"
            )
        profile = next(iter(counts), None)
        total = sum(counts.values())
        labels["nvidia.com/gpu.count"] = str(total)
        if profile:
            spec = product.mig_profiles[profile]
            labels["nvidia.com/gpu.product"] = f"{product.name}-MIG-{profile}{suffix}"
            labels["nvidia.com/gpu.memory"] = str(spec.memory_mib)
        return NodeView(_shared({GPU: total}, config), labels)
    # mixed: GFD labels the MIG-enabled cards themselves without sharing (replicas 0, no suffix)
    labels["nvidia.com/gpu.replicas"] = "0"
    labels["nvidia.com/gpu.product"] = product.name
    resources = {GPU: 0}
    for profile, count in counts.items():
        resources[f"nvidia.com/mig-{profile}"] = count
        labels[f"nvidia.com/mig-{profile}.count"] = str(count)
        labels[f"nvidia.com/mig-{profile}.memory"] = str(product.mig_profiles[profile].memory_mib)
    return NodeView(resources, labels)
