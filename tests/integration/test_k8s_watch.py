"""gpushare.k8s.watch against the real API server: a watch from a list's resourceVersion gives what
changed since, and says when it cannot (a version older than the server's watch history, one
never reached)."""

from __future__ import annotations

import uuid

import pytest

from gpushare.k8s.session import Session
from gpushare.k8s.watch import changed_since
from tests.integration.k8s_fixtures import forget_watch_history, scratch_node, session  # noqa: F401 - fixtures
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
LABEL = "gpushare.io/watch-test"


def version(obj: dict) -> str:
    return obj["metadata"]["resourceVersion"]


def test_a_watch_from_a_list_gives_what_changed_since(session: Session, scratch_node: str) -> None:
    selector = LABEL
    session.patch("Node", scratch_node, {"metadata": {"labels": {LABEL: "before"}}})
    try:
        items, since = session.listing("Node", label_selector=selector)
        assert [i["metadata"]["name"] for i in items] == [scratch_node] and since
        assert changed_since(session, "Node", since, selector, {}) is None  # nothing written since to wait for

        after = session.patch("Node", scratch_node, {"metadata": {"labels": {LABEL: f"after-{uuid.uuid4().hex[:6]}"}}})
        changed = changed_since(session, "Node", since, selector, {scratch_node: version(after)})
        assert changed is not None and set(changed) == {scratch_node}
        assert changed[scratch_node]["metadata"]["labels"][LABEL] == after["metadata"]["labels"][LABEL]

        left = session.patch("Node", scratch_node, {"metadata": {"labels": {LABEL: None}}})
        assert changed_since(session, "Node", since, selector, {scratch_node: version(left)}) == {scratch_node: None}

        # a version the object never reaches
        assert changed_since(session, "Node", since, selector, {scratch_node: "0"}, timeout_s=1) is None
    finally:
        session.patch("Node", scratch_node, {"metadata": {"labels": {LABEL: None}}})


def test_a_watch_from_before_the_compacted_history_says_it_cannot_tell(cluster: Cluster, session: Session,
                                                                        scratch_node: str) -> None:
    since = session.listing("Node", label_selector=LABEL)[1]
    session.patch("Node", scratch_node, {"metadata": {"labels": {LABEL: "compacted"}}})
    left = session.patch("Node", scratch_node, {"metadata": {"labels": {LABEL: None}}})
    assert changed_since(session, "Node", since, LABEL, {scratch_node: version(left)}) == {scratch_node: None}
    forget_watch_history(cluster)
    assert changed_since(session, "Node", since, LABEL, {scratch_node: version(left)}) is None
    assert changed_since(session, "Node", "1", LABEL, {scratch_node: version(left)}) is None
