"""Writes whose answer is lost, against the real API server: what a control-plane restart does to a
runbook's write. The connection, not the server, is faulty here: the request either reaches the
server and its answer is dropped, or it is dropped on the way. Either way each change ends done
exactly once, and a change someone else overtook meanwhile is refused naming the object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpushare.k8s.changes import Change, ChangeFailed, apply_changes
from gpushare.k8s.session import Session, Unreachable
from tests.integration.k8s_fixtures import namespace, scratch_node, session  # noqa: F401 - fixtures

pytestmark = pytest.mark.cluster

POOL = {"key": "gpushare.test/pool", "value": "shared", "effect": "NoSchedule"}


def configmap(name: str, ns: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


class LossyConnection:
    """Loses the answer to the first write (`reached`: after the server carried it out) or the write
    itself (before it reached the server); counts the writes that reached the server."""

    def __init__(self, session: Session, reached: bool, meanwhile: Callable[[], None] | None = None):
        self.reached, self.meanwhile, self.arrived, self.lost = reached, meanwhile, 0, False
        self.forward = session._request_once

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET":
            return self.forward(method, *args, **kwargs)
        if not self.lost:
            self.lost = True
            if self.reached:
                self.arrived += 1
                self.forward(method, *args, **kwargs)
            if self.meanwhile:
                self.meanwhile()
            raise Unreachable("https://api", "RemoteDisconnected('Remote end closed connection without response')")
        self.arrived += 1
        return self.forward(method, *args, **kwargs)


def lossy(monkeypatch: pytest.MonkeyPatch, session: Session, reached: bool,
          meanwhile: Callable[[], None] | None = None) -> LossyConnection:
    connection = LossyConnection(session, reached, meanwhile)
    monkeypatch.setattr(session, "_request_once", connection)
    return connection


def data(session: Session, name: str, ns: str) -> dict[str, str] | None:
    found = session.get("ConfigMap", name, ns)
    return None if found is None else found.get("data")


@pytest.mark.parametrize("reached", [True, False], ids=["answer-lost", "request-lost"])
def test_a_create_is_done_once(monkeypatch: pytest.MonkeyPatch, session: Session, namespace: str,
                               reached: bool) -> None:
    connection = lossy(monkeypatch, session, reached)
    outcome = apply_changes(session, [Change("create", "ConfigMap", "probe", namespace,
                                             configmap("probe", namespace, a="1"))])[0]
    assert outcome.changed and outcome.after["data"] == {"a": "1"}
    assert connection.arrived == 1
    assert data(session, "probe", namespace) == {"a": "1"}


@pytest.mark.parametrize("reached", [True, False], ids=["answer-lost", "request-lost"])
def test_a_json_patch_is_applied_once(monkeypatch: pytest.MonkeyPatch, session: Session, namespace: str,
                                      reached: bool) -> None:
    session.create({**configmap("probe", namespace), "data": {"list": "a"}})
    connection = lossy(monkeypatch, session, reached)
    outcome = apply_changes(session, [Change("json", "ConfigMap", "probe", namespace,
                                             [{"op": "test", "path": "/data/list", "value": "a"},
                                              {"op": "replace", "path": "/data/list", "value": "a,b"}])])[0]
    assert outcome.changed
    assert connection.arrived == 1
    assert data(session, "probe", namespace) == {"list": "a,b"}


@pytest.mark.parametrize("reached", [True, False], ids=["answer-lost", "request-lost"])
def test_a_replace_at_the_version_read_is_done_once(monkeypatch: pytest.MonkeyPatch, session: Session,
                                                    namespace: str, reached: bool) -> None:
    version = session.create(configmap("probe", namespace, a="1"))["metadata"]["resourceVersion"]
    body = configmap("probe", namespace, a="2")
    body["metadata"]["resourceVersion"] = version
    connection = lossy(monkeypatch, session, reached)
    outcome = apply_changes(session, [Change("replace", "ConfigMap", "probe", namespace, body,
                                             preconditions={"resourceVersion": version})])[0]
    assert outcome.changed and connection.arrived == 1
    assert data(session, "probe", namespace) == {"a": "2"}


@pytest.mark.parametrize("reached", [True, False], ids=["answer-lost", "request-lost"])
def test_a_delete_without_preconditions_is_done_once(monkeypatch: pytest.MonkeyPatch, session: Session,
                                                     namespace: str, reached: bool) -> None:
    session.create(configmap("probe", namespace, a="1"))
    connection = lossy(monkeypatch, session, reached)
    outcome = apply_changes(session, [Change("delete", "ConfigMap", "probe", namespace)])[0]
    assert outcome.changed and connection.arrived == 1
    assert session.get("ConfigMap", "probe", namespace) is None


@pytest.mark.parametrize("reached", [True, False], ids=["answer-lost", "request-lost"])
def test_a_taint_and_its_removal_are_done_once(monkeypatch: pytest.MonkeyPatch, session: Session,
                                               scratch_node: str, reached: bool) -> None:
    def pool_taints() -> list[dict[str, Any]]:
        return [t for t in (session.get("Node", scratch_node).get("spec") or {}).get("taints") or []
                if t["key"] == POOL["key"]]

    for action, expected in (("taint", 1), ("untaint", 0)):
        monkeypatch.undo()
        connection = lossy(monkeypatch, session, reached)
        outcome = apply_changes(session, [Change(action, "Node", scratch_node, body=dict(POOL))])[0]
        assert outcome.changed and connection.arrived == 1, action
        assert len(pool_taints()) == expected, action


@pytest.mark.parametrize("reached", [True, False], ids=["answer-lost", "request-lost"])
def test_a_merge_patch_and_a_delete_by_uid_are_sent_again_by_the_session(
        monkeypatch: pytest.MonkeyPatch, session: Session, namespace: str, reached: bool) -> None:
    """Repeating them does nothing more: a merge patch leaves the same object, a delete by uid finds
    it gone."""
    uid = session.create(configmap("probe", namespace, a="1"))["metadata"]["uid"]
    patched = lossy(monkeypatch, session, reached)
    session.patch("ConfigMap", "probe", {"data": {"b": "2"}}, namespace)
    assert data(session, "probe", namespace) == {"a": "1", "b": "2"}
    monkeypatch.undo()
    deleted = lossy(monkeypatch, session, reached)
    session.delete("ConfigMap", "probe", namespace, preconditions={"uid": uid})
    assert session.get("ConfigMap", "probe", namespace) is None
    assert (patched.arrived, deleted.arrived) == ((2, 2) if reached else (1, 1))


def test_a_create_is_not_sent_again_by_the_session(monkeypatch: pytest.MonkeyPatch, session: Session,
                                                   namespace: str) -> None:
    """A create sent twice would be refused as existing: the change list judges it (above)."""
    connection = lossy(monkeypatch, session, reached=True)
    with pytest.raises(Unreachable):
        session.create(configmap("probe", namespace, a="1"))
    assert connection.arrived == 1
    assert data(session, "probe", namespace) == {"a": "1"}


def test_an_object_someone_else_changed_meanwhile_is_refused(monkeypatch: pytest.MonkeyPatch, session: Session,
                                                             namespace: str) -> None:
    session.create({**configmap("probe", namespace), "data": {"list": "a"}})

    def someone_else() -> None:
        connection.forward("PATCH", f"/api/v1/namespaces/{namespace}/configmaps/probe", {"data": {"list": "x"}},
                           None, "application/merge-patch+json")

    connection = lossy(monkeypatch, session, reached=False, meanwhile=someone_else)
    with pytest.raises(ChangeFailed) as refused:
        apply_changes(session, [Change("json", "ConfigMap", "probe", namespace,
                                       [{"op": "test", "path": "/data/list", "value": "a"},
                                        {"op": "replace", "path": "/data/list", "value": "a,b"}])])
    assert f"ConfigMap {namespace}/probe has changed since it was read" in str(refused.value)
    assert "did not answer" in str(refused.value)
    assert data(session, "probe", namespace) == {"list": "x"}
