"""A de-duplicating work queue: a key is processed by one worker at a time, at most once more
after the current run if it changed meanwhile (the client-go workqueue contract)."""

from __future__ import annotations

import threading
from collections import deque


class WorkQueue:
    def __init__(self) -> None:
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._cond = threading.Condition()
        self._closed = False

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def get(self) -> str | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            key = self._queue.popleft()
            self._dirty.discard(key)
            self._processing.add(key)
            return key

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def idle(self) -> bool:
        with self._cond:
            return not self._queue and not self._processing

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
