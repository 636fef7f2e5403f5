"""The simulator's path-level view of one gpushare.k8s.session.Session: raw JSON (no model classes:
the simulator handles thousands of pods and decoding them into models would cost more than everything
else it does), each request sent once (a controller requeues what failed, see Simulator._work)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubernetes import client

from gpushare.k8s.connection import from_configuration
from gpushare.k8s.session import PATCH_TYPES, Session

Obj = dict[str, Any]


class Rest:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.session = Session(connection=from_configuration(api.configuration), retries=False)

    def _send(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None,
              patch_type: str | None = None) -> Obj:
        content_type = PATCH_TYPES[patch_type] if patch_type else "application/json"
        return self.session.request(method, path, body, query, content_type) or {}

    def get(self, path: str, **query: Any) -> Obj:
        return self._send("GET", path, query=query)

    def create(self, path: str, body: Obj) -> Obj:
        return self._send("POST", path, body)

    def replace(self, path: str, body: Obj) -> Obj:
        return self._send("PUT", path, body)

    def patch(self, path: str, body: Obj, patch_type: str = "merge") -> Obj:
        return self._send("PATCH", path, body, patch_type=patch_type)

    def delete(self, path: str, body: Obj | None = None) -> Obj:
        return self._send("DELETE", path, body)

    def watch(self, path: str, resource_version: str, timeout_s: int, **query: Any) -> Iterator[Obj]:
        """Watch events (`{"type", "object"}`) from `resource_version` for up to `timeout_s`, bookmarks included."""
        return self.session.events(path, {**query, "resourceVersion": resource_version, "allowWatchBookmarks": "true"},
                                   timeout_s)
