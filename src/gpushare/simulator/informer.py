"""A minimal informer: list, then watch, keep a cache, call back on every change; re-list on 410."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


class Informer:
    def __init__(self, name: str, list_fn: Callable[..., Any], key: Callable[[Any], str],
                 on_change: Callable[[str, Any | None], None], **list_kwargs: Any):
        self.name = name
        self.list_fn = list_fn
        self.key = key
        self.on_change = on_change
        self.list_kwargs = list_kwargs
        self.cache: dict[str, Any] = {}
        self.synced = threading.Event()
        self.lock = threading.Lock()

    def get(self, key: str) -> Any | None:
        with self.lock:
            return self.cache.get(key)

    def items(self) -> list[Any]:
        with self.lock:
            return list(self.cache.values())

    def _resource_version(self, obj: Any) -> str:
        meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
        return meta["resourceVersion"] if isinstance(meta, dict) else meta.resource_version

    def _relist(self) -> str:
        listing = self.list_fn(**self.list_kwargs)
        items = listing["items"] if isinstance(listing, dict) else listing.items
        fresh = {self.key(obj): obj for obj in items}
        with self.lock:
            gone = set(self.cache) - set(fresh)
            self.cache = fresh
        for key in gone:
            self.on_change(key, None)
        for key, obj in fresh.items():
            self.on_change(key, obj)
        meta = listing["metadata"] if isinstance(listing, dict) else listing.metadata
        return meta["resourceVersion"] if isinstance(meta, dict) else meta.resource_version

    def run(self, stop: threading.Event) -> None:
        resource_version = None
        while not stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                    self.synced.set()
                stream = watch.Watch()
                for event in stream.stream(self.list_fn, resource_version=resource_version,
                                           timeout_seconds=60, allow_watch_bookmarks=True, **self.list_kwargs):
                    if stop.is_set():
                        stream.stop()
                        return
                    obj = event["object"]
                    resource_version = self._resource_version(obj)
                    if event["type"] == "BOOKMARK":
                        continue
                    key = self.key(obj)
                    with self.lock:
                        if event["type"] == "DELETED":
                            self.cache.pop(key, None)
                        else:
                            self.cache[key] = obj
                    self.on_change(key, None if event["type"] == "DELETED" else obj)
            except ApiException as err:
                if err.status == 410:
                    resource_version = None
                    continue
                log.warning("%s watch failed: %s; re-listing", self.name, err.reason)
                resource_version = None
                stop.wait(1)
            except Exception as err:  # noqa: BLE001 - connection drops: re-list and carry on
                log.warning("%s watch interrupted: %s; re-listing", self.name, err)
                resource_version = None
                stop.wait(1)
