"""The UUIDs DCGM reports for a node's GPUs, read from Prometheus (the DCGM exporter's series, under
either spelling of its node label), for the pool the DRA driver publishes to be compared with."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

from gpushare.dcgm_labels import on_hosts
from gpushare.prometheus_answer import MalformedAnswer, PrometheusError, read

QUERY = "DCGM_FI_DEV_FB_FREE{<node>}"  # one series per GPU, MIG instances and all; their UUID label


def query(node: str) -> str:
    return on_hosts(QUERY, node.replace(".", "\\\\."))


def uuids_of(answer: object) -> list[str]:
    """The distinct UUIDs of a query answer (MalformedAnswer or PrometheusError when it is none)."""
    _, series = read(answer)
    return sorted({labels["UUID"] for labels, _ in series if labels.get("UUID")})


def uuids(url: str, node: str, timeout_s: float = 10.0) -> tuple[list[str] | None, str]:
    """(the node's GPU UUIDs DCGM reports, why they could not be read: '' when they could)."""
    form = urllib.parse.urlencode({"query": query(node)}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url.rstrip('/')}/api/v1/query", data=form),  # noqa: S310 - the operator's Prometheus
                                    timeout=timeout_s) as response:
            found = uuids_of(json.loads(response.read()))
    except (OSError, ValueError, MalformedAnswer, PrometheusError) as err:
        return None, f"cannot read DCGM's UUIDs of {node} from {url}: {err}"
    if not found:
        return None, f"{url} has no DCGM series of {node} ({query(node)})"
    return found, ""
