"""Bounded polling, one idiom for every wait: during the first second the checks come 0.1 s apart
(on a quiet cluster most waits end within a fraction of a second, and a reaction that takes 0.3 s is
seen at 0.3 s, not at the next step of a doubling pause), then the pause doubles up to the caller's
interval, so a long wait asks the API server no more often than a fixed-interval poll would."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

FIRST_PAUSE_S = 0.1
QUICK_S = 1.0  # how long the checks come FIRST_PAUSE_S apart


def pauses(interval_s: float) -> Iterator[float]:
    """The pauses between checks: 0.1 s for the first second, then doubling, capped at `interval_s`."""
    pause = min(FIRST_PAUSE_S, interval_s)
    for _ in range(round(QUICK_S / FIRST_PAUSE_S)):
        yield pause
    while True:
        pause = min(pause * 2, interval_s)
        yield pause


class DeadEnd(Exception):
    """A wait that cannot end well: what its check found ends it at once, with these problems."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class WaitTimeout(TimeoutError):
    """A bounded wait ran out; the message names what was awaited and the last observation."""


def wait_for(probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """Poll `probe` (pauses as `pauses(interval_s)` gives) until it returns a truthy value; raise
    WaitTimeout naming `what`, and the last error `probe` raised, otherwise."""
    deadline, pause = time.monotonic() + timeout_s, pauses(interval_s)
    last_error: Exception | None = None
    while True:
        try:
            result = probe()
            if result:
                return result
        except Exception as err:  # noqa: BLE001 - the last error is reported on timeout
            last_error = err
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise WaitTimeout(f"timed out after {timeout_s:.0f}s waiting for {what}{detail}")
        time.sleep(next(pause))
