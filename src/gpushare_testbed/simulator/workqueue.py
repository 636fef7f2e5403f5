"""A de-duplicating work queue: a key is processed by one worker at a time, at most once more
after the current run if it changed meanwhile (the client-go workqueue contract), and can be
added after a delay (client-go's AddAfter) for what the simulator does on a clock."""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque


class WorkQueue:
    def __init__(self) -> None:
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        self._closed = False
        threading.Thread(target=self._release_delayed, name="workqueue-delay", daemon=True).start()

    def add(self, key: str) -> None:
        with self._cond:
            self._add(key)

    def _add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify_all()

    def add_after(self, key: str, delay_s: float) -> None:
        with self._cond:
            heapq.heappush(self._delayed, (time.monotonic() + max(0.0, delay_s), key))
            self._cond.notify_all()

    def _release_delayed(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    self._add(heapq.heappop(self._delayed)[1])
                self._cond.wait(self._delayed[0][0] - now if self._delayed else None)

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
                self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing queued or running (delayed keys not counted)."""
        with self._cond:
            return not self._queue and not self._processing

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
