"""Unit tests of roles/share_check/filter_plugins/share_check.py (behaviour only)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.filters import load_filters

F = load_filters("roles/share_check/filter_plugins/share_check.py")

node_state = F["share_check_node_state"]
pod_shares = F["share_check_pod_shares"]
pod_summary = F["share_check_pod_summary"]
gpu_uuids = F["share_check_gpu_uuids"]

SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"


def test_filter_names() -> None:
    assert sorted(F) == ["share_check_gpu_uuids", "share_check_node_state", "share_check_pod_shares",
                         "share_check_pod_summary"]


def node(labels: dict[str, str] | None = None, allocatable: dict[str, Any] | None = None,
         taints: list[dict[str, Any]] | None = None, unschedulable: bool | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    return {"metadata": {"name": "gpu-1", "labels": labels or {}, "annotations": annotations or {}},
            "spec": spec, "status": {"allocatable": allocatable or {}}}


TS = {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "2"}


@pytest.mark.parametrize("n, resource, allocatable, shared", [
    pytest.param(node(TS, {SHARED: "8", GPU: "0"}), SHARED, 8, True, id="renamed"),
    pytest.param(node(TS, {GPU: "8"}), GPU, 8, True, id="not renamed: replicas handed out as nvidia.com/gpu"),
    pytest.param(node({"nvidia.com/gpu.count": "2"}, {GPU: "2"}), "", 0, False, id="whole cards"),
    pytest.param(node({"nvidia.com/gpu.sharing-strategy": "none"}, {GPU: "2"}), "", 0, False, id="strategy none"),
    pytest.param(node({"nvidia.com/gpu.sharing-strategy": ""}, {GPU: "2"}), "", 0, False, id="empty strategy is none"),
    pytest.param(node(TS, {GPU: "0"}), "", 0, False, id="sharing label but nothing allocatable"),
    pytest.param(node({}, {SHARED: "3"}), SHARED, 3, True, id="shared allocatable without labels"),
    pytest.param(node(TS, {GPU: "8Ki"}), "", 0, False, id="unparsable quantity is 0"),
    pytest.param({"metadata": {"name": "bare"}}, "", 0, False, id="bare node"),
])
def test_node_resource(n: dict[str, Any], resource: str, allocatable: int, shared: bool) -> None:
    s = node_state(n, "gpu-mode", "shared")
    assert (s["resource"], s["allocatable"], s["shared"]) == (resource, allocatable, shared)


def test_node_state_all_fields() -> None:
    n = node({**TS, "kubernetes.io/hostname": "host-1", "nvidia.com/gpu.product": "NVIDIA-H100-SHARED",
              "nvidia.com/device-plugin.config": "shared", "gpu-mode": "shared"},
             {SHARED: "8", GPU: "0", "cpu": "16"},
             taints=[{"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}, {"key": "other", "effect": "NoExecute"}],
             unschedulable=True, annotations={"gpushare.io/timeslicing": '{"replicas": 4}'})
    assert node_state(n, "gpu-mode", "shared") == {
        "name": "gpu-1", "hostname": "host-1", "shared": True, "resource": SHARED, "allocatable": 8,
        "allocatable_gpu": 0, "allocatable_shared": 8, "physical_gpus": 2, "replicas": 4, "strategy": "time-slicing",
        "product": "NVIDIA-H100-SHARED", "config_label": "shared", "timeslicing_annotation": '{"replicas": 4}',
        "in_pool": True, "pool_label": "gpu-mode=shared", "pool_taint": "gpu-mode=shared:NoSchedule",
        "pool_tainted": True, "schedulable": False}


def test_node_state_defaults() -> None:
    s = node_state(node(), "gpu-mode", "shared")
    assert {k: s[k] for k in ("hostname", "physical_gpus", "replicas", "strategy", "product", "in_pool", "pool_label",
                              "pool_taint", "pool_tainted", "schedulable")} == {
        "hostname": "gpu-1", "physical_gpus": 0, "replicas": 1, "strategy": "none", "product": "", "in_pool": False,
        "pool_label": "", "pool_taint": "", "pool_tainted": False, "schedulable": True}


@pytest.mark.parametrize("labels, taints, in_pool, pool_label, pool_taint, tainted", [
    ({"gpu-mode": "exclusive"}, [{"key": "gpu-mode", "value": "exclusive", "effect": "NoSchedule"}],
     False, "gpu-mode=exclusive", "gpu-mode=exclusive:NoSchedule", False),
    ({"gpu-mode": "shared"}, [{"key": "gpu-mode", "value": "shared", "effect": "PreferNoSchedule"}],
     True, "gpu-mode=shared", "gpu-mode=shared:PreferNoSchedule", False),
    ({}, [{"key": "gpu-mode", "effect": "NoSchedule"}, {"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}],
     False, "", "gpu-mode=:NoSchedule, gpu-mode=shared:NoSchedule", True),
])
def test_node_pool(labels: dict[str, str], taints: list[dict[str, Any]], in_pool: bool, pool_label: str,
                   pool_taint: str, tainted: bool) -> None:
    s = node_state(node(labels, taints=taints), "gpu-mode", "shared")
    assert (s["in_pool"], s["pool_label"], s["pool_taint"], s["pool_tainted"]) == (in_pool, pool_label, pool_taint, tainted)


def container(limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "c", "resources": {k: v for k, v in (("limits", limits), ("requests", requests)) if v is not None}}


def pod(containers: list[dict[str, Any]] | None = None, init: list[dict[str, Any]] | None = None,
        phase: str = "Running", namespace: str = "default", labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers if containers is not None else [container({SHARED: 1})]}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "namespace": namespace, "labels": labels or {}}, "spec": spec,
            "status": {"phase": phase}}


@pytest.mark.parametrize("pods, used", [
    pytest.param([pod()], 1, id="one"),
    pytest.param([pod([container({SHARED: 1}), container({SHARED: "2"})])], 3, id="containers summed"),
    pytest.param([pod([container(requests={SHARED: 2})])], 2, id="request only"),
    pytest.param([pod([container({SHARED: 3}, {SHARED: 1})])], 3, id="limit wins"),
    pytest.param([pod([container({SHARED: 1})], init=[container({SHARED: 3}), container({SHARED: 2})])], 3,
                 id="largest init wins"),
    pytest.param([pod([container({SHARED: 2}), container({SHARED: 2})], init=[container({SHARED: 3})])], 4,
                 id="container sum wins"),
    pytest.param([pod(phase="Succeeded"), pod(phase="Failed"), pod(phase="Pending"), pod()], 2, id="finished hold none"),
    pytest.param([pod([container({GPU: 4})])], 0, id="other resource"),
    pytest.param([pod([container({SHARED: "500m"})])], 0, id="unparsable quantity"),
    pytest.param([], 0, id="no pods"),
    pytest.param(None, 0, id="none"),
])
def test_pod_shares(pods: list[dict[str, Any]] | None, used: int) -> None:
    assert pod_shares(pods, SHARED) == used


def test_pod_shares_exclusion_needs_namespace_and_every_label() -> None:
    check = pod(namespace="gpushare", labels={"app": "share-check", "run": "1"})
    other_ns = pod(namespace="default", labels={"app": "share-check", "run": "1"})
    partial = pod(namespace="gpushare", labels={"app": "share-check"})
    pods = [check, other_ns, partial]
    assert pod_shares(pods, SHARED) == 3
    assert pod_shares(pods, SHARED, "gpushare", {"app": "share-check", "run": "1"}) == 2
    assert pod_shares(pods, SHARED, "gpushare", {"app": "share-check"}) == 1
    assert pod_shares(pods, SHARED, "gpushare", {}) == 3
    assert pod_shares(pods, SHARED, "gpushare", None) == 3


def test_pod_summary() -> None:
    scheduled = {"metadata": {"name": "a"}, "spec": {"nodeName": "gpu-1"},
                 "status": {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": "maximum request size",
                            "conditions": [{"type": "PodScheduled", "status": "True"}]}}
    pending = {"metadata": {"name": "b", "deletionTimestamp": "2025-01-01T00:00:00Z"}, "spec": {"nodeName": None},
               "status": {"phase": "Pending", "conditions": [
                   {"type": "Ready", "status": "False", "reason": "NotReady"},
                   {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "Insufficient"}]}}
    assert pod_summary([scheduled, pending, {}]) == [
        {"name": "a", "phase": "Failed", "node": "gpu-1", "reason": "UnexpectedAdmissionError",
         "message": "maximum request size", "scheduled": "True", "terminating": False},
        {"name": "b", "phase": "Pending", "node": "", "reason": "Unschedulable", "message": "Insufficient",
         "scheduled": "False", "terminating": True},
        {"name": "", "phase": "", "node": "", "reason": "", "message": "", "scheduled": "", "terminating": False}]
    assert pod_summary(None) == []


@pytest.mark.parametrize("stdout, uuids", [
    ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1a2b3c4d-0000-1111-2222-333344445555)\n"
     "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-ffff)\n",
     ["GPU-1a2b3c4d-0000-1111-2222-333344445555", "GPU-ffff"]),
    ("GPU 0: A100 (UUID: GPU-abc)\n  MIG 1g.10gb Device 0: (UUID: MIG-def)\n", ["GPU-abc"]),
    ("GPU 0: A100 (UUID:GPU-nospace)", ["GPU-nospace"]),
    ("No devices were found", []),
    ("", []),
    (None, []),
])
def test_gpu_uuids(stdout: str | None, uuids: list[str]) -> None:
    assert gpu_uuids(stdout) == uuids
