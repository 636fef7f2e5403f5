"""Which pods the simulated driver upgrade takes off a node (gpushare_testbed.simulator.pod_deletion),
case by case against gpu-operator's gpuPodSpecFilter and kubectl's drain filters (pkg/drain/filters.go)."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare_testbed.simulator.pod_deletion import (
    DELETE,
    EMPTY_DIR,
    SKIP,
    UNMANAGED,
    DeletionRules,
    deletion_refused,
    drain_verdict,
    is_gpu_pod,
    selected,
)

OWNED = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "controller": True}]


def pod(phase: str = "Running", owners: list[dict[str, Any]] | None = None, volumes: tuple[str, ...] = (),
        resources: dict[str, Any] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "ownerReferences": OWNED if owners is None else owners,
                         "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "resources": resources or {}}],
                     "volumes": [{"name": v, v: {}} for v in volumes]},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("resources", "phase", "gpu"), [
    ({"limits": {"nvidia.com/gpu": "1"}}, "Running", True),
    ({"requests": {"nvidia.com/gpu.shared": "1"}}, "Pending", True),
    ({"limits": {"nvidia.com/mig-1g.10gb": "1"}}, "Running", True),
    ({"limits": {"nvidia.com/gpu": "1"}}, "Succeeded", False),
    ({"limits": {"cpu": "1"}}, "Running", False),
    ({"limits": {"example.com/nvidia.com/gpu": "1"}}, "Running", False),
])
def test_gpu_pods_are_running_or_pending_and_ask_for_an_nvidia_gpu_resource(resources: dict[str, Any], phase: str, gpu: bool) -> None:
    assert is_gpu_pod(pod(phase, resources=resources)) is gpu


@pytest.mark.parametrize(("case", "force", "empty_dir", "verdict"), [
    (pod(), False, False, DELETE),
    (pod(owners=[{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True}]), True, True, SKIP),
    # the filter compares the controller's Kind only
    (pod(owners=[{"apiVersion": "extensions/v1beta1", "kind": "DaemonSet", "name": "ds", "controller": True}]), False, False, SKIP),
    (pod(annotations={"kubernetes.io/config.mirror": "x"}, owners=[]), False, False, SKIP),
    (pod(volumes=("emptyDir",)), False, False, EMPTY_DIR),
    (pod(volumes=("emptyDir",)), False, True, DELETE),
    (pod(volumes=("hostPath",)), False, False, DELETE),
    (pod(owners=[]), False, True, UNMANAGED),
    (pod(owners=[]), True, False, DELETE),
    (pod(owners=[{"apiVersion": "v1", "kind": "Node", "name": "n"}]), False, False, UNMANAGED),  # an owner, not a controller
    (pod("Succeeded", owners=[], volumes=("emptyDir",)), False, False, DELETE),
    (pod("Failed", owners=[{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True}]), False, False, DELETE),
])
def test_the_drain_filters_in_kubectls_order(case: dict[str, Any], force: bool, empty_dir: bool, verdict: str) -> None:
    assert drain_verdict(case, force, empty_dir) == verdict


def test_the_gpu_pod_deletion_uses_its_own_settings() -> None:
    unmanaged = pod(owners=[], volumes=("emptyDir",))
    rules = DeletionRules.of({"podDeletion": {"force": True}, "drain": {"force": True, "deleteEmptyDir": True}})
    assert deletion_refused(unmanaged, rules)
    assert not deletion_refused(unmanaged, DeletionRules.of({"podDeletion": {"force": True, "deleteEmptyDir": True}}))
    assert DeletionRules.of({"podDeletion": "yes", "drain": None}) == DeletionRules()


@pytest.mark.parametrize(("selector", "labels", "chosen"), [
    ("", {}, True),
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "db"}, False),
    ("app!=web", {}, True),
    ("app", {"app": ""}, True),
    ("!app", {"app": "web"}, False),
    ("tier in (a, b),app", {"tier": "b", "app": "x"}, True),
    ("tier notin (a,b)", {"tier": "a"}, False),
    ("tier notin (a,b)", {}, True),
])
def test_the_drain_pod_selector(selector: str, labels: dict[str, str], chosen: bool) -> None:
    assert selected(selector, labels) is chosen
