"""How well the hourly series cover the window, and the statistics the verdict reads from them."""

from __future__ import annotations

from collections.abc import Iterable

from gpushare.baseline.model import Coverage

HOUR = 3600


def coverage(hours_with_data: Iterable[int], end: int, window_s: int) -> Coverage:
    """Coverage of the hours ending at end - (n-1) h, ..., end by the hour ends that have samples."""
    expected = [end - k * HOUR for k in range(window_s // HOUR - 1, -1, -1)]
    present = set(hours_with_data)
    seen = [index for index, stamp in enumerate(expected) if stamp in present]
    if not seen:
        return Coverage(0, len(expected), None, None, len(expected), 0, 0, None)
    longest, gap_start = 0, None
    for before, after in zip(seen, seen[1:]):
        if after - before - 1 > longest:
            longest, gap_start = after - before - 1, expected[before]
    return Coverage(len(seen), len(expected), expected[seen[0]], expected[seen[-1]], seen[0],
                    len(expected) - 1 - seen[-1], longest, gap_start)


def quantile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def busy_hours_of_day(util_1h: dict[int, float], threshold: float) -> list[int]:
    """UTC hours of the day (where each hour's middle falls) above `threshold` on most days: a daily peak."""
    seen: dict[int, list[bool]] = {}
    for stamp, value in util_1h.items():
        seen.setdefault(((stamp - HOUR // 2) % 86400) // HOUR, []).append(value > threshold)
    return sorted(hour for hour, busy in seen.items() if sum(busy) * 2 > len(busy))
