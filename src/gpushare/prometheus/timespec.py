"""Durations (`5m`, `1h30m`, `7d`) and points in time, Prometheus style, for the options and
thresholds of the baseline and the gates."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from gpushare.prometheus import InputError

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str, what: str, error: type[InputError] = InputError) -> int:
    """Seconds in a Prometheus-style duration such as `1h`, `90m`, `7d` or `1h30m`."""
    match = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match or not any(match.groups()):
        raise error(f"{what}: {text!r} is not a duration; write it like 30s, 5m, 1h, 7d or 1h30m")
    seconds = sum(int(n) * unit for n, unit in zip(match.groups(), _UNITS.values()) if n)
    if seconds <= 0:
        raise error(f"{what}: {text!r} is zero; give a positive duration")
    return seconds


def parse_time(text: str, what: str, error: type[InputError] = InputError) -> float:
    """Unix seconds from an RFC 3339 time with a zone (`2024-01-08T00:00:00Z`) or unix seconds."""
    try:
        unix = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(unix):
            return unix
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise error(
            f"{what}: {text!r} is not a time; give RFC 3339 with a zone (2024-01-08T00:00:00Z) or unix seconds"
        )
    return moment.timestamp()


def format_duration(seconds: int) -> str:
    """The shortest Prometheus duration for whole seconds (`3600` -> `1h`)."""
    parts = []
    for suffix, unit in _UNITS.items():
        count, seconds = divmod(seconds, unit)
        if count:
            parts.append(f"{count}{suffix}")
    return "".join(parts) or "0s"


def format_time(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
