"""What the runbook knows of MIG-capable GPUs, read from gpushare.gpu_catalog (its MigProfile is
the one profile model): the PCI device IDs mig-parted's `device-filter` matches (per GFD product
label), and each profile's compute slices, memory, memory slices and most instances per GPU. A profile the tables do
not know (a newer product, a `+me` media variant) is read from its name, with its memory taken as
the decimal gigabytes the name says: never more than the real size, so a fit found with it holds."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpushare.gpu_catalog import PRODUCTS, MigProfile

PROFILE_NAME = re.compile(r"^(?P<compute>\d+)g\.(?P<gb>\d+)gb(?P<variant>[+-].+)?$")
MIB_PER_GB = 1e9 / 2**20

KNOWN_PROFILES = frozenset(p for product in PRODUCTS.values() for p in product.mig_profiles)


def from_name(name: str) -> MigProfile | None:
    """A profile as its name describes it: `<compute>g.<memory>gb[+variant]`; None if it is not one."""
    match = PROFILE_NAME.match(name)
    if not match:
        return None
    return MigProfile(name, int(match["compute"]), math.floor(int(match["gb"]) * MIB_PER_GB), None, False)


def base_name(name: str) -> str:
    """A profile without its variant: 1g.5gb+me -> 1g.5gb."""
    match = PROFILE_NAME.match(name)
    return name.removesuffix(match["variant"] or "") if match else name


@dataclass(frozen=True)
class GpuModel:
    """One product as the runbook knows it."""

    product: str
    device_ids: tuple[str, ...]  # empty: unknown, so a device-filter cannot be judged
    memory_mib: int  # 0: unknown
    table: dict[str, MigProfile]  # exact profiles; empty when the product is not in the tables

    @property
    def known(self) -> bool:
        return bool(self.table)

    def profile(self, name: str) -> MigProfile | None:
        """The exact profile, else (a variant of a known one) its memory, else what the name says."""
        if name in self.table:
            return self.table[name]
        guess = from_name(name)
        base = self.table.get(base_name(name))
        if guess is not None and base is not None:
            return MigProfile(name, base.compute_slices, base.memory_mib, None, False)
        return guess

    def foreign(self, name: str) -> bool:
        """A profile of other known products that this (known) product does not have."""
        return self.known and name not in self.table and base_name(name) not in self.table and (
            base_name(name) in KNOWN_PROFILES)


def model(product: str, memory_mib: int = 0) -> GpuModel:
    """The product as the runbook knows it; `memory_mib` (GFD's nvidia.com/gpu.memory) when the tables lack it."""
    catalog = PRODUCTS.get(product)
    if catalog is None:
        return GpuModel(product, (), memory_mib, {})
    return GpuModel(product, catalog.pci_device_ids, catalog.memory_mib or memory_mib, dict(catalog.mig_profiles))
