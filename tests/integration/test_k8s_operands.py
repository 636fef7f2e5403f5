"""gpushare.model.operands.Operand.current against a real DaemonSet controller: a pod runs the
current template until the template changes, whatever else of the DaemonSet's spec changes."""

from __future__ import annotations

import threading

import pytest

from gpushare.k8s.session import Session
from gpushare.model.operands import CONFIG_READERS, Operand, OperandPod, pods_by_node
from gpushare.polling import wait_for
from gpushare.runbook.restart import restart_readers, stale_pods
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
