"""A minimal informer over raw JSON: list, then watch, keep a cache, call back on every change;
re-list when the watch expires (410 Gone) or breaks."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from gpushare.k8s.session import ApiError, Unreachable
from gpushare_testbed.simulator.rest import Obj, Rest

log = logging.getLogger(__name__)
WATCH_TIMEOUT_S = 240


def namespaced_key(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def name_key(obj: Obj) -> str:
    return obj["metadata"]["name"]


class Informer:
    def __init__(self, rest: Rest, path: str, key: Callable[[Obj], str],
                 on_change: Callable[[str, Obj | None, Obj | None], None]) -> None:
        """`on_change(key, old, new)`: new is None on deletion, old None on creation."""
        self.rest = rest
        self.path = path
        self.name = path.rsplit("/", 1)[-1]
        self.key = key
        self.on_change = on_change
        self.cache: dict[str, Obj] = {}
        self.synced = threading.Event()
        self.lock = threading.Lock()

    def get(self, key: str) -> Obj | None:
        with self.lock:
            return self.cache.get(key)

    def items(self) -> list[Obj]:
        with self.lock:
            return list(self.cache.values())

    def _relist(self) -> str:
        listing = self.rest.get(self.path)
        fresh = {self.key(obj): obj for obj in listing.get("items") or []}
        with self.lock:
            old, self.cache = self.cache, fresh
        for key in set(old) - set(fresh):
            self.on_change(key, old[key], None)
        # every object, changed or not, as client-go's informers do on a re-list: a cached object at
        # the listed version may be the simulator's own write (Simulator.remember), whose event the
        # broken watch never delivered (after an API server restart, nfd-master missed GFD's labels)
        for key, obj in fresh.items():
            self.on_change(key, old.get(key), obj)
        return listing["metadata"]["resourceVersion"]

    def run(self, stop: threading.Event) -> None:
        version: str | None = None
        while not stop.is_set():
            try:
                if version is None:
                    version = self._relist()
                    self.synced.set()
                for event in self.rest.watch(self.path, version, WATCH_TIMEOUT_S):
                    if stop.is_set():
                        return
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        version = None  # 410 Gone and the like: start over
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if kind == "BOOKMARK":
                        continue
                    key = self.key(obj)
                    with self.lock:
                        old = self.cache.pop(key, None) if kind == "DELETED" else self.cache.get(key)
                        if kind != "DELETED":
                            self.cache[key] = obj
                    self.on_change(key, old, None if kind == "DELETED" else obj)
            except Exception as err:  # noqa: BLE001 - refusals and connection drops: re-list and carry on
                if isinstance(err, ApiError) and not isinstance(err, Unreachable):
                    log.warning("%s watch failed: %s %s; re-listing", self.name, err.status, err.reason)
                elif not stop.is_set():
                    log.warning("%s watch interrupted: %s; re-listing", self.name, err)
                version = None
                stop.wait(1)
