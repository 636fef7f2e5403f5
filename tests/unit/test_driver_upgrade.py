"""Which pods the GPU Operator's driver upgrade can take off a node (gpushare.driver_upgrade): the
GPU pods its pod deletion must delete, kubectl's drain filters with the ClusterPolicy's
`driver.upgradePolicy` (chart defaults: podDeletion force and deleteEmptyDir false, drain off), and
what the drain does when enabled. Cases follow k8s-operator-libs pkg/upgrade/pod_manager_test.go
(SchedulePodEviction: standalone GPU pods with and without force, emptyDir with and without
deleteEmptyDir, drain enabled) and gpu-operator cmd/gpu-operator/main_test.go
(TestGPUPodSpecFilterResourceList); the DaemonSet case follows kubectl pkg/drain filters.go
(daemonSetFilter with IgnoreAllDaemonSets), which those tests do not cover."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare import driver_upgrade as du

CHART = du.Policy()
FORCE = du.Policy(deletion_force=True)


def pod(name: str = "p", resource: str | None = "nvidia.com/gpu", owner: str | None = "ReplicaSet",
        phase: str = "Running", empty_dir: bool = False, labels: dict[str, str] | None = None,
        mirror: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "team", "labels": labels or {}, "annotations": {}}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                        "controller": True}]
    if mirror:
        metadata["annotations"][du.MIRROR_ANNOTATION] = "x"
    container: dict[str, Any] = {"name": "c"}
    if resource:
        container["resources"] = {"limits": {resource: "1"}}
    return {"metadata": metadata, "status": {"phase": phase},
            "spec": {"containers": [container], "volumes": [{"name": "s", "emptyDir": {}}] if empty_dir else []}}


@pytest.mark.parametrize(("candidate", "gpu"), [
    pytest.param(pod(resource="nvidia.com/gpu"), True, id="gpu"),
    pytest.param(pod(resource="nvidia.com/gpu.shared"), True, id="shared-replica"),
    pytest.param(pod(resource="nvidia.com/mig-1g.5gb"), True, id="mig-device"),
    pytest.param(pod(resource="cpu"), False, id="cpu"),
    pytest.param(pod(resource=None), False, id="no-resources"),
    pytest.param(pod(phase="Pending"), True, id="pending"),
    pytest.param(pod(phase="Succeeded"), False, id="finished"),
])
def test_the_gpu_pods(candidate: dict[str, Any], gpu: bool) -> None:
    assert du.gpu_pod(candidate) is gpu


@pytest.mark.parametrize(("candidate", "policy", "why"), [
    pytest.param(pod(), CHART, None, id="controlled"),
    pytest.param(pod(owner=None), CHART, "it has no controller and spec.driver.upgradePolicy.podDeletion.force is false",
                 id="standalone-without-force"),
    pytest.param(pod(owner=None), FORCE, None, id="standalone-with-force"),
    pytest.param(pod(empty_dir=True), FORCE, "it uses an emptyDir volume and "
                 "spec.driver.upgradePolicy.podDeletion.deleteEmptyDir is false", id="emptydir-force-only"),
    pytest.param(pod(owner=None, empty_dir=True), du.Policy(deletion_force=True, deletion_empty_dir=True), None,
                 id="emptydir-with-both"),
    pytest.param(pod(owner=None, empty_dir=True), CHART, "it uses an emptyDir volume and "
                 "spec.driver.upgradePolicy.podDeletion.deleteEmptyDir is false", id="local-storage-filter-comes-first"),
    pytest.param(pod(owner="DaemonSet"), FORCE, "DaemonSet p-owner runs it, and the driver upgrade's GPU-pod deletion "
                 "never deletes a DaemonSet's pod", id="daemonset-even-with-force"),
    pytest.param(pod(mirror=True, owner=None), FORCE, "it is a static pod of the node's kubelet, which no drain deletes",
                 id="mirror"),
])
def test_what_the_gpu_pod_deletion_cannot_delete(candidate: dict[str, Any], policy: du.Policy, why: str | None) -> None:
    assert du.deletion_refusal(candidate, policy) == why


def test_with_the_chart_defaults_only_the_gpu_pods_it_cannot_delete_block_the_node() -> None:
    pods = [pod("web", resource="cpu", owner=None), pod("infer"), pod("bare", owner=None), pod("agent", owner="DaemonSet")]
    assert [(p["metadata"]["name"], why.split(" ")[0]) for p, why in du.blockers(pods, CHART)] == [
        ("bare", "it"), ("agent", "DaemonSet")]
    assert du.blockers(pods[:2], CHART) == [], "a CPU pod without controller is no GPU pod: the pod deletion ignores it"


def test_with_drain_enabled_the_drain_decides_over_every_selected_pod() -> None:
    """drain_manager.go: the drain runs the same filters with the drain's own force/deleteEmptyDir over
    drain.podSelector (all pods when empty): a DaemonSet's GPU pod is left alone, any standalone pod fails it."""
    drain = du.Policy(drain=True)
    assert du.blockers([pod("agent", owner="DaemonSet")], drain) == []
    blocked = du.blockers([pod("agent", owner="DaemonSet"), pod("web", resource="cpu", owner=None)], drain)
    assert [(p["metadata"]["name"], why) for p, why in blocked] == [
        ("web", "it has no controller and spec.driver.upgradePolicy.drain.force is false")]
    assert du.blockers([pod("agent", owner="DaemonSet"), pod("web", resource="cpu", owner=None)],
                       du.Policy(drain=True, drain_selector="tier=gpu")) == []
    assert du.blockers([pod("bare", owner=None)], drain) != [], "pod deletion failed, and the drain refuses it too"


def test_the_policy_from_a_clusterpolicy_spec() -> None:
    spec = {"driver": {"upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1,
                                         "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": True},
                                         "drain": {"enable": True, "force": True, "podSelector": "a=b"}}}}
    assert du.Policy.of(spec) == du.Policy(True, 1, False, True, True, True, False, "a=b")
    assert du.Policy.of({}) == du.Policy(auto_upgrade=False, max_parallel=1)


@pytest.mark.parametrize(("selector", "selected"), [
    ("", True), ("app=web", True), ("app==web,tier", True), ("app!=web", False), ("!canary", True), ("!app", False),
    ("tier in (gpu, cpu)", True), ("tier notin (gpu)", False), ("zone notin (a)", True), ("zone", False),
])
def test_label_selectors(selector: str, selected: bool) -> None:
    assert du.selects(selector, {"app": "web", "tier": "gpu"}) is selected


def test_the_ways_out_name_the_fields_that_let_it_through() -> None:
    ways = du.ways_out(CHART, ["it uses an emptyDir volume and ...", "DaemonSet x runs it, ..."])
    assert any("podDeletion.deleteEmptyDir=true" in w for w in ways)
    assert any("drain.enable=true" in w for w in ways)
    assert any(du.SKIP_LABEL in w for w in ways)
    assert not any("force=true" in w for w in ways)
