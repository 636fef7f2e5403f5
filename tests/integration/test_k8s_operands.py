"""gpushare.model.operands.Operand.current against a real DaemonSet controller: a pod runs the
current template until the template changes, whatever else of the DaemonSet's spec changes."""

from __future__ import annotations

import copy
import threading

import pytest

from gpushare.k8s.session import Session
from gpushare.model.operands import CONFIG_READERS, DEVICE_PLUGIN, MPS, Operand, OperandPod, pods_by_node
from gpushare.polling import wait_for
from gpushare.runbook.restart import late_readers, restart_readers, stale_pods
from tests.integration.k8s_fixtures import namespace, session  # noqa: F401 - fixtures

pytestmark = pytest.mark.cluster


def daemonset(node: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "reader"},
            "spec": {"selector": {"matchLabels": {"app": "reader"}},
                     "template": {"metadata": {"labels": {"app": "reader"}},
                                  "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                                           "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}}


def ready_pods(session: Session, namespace: str, node: str, name: str = "reader") -> list[OperandPod]:
    pods = pods_by_node(session.list("Pod", namespace), name).get(node, [])
    return [p for p in pods if p.ready]


def test_a_pod_is_current_until_the_template_changes(session: Session, namespace: str) -> None:
    node = sorted(session.list("Node"), key=lambda n: n["metadata"]["name"])[0]["metadata"]["name"]
    session.create({**daemonset(node), "metadata": {"name": "reader", "namespace": namespace}})
    first = wait_for(lambda: ready_pods(session, namespace, node), 60, "the DaemonSet's pod to be Ready")[0]
    assert Operand(session.get("DaemonSet", "reader", namespace)).current(first)

    # a change outside the template bumps metadata.generation, and the controller leaves the pod alone
    changed = session.patch("DaemonSet", "reader", {"spec": {"minReadySeconds": 5}}, namespace)
    assert changed["metadata"]["generation"] == 2
    assert Operand(changed).current(first)

    changed = session.patch("DaemonSet", "reader", {"spec": {"template": {"metadata": {"labels": {
        "app": "reader", "rev": "2"}}}}}, namespace)
    assert not Operand(changed).current(first)
    second = wait_for(lambda: [p for p in ready_pods(session, namespace, node) if p.uid != first.uid], 60,
                      "the DaemonSet to replace its pod")[0]
    assert Operand(session.get("DaemonSet", "reader", namespace)).current(second)


def test_the_restarted_readers_are_named_so_a_rerun_restarts_nothing(session: Session, namespace: str) -> None:
    node = sorted(session.list("Node"), key=lambda n: n["metadata"]["name"])[0]["metadata"]["name"]
    name = CONFIG_READERS[0]
    session.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config", "namespace": namespace},
                    "data": {"shared": "0"}})
    session.create({**daemonset(node), "metadata": {"name": name, "namespace": namespace}})
    wait_for(lambda: ready_pods(session, namespace, node, name), 60, "the DaemonSet's pod to be Ready")
    # timestamps are whole seconds: written and restarted at once, a pod may start within the write's
    # second, where only the restart's result can tell it from one that started before the write
    for attempt in range(1, 4):
        written = session.patch("ConfigMap", "config", {"data": {"shared": str(attempt)}}, namespace)
        result = restart_readers(session, namespace, [node], "config", force=False, check_mode=False, timeout_s=60)
        assert result.problems == [] and result.restarted, result
        assert result.configmap_version == written["metadata"]["resourceVersion"]
        pods = [p for p in ready_pods(session, namespace, node, name) if not p.terminating]
        assert pods and sorted(p.uid for p in pods) == result.readers
        operands = {name: Operand(session.get("DaemonSet", name, namespace))}
        assert stale_pods(operands, pods, [node], written, force=False, started_after=result.readers) == []


def test_a_reader_its_daemonset_is_replacing_is_waited_for(session: Session, namespace: str) -> None:
    """The operator's roll (a new template) has deleted the node's reader, which is still terminating:
    nothing is stale to delete, and the restart waits for the DaemonSet's replacement all the same."""
    node = sorted(session.list("Node"), key=lambda n: n["metadata"]["name"])[0]["metadata"]["name"]
    name = CONFIG_READERS[0]
    session.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config", "namespace": namespace},
                    "data": {"shared": "0"}})
    session.create({**daemonset(node), "metadata": {"name": name, "namespace": namespace}})
    old = wait_for(lambda: ready_pods(session, namespace, node, name), 60, "the DaemonSet's pod to be Ready")[0]
    finalizer = "gpushare.test/hold"
    session.patch("Pod", old.name, {"metadata": {"finalizers": [finalizer]}}, namespace)
    session.patch("DaemonSet", name, {"spec": {"template": {"metadata": {"labels": {"app": "reader", "rev": "2"}}}}},
                  namespace)
    wait_for(lambda: (pod := session.get("Pod", old.name, namespace)) and "deletionTimestamp" in pod["metadata"], 60,
             "the DaemonSet controller to delete the old pod")
    released = threading.Timer(1.0, lambda: session.patch("Pod", old.name, {"metadata": {"finalizers": None}}, namespace))
    released.start()
    try:
        result = restart_readers(session, namespace, [node], "config", force=False, check_mode=False, timeout_s=60)
    finally:
        released.join()
    assert result.problems == [] and result.restarted == {}, result
    operand = Operand(session.get("DaemonSet", name, namespace))
    configmap = session.get("ConfigMap", "config", namespace)
    pods = [p for p in ready_pods(session, namespace, node, name) if not p.terminating]
    assert [p.uid for p in pods] != [old.uid] and pods and all(operand.current(p) for p in pods)
    assert result.readers == sorted(p.uid for p in pods) and all(p.sees(configmap, result.readers) for p in pods)


def test_a_reader_started_after_the_restart_is_named_although_its_second_is_the_writes(
        session: Session, namespace: str) -> None:
    """The MPS control daemon's race (a loaded run): the node label written after the restart starts the
    daemon, which may be created within the ConfigMap write's second, where its creation time cannot tell
    it from a pod that mounted the data before the write. Its DaemonSet, created here after the restart,
    stands for the label. Read once the daemon is Ready, it is a late reader: a record naming it too
    keeps a re-run from restarting it, whichever second it was created in."""
    node = sorted(session.list("Node"), key=lambda n: n["metadata"]["name"])[0]["metadata"]["name"]
    session.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config", "namespace": namespace},
                    "data": {"mps": "0"}})
    session.create({**daemonset(node), "metadata": {"name": DEVICE_PLUGIN, "namespace": namespace}})
    wait_for(lambda: ready_pods(session, namespace, node, DEVICE_PLUGIN), 60, "the device plugin's pod to be Ready")
    written = session.patch("ConfigMap", "config", {"data": {"mps": "4"}}, namespace)
    result = restart_readers(session, namespace, [node], "config", force=False, check_mode=False, timeout_s=60)
    assert result.problems == [] and result.configmap_version == written["metadata"]["resourceVersion"], result
    session.create({**daemonset(node), "metadata": {"name": MPS, "namespace": namespace}})
    daemon = wait_for(lambda: ready_pods(session, namespace, node, MPS), 60, "the MPS daemon's pod to be Ready")[0]

    readers = sorted({*result.readers, *late_readers(result.listed, session.list("DaemonSet", namespace),
                                                      session.pods_on([node], namespace))})
    assert daemon.uid in readers and daemon.uid not in result.readers
    # the write as if in the daemon's creation second: at the same resourceVersion, only the record tells
    same_second = copy.deepcopy(written)
    for entry in same_second["metadata"]["managedFields"]:
        entry["time"] = daemon.raw["metadata"]["creationTimestamp"]
    operands = {d["metadata"]["name"]: Operand(d) for d in session.list("DaemonSet", namespace)}
    pods = [*ready_pods(session, namespace, node, DEVICE_PLUGIN), *ready_pods(session, namespace, node, MPS)]
    assert [p.uid for p in stale_pods(operands, pods, [node], same_second, False, result.readers)] == [daemon.uid]
    assert stale_pods(operands, pods, [node], same_second, False, readers) == []
