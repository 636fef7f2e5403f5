"""mig-parted's side of the MIG manager, with no I/O: apply a config (as gpushare.mig_parted_config
reads it) to a node's GPUs, and write the default config the operator ships
(assets/state-mig-manager/0400_configmap.yaml, generated here from the catalog). Semantics follow
NVIDIA/mig-parted cmd/nvidia-mig-parted/apply.

A node's MIG layout is one entry per GPU: None (MIG mode disabled) or the list of MIG devices on it
(an empty list is MIG mode enabled with no devices)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Union

import yaml

from gpushare.gpu_catalog import COMPUTE_SLICES, MEMORY_SLICES, GpuProduct
from gpushare.mig_parted_config import MigConfigError, MigConfigSpec

DISABLED = "all-disabled"
Layout = list[Union[list[str], None]]


def _check_fits(product: GpuProduct, wanted: dict[str, int]) -> None:
    unknown = [p for p in wanted if p not in product.mig_profiles]
    if unknown:
        raise MigConfigError(f"error setting MIGConfig: MIG profile {unknown[0]} is not supported on {product.name}")
    profiles = [(product.mig_profiles[p], n) for p, n in wanted.items()]
    compute = sum(p.compute_slices * n for p, n in profiles)
    memory = sum(p.memory_slices * n for p, n in profiles)
    if compute > COMPUTE_SLICES or memory > MEMORY_SLICES or any(n > p.max_per_gpu for p, n in profiles):
        layout_text = ", ".join(f"{p}x{n}" for p, n in wanted.items())
        raise MigConfigError(f"error setting MIGConfig: {layout_text} does not fit one {product.name}")


def apply(product: GpuProduct, current: Layout, entries: Iterable[MigConfigSpec]) -> Layout:
    """The layout after `nvidia-mig-parted apply` of `entries` (GPUs no entry matches keep theirs)."""
    result = list(current)
    for spec in entries:
        for index in range(len(result)):
            if not spec.matches((product.pci_device_id,), index):
                continue
            if not product.mig_capable:
                if spec.mig_enabled and spec.devices is not None:
                    raise MigConfigError("cannot set MIG config on non MIG-capable GPU")
                continue
            if not spec.mig_enabled:
                result[index] = None
                continue
            _check_fits(product, spec.mig_devices)
            result[index] = [p for p, n in spec.mig_devices.items() for _ in range(n)]
    return result


def mode_change(current: Layout, target: Layout) -> bool:
    """Whether going from `current` to `target` toggles MIG mode on any GPU."""
    return any((a is None) != (b is None) for a, b in zip(current, target))


def devices(layout: Layout) -> Counter[str]:
    return Counter(name for gpu in layout if gpu for name in gpu)


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
                {"device-filter": [product.pci_device_id], "devices": "all", "mig-enabled": True,
                 "mig-devices": {name: product.mig_profiles[name].max_per_gpu}} for product in having]
    configs["all-balanced"] = [
        {"device-filter": [product.pci_device_id], "devices": "all", "mig-enabled": True,
         "mig-devices": dict(product.mig_balanced)} for product in capable]
    return yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=False)
