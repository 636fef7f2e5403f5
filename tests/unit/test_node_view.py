"""What a GPU node advertises for a hardware, a loaded config and a MIG layout.

Cases trace to the contract's "What a node shows once the plugin has loaded a config" and "MIG"."""

from __future__ import annotations

import pytest

from gpushare.device_plugin_config import NO_SHARING, ConfigError, PluginConfig, Sharing
from gpushare.gpu_catalog import product
from gpushare.simulator.mig import layout
from gpushare.simulator.node_view import GPU, SHARED, compute

H100 = product("NVIDIA-H100-80GB-HBM3")
A100 = product("NVIDIA-A100-SXM4-40GB")


def shared(replicas: int, renamed: bool, strategy: str = "time-slicing") -> PluginConfig:
    return PluginConfig("none", Sharing(strategy, rename_by_default=renamed, replicas=replicas))


@pytest.mark.parametrize(
    ("gpus", "config", "resources", "labels"),
    [
        # no sharing: whole cards, replicas "1", strategy none
        pytest.param(
            8,
            NO_SHARING,
            {GPU: 8},
            {
                "nvidia.com/gpu.replicas": "1",
                "nvidia.com/gpu.sharing-strategy": "none",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            },
            id="whole-cards",
        ),
        # "renameByDefault: true -> nvidia.com/gpu.shared: NxR and nvidia.com/gpu: 0"; no -SHARED suffix
        pytest.param(
            1,
            shared(4, renamed=True),
            {GPU: 0, SHARED: 4},
            {
                "nvidia.com/gpu.replicas": "4",
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            },
            id="renamed-1x4",
        ),
        pytest.param(
            8,
            shared(4, renamed=True),
            {GPU: 0, SHARED: 32},
            {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            id="renamed-8x4",
        ),
        # "renameByDefault: false -> nvidia.com/gpu: NxR"; "-SHARED only when shared AND not renamed"
        pytest.param(
            8,
            shared(2, renamed=False),
            {GPU: 16},
            {
                "nvidia.com/gpu.replicas": "2",
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
            },
            id="not-renamed-8x2",
        ),
        # "sharing-strategy = none | time-slicing | mps"
        pytest.param(
            2,
            shared(3, renamed=False, strategy="mps"),
            {GPU: 6},
            {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"},
            id="mps-not-renamed",
        ),
    ],
)
def test_time_slicing_arithmetic(
    gpus: int, config: PluginConfig, resources: dict[str, int], labels: dict[str, str]
) -> None:
    view = compute(H100, gpus, config, "single", None)
    assert view.resources == resources
    assert labels.items() <= view.labels.items()
    # "`nvidia.com/gpu.count` = physical GPUs" whatever the sharing
    assert view.labels["nvidia.com/gpu.count"] == str(gpus)
    assert view.labels["nvidia.com/gpu.memory"] == str(H100.memory_mib)


@pytest.mark.parametrize(("strategy", "label"), [("single", "single"), ("mixed", "mixed"), ("none", None)])
def test_mig_strategy_label_on_every_gpu_node(strategy: str, label: str | None) -> None:
    # GFD adds nvidia.com/mig.strategy whenever the strategy is not `none`, on MIG-less cards too
    assert compute(H100, 8, NO_SHARING, strategy, None).labels.get("nvidia.com/mig.strategy") == label


@pytest.mark.parametrize(
    ("config", "resources", "product_label"),
    [
        # "single -> resource nvidia.com/gpu, product label with -MIG-<profile>"; gpu.count = MIG devices
        pytest.param(NO_SHARING, {GPU: 28}, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", id="single"),
        # time-slicing applies to the MIG devices advertised as nvidia.com/gpu
        pytest.param(
            shared(2, renamed=True),
            {GPU: 0, SHARED: 56},
            "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            id="single-shared-renamed",
        ),
        # "-SHARED only when shared AND not renamed", after the MIG profile (GFD's productLabel)
        pytest.param(
            shared(2, renamed=False),
            {GPU: 56},
            "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED",
            id="single-shared-not-renamed",
        ),
    ],
)
def test_mig_single(config: PluginConfig, resources: dict[str, int], product_label: str) -> None:
    view = compute(A100, 4, config, "single", layout(A100, "all-1g.5gb", 4))
    assert view.resources == resources
    assert view.labels["nvidia.com/gpu.product"] == product_label
    assert view.labels["nvidia.com/gpu.count"] == "28"
    assert view.labels["nvidia.com/gpu.memory"] == str(A100.mig_profiles["1g.5gb"].memory_mib)
    assert view.labels["nvidia.com/mig.strategy"] == "single"


@pytest.mark.parametrize("config", [NO_SHARING, shared(4, renamed=False)], ids=["no-sharing", "gpu-sharing-config"])
def test_mig_mixed_advertises_one_resource_and_count_label_per_profile(config: PluginConfig) -> None:
    # "mixed -> resources nvidia.com/mig-1g.10gb etc. with labels nvidia.com/mig-1g.10gb.count"
    view = compute(A100, 4, config, "mixed", layout(A100, "all-balanced", 4))
    assert view.resources == {
        GPU: 0,
        "nvidia.com/mig-1g.5gb": 8,
        "nvidia.com/mig-2g.10gb": 4,
        "nvidia.com/mig-3g.20gb": 4,
    }
    assert {k: v for k, v in view.labels.items() if k.endswith(".count")} == {
        "nvidia.com/gpu.count": "4",  # physical cards
        "nvidia.com/mig-1g.5gb.count": "8",
        "nvidia.com/mig-2g.10gb.count": "4",
        "nvidia.com/mig-3g.20gb.count": "4",
    }
    # GFD labels MIG-enabled cards without sharing: replicas 0, no -SHARED suffix
    assert view.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert view.labels["nvidia.com/gpu.replicas"] == "0"
    assert view.labels["nvidia.com/mig.strategy"] == "mixed"
    assert all(view.owns(label) for label in view.labels)


def test_mig_single_with_mixed_profiles_is_a_plugin_error() -> None:
    # the plugin's single strategy requires one MIG device type on the node
    with pytest.raises(ConfigError, match="more than one MIG device type present on node"):
        compute(A100, 4, NO_SHARING, "single", layout(A100, "all-balanced", 4))


@pytest.mark.parametrize(
    ("label", "owned"),
    [
        pytest.param("nvidia.com/gpu.replicas", True, id="gfd-label"),
        pytest.param("nvidia.com/mig-1g.5gb.count", True, id="mig-count-label"),
        pytest.param("nvidia.com/gpu.present", False, id="operator-trigger-label"),
        pytest.param("nvidia.com/mig.config", False, id="mig-manager-input"),
        pytest.param("nvidia.com/device-plugin.config", False, id="per-node-config-label"),
    ],
)
def test_view_owns_only_gfd_labels(label: str, owned: bool) -> None:
    # labels the view owns are removed from the node when a new view lacks them; the rest are the user's or operator's
    assert compute(H100, 1, NO_SHARING, "single", None).owns(label) is owned
