"""The GPU Operator's operands (gpushare.model.operands): which DaemonSets read the config, their
pods per node, whether a pod runs the current template, is Ready, and has seen the ConfigMap."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.clock import parse_time
from gpushare.model.operands import MPS, Operand, OperandPod, last_write, pods_by_node
from gpushare.runbook.restart import late_readers, stale_pods, trusted_readers
from tests.unit.cluster_objects import configmap, daemonset, operand_pod, workload_pod

PLUGIN = "nvidia-device-plugin-daemonset"


def test_last_write_is_the_newest_managed_fields_time() -> None:
    cm = configmap("time-slicing-config", {"shared": "x"}, written="2026-12-01T09:00:00Z")
    cm["metadata"]["managedFields"].append({"manager": "kubectl", "operation": "Update",
                                            "time": "2026-12-01T09:30:00Z"})
    assert last_write(cm) == parse_time("2026-12-01T09:30:00Z")
    del cm["metadata"]["managedFields"]
    assert last_write(cm) == parse_time("2026-12-01T09:00:00Z")
    assert last_write({"metadata": {}}) is None


@pytest.mark.parametrize(("created", "sees"), [
    ("2026-12-01T09:00:01Z", True),
    ("2026-12-01T09:00:00Z", False),  # the same second: it may have mounted the old data
    ("2026-12-01T08:45:19Z", False),
])
def test_a_pod_sees_the_configmap_only_if_it_started_after_its_last_write(created: str, sees: bool) -> None:
    cm = configmap("time-slicing-config", {"shared": "x"}, written="2026-12-01T09:00:00Z")
    assert OperandPod(operand_pod(PLUGIN, "gpu-node", created=created)).sees(cm) is sees


def test_every_pod_sees_a_configmap_that_does_not_exist() -> None:
    assert OperandPod(operand_pod(PLUGIN, "gpu-node")).sees(None)


def test_operand_pod_facts() -> None:
    pod = OperandPod(operand_pod(PLUGIN, "gpu-node", generation=3))
    assert (pod.name, pod.node, pod.daemonset, pod.template_generation) == (
        f"{PLUGIN}-gpu-node", "gpu-node", PLUGIN, "3")
    assert pod.ready and not pod.terminating
    assert not OperandPod(operand_pod(PLUGIN, "gpu-node", ready=False)).ready
    terminating = OperandPod(operand_pod(PLUGIN, "gpu-node", terminating=True))
    assert terminating.terminating and not terminating.ready
    assert OperandPod(workload_pod("p", "gpu-node", owner="ReplicaSet")).daemonset == ""


@pytest.mark.parametrize(("pod", "problem"), [
    pytest.param(operand_pod(PLUGIN, "gpu-node", ready=False, waiting={
        "reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}),
        f"container {PLUGIN}: CrashLoopBackOff (back-off 10s restarting failed container)", id="crash-loop"),
    pytest.param(operand_pod(PLUGIN, "gpu-node", ready=False, waiting={"reason": "ContainerCreating"}),
                 f"container {PLUGIN}: ContainerCreating", id="waiting"),
    pytest.param(operand_pod(PLUGIN, "gpu-node", ready=False, terminating=True), "terminating", id="terminating"),
    pytest.param(operand_pod(PLUGIN, "gpu-node", ready=False), "phase Running, not Ready", id="not-ready"),
])
def test_why_a_pod_is_not_ready_in_kubectl_words(pod: dict, problem: str) -> None:
    assert OperandPod(pod).problem() == problem


def test_an_init_container_that_failed_is_named() -> None:
    pod = operand_pod(PLUGIN, "gpu-node", ready=False)
    pod["status"]["phase"] = "Pending"
    pod["status"]["initContainerStatuses"] = [{"name": "toolkit-validation", "state": {"terminated": {
        "exitCode": 1, "reason": "Error", "message": "driver not ready"}}}]
    assert OperandPod(pod).problem() == "init container toolkit-validation: Error (driver not ready)"


def test_a_pod_is_current_when_it_runs_the_current_template() -> None:
    operand = Operand(daemonset(PLUGIN, generation=4))
    assert operand.current(OperandPod(operand_pod(PLUGIN, "gpu-node", generation=4)))
    assert not operand.current(OperandPod(operand_pod(PLUGIN, "gpu-node", generation=3)))


def test_a_change_outside_the_template_leaves_the_pods_current() -> None:
    """metadata.generation counts every spec change (say minReadySeconds); the controller stamps
    pods with the template's generation, deprecated.daemonset.template.generation."""
    operand = Operand(daemonset(PLUGIN, generation=5, template_generation=4))
    assert operand.current(OperandPod(operand_pod(PLUGIN, "gpu-node", generation=4)))


def test_operand_template() -> None:
    operand = Operand(daemonset(PLUGIN, configmap_name="time-slicing-config", updated=1, desired=3,
                                tolerations=[{"operator": "Exists"}]))
    assert operand.mounts("time-slicing-config") and not operand.mounts("other")
    assert not Operand(daemonset(PLUGIN)).mounts("time-slicing-config")
    assert operand.tolerations == [{"operator": "Exists"}]
    assert operand.rollout() == (1, 3)


def test_pods_by_node_groups_one_daemonsets_scheduled_pods() -> None:
    unscheduled = operand_pod(PLUGIN, "gpu-node-2")
    unscheduled["spec"]["nodeName"] = ""
    pods = [operand_pod(PLUGIN, "gpu-node"), operand_pod("gpu-feature-discovery", "gpu-node"), unscheduled,
            workload_pod("p", "gpu-node")]
    grouped = pods_by_node(pods, PLUGIN)
    assert list(grouped) == ["gpu-node"] and [p.name for p in grouped["gpu-node"]] == [f"{PLUGIN}-gpu-node"]


def test_stale_readers_of_some_nodes() -> None:
    cm = configmap("time-slicing-config", {"shared": "x"}, written="2026-12-01T09:00:00Z")
    operands = {PLUGIN: Operand(daemonset(PLUGIN, generation=2)),
                "gpu-feature-discovery": Operand(daemonset("gpu-feature-discovery"))}
    pods = [OperandPod(p) for p in (
        operand_pod(PLUGIN, "gpu-node", generation=1, created="2026-12-01T09:10:00Z"),  # old template
        operand_pod("gpu-feature-discovery", "gpu-node", created="2026-12-01T08:45:19Z"),  # before the write
        operand_pod(PLUGIN, "gpu-node-2", generation=2, created="2026-12-01T09:10:00Z"),  # fine
        operand_pod("gpu-feature-discovery", "gpu-node-2", created="2026-12-01T09:10:00Z"),  # fine
        operand_pod(PLUGIN, "gpu-node-mig", generation=1, terminating=True),  # going already
        operand_pod("nvidia-dcgm-exporter", "gpu-node"),  # not a reader
    )]
    nodes = ["gpu-node", "gpu-node-2", "gpu-node-mig"]
    assert [(p.node, p.daemonset) for p in stale_pods(operands, pods, nodes, cm, force=False)] == [
        ("gpu-node", PLUGIN), ("gpu-node", "gpu-feature-discovery")]
    assert [p.node for p in stale_pods(operands, pods, ["gpu-node-2"], cm, force=True)] == ["gpu-node-2"] * 2
    assert stale_pods(operands, pods, ["cpu-node"], cm, force=True) == []


def test_readers_a_run_named_are_trusted_only_at_the_configmap_version_they_read() -> None:
    cm = configmap("time-slicing-config", {"shared": "x"}, written="2026-12-01T09:00:00Z")  # resourceVersion 465
    operands = {PLUGIN: Operand(daemonset(PLUGIN))}
    same_second = OperandPod(operand_pod(PLUGIN, "gpu-node", created="2026-12-01T09:00:00Z"))
    known = {"resourceVersion": "465", "pods": [same_second.uid]}
    assert trusted_readers(known, cm) == [same_second.uid]
    assert stale_pods(operands, [same_second], ["gpu-node"], cm, False, trusted_readers(known, cm)) == []
    for other in ({"resourceVersion": "464", "pods": [same_second.uid]}, {}, None):  # written again since, or none
        assert trusted_readers(other, cm) == []
        assert stale_pods(operands, [same_second], ["gpu-node"], cm, False, trusted_readers(other, cm)) == [same_second]
    assert trusted_readers(known, None) == []


def test_the_readers_a_label_started_after_the_restarts_listing_are_late_readers() -> None:
    """A reader of a restarted node that the restart's first listing did not hold was created after
    it, so after the ConfigMap's write: named when Ready on its DaemonSet's current template."""
    def pod(daemonset_name: str, node: str, uid: str, **kwargs: Any) -> dict[str, Any]:
        raw = operand_pod(daemonset_name, node, **kwargs)
        raw["metadata"]["uid"] = uid
        return raw

    daemonsets = [daemonset(PLUGIN), daemonset("gpu-feature-discovery"), daemonset(MPS, generation=2),
                  daemonset("nvidia-dcgm-exporter")]
    pods = [
        pod(PLUGIN, "gpu-node", "listed"),  # in the first listing: judged by the restart, not here
        pod(MPS, "gpu-node", "late", generation=2),  # the MPS daemon GFD's label started: a late reader
        pod("gpu-feature-discovery", "gpu-node-2", "elsewhere"),  # a node the restart did not restart
        pod("nvidia-dcgm-exporter", "gpu-node", "not-a-reader"),
        pod(MPS, "gpu-node", "not-ready", generation=2, ready=False),
        pod(MPS, "gpu-node", "terminating", generation=2, terminating=True),
        pod(MPS, "gpu-node", "old-template", generation=1),
    ]
    assert late_readers({"gpu-node": ["listed"]}, daemonsets, pods) == ["late"]
    assert late_readers({"gpu-node": []}, daemonsets, pods) == ["late", "listed"]
    assert late_readers({}, daemonsets, pods) == []  # no restart: none
    assert late_readers({"gpu-node": ["listed"]}, [], pods) == []  # no reader DaemonSet read: none current
