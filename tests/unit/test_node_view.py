"""What a GPU node advertises (device plugin) and how GFD labels it, for a hardware, a loaded config
and a MIG layout. Cases trace to the contract's "What a node shows once the plugin has loaded a
config" and "MIG", and to k8s-device-plugin internal/rm/device_map.go and internal/lm."""

from __future__ import annotations

import pytest
import yaml

from gpushare.gpu_catalog import product
from gpushare_testbed.simulator.node_view import GPU, SHARED, TIMESTAMP, gfd_labels, gfd_owns, plugin_resources
from gpushare_testbed.simulator.nvidia_judge import NO_SHARING, ConfigError, PluginConfig, plugin_config

H100 = product("NVIDIA-H100-80GB-HBM3")
A100 = product("NVIDIA-A100-SXM4-40GB")
WHOLE = [None]
ALL_1G5 = [{"1g.5gb": 7} for _ in range(4)]
BALANCED = [{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1} for _ in range(4)]


def parse(text: str, strategy: str = "time-slicing") -> PluginConfig:
    """What the simulator reads from NVIDIA's verdict on this config (its resolved form is the file's here)."""
    return plugin_config(yaml.safe_load(text), strategy)


def shared(replicas: int, renamed: bool, mechanism: str = "timeSlicing") -> PluginConfig:
    return parse(f"""
version: v1
sharing:
  {mechanism}:
    renameByDefault: {str(renamed).lower()}
    resources:
    - name: nvidia.com/gpu
      replicas: {replicas}
""", "mps" if mechanism == "mps" else "time-slicing")


@pytest.mark.parametrize(
    ("gpus", "config", "resources", "labels"),
    [
        pytest.param(8, NO_SHARING, {GPU: 8}, {"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
                                               "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, id="whole-cards"),
        # "renameByDefault: true -> nvidia.com/gpu.shared: NxR" (nvidia.com/gpu is no longer registered)
        pytest.param(1, shared(4, renamed=True), {SHARED: 4}, {"nvidia.com/gpu.replicas": "4",
                     "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                     id="renamed-1x4"),
        pytest.param(8, shared(4, renamed=True), {SHARED: 32}, {"nvidia.com/gpu.replicas": "4"}, id="renamed-8x4"),
        # "renameByDefault: false -> nvidia.com/gpu: NxR"; "-SHARED only when shared AND not renamed"
        pytest.param(8, shared(2, renamed=False), {GPU: 16}, {"nvidia.com/gpu.replicas": "2",
                     "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}, id="not-renamed-8x2"),
        pytest.param(2, shared(3, renamed=False, mechanism="mps"), {GPU: 6}, {"nvidia.com/gpu.sharing-strategy": "mps",
                     "nvidia.com/mps.capable": "true"}, id="mps"),
    ],
)
def test_time_slicing_arithmetic(gpus: int, config: PluginConfig, resources: dict[str, int], labels: dict[str, str]) -> None:
    layout = [None] * gpus
    assert plugin_resources(config, "single", layout) == resources
    gfd = gfd_labels(H100, config, "single", layout, 1700000000)
    assert labels.items() <= gfd.items()
    assert gfd["nvidia.com/gpu.count"] == str(gpus)  # physical GPUs whatever the sharing
    assert gfd["nvidia.com/gpu.memory"] == str(H100.memory_mib)
    assert gfd[TIMESTAMP] == "1700000000"


@pytest.mark.parametrize(("strategy", "label"), [("single", "single"), ("mixed", "mixed"), ("none", None)])
def test_mig_strategy_label_on_every_gpu_node(strategy: str, label: str | None) -> None:
    # GFD adds nvidia.com/mig.strategy whenever the strategy is not `none`, on MIG-less cards too
    assert gfd_labels(H100, NO_SHARING, strategy, [None] * 8, 0).get("nvidia.com/mig.strategy") == label


def test_mig_capable_label_comes_from_the_product() -> None:
    assert gfd_labels(A100, NO_SHARING, "single", [None] * 4, 0)["nvidia.com/mig.capable"] == "true"
    assert gfd_labels(product("NVIDIA-L4"), NO_SHARING, "single", [None], 0)["nvidia.com/mig.capable"] == "false"


@pytest.mark.parametrize(
    ("config", "resources", "product_label"),
    [
        # "single -> resource nvidia.com/gpu (one per instance), product label with -MIG-<profile>"
        pytest.param(NO_SHARING, {GPU: 28}, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", id="single"),
        pytest.param(shared(2, renamed=True), {SHARED: 56}, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", id="single-shared-renamed"),
        pytest.param(shared(2, renamed=False), {GPU: 56}, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED",
                     id="single-shared-not-renamed"),
    ],
)
def test_mig_single(config: PluginConfig, resources: dict[str, int], product_label: str) -> None:
    assert plugin_resources(config, "single", ALL_1G5) == resources
    labels = gfd_labels(A100, config, "single", ALL_1G5, 0)
    assert labels["nvidia.com/gpu.product"] == product_label
    assert labels["nvidia.com/gpu.count"] == "28"
    assert labels["nvidia.com/gpu.memory"] == str(A100.mig_profiles["1g.5gb"].memory_mib)
    assert labels["nvidia.com/mig.strategy"] == "single"


@pytest.mark.parametrize("config", [NO_SHARING, shared(4, renamed=False)], ids=["no-sharing", "gpu-sharing-config"])
def test_mig_mixed_advertises_one_resource_and_count_label_per_profile(config: PluginConfig) -> None:
    # "mixed -> resources nvidia.com/mig-1g.10gb etc. with labels nvidia.com/mig-1g.10gb.count"
    assert plugin_resources(config, "mixed", BALANCED) == {
        "nvidia.com/mig-1g.5gb": 8, "nvidia.com/mig-2g.10gb": 4, "nvidia.com/mig-3g.20gb": 4}
    labels = gfd_labels(A100, config, "mixed", BALANCED, 0)
    assert {k: v for k, v in labels.items() if k.endswith(".count")} == {
        "nvidia.com/gpu.count": "4",  # every card of the model
        "nvidia.com/mig-1g.5gb.count": "8", "nvidia.com/mig-2g.10gb.count": "4", "nvidia.com/mig-3g.20gb.count": "4"}
    # "sharing-strategy label `none` under mixed": MIG-enabled cards are labelled without sharing
    assert labels["nvidia.com/gpu.sharing-strategy"] == "none"
    assert labels["nvidia.com/gpu.replicas"] == "0"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert labels["nvidia.com/mig-3g.20gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"
    assert all(gfd_owns(label) for label in labels)


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        pytest.param(BALANCED, "more than one MIG device type present on node", id="mixed-geometry"),
        pytest.param([{}, {}, {"1g.5gb": 1}, {"1g.5gb": 1}], "has no MIG devices configured", id="enabled-but-empty"),
        pytest.param([None, {"1g.5gb": 7}, None, None], "the same migEnabled value", id="some-cards-whole"),
    ],
)
def test_invalid_layout_under_single_labels_mig_invalid_and_stops_the_plugin(layout: list, problem: str) -> None:
    # GFD: newInvalidMigStrategyLabeler (no exception); the plugin: refuses to build its device map
    labels = gfd_labels(A100, NO_SHARING, "single", layout, 0)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-INVALID"
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.memory"]) == ("0", "0", "0")
    with pytest.raises(ConfigError, match=problem):
        plugin_resources(NO_SHARING, "single", layout)


def test_gpu_count_is_every_card_of_the_model_mig_or_not() -> None:
    """internal/lm/mig-strategy.go newGPULabelers: counts[name]++ over MIG-enabled and full cards alike."""
    half = [{"1g.5gb": 7}, {"1g.5gb": 7}, None, None]
    assert gfd_labels(A100, NO_SHARING, "mixed", half, 0)["nvidia.com/gpu.count"] == "4"
    assert plugin_resources(NO_SHARING, "mixed", half) == {GPU: 2, "nvidia.com/mig-1g.5gb": 14}
    labels = gfd_labels(A100, shared(2, renamed=False), "mixed", half, 0)
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"]) == ("4", "2")


def mig_shared(renamed: bool) -> PluginConfig:
    """Time-slicing of one MIG profile's instances (the mixed strategy's resource name), 3 ways."""
    return parse(f"""
version: v1
sharing:
  timeSlicing:
    renameByDefault: {str(renamed).lower()}
    resources:
    - name: nvidia.com/mig-1g.5gb
      replicas: 3
""")


def test_under_mixed_time_slicing_replicates_mig_devices_too() -> None:
    """internal/rm/device_map.go updateDeviceMapWithReplicas replicates every listed resource, so an
    nvidia.com/mig-* entry multiplies that profile's instances; GFD labels it as shared
    (internal/lm/resource.go NewMIGResourceLabeler with the config)."""
    config = mig_shared(renamed=False)
    assert plugin_resources(config, "mixed", BALANCED) == {
        "nvidia.com/mig-1g.5gb": 24, "nvidia.com/mig-2g.10gb": 4, "nvidia.com/mig-3g.20gb": 4}
    labels = gfd_labels(A100, config, "mixed", BALANCED, 0)
    assert (labels["nvidia.com/mig-1g.5gb.replicas"], labels["nvidia.com/mig-1g.5gb.sharing-strategy"],
            labels["nvidia.com/mig-1g.5gb.product"]) == ("3", "time-slicing", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED")
    assert (labels["nvidia.com/mig-2g.10gb.replicas"], labels["nvidia.com/mig-2g.10gb.sharing-strategy"]) == ("1", "none")
    assert labels["nvidia.com/gpu.sharing-strategy"] == "none", "nvidia.com/gpu itself is not shared"
    renamed = mig_shared(renamed=True)
    assert plugin_resources(renamed, "mixed", ALL_1G5) == {"nvidia.com/mig-1g.5gb.shared": 84}
    assert gfd_labels(A100, renamed, "mixed", ALL_1G5, 0)["nvidia.com/mig-1g.5gb.product"] == \
        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def test_strategy_none_ignores_mig() -> None:
    # the plugin's own default (no MIG_STRATEGY): MIG-enabled cards still count as whole GPUs
    assert plugin_resources(NO_SHARING, "none", ALL_1G5) == {GPU: 4}
    labels = gfd_labels(A100, NO_SHARING, "none", ALL_1G5, 0)
    assert "nvidia.com/mig.strategy" not in labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"


@pytest.mark.parametrize(
    ("label", "owned"),
    [
        pytest.param("nvidia.com/gpu.replicas", True, id="gfd-label"),
        pytest.param("nvidia.com/mig-1g.5gb.count", True, id="mig-count-label"),
        pytest.param(TIMESTAMP, True, id="timestamp"),
        pytest.param("nvidia.com/gpu.present", False, id="operator-trigger-label"),
        pytest.param("nvidia.com/gpu.deploy.device-plugin", False, id="operator-deploy-label"),
        pytest.param("nvidia.com/mig.config", False, id="mig-manager-input"),
        pytest.param("nvidia.com/device-plugin.config", False, id="per-node-config-label"),
    ],
)
def test_gfd_owns_only_its_labels(label: str, owned: bool) -> None:
    # labels GFD owns are removed when it no longer produces them; the rest are the user's or operator's
    assert gfd_owns(label) is owned
