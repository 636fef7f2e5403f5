"""MIG manager: which MIG devices a `nvidia.com/mig.config` value creates on a product (mig-parted's
default configs), and what the device plugin and GFD then advertise per MIG strategy."""

from __future__ import annotations

from collections import Counter

from gpushare.gpu_catalog import GpuProduct

DISABLED = "all-disabled"


class MigConfigError(ValueError):
    """mig-parted cannot apply this config to this GPU; the node's state becomes `failed`."""


def layout(product: GpuProduct, config: str, gpus: int) -> list[list[str]] | None:
    """MIG devices per GPU for a mig-parted config name; None when MIG is disabled."""
    if config == DISABLED:
        return None
    if not product.mig_capable:
        raise MigConfigError(f"{product.name} does not support MIG; only {DISABLED} applies")
    if config == "all-enabled":
        return [[] for _ in range(gpus)]
    if config == "all-balanced":
        per_gpu = [name for name, count in product.mig_balanced.items() for _ in range(count)]
        return [list(per_gpu) for _ in range(gpus)]
    if config.startswith("all-"):
        profile = product.mig_profiles.get(config.removeprefix("all-"))
        if profile is None:
            fits = ", ".join(f"all-{p}" for p in product.mig_profiles)
            raise MigConfigError(f"MIG profile {config!r} does not fit {product.name}; it takes: {fits}")
        return [[profile.name] * profile.max_per_gpu for _ in range(gpus)]
    raise MigConfigError(f"selected mig-config {config!r} does not exist")


def devices(mig_layout: list[list[str]]) -> Counter[str]:
    return Counter(name for gpu in mig_layout for name in gpu)
