"""Bounded polling, one idiom for every wait: the first checks come quickly (on a quiet cluster most
waits end within a fraction of a second), then the pause doubles up to the caller's interval, so a
long wait asks the API server no more often than a fixed-interval poll would."""

from __future__ import annotations

from collections.abc import Iterator

FIRST_PAUSE_S = 0.1


def pauses(interval_s: float) -> Iterator[float]:
    """The pauses between checks: 0.1 s, doubling, capped at `interval_s`."""
    pause = min(FIRST_PAUSE_S, interval_s)
    while True:
        yield pause
        pause = min(pause * 2, interval_s)
