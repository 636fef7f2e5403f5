"""The GPU products gpushare knows, one table for the runbooks and the simulator: PCI device IDs (as
mig-parted's `device-filter` writes them, as grouped in the GPU Operator's
default-mig-parted-config), memory and MIG profile tables (NVIDIA MIG user guide). A product with
its memory is one the simulator can model; the others are known by their device IDs only (the MIG
runbook judges a `device-filter` with them, and reads their memory and profiles from the node)."""

from __future__ import annotations

from dataclasses import dataclass, field

COMPUTE_SLICES = 7  # per GPU, on every MIG-capable product modelled here
MEMORY_SLICES = 8
# The A100 / H100 MIG geometry: per kind of profile its compute slices, memory slices and most
# instances per GPU, in the order a product's profile row lists them.
SEVEN_SLICES = ((1, 1, 7), (1, 2, 4), (2, 2, 3), (3, 4, 2), (4, 4, 1), (7, 8, 1))


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile: exact from a product's table, or read from its name alone (memory a lower
    bound; slices and most per GPU unknown)."""

    name: str  # e.g. "1g.10gb"
    compute_slices: int
    memory_mib: int
    max_per_gpu: int | None  # None: not known for this product
    exact: bool = True
    memory_slices: int | None = None  # of the product's eight; None: not known (not exact)

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


@dataclass(frozen=True)
class GpuProduct:
    name: str  # the `nvidia.com/gpu.product` label value
    pci_device_ids: tuple[str, ...]  # e.g. ("0x233010DE",)
    memory_mib: int = 0  # 0: not modelled (the simulator cannot run it)
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)

    @property
    def mig_capable(self) -> bool:
        """MIG-capable as modelled here: with a profile table (none for a product known by its device IDs only)."""
        return bool(self.mig_profiles)

    @property
    def simulated(self) -> bool:
        return bool(self.memory_mib)


def _product(name: str, device_ids: tuple[str, ...], memory_mib: int = 0,
             profiles: tuple[tuple[str, int], ...] = ()) -> GpuProduct:
    """A row of the table: `profiles` are (name, memory MiB) in the order of SEVEN_SLICES."""
    return GpuProduct(name, device_ids, memory_mib, {
        profile: MigProfile(profile, compute, memory, most, memory_slices=memory_slices)
        for (profile, memory), (compute, memory_slices, most) in zip(profiles, SEVEN_SLICES)})


PRODUCTS: dict[str, GpuProduct] = {
    product.name: product
    for product in (
        _product("NVIDIA-H100-80GB-HBM3", ("0x233010DE",), 81559, (
            ("1g.10gb", 9984), ("1g.20gb", 20096), ("2g.20gb", 20096), ("3g.40gb", 40320), ("4g.40gb", 40320),
            ("7g.80gb", 80896))),
        _product("NVIDIA-A100-SXM4-40GB", ("0x20B010DE",), 40960, (
            ("1g.5gb", 4864), ("1g.10gb", 9856), ("2g.10gb", 9984), ("3g.20gb", 20096), ("4g.20gb", 20096),
            ("7g.40gb", 40192))),
        _product("NVIDIA-A100-SXM4-80GB", ("0x20B210DE",), 81920, (
            ("1g.10gb", 9728), ("1g.20gb", 19968), ("2g.20gb", 19968), ("3g.40gb", 40192), ("4g.40gb", 40192),
            ("7g.80gb", 80384))),
        _product("NVIDIA-L4", ("0x27B810DE",), 23034),
        _product("Tesla-T4", ("0x1EB810DE",), 15360),
        # known by their device IDs only
        _product("NVIDIA-A100-PCIE-40GB", ("0x20B110DE", "0x20F110DE")),
        _product("NVIDIA-A100-80GB-PCIe", ("0x20B510DE",)),
        _product("NVIDIA-A30", ("0x20B710DE",)),
        _product("NVIDIA-H100-PCIe", ("0x233110DE",)),
        _product("NVIDIA-H200", ("0x233510DE",)),
    )
}
SIMULATED: dict[str, GpuProduct] = {name: p for name, p in PRODUCTS.items() if p.simulated}


def product(name: str) -> GpuProduct:
    """A product the simulator can model."""
    try:
        return SIMULATED[name]
    except KeyError:
        known = ", ".join(sorted(SIMULATED))
        raise ValueError(f"unknown GPU product {name!r}; use one of: {known}") from None
