"""Raw JSON access to the API server over the official client's connection (auth, TLS, pooling),
without its model classes: the simulator handles thousands of pods and decoding them into models
would cost more than everything else it does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
Obj = dict[str, Any]


class Rest:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def _call(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None,
              content_type: str = "application/json", timeout: float | None = 30) -> Any:
        """The urllib3 response, its body not read yet; ApiException unless 2xx."""
        method, url, headers, body, _ = self.api.param_serialize(
            method, path, query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body, auth_settings=["BearerToken"])
        response = self.api.call_api(method, url, headers, body, _request_timeout=timeout).response
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
        return response

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                **query: Any) -> Obj:
        data = self._call(method, path, query, body, content_type).data
        return json.loads(data) if data else {}

    def get(self, path: str, **query: Any) -> Obj:
        return self.request("GET", path, **query)

    def create(self, path: str, body: Obj) -> Obj:
        return self.request("POST", path, body)

    def replace(self, path: str, body: Obj) -> Obj:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Obj, content_type: str = MERGE) -> Obj:
        return self.request("PATCH", path, body, content_type)

    def delete(self, path: str, body: Obj | None = None) -> Obj:
        return self.request("DELETE", path, body)

    def watch(self, path: str, resource_version: str, timeout_s: int, **query: Any) -> Iterator[Obj]:
        """Watch events (`{"type", "object"}`) from `resource_version` for up to `timeout_s`."""
        response = self._call("GET", path, {
            **query, "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_s}, timeout=timeout_s + 10)
        buffer = b""
        try:
            for segment in response.stream(amt=None, decode_content=False):
                buffer += segment
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        finally:
            response.release_conn()
