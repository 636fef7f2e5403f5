"""Workload pods (gpushare.model.pods): the shares a pod holds as the scheduler counts them
(k8s.io/component-helpers resource.PodRequests), who re-creates it, and the nodes its required
selection admits (component-helpers scheduling/corev1/nodeaffinity)."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.model.pods import UNSCHEDULABLE, Pod, container_request, pod_request
from gpushare.model.taints import Taint
from tests.unit.cluster_objects import workload_pod

SHARED = "nvidia.com/gpu.shared"


def container(amount: int | None = None, *, requests: int | None = None, sidecar: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if amount is not None:
        resources["limits"] = {SHARED: str(amount), "cpu": "500m"}
    if requests is not None:
        resources["requests"] = {SHARED: str(requests)}
    spec: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": resources}
    if sidecar:
        spec["restartPolicy"] = "Always"
    return spec


def with_containers(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "team-a"},
            "spec": {"containers": containers, "initContainers": init or []}}


def test_container_request() -> None:
    assert container_request(container(2), SHARED) == 2
    assert container_request(container(requests=3), SHARED) == 3  # requests alone (limits default to them)
    assert container_request(container(), SHARED) == 0
    assert container_request(container(2), "nvidia.com/gpu") == 0
    assert container_request({"name": "c", "resources": {"limits": {SHARED: "two"}}}, SHARED) == 0


@pytest.mark.parametrize(("containers", "init", "held"), [
    pytest.param([container(1), container(2)], [], 3, id="containers-add-up"),
    pytest.param([container(1)], [container(4)], 4, id="a-bigger-init-container"),
    pytest.param([container(3)], [container(1), container(2)], 3, id="init-containers-run-one-at-a-time"),
    pytest.param([container(1)], [container(1, sidecar=True)], 2, id="a-sidecar-runs-with-the-containers"),
    pytest.param([container(0)], [container(1, sidecar=True), container(3)], 4,
                 id="an-init-container-after-a-sidecar-runs-next-to-it"),
    pytest.param([container(1)], [container(3), container(1, sidecar=True)], 3,
                 id="an-init-container-before-a-sidecar-runs-alone"),
    pytest.param([container()], [], 0, id="no-shares"),
])
def test_pod_request_as_the_scheduler_counts_it(containers: list[dict[str, Any]], init: list[dict[str, Any]],
                                                held: int) -> None:
    assert pod_request(with_containers(containers, init), SHARED) == held


def test_holds_only_what_it_asks_for() -> None:
    pod = Pod(workload_pod("trainer-a", "gpu-node", amount=2))
    assert pod.holds(("nvidia.com/gpu.shared", "nvidia.com/gpu")) == {SHARED: 2}
    assert Pod(workload_pod("cpu-only", "gpu-node", amount=0)).holds((SHARED,)) == {}


def test_who_recreates_a_pod() -> None:
    replica = Pod(workload_pod("trainer-5d4f7b9c8-x2x4z", "gpu-node"))
    assert replica.controller == {"kind": "ReplicaSet", "name": "trainer-5d4f7b9c8", "uid": "uid-trainer-5d4f7b9c8"}
    assert not replica.daemonset
    assert Pod(workload_pod("agent-x", "gpu-node", owner="DaemonSet", owner_name="agent")).daemonset
    assert Pod(workload_pod("bare", "gpu-node", owner=None)).controller == {}
    owned_not_controlled = workload_pod("p", "gpu-node")
    owned_not_controlled["metadata"]["ownerReferences"][0]["controller"] = False
    assert Pod(owned_not_controlled).controller == {}


def test_pod_facts() -> None:
    pod = Pod(workload_pod("trainer-a", "gpu-node", volumes=[{"name": "scratch", "emptyDir": {}},
                                                             {"name": "cfg", "configMap": {"name": "c"}}]))
    assert (pod.ref, pod.node, pod.phase, pod.uid) == ("team-a/trainer-a", "gpu-node", "Running", "uid-trainer-a")
    assert pod.uses_emptydir and not pod.finished and not pod.terminating
    assert not Pod(workload_pod("p", "gpu-node", volumes=[{"name": "cfg", "configMap": {"name": "c"}}])).uses_emptydir
    assert Pod(workload_pod("done", "gpu-node", phase="Succeeded")).finished
    assert Pod(workload_pod("failed", "gpu-node", phase="Failed")).finished


@pytest.mark.parametrize(("tolerations", "tolerates"), [
    pytest.param(None, False, id="the-defaults"),
    pytest.param([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}], True,
                 id="the-cordon-taint"),
    pytest.param([{"operator": "Exists"}], True, id="everything"),
    pytest.param([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}], False,
                 id="another-effect"),
])
def test_tolerates_the_cordon(tolerations: list[dict[str, Any]] | None, tolerates: bool) -> None:
    pod = Pod(workload_pod("p", "gpu-node", tolerations=tolerations))
    assert pod.tolerates_cordon is tolerates
    if tolerates:
        assert pod.cordon_toleration() in {'{"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", '
                                           '"operator": "Exists"}', '{"operator": "Exists"}'}


@pytest.mark.parametrize(("tolerations", "tolerates"), [
    pytest.param([{"operator": "Exists"}], True, id="everything"),
    pytest.param([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], False, id="the-cordon-only"),
    pytest.param([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
                  {"key": "nvidia.com/gpu", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}], True,
                 id="both"),
])
def test_tolerates_all_the_taints_that_keep_the_scheduler_away(tolerations: list[dict[str, Any]],
                                                                tolerates: bool) -> None:
    taints = [UNSCHEDULABLE, Taint("nvidia.com/gpu", "shared", "NoSchedule"), Taint("spot", "", "PreferNoSchedule")]
    assert Pod(workload_pod("p", "gpu-node", tolerations=tolerations)).tolerates_all(taints) is tolerates


LABELS = {"kubernetes.io/hostname": "gpu-node", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
          "nvidia.com/gpu.count": "8", "zone": "a"}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(("node_selector", "affinity", "admits"), [
    pytest.param(None, None, True, id="no-selection"),
    pytest.param({"zone": "a"}, None, True, id="node-selector"),
    pytest.param({"zone": "a", "gpu-mode": "shared"}, None, False, id="node-selector-needs-every-label"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "In", "a", "b")]}), True, id="in"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "In", "b")]}), False, id="not-in-the-values"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "NotIn", "b")]}), True, id="notin"),
    pytest.param(None, required({"matchExpressions": [expression("gpu-mode", "NotIn", "shared")]}), True,
                 id="notin-a-missing-label"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "Exists")]}), True, id="exists"),
    pytest.param(None, required({"matchExpressions": [expression("gpu-mode", "DoesNotExist")]}), True,
                 id="does-not-exist"),
    pytest.param(None, required({"matchExpressions": [expression("nvidia.com/gpu.count", "Gt", "4")]}), True, id="gt"),
    pytest.param(None, required({"matchExpressions": [expression("nvidia.com/gpu.count", "Lt", "4")]}), False,
                 id="lt"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "Gt", "4")]}), False,
                 id="gt-of-a-label-that-is-no-number"),
    pytest.param(None, required({"matchExpressions": [expression("gpu-mode", "Gt", "4")]}), False,
                 id="gt-of-a-missing-label"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "In", "a"),
                                                      expression("gpu-mode", "Exists")]}), False,
                 id="expressions-of-a-term-are-anded"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "In", "b")]},
                                {"matchExpressions": [expression("zone", "In", "a")]}), True,
                 id="terms-are-ored"),
    pytest.param(None, required({}), False, id="an-empty-term-selects-nothing"),
    pytest.param(None, required({}, {"matchExpressions": [expression("zone", "In", "a")]}), True,
                 id="an-empty-term-is-skipped"),
    pytest.param(None, required({"matchFields": [expression("metadata.name", "In", "gpu-node")]}), True,
                 id="match-fields-in"),
    pytest.param(None, required({"matchFields": [expression("metadata.name", "NotIn", "gpu-node")]}), False,
                 id="match-fields-notin"),
    pytest.param(None, required({"matchExpressions": [expression("zone", "In", "a")],
                                 "matchFields": [expression("metadata.name", "In", "gpu-node-2")]}), False,
                 id="fields-and-expressions-are-anded"),
    pytest.param({"zone": "b"}, required({"matchExpressions": [expression("zone", "In", "a")]}), False,
                 id="node-selector-and-affinity-both-apply"),
    pytest.param(None, {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [expression("zone", "In", "b")]}}]}}, True,
                 id="a-preference-is-not-required"),
])
def test_selects_as_the_scheduler_does(node_selector: dict[str, str] | None, affinity: dict[str, Any] | None,
                                       admits: bool) -> None:
    pod = Pod(workload_pod("p", "gpu-node", node_selector=node_selector, affinity=affinity))
    assert pod.selects("gpu-node", LABELS) is admits


def test_selection_in_messages() -> None:
    assert Pod(workload_pod("p", "gpu-node")).selection() == ""
    both = Pod(workload_pod("p", "gpu-node", node_selector={"zone": "a"},
                            affinity=required({"matchExpressions": [expression("zone", "Exists")]})))
    assert both.selection() == ('nodeSelector {"zone": "a"} and required node affinity {"nodeSelectorTerms": '
                                '[{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}')


def test_pending_reason() -> None:
    pending = workload_pod("p", "", phase="Pending")
    pending["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.shared."}]
    assert Pod(pending).pending_reason() == "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.shared."
    assert Pod(workload_pod("p", "gpu-node")).pending_reason() == ""
