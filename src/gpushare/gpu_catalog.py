"""The GPU products the simulator can model: memory, PCI device ID and MIG profile tables (NVIDIA MIG
user guide; device IDs as mig-parted's `device-filter` writes them)."""

from __future__ import annotations

from dataclasses import dataclass, field

COMPUTE_SLICES = 7  # per GPU, on every MIG-capable product modelled here
MEMORY_SLICES = 8


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.10gb"
    compute_slices: int
    memory_slices: int
    memory_mib: int
    max_per_gpu: int


@dataclass(frozen=True)
class GpuProduct:
    name: str  # the `nvidia.com/gpu.product` label value
    memory_mib: int
    pci_device_id: str  # e.g. "0x233010DE"
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)
    # mig-parted's `all-balanced` layout for this product (profile -> instances per GPU).
    mig_balanced: dict[str, int] = field(default_factory=dict)

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)


def _profiles(*rows: tuple[str, int, int, int, int]) -> dict[str, MigProfile]:
    return {name: MigProfile(name, slices, mem_slices, mem, count) for name, slices, mem_slices, mem, count in rows}


PRODUCTS: dict[str, GpuProduct] = {
    product.name: product
    for product in (
        GpuProduct(
            "NVIDIA-H100-80GB-HBM3",
            81559,
            "0x233010DE",
            _profiles(
                ("1g.10gb", 1, 1, 9984, 7),
                ("1g.20gb", 1, 2, 20096, 4),
                ("2g.20gb", 2, 2, 20096, 3),
                ("3g.40gb", 3, 4, 40320, 2),
                ("4g.40gb", 4, 4, 40320, 1),
                ("7g.80gb", 7, 8, 80896, 1),
            ),
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
        GpuProduct(
            "NVIDIA-A100-SXM4-40GB",
            40960,
            "0x20B010DE",
            _profiles(
                ("1g.5gb", 1, 1, 4864, 7),
                ("1g.10gb", 1, 2, 9856, 4),
                ("2g.10gb", 2, 2, 9984, 3),
                ("3g.20gb", 3, 4, 20096, 2),
                ("4g.20gb", 4, 4, 20096, 1),
                ("7g.40gb", 7, 8, 40192, 1),
            ),
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        ),
        GpuProduct(
            "NVIDIA-A100-SXM4-80GB",
            81920,
            "0x20B210DE",
            _profiles(
                ("1g.10gb", 1, 1, 9728, 7),
                ("1g.20gb", 1, 2, 19968, 4),
                ("2g.20gb", 2, 2, 19968, 3),
                ("3g.40gb", 3, 4, 40192, 2),
                ("4g.40gb", 4, 4, 40192, 1),
                ("7g.80gb", 7, 8, 80384, 1),
            ),
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
        GpuProduct("NVIDIA-L4", 23034, "0x27B810DE"),
        GpuProduct("Tesla-T4", 15360, "0x1EB810DE"),
    )
}


def product(name: str) -> GpuProduct:
    try:
        return PRODUCTS[name]
    except KeyError:
        known = ", ".join(sorted(PRODUCTS))
        raise ValueError(f"unknown GPU product {name!r}; use one of: {known}") from None
