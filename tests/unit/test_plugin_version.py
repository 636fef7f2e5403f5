"""The device-plugin release a container runs and what changed between releases
(k8s-device-plugin cmd/config-manager/main.go, commit ab05acef5; cmd/gpu-feature-discovery/main.go)."""

from __future__ import annotations

import pytest

from gpushare_testbed.simulator.plugin_version import gfd_uses_node_feature_api, init_waits_for_label, release

IMAGE = "nvcr.io/nvidia/k8s-device-plugin"


@pytest.mark.parametrize(("image", "version"), [
    (f"{IMAGE}:v0.20.0", (0, 20, 0)),
    (f"{IMAGE}:v0.17.4-ubi9", (0, 17, 4)),
    ("localhost:5000/k8s-device-plugin:0.18.2", (0, 18, 2)),  # a registry port is not a tag
    (f"{IMAGE}@sha256:0123", None),
    (f"{IMAGE}:latest", None),
    (IMAGE, None),
])
def test_release_from_the_image_tag(image: str, version: tuple[int, int, int] | None) -> None:
    assert release(image) == version


@pytest.mark.parametrize(("tag", "waits"), [("v0.17.4", True), ("v0.18.1", True), ("v0.18.2", False),
                                            ("v0.19.0", False), ("v0.20.0", False), ("latest", False)])
def test_config_manager_init_waits_for_the_label_only_before_v0_18_2(tag: str, waits: bool) -> None:
    assert init_waits_for_label(f"{IMAGE}:{tag}") is waits


@pytest.mark.parametrize(("tag", "env", "uses"), [
    ("v0.18.2", {}, False),
    ("v0.19.0", {}, True),
    ("v0.20.0", {"USE_NODE_FEATURE_API": "false"}, False),  # the operator sets it so on OpenShift
    ("v0.17.4", {"USE_NODE_FEATURE_API": "true"}, True),
    ("v0.20.0", {"GFD_USE_NODE_FEATURE_API": "false", "USE_NODE_FEATURE_API": "true"}, False),  # the first set wins
])
def test_gfd_uses_the_node_feature_api_by_default_from_v0_19(tag: str, env: dict[str, str], uses: bool) -> None:
    assert gfd_uses_node_feature_api(f"{IMAGE}:{tag}", env) is uses
