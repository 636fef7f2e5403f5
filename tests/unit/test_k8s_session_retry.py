"""Which failed requests the session repeats while the control plane restarts: reads while the API
server does not answer or is not ready, writes when they never reached it or when repeating them
does nothing more (merge patches, deletes by uid or version)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from gpushare.k8s import session as k8s_session
from gpushare.k8s.session import ApiError, Session, Unreachable, retryable


@pytest.mark.parametrize(("method", "err", "expected"), [
    ("GET", Unreachable("https://api", "reset", sent=True), True),
    ("GET", Unreachable("https://api", "refused", sent=False), True),
    ("PATCH", Unreachable("https://api", "refused", sent=False), True),
    ("PATCH", Unreachable("https://api", "read timed out", sent=True), False),
    ("POST", Unreachable("https://api", "read timed out", sent=True), False),
    ("GET", ApiError(503, "Service Unavailable", "not ready"), True),
    ("GET", ApiError(429, "Too Many Requests", "throttled"), True),
    ("POST", ApiError(429, "Too Many Requests", "Cannot evict pod as it would violate the pod's disruption budget."), False),
    ("GET", ApiError(403, "Forbidden", "no"), False),
    ("GET", ApiError(404, "Not Found", "gone"), False),
    ("PUT", ApiError(503, "Service Unavailable", "not ready"), False),
])
def test_what_is_repeated(method: str, err: ApiError, expected: bool) -> None:
    assert retryable(method, err) is expected


@pytest.mark.parametrize(("method", "err", "expected"), [
    ("PATCH", Unreachable("https://api", "RemoteDisconnected", sent=True), True),
    ("DELETE", Unreachable("https://api", "read timed out", sent=True), True),
    ("PATCH", ApiError(503, "Service Unavailable", "not ready"), False),  # answered: the server said no
    ("DELETE", ApiError(409, "Conflict", "precondition failed"), False),
])
def test_a_repeatable_write_is_repeated_when_its_answer_is_lost(method: str, err: ApiError, expected: bool) -> None:
    assert retryable(method, err, repeatable=True) is expected


@pytest.fixture
def closed_port_kubeconfig(tmp_path: Path) -> Path:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def test_a_refused_connection_is_a_request_never_sent(closed_port_kubeconfig: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(k8s_session, "RETRY_WINDOW_S", 0.0)
    with pytest.raises(Unreachable) as raised:
        Session(closed_port_kubeconfig).create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    assert raised.value.sent is False
    assert "Connection refused" in raised.value.message


@pytest.mark.parametrize(("window", "more_than_once"), [(0.0, False), (1.0, True)])
def test_a_read_is_repeated_within_the_window_only(closed_port_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch,
                                                   window: float, more_than_once: bool) -> None:
    monkeypatch.setattr(k8s_session, "RETRY_WINDOW_S", window)
    attempts = _read_attempts(Session(closed_port_kubeconfig), monkeypatch)
    assert (len(attempts) > 1) is more_than_once, attempts


def _read_attempts(session: Session, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The requests `session` sends for one GET of a node from a server that never answers."""
    attempts, once = [], session._request_once

    def counted(*args: object) -> object:
        attempts.append(args[0])
        return once(*args)

    monkeypatch.setattr(session, "_request_once", counted)
    with pytest.raises(Unreachable):
        session.get("Node", "gpu-node")
    return attempts


def test_a_session_without_retries_sends_a_read_once(closed_port_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's (gpushare_testbed.simulator.rest): a controller requeues what failed instead."""
    assert _read_attempts(Session(closed_port_kubeconfig, retries=False), monkeypatch) == ["GET"]


class _Stream:
    """A watch response as urllib3 gives it: the body in arbitrary chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.ended_by = chunks, ""

    def stream(self, amt: object = None, decode_content: bool = True) -> object:
        yield from self.chunks

    def release_conn(self) -> None:
        self.ended_by = "release_conn"

    def close(self) -> None:
        self.ended_by = "close"


def test_watch_events_are_one_json_document_a_line_whatever_the_chunks(closed_port_kubeconfig: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session(closed_port_kubeconfig)
    response = _Stream([b'{"type": "ADDED", "obj', b'ect": {"n": 1}}\n\n{"type": "BOOK', b'MARK", "object": {}}\n'])
    monkeypatch.setattr(session, "_open", lambda *_: response)
    assert [e["type"] for e in session.events("/api/v1/nodes", {"resourceVersion": "1"}, 5)] == ["ADDED", "BOOKMARK"]
    assert response.ended_by == "release_conn"  # read to its end: the connection is reused
    response = _Stream([b'{"type": "ADDED", "object": {}}\n', b'{"type": "MODIFIED", "object": {}}\n'])
    monkeypatch.setattr(session, "_open", lambda *_: response)
    events = session.events("/api/v1/nodes", {"resourceVersion": "1"}, 5)
    assert next(events)["type"] == "ADDED"
    events.close()
    assert response.ended_by == "close"  # left early: the rest of the stream is not read on a reused connection
