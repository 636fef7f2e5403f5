"""The DCGM exporter's node label, in both spellings, for the baseline and the gates alike.

dcgm-exporter labels every GPU series with the node it runs on: `Hostname` up to release
4.5.3-4.8.2, `hostname` since upstream commit d5e5f51 (May 2026; NVIDIA/dcgm-exporter
internal/pkg/rendermetrics/render_metrics.go), so 4.6.0-4.8.3, the GPU Operator's current image,
writes `hostname`. A fleet in the middle of an exporter upgrade has both in one window. Reading a
node (`host_of`) and selecting nodes in PromQL (`on_hosts`) go through here, never through one
spelling written into a query.
"""

from __future__ import annotations

from collections.abc import Mapping

HOST_LABELS = ("Hostname", "hostname")
NODE_MATCHER = "<node>"  # where `on_hosts` writes the node matcher into a selector


def host_of(labels: Mapping[str, str]) -> str:
    """The node a DCGM series belongs to, whichever spelling carries it ('' when neither does)."""
    return next((labels[key] for key in HOST_LABELS if labels.get(key)), "")


def on_hosts(expression: str, nodes: str) -> str:
    """`expression` for the nodes whose names match the regex `nodes`, under either label spelling.

    `expression` is an instant-vector expression around one selector whose braces hold
    NODE_MATCHER, e.g. `max_over_time(DCGM_FI_DEV_XID_ERRORS{<node>}[1h])`; the result is that
    expression once per spelling joined with `or` (a range selector cannot take a union inside).
    Series carry one spelling or the other, so the two never return the same series twice."""
    if NODE_MATCHER not in expression:
        raise ValueError(f"{expression!r} has no {NODE_MATCHER} in a selector")
    copies = (expression.replace(NODE_MATCHER, f'{label}=~"{nodes}"') for label in HOST_LABELS)
    return "(" + " or ".join(copies) + ")"
