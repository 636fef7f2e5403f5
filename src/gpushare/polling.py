"""Bounded polling, one idiom for every wait: during the first second the checks come 0.1 s apart
(on a quiet cluster most waits end within a fraction of a second, and a reaction that takes 0.3 s is
seen at 0.3 s, not at the next step of a doubling pause), then the pause doubles up to the caller's
interval, so a long wait asks the API server no more often than a fixed-interval poll would."""

from __future__ import annotations

from collections.abc import Iterator

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
