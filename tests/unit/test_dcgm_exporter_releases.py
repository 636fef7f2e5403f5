"""The recorded dcgm-exporter releases (tests/fixtures/dcgm_exporter): what each one writes, and
that the simulated exporter writes the same names and labels in the same order when set up as it."""

from __future__ import annotations

import re

import pytest

from gpushare_testbed.dcgm_sim.exposition import FAMILIES, Exporter, SimGpu, exposition
from gpushare_testbed.dcgm_sim.profiles import Profile
from tests.dcgm_releases import RELEASES, load

# release -> (node label, exports FB_RESERVED, pods share cards: KUBERNETES_VIRTUAL_GPUS)
EXPECTED = {
    "3.3.9-3.6.1": ("Hostname", False, False),
    "4.4.2-4.7.1": ("Hostname", True, False),
    "4.6.0-4.8.3": ("hostname", True, False),
    "4.6.0-4.8.3-virtual-gpus": ("hostname", True, True),
}
READ = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"}


def test_every_release_is_recorded() -> None:
    assert set(RELEASES) == set(EXPECTED)


@pytest.mark.parametrize("release", sorted(EXPECTED))
def test_what_each_release_writes(release) -> None:
    recorded, (host, reserved, shared) = load(release), EXPECTED[release]
    assert recorded.host_label == host
    assert ("DCGM_FI_DEV_FB_RESERVED" in recorded.types) == reserved
    assert set(recorded.types) >= READ  # everything the baseline and the gates read but FB_RESERVED
    assert all(labels["DCGM_FI_DRIVER_VERSION"] for _, labels, _ in recorded.samples)  # a `label` field
    vgpu = {labels.get("vgpu") for _, labels, _ in recorded.samples} - {None}
    assert (vgpu == {"0", "1"}) == shared
    assert all(len(pods) == (2 if shared else 1) for pods in recorded.pods().values())


@pytest.mark.parametrize("release", sorted(EXPECTED))
def test_the_simulated_exporter_writes_what_the_release_writes(release) -> None:
    """Set up with the release's node label and fields, the simulator's series carry the recorded
    label keys in the recorded order (less the driver-version label it does not model)."""
    recorded = load(release)
    exporter = Exporter(recorded.host_label, frozenset(recorded.types))
    text = exposition([SimGpu("fixture-node", 0, "NVIDIA-H100-80GB-HBM3", 81559, Profile("trainer", "ml-batch"))],
                      1704672000, 1704672000, exporter)
    simulated = {name: re.findall(r'(\w+)="', labels) for name, labels in re.findall(r"^(\w+)\{([^}]*)\}", text, re.M)}
    mapped = next(labels for name, labels, _ in recorded.samples if name == "DCGM_FI_DEV_FB_FREE" and "pod" in labels)
    keys = [key for key in mapped if key not in ("DCGM_FI_DRIVER_VERSION", "vgpu")]
    assert simulated["DCGM_FI_DEV_FB_FREE"] == keys
    assert set(simulated) == {family.name for family in FAMILIES} & set(recorded.types)
