"""The UUIDs DCGM reports for a node's GPUs, read from Prometheus (the DCGM exporter's series, under
either spelling of its node label), for the pool the DRA driver publishes to be compared with."""

from __future__ import annotations

import time

from gpushare.dcgm_labels import on_hosts
from gpushare.prometheus.answer import Series
from gpushare.prometheus.client import Client, QueryFailure

QUERY = "DCGM_FI_DEV_FB_FREE{<node>}"  # one series per GPU, MIG instances and all; their UUID label


def query(node: str) -> str:
    return on_hosts(QUERY, node.replace(".", "\\\\."))


def uuids_of(series: list[Series]) -> list[str]:
    """The distinct UUIDs of a query's series."""
    return sorted({labels["UUID"] for labels, _ in series if labels.get("UUID")})


def uuids(url: str, node: str, timeout_s: float = 10.0) -> tuple[list[str] | None, str]:
    """(the node's GPU UUIDs DCGM reports, why they could not be read: '' when they could)."""
    try:
        _, series = Client(url, timeout_s).instant(query(node), time.time())
    except QueryFailure as err:
        return None, f"cannot read DCGM's UUIDs of {node} from {url}: {err}"
    found = uuids_of(series)
    if not found:
        return None, f"{url} has no DCGM series of {node} ({query(node)})"
    return found, ""
