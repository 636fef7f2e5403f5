"""The device-plugin release a container runs and what changed between releases
(k8s-device-plugin cmd/config-manager/main.go, commit ab05acef5; cmd/gpu-feature-discovery/main.go)."""

from __future__ import annotations

import pytest

from gpushare.model.releases import (
    KERNEL_THREAD_PANIC, NO_PROCESS_FOUND, init_waits_for_label, release, signal_failure,
)
from gpushare_testbed.simulator import plugin_version
from gpushare_testbed.simulator.plugin_version import gfd_uses_node_feature_api

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


@pytest.mark.parametrize(("tag", "target", "argv0", "host_pid", "failure"), [
    # the MPS control daemon as every operator release renders it (hostPID, PROCESS_TO_SIGNAL=/usr/bin/...)
    ("v0.18.1", "/usr/bin/mps-control-daemon", "mps-control-daemon", True, KERNEL_THREAD_PANIC),
    ("v0.19.3", "/usr/bin/mps-control-daemon", "mps-control-daemon", True, KERNEL_THREAD_PANIC),
    ("v0.20.0", "/usr/bin/mps-control-daemon", "mps-control-daemon", True, NO_PROCESS_FOUND),
    ("latest", "/usr/bin/mps-control-daemon", "mps-control-daemon", True, NO_PROCESS_FOUND),
    ("v0.20.0", "mps-control-daemon", "mps-control-daemon", True, None),  # a PROCESS_TO_SIGNAL that matches argv[0]
    # the device plugin and GFD share their pod's process namespace: no kernel thread there
    ("v0.19.3", "nvidia-device-plugin", "nvidia-device-plugin", False, None),
    ("v0.17.4", "gpu-feature-discovery", "gpu-feature-discovery", False, None),
])
def test_the_sidecar_signals_the_process_whose_argv0_matches_exactly(
        tag: str, target: str, argv0: str, host_pid: bool, failure: str | None) -> None:
    assert signal_failure(f"{IMAGE}:{tag}", target, argv0, host_pid) == failure


@pytest.mark.parametrize("image", [f"{IMAGE}:{tag}" for tag in ("v0.17.4", "v0.18.1", "v0.18.2", "v0.19.3", "v0.20.0", "latest")])
@pytest.mark.parametrize("argv0", ["mps-control-daemon", "/usr/bin/mps-control-daemon"])
@pytest.mark.parametrize("host_pid", [True, False])
def test_the_test_bed_and_the_runbooks_read_the_config_manager_alike(image: str, argv0: str, host_pid: bool) -> None:
    """Two models of the same upstream code (the test bed imports no runbook rule): held to one verdict."""
    assert plugin_version.init_waits_for_label(image) == init_waits_for_label(image)
    assert plugin_version.signal_failure(image, "/usr/bin/mps-control-daemon", argv0, host_pid) == signal_failure(
        image, "/usr/bin/mps-control-daemon", argv0, host_pid)
