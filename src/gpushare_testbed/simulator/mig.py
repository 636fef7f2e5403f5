"""mig-parted's side of the MIG manager, with no I/O: a node's MIG layout, `nvidia-mig-parted apply`
of a config (as mig_parted reads it) to a node's GPUs, the default config the operator ships
(assets/state-mig-manager/0400_configmap.yaml, generated here from the catalog) and the one the MIG
manager generates from a node's GPUs (mig-parted v0.15 pkg/mig/builder). Semantics follow
NVIDIA/mig-parted cmd/nvidia-mig-parted/apply: each entry of the selected config, in turn, sets
the GPUs it matches (MIG mode off, or on with its MIG devices); a GPU no entry matches keeps what
it has; a GPU's MIG devices must be profiles of its product that fit its compute and memory slices."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Union

import yaml

from gpushare.gpu_catalog import COMPUTE_SLICES, MEMORY_SLICES, GpuProduct
from gpushare_testbed.simulator.mig_parted import Entry, MigConfigError

DISABLED = "all-disabled"  # the config every MIG manager has: MIG mode off on every GPU
# One item per GPU: None (MIG mode off) or its MIG devices, profile -> instances ({}: MIG mode on, no device).
Layout = list[Union[dict[str, int], None]]


def _check_fits(product: GpuProduct, wanted: dict[str, int]) -> None:
    unknown = [p for p in wanted if p not in product.mig_profiles]
    if unknown:
        raise MigConfigError(f"error setting MIGConfig: MIG profile {unknown[0]} is not supported on {product.name}")
    profiles = [(product.mig_profiles[name], count) for name, count in wanted.items()]
    if (sum(profile.compute_slices * count for profile, count in profiles) > COMPUTE_SLICES
            or sum(profile.memory_slices * count for profile, count in profiles) > MEMORY_SLICES
            or any(count > profile.max_per_gpu for profile, count in profiles)):
        layout_text = ", ".join(f"{p}x{n}" for p, n in wanted.items())
        raise MigConfigError(f"error setting MIGConfig: {layout_text} does not fit one {product.name}")


def apply(product: GpuProduct, current: Layout, entries: Iterable[Entry]) -> Layout:
    """The layout after `nvidia-mig-parted apply` of `entries` (a later entry wins on a GPU), or
    MigConfigError as it fails on the first GPU it cannot set; a non MIG-capable GPU is skipped for
    `devices: all`."""
    matched = [(index, entry) for entry in entries for index in range(len(current))
               if entry.matches(product.pci_device_ids, index)]
    for _, entry in matched:
        if not product.mig_capable:
            if entry.mig_enabled and entry.devices is not None:
                raise MigConfigError("cannot set MIG config on non MIG-capable GPU")
        elif entry.mig_enabled:
            _check_fits(product, entry.mig_devices)
    layout: Layout = list(current)
    if product.mig_capable:
        for index, entry in matched:
            layout[index] = dict(entry.mig_devices) if entry.mig_enabled else None
    return layout


def devices(gpu: dict[str, int]) -> list[str]:
    """One GPU's MIG devices, one name per instance."""
    return [name for name, count in gpu.items() for _ in range(count)]


def instances(layout: Layout) -> Counter[str]:
    """MIG instances per profile on the node."""
    return sum((Counter(gpu) for gpu in layout if gpu), Counter())


def mode_change(current: Layout, target: Layout) -> bool:
    """Whether going from `current` to `target` turns MIG mode on or off on a GPU."""
    return any((before is None) != (after is None) for before, after in zip(current, target))


def default_config(products: Iterable[GpuProduct]) -> str:
    """The operator's default-mig-parted-config `config.yaml` for these products: all-disabled,
    all-enabled, all-<profile> (a device-filter per product where the count differs) and
    all-balanced (a device-filter per product)."""
    capable = [p for p in products if p.mig_capable]
    configs: dict[str, list[dict[str, Any]]] = {
        DISABLED: [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    for name in sorted({p for product in capable for p in product.mig_profiles}):
        having = [product for product in capable if name in product.mig_profiles]
        counts = {product.mig_profiles[name].max_per_gpu for product in having}
        if len(counts) == 1:
            configs[f"all-{name}"] = [{"devices": "all", "mig-enabled": True, "mig-devices": {name: counts.pop()}}]
        else:
            configs[f"all-{name}"] = [
                {"device-filter": list(product.pci_device_ids), "devices": "all", "mig-enabled": True,
                 "mig-devices": {name: product.mig_profiles[name].max_per_gpu}} for product in having]
    configs["all-balanced"] = [
        {"device-filter": list(product.pci_device_ids), "devices": "all", "mig-enabled": True,
         "mig-devices": balanced(product)} for product in capable]
    return yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=False)


# pkg/mig/builder/balanced.go balancedFormula: instances per G value, by the largest G of the GPU
BALANCED_FORMULA = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}
GENERATED_HEADER = ("# DO NOT EDIT: Auto-generated MIG configuration from GPU hardware.\n"
                    "# Generated by \"nvidia-mig-manager\".\n")


def balanced(product: GpuProduct) -> dict[str, int]:
    """The `all-balanced` MIG devices of one GPU (balanced.go: per G value of the formula the profile
    with the most instances); {} when the product has no profile for one of them."""
    profiles = product.mig_profiles.values()
    formula = BALANCED_FORMULA.get(max((p.compute_slices for p in profiles), default=0), {})
    widest = {g: max((p for p in profiles if p.compute_slices == g), key=lambda p: p.max_per_gpu, default=None)
              for g in formula}
    return {p.name: formula[g] for g, p in widest.items() if p} if all(widest.values()) else {}


def generated_config(product: GpuProduct) -> str:
    """The config a v0.15 MIG manager generates from a node of one GPU product (pkg/mig/builder
    builder.go buildMigConfigSpec; cmd/nvidia-mig-manager/main.go writeGeneratedConfig): all-disabled,
    all-enabled, all-balanced (balanced.go: per G value the profile with the most instances) and
    all-<profile> at its most instances (`+` written `.`), with no device-filter on one product."""
    configs: dict[str, list[dict[str, Any]]] = {
        DISABLED: [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    if layout := balanced(product):
        configs["all-balanced"] = [{"devices": "all", "mig-enabled": True, "mig-devices": layout}]
    for profile in sorted(product.mig_profiles.values(), key=lambda p: p.name):
        configs[f"all-{profile.name.replace('+', '.')}"] = [
            {"devices": "all", "mig-enabled": True, "mig-devices": {profile.name: profile.max_per_gpu}}]
    return GENERATED_HEADER + yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=True)
