"""The GPU products the simulator can model: memory and MIG profile tables (NVIDIA MIG user guide)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.10gb"
    compute_slices: int
    memory_mib: int
    max_per_gpu: int


@dataclass(frozen=True)
class GpuProduct:
    name: str  # the `nvidia.com/gpu.product` label value
    memory_mib: int
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)
    # mig-parted's `all-balanced` layout for this product (profile -> instances per GPU).
    mig_balanced: dict[str, int] = field(default_factory=dict)

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)


def _profiles(*rows: tuple[str, int, int, int]) -> dict[str, MigProfile]:
    return {name: MigProfile(name, slices, mem, count) for name, slices, mem, count in rows}


PRODUCTS: dict[str, GpuProduct] = {
    product.name: product
    for product in (
        GpuProduct(
            "NVIDIA-H100-80GB-HBM3",
            81559,
            _profiles(
                ("1g.10gb", 1, 9984, 7),
                ("1g.20gb", 1, 20096, 4),
                ("2g.20gb", 2, 20096, 3),
                ("3g.40gb", 3, 40320, 2),
                ("4g.40gb", 4, 40320, 1),
                ("7g.80gb", 7, 80896, 1),
            ),
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
        GpuProduct(
            "NVIDIA-A100-SXM4-40GB",
            40960,
            _profiles(
                ("1g.5gb", 1, 4864, 7),
                ("1g.10gb", 1, 9856, 4),
                ("2g.10gb", 2, 9984, 3),
                ("3g.20gb", 3, 20096, 2),
                ("4g.20gb", 4, 20096, 1),
                ("7g.40gb", 7, 40192, 1),
            ),
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        ),
        GpuProduct(
            "NVIDIA-A100-SXM4-80GB",
            81920,
            _profiles(
                ("1g.10gb", 1, 9728, 7),
                ("1g.20gb", 1, 19968, 4),
                ("2g.20gb", 2, 19968, 3),
                ("3g.40gb", 3, 40192, 2),
                ("4g.40gb", 4, 40192, 1),
                ("7g.80gb", 7, 80384, 1),
            ),
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
        GpuProduct("NVIDIA-L4", 23034),
        GpuProduct("Tesla-T4", 15360),
    )
}


def product(name: str) -> GpuProduct:
    try:
        return PRODUCTS[name]
    except KeyError:
        known = ", ".join(sorted(PRODUCTS))
        raise ValueError(f"unknown GPU product {name!r}; use one of: {known}") from None
