"""One connection to the API server (gpushare.k8s.connection), speaking plain JSON.

The runbooks read and write a handful of kinds (see kinds.py); going through the REST paths
directly keeps a request to one round-trip (no discovery) and objects as plain dicts, the shape
Ansible and the planners work with."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import urllib3

from gpushare import __version__
from gpushare.k8s.connection import Connection, connect
from gpushare.k8s.kinds import Kind, kind_of

TIMEOUT = (5, 30)  # connect, read seconds
USER_AGENT = f"gpushare/{__version__}"  # how the API server's audit log names the runbooks' requests
# A control-plane restart in a change window (the API server or etcd back within seconds) is ridden
# out: a read is retried while the server does not answer or is not ready; a write when the
# connection was refused (it never reached the server), or whenever it went unanswered if sending it
# twice does what sending it once does (`repeatable`); any request refused (403) while the server
# says it is not ready yet (its authorizer has not read RBAC yet); all within this window. A write
# that is not repeatable and went unanswered is judged by whoever sent it (see changes.py).
RETRY_WINDOW_S = 30.0
READ_RETRY_STATUSES = frozenset({429, 500, 503, 504})
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


class ApiError(Exception):
    """The API server refused a request; `status` is the HTTP status, `message` its explanation."""

    def __init__(self, status: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}


class Unreachable(ApiError):
    """No answer from the API server at all; `sent` is False when the connection was refused (the
    request never reached it)."""

    def __init__(self, server: str, detail: str, sent: bool = True) -> None:
        super().__init__(0, "Unreachable", f"the Kubernetes API at {server} did not answer ({detail})")
        self.server = server
        self.sent = sent


def retryable(method: str, err: ApiError, repeatable: bool = False) -> bool:
    """Whether repeating the request cannot do anything twice, and may succeed once the control plane
    is back. An unanswered request may have been carried out: only a read or a `repeatable` write
    (its repetition changes nothing more) is sent again."""
    if isinstance(err, Unreachable):
        return method == "GET" or not err.sent or repeatable
    return method == "GET" and err.status in READ_RETRY_STATUSES


class KindNotServed(ApiError):
    """The cluster does not serve this kind (its CRD is not installed)."""


class Session:
    """Plain-JSON requests over one connection (a kubeconfig context's, or `connection`). With
    `retries` False, `request` sends each request once (a controller that requeues what failed, as
    the simulator does, retries on its own)."""

    def __init__(self, kubeconfig: str | Path | None = None, context: str | None = None,
                 connection: Connection | None = None, retries: bool = True) -> None:
        self.connection = connection or connect(kubeconfig, context)
        self.server = self.connection.host
        self.retries = retries

    # ---- transport -------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None,
                content_type: str = "application/json", repeatable: bool = False) -> Any:
        """One request, repeated (bounded, see RETRY_WINDOW_S) only where `retryable` allows. This is a
        retry policy, not a poll (gpushare.polling): a request that failed in a way a retry can mend is
        sent again after a pause that starts at 0.25 s and doubles up to 2 s."""
        deadline, delay = time.monotonic() + (RETRY_WINDOW_S if self.retries else 0.0), 0.25
        while True:
            try:
                return self._request_once(method, path, body, query, content_type)
            except ApiError as err:
                if time.monotonic() + delay > deadline \
                        or not (retryable(method, err, repeatable) or err.status == 403 and not self._ready()):
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _ready(self) -> bool:
        """Whether the API server says it is ready. One that has just started serves requests before
        its authorizer has read the RBAC objects and refuses them (403): that is not a verdict."""
        try:
            self._request_once("GET", "/readyz", None, None, "application/json", parse=False)
        except ApiError:
            return False
        return True

    def text(self, path: str) -> str:
        """The body of a GET of `path` as text (the API server's /metrics), once."""
        response = self._open("GET", path, None, None, "application/json", TIMEOUT)
        try:
            return response.data.decode("utf-8", "replace")
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise Unreachable(self.server, _reason(err), sent=not _refused(err)) from None

    def _request_once(self, method: str, path: str, body: Any, query: dict[str, Any] | None,
                      content_type: str, parse: bool = True) -> Any:
        response = self._open(method, path, body, query, content_type, TIMEOUT)
        try:
            data = response.data
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise Unreachable(self.server, _reason(err), sent=not _refused(err)) from None
        return json.loads(data) if data and parse else None

    def _open(self, method: str, path: str, body: Any, query: dict[str, Any] | None, content_type: str,
              timeout: tuple[float, float]) -> urllib3.BaseHTTPResponse:
        """The response of a 2xx answer, its body not read yet (an ApiError otherwise)."""
        query = {k: v for k, v in (query or {}).items() if v not in (None, "")}
        url = self.server + path + ("?" + urlencode(query) if query else "")
        headers = {"Accept": "application/json", "Content-Type": content_type, "User-Agent": USER_AGENT,
                   **self.connection.headers()}
        data = body.encode() if isinstance(body, str) else body if body is None or isinstance(body, bytes) \
            else json.dumps(body).encode()  # a text body (a server-side apply's YAML) goes as it is
        try:
            response = self.connection.pool.request(
                method, url, body=data, headers=headers, timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                preload_content=False, redirect=False)
            if not 200 <= response.status <= 299:
                raise _api_error(response.status, response.reason or "", response.data)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise Unreachable(self.server, _reason(err), sent=not _refused(err)) from None
        return response

    # ---- verbs -----------------------------------------------------------------------------
    def get(self, kind: str | Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist (KindNotServed when its API is missing)."""
        k = _kind(kind)
        try:
            return self.request("GET", k.path(namespace, name))
        except ApiError as err:
            if err.status == 404 and not isinstance(err, KindNotServed):
                return None
            raise

    def list(self, kind: str | Kind, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        return self.listing(kind, namespace, label_selector, field_selector)[0]

    def listing(self, kind: str | Kind, namespace: str | None = None, label_selector: str | None = None,
                field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """The items and the list's resourceVersion: the snapshot they were read at, from which a
        watch gives every change since."""
        k = _kind(kind)
        result = self.request("GET", k.path(namespace), query={
            "labelSelector": label_selector, "fieldSelector": field_selector}) or {}
        version = str((result.get("metadata") or {}).get("resourceVersion") or "")
        return [_with_kind(item, k) for item in result.get("items") or []], version

    def watch(self, kind: str | Kind, since: str, label_selector: str | None = None,
              timeout_s: int = 10) -> Iterator[dict[str, Any]]:
        """The watch events (`{"type", "object"}`) of `kind` after resourceVersion `since`, in the
        order they happened, for at most `timeout_s` seconds. Not retried: a caller that cannot
        tell what changed reads everything instead."""
        return self.events(_kind(kind).path(), {"resourceVersion": since, "labelSelector": label_selector}, timeout_s)

    def events(self, path: str, query: dict[str, Any], timeout_s: int) -> Iterator[dict[str, Any]]:
        """The watch events (`{"type", "object"}`) of the collection at `path` (`query`: its
        resourceVersion, selectors...) for at most `timeout_s` seconds, one JSON document a line as
        the API server streams them; a broken stream raises Unreachable."""
        response = self._open("GET", path, None, {**query, "watch": "true", "timeoutSeconds": timeout_s},
                              "application/json", (TIMEOUT[0], timeout_s + TIMEOUT[0]))
        ended = False
        try:
            buffer = b""
            for chunk in response.stream(amt=None, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                yield from (json.loads(line) for line in lines if line.strip())
            ended = True
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise Unreachable(self.server, _reason(err)) from None
        finally:
            if ended:
                response.release_conn()
            else:
                response.close()  # a watch left early still streams: its connection is not reused

    def pods_on(self, nodes: list[str], namespace: str | None = None) -> list[dict[str, Any]]:
        """The pods of some nodes only (one field-selected list per node: cheap on a large fleet)."""
        return [pod for node in sorted(set(nodes)) for pod in self.list("Pod", namespace, field_selector=f"spec.nodeName={node}")]

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        k = kind_of(obj["kind"], obj.get("apiVersion"))
        namespace = (obj.get("metadata") or {}).get("namespace")
        return self.request("POST", k.path(namespace), body=obj, query=_dry(dry_run))

    def replace(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        k = kind_of(obj["kind"], obj.get("apiVersion"))
        metadata = obj.get("metadata") or {}
        return self.request("PUT", k.path(metadata.get("namespace"), metadata["name"]), body=obj, query=_dry(dry_run))

    def patch(self, kind: str | Kind, name: str, patch: Any, namespace: str | None = None,
              patch_type: str = "merge", dry_run: bool = False, subresource: str | None = None) -> dict[str, Any]:
        """A merge patch applied twice leaves the object as applied once: it is sent again when its answer
        is lost. A JSON patch (it may add to a list) is not."""
        k = _kind(kind)
        return self.request("PATCH", k.path(namespace, name, subresource), body=patch, query=_dry(dry_run),
                            content_type=PATCH_TYPES[patch_type], repeatable=patch_type in ("merge", "strategic"))

    def delete(self, kind: str | Kind, name: str, namespace: str | None = None,
               preconditions: dict[str, str] | None = None, dry_run: bool = False,
               grace_period_seconds: int | None = None) -> dict[str, Any] | None:
        """Delete; None when it was already gone. Sent again when its answer is lost only under a uid or
        resourceVersion precondition: a repetition then finds the object gone (None) and can never
        delete an object re-created under the same name."""
        k = _kind(kind)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:  # with a body the server reads DeleteOptions from it, never from the query
            options["dryRun"] = ["All"]
        try:
            return self.request("DELETE", k.path(namespace, name), body=options, query=_dry(dry_run),
                                repeatable=bool(preconditions))
        except ApiError as err:
            if err.status == 404 and not isinstance(err, KindNotServed):
                return None
            raise

    def evict(self, name: str, namespace: str, dry_run: bool = False, grace_period_seconds: int | None = None,
              uid: str | None = None) -> None:
        """Evict a pod through the eviction API (PodDisruptionBudgets apply: 429 when one refuses). With
        the pod's `uid` it is sent again when its answer is lost: a repetition finds the pod gone (404)
        or terminating, and never evicts a pod re-created under the same name."""
        options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            options["preconditions"] = {"uid": uid}
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace}, "deleteOptions": options}
        self.request("POST", kind_of("Pod").path(namespace, name, "eviction"), body=eviction, query=_dry(dry_run),
                     repeatable=bool(uid))

    def whoami(self) -> str:
        """The user name the API server sees for this session (a SelfSubjectReview persists nothing)."""
        review = self.request("POST", kind_of("SelfSubjectReview").path(), body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, repeatable=True)
        return (((review or {}).get("status") or {}).get("userInfo") or {}).get("username", "")

    def may(self, verb: str, kind: str | Kind, namespace: str | None = None, name: str | None = None) -> tuple[bool, str]:
        """Whether the API server's authorizer lets this session send `verb` on `kind` (in `namespace`,
        named `name`), and its reason (a SelfSubjectAccessReview persists nothing). Admission is not
        asked: a request allowed here may still be refused by an admission policy."""
        k = _kind(kind)
        attributes = {"verb": verb, "group": k.group, "version": k.version, "resource": k.plural}
        if namespace and k.namespaced:
            attributes["namespace"] = namespace
        if name:
            attributes["name"] = name
        review = self.request("POST", kind_of("SelfSubjectAccessReview").path(), body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes}}, repeatable=True)
        status = (review or {}).get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or status.get("evaluationError") or "")


def _kind(kind: str | Kind) -> Kind:
    return kind if isinstance(kind, Kind) else kind_of(kind)


def _dry(dry_run: bool) -> dict[str, str]:
    return {"dryRun": "All"} if dry_run else {}


def _with_kind(item: dict[str, Any], kind: Kind) -> dict[str, Any]:
    """List items come without kind and apiVersion; put them back so every object is self-describing."""
    item.setdefault("kind", kind.kind)
    item.setdefault("apiVersion", kind.api_version)
    return item


def _refused(err: BaseException) -> bool:
    """The connection could not be made, so nothing was sent."""
    cause = getattr(err, "reason", None) if isinstance(err, urllib3.exceptions.MaxRetryError) else err
    return isinstance(cause, (urllib3.exceptions.NewConnectionError, ConnectionRefusedError))


def _reason(err: BaseException) -> str:
    reason = getattr(err, "reason", None)
    return str(reason or err).strip() or type(err).__name__


def _api_error(status: int, reason: str, data: bytes | str | None) -> ApiError:
    try:
        body = json.loads(data) if data else {}
    except (ValueError, TypeError):
        body = {"message": data.decode(errors="replace") if isinstance(data, bytes) else str(data)}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    message = body.get("message") or reason
    details = body.get("details") or {}
    # A missing object names itself in details; a kind the cluster does not serve does not.
    if status == 404 and not details.get("name"):
        return KindNotServed(status, reason, message, details)
    return ApiError(status, reason, message, details)
