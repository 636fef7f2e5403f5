"""What the MIG runbook knows of the hardware (gpushare.mig.hardware, read from gpushare.gpu_catalog)
and the node facts it reads (gpushare.model.node): profiles from the tables or from their names,
memory slices, the device IDs mig-parted's device-filter matches, MIG-capable as the GPU Operator
decides it."""

from __future__ import annotations

import math

import pytest

from gpushare.gpu_catalog import PRODUCTS
from gpushare.mig.hardware import base_name, from_name, model
from gpushare.model.node import Node


def test_a_profile_name_says_its_compute_slices_and_a_lower_bound_of_its_memory() -> None:
    profile = from_name("3g.20gb")
    assert (profile.compute_slices, profile.memory_mib, profile.exact, profile.max_per_gpu) == (3, 19073, False, None)
    assert from_name("1g.5gb+me").compute_slices == 1
    assert from_name("MIG-1g") is None


@pytest.mark.parametrize("product", [p for p in PRODUCTS.values() if p.mig_capable], ids=lambda p: p.name)
def test_the_memory_read_from_a_name_is_never_more_than_the_real_one(product) -> None:
    for name, profile in product.mig_profiles.items():
        assert from_name(name).memory_mib <= profile.memory_mib, name


def test_a_variant_takes_the_memory_of_its_profile_and_is_not_exact() -> None:
    a100 = model("NVIDIA-A100-SXM4-40GB")
    variant = a100.profile("1g.5gb+me")
    assert base_name("1g.5gb+me") == "1g.5gb"
    assert (variant.memory_mib, variant.exact) == (4864, False)


@pytest.mark.parametrize(("product", "profile", "slices"), [
    ("NVIDIA-A100-SXM4-40GB", "1g.5gb", 1), ("NVIDIA-A100-SXM4-40GB", "1g.10gb", 2),
    ("NVIDIA-A100-SXM4-40GB", "3g.20gb", 4), ("NVIDIA-A100-SXM4-40GB", "7g.40gb", 8),
    ("NVIDIA-H100-80GB-HBM3", "1g.20gb", 2), ("NVIDIA-H100-80GB-HBM3", "3g.40gb", 4),
    ("NVIDIA-A100-SXM4-80GB", "1g.10gb", 1), ("NVIDIA-A100-SXM4-80GB", "7g.80gb", 8),
])
def test_memory_slices_are_eighths_of_the_gpu(product: str, profile: str, slices: int) -> None:
    assert model(product).profile(profile).memory_slices == slices


@pytest.mark.parametrize("product", [p for p in PRODUCTS.values() if p.mig_capable], ids=lambda p: p.name)
def test_the_tables_memory_slices_are_the_eighths_their_memory_takes(product) -> None:
    for name, profile in product.mig_profiles.items():
        assert profile.memory_slices == math.ceil(profile.memory_mib / (product.memory_mib / 8)), name


def test_a_profile_of_another_product_is_foreign_and_an_unknown_one_is_not() -> None:
    a100 = model("NVIDIA-A100-SXM4-40GB")
    assert a100.foreign("2g.20gb") and a100.foreign("1g.20gb")
    assert not a100.foreign("1g.5gb") and not a100.foreign("1g.5gb+me") and not a100.foreign("1g.24gb")


def test_an_unknown_product_keeps_what_gfd_said_and_judges_nothing() -> None:
    gpu = model("NVIDIA-B200", 183359)
    assert (gpu.known, gpu.device_ids, gpu.memory_mib) == (False, (), 183359)
    assert not gpu.foreign("1g.23gb") and gpu.profile("1g.23gb").exact is False


def test_every_product_has_a_device_id_and_the_runbook_reads_it() -> None:
    assert all(p.pci_device_ids for p in PRODUCTS.values())
    assert model("NVIDIA-A100-PCIE-40GB").device_ids == ("0x20B110DE", "0x20F110DE")
    a30 = model("NVIDIA-A30", 24576)  # known by its device ID only: the memory is GFD's, no profile table
    assert (a30.device_ids, a30.memory_mib, a30.known) == (("0x20B710DE",), 24576, False)


def _node(labels: dict[str, str]) -> Node:
    return Node({"metadata": {"name": "n", "labels": labels}})


@pytest.mark.parametrize(("labels", "capable"), [
    ({"nvidia.com/mig.capable": "true", "nvidia.com/gpu.product": "NVIDIA-L4"}, True),
    ({"nvidia.com/mig.capable": "false", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}, False),
    ({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}, True),
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, True),
    ({"nvidia.com/gpu.product": "NVIDIA-A30"}, True),
    ({"nvidia.com/gpu.product": "NVIDIA-L4"}, False),
    ({}, False),
])
def test_mig_capable_as_the_operator_decides_it(labels: dict[str, str], capable: bool) -> None:
    assert _node(labels).mig_capable is capable


@pytest.mark.parametrize(("label", "product"), [
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA-A100-SXM4-40GB"),
    ("NVIDIA-A100-SXM4-40GB-MIG-INVALID", "NVIDIA-A100-SXM4-40GB"),
    ("NVIDIA-H100-80GB-HBM3-SHARED", "NVIDIA-H100-80GB-HBM3"),
    ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3"),
])
def test_the_product_without_gfds_suffixes(label: str, product: str) -> None:
    assert _node({"nvidia.com/gpu.product": label}).product == product


def test_deploy_labels_and_mig_state() -> None:
    node = _node({"nvidia.com/gpu.deploy.dcgm": "false", "nvidia.com/gpu.present": "true",
                  "nvidia.com/mig.config.state": "pending"})
    assert node.deploy_labels == {"nvidia.com/gpu.deploy.dcgm": "false"}
    assert node.mig_state == "pending" and _node({}).mig_state == ""
