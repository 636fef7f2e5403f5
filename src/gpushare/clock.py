"""UTC time as the Kubernetes API writes it."""

from __future__ import annotations

import datetime as dt

# A MicroTime (a Lease's acquireTime and renewTime).
MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> dt.datetime | None:
    """An API timestamp (RFC 3339, with or without fractions); None when absent or malformed."""
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
