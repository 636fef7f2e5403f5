"""gpushare.model.operands.Operand.current against a real DaemonSet controller: a pod runs the
current template until the template changes, whatever else of the DaemonSet's spec changes."""

from __future__ import annotations

import pytest

from gpushare.k8s.session import Session
from gpushare.kube import wait_for
from gpushare.model.operands import Operand, OperandPod, pods_by_node
from tests.integration.k8s_fixtures import namespace, session  # noqa: F401 - fixtures

pytestmark = pytest.mark.cluster


def daemonset(node: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "reader"},
            "spec": {"selector": {"matchLabels": {"app": "reader"}},
                     "template": {"metadata": {"labels": {"app": "reader"}},
                                  "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                                           "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}}


def ready_pods(session: Session, namespace: str, node: str) -> list[OperandPod]:
    pods = pods_by_node(session.list("Pod", namespace), "reader").get(node, [])
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
