"""The recorded dcgm-exporter releases (tests/fixtures/dcgm_exporter): what each one writes, and
that the simulated exporter writes the same names and labels in the same order when set up as it."""

from __future__ import annotations

import re

import pytest

from gpushare_testbed.dcgm_sim.exposition import FAMILIES, Exporter, SimGpu, exporter_of, exposition
from gpushare_testbed.dcgm_sim.profiles import Profile
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operand_specs
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


def _label_keys(text: str) -> dict[str, list[tuple[str, ...]]]:
    found: dict[str, list[tuple[str, ...]]] = {}
    for name, labels in re.findall(r"^(\w+)\{([^}]*)\}", text, re.M):
        found.setdefault(name, []).append(tuple(re.findall(r'(\w+)="', labels)))
    return found


def test_the_simulated_exporter_maps_shares_as_the_virtual_gpus_release_does() -> None:
    """KUBERNETES_VIRTUAL_GPUS on 4.6.0-4.8.3, two pods per card: every series of the recording, the
    card's own DCGM_FI_DEV_GPU_UTIL / FB_USED beside each pod's process values (with pod_uid) and the
    other families copied to each pod with its replica, has its twin in the simulator's, key for key."""
    recorded = load("4.6.0-4.8.3-virtual-gpus")
    exporter = Exporter(recorded.host_label, frozenset(recorded.types), virtual_gpus=True)
    profile = Profile("serve", "ml-serve", util_pct=8, fb_fraction=0.12)
    gpus = [SimGpu("fixture-node", index, "NVIDIA-H100-80GB-HBM3", 81559, profile, replicas=2) for index in (0, 1)]
    simulated = _label_keys(exposition(gpus, 1704672000, 1704672000, exporter))
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_XID_ERRORS"):
        wanted = sorted(tuple(key for key in labels if key != "DCGM_FI_DRIVER_VERSION")
                        for family, labels, _ in recorded.samples if family == name)
        assert sorted(simulated[name]) == wanted, name


def _values(text: str, name: str) -> dict[str, float]:
    """`pod` (or "card" for the card's own series) -> value, of GPU 0's `name` series."""
    return {(dict(re.findall(r'(\w+)="([^"]*)"', labels)).get("pod") or "card"): float(value)
            for family, labels, value in re.findall(r"^(\w+)\{([^}]*)\} (\S+)$", text, re.M)
            if family == name and 'gpu="0"' in labels}


def test_per_pod_values_split_the_card_and_older_releases_copy_it() -> None:
    profile = Profile("serve", "ml-serve", util_pct=40, fb_fraction=0.40, noise_pct=0)
    busy = SimGpu("node-a", 0, "NVIDIA-H100-80GB-HBM3", 81559, profile, replicas=4)
    idle = SimGpu("node-a", 1, "NVIDIA-H100-80GB-HBM3", 81559, Profile("idle", None))
    per_process = exposition([busy, idle], 1704672000, 1704672000, Exporter(virtual_gpus=True))
    util, used = _values(per_process, "DCGM_FI_DEV_GPU_UTIL"), _values(per_process, "DCGM_FI_DEV_FB_USED")
    assert util.pop("card") == 40 and sorted(util.values()) == [10] * 4
    assert sum(used.values()) - used["card"] <= used["card"] and len(used) == 5
    assert '{gpu="1"' in per_process  # 4.5.3-4.8.2 on: an idle card keeps its series
    copies = exposition([busy, idle], 1704672000, 1704672000,
                        Exporter("Hostname", virtual_gpus=True, per_process=False))
    assert sorted(_values(copies, "DCGM_FI_DEV_GPU_UTIL").values()) == [40] * 4  # no card series, no split
    assert '{gpu="1"' not in copies and "pod_uid" not in copies  # up to 4.5.2-4.8.1: the idle card is dropped


# operator release -> the dcgm-exporter it deploys: (node label, per-pod process series with virtual GPUs)
RELEASE_EXPORTERS = {"v25.10": ("Hostname", False), "v26.3": ("Hostname", True), "v26.7": ("hostname", True)}


@pytest.mark.parametrize("release", sorted(RELEASE_EXPORTERS))
@pytest.mark.parametrize("virtual", [False, True])
def test_each_operator_release_deploys_its_exporter(release, virtual) -> None:
    """The exporter the simulated operator's DaemonSet runs, read from its image and env as the
    live simulated exporter reads it: 4.4.2-4.7.0 (v25.10), 4.5.3-4.8.2 (v26.3), 4.6.0-4.8.3 (v26.7)."""
    spec = cp.default_instance(release)["spec"]
    if virtual:
        spec["dcgmExporter"]["env"] = [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"}]
    container = operand_specs.dcgm_exporter(spec)[1]["containers"][0]
    exporter = exporter_of(container["image"], {e["name"]: e.get("value", "") for e in container.get("env", [])})
    assert (exporter.host_label, exporter.per_process, exporter.virtual_gpus) == (*RELEASE_EXPORTERS[release], virtual)
    assert set(RELEASE_EXPORTERS) == set(cp.RELEASES)
