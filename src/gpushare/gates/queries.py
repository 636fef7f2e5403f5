"""Default PromQL for each metrics key, and the placeholders an override may use.

Placeholders ($-style, because PromQL uses braces):
  $window    the range a value covers: the trial, one latency window, or the baseline
  $nodes     regex of the --node names (`.*` without --node), for DCGM's node label
  $on_nodes  with --node: `* on (namespace, pod) group_left () ...kube_pod_info{node=~...}`,
             which keeps only pods that ran on those nodes; empty without --node
  $on_uuids  with --uuid: `,UUID=~"<those cards>"`, written after the node matcher of every DCGM
             selector, so the DCGM-based queries count only those cards; empty without --uuid (the
             workload's and kube-state-metrics' queries stay scoped by node)

Each query must return one series (aggregate with sum/avg/max), except `dcgm_nodes` and `dcgm_uuids`,
which return one series per node and per card; counts must stay 0 rather than vanish when nothing
happened, so that "no series" reliably means "no data". Every DCGM selector reads both spellings of the exporter's node
label (`Hostname`, `hostname`: gpushare.dcgm_labels); an override should too.
"""

from __future__ import annotations

from string import Template

import re
from collections.abc import Sequence

from gpushare.dcgm_labels import NODE_MATCHER, on_hosts

_PODS_ON_NODES = (
    '* on (namespace, pod) group_left () max by (namespace, pod) '
    '(max_over_time(kube_pod_info{node=~"$nodes"}[$window]))'
)


def _dcgm(expression: str) -> str:
    return on_hosts(expression.replace(NODE_MATCHER, f"{NODE_MATCHER}$on_uuids"), "$nodes")


_GPUS = f"count(count by (UUID) ({_dcgm('max_over_time(DCGM_FI_DEV_GPU_UTIL{<node>}[$window])')}))"
_CARD = "UUID, GPU_I_ID"  # a whole GPU, or one MIG instance of it


def _last(field: str) -> str:
    """The card's last DCGM_FI_DEV_FB_<field> in the window, one series per card (the exporter also
    writes per-pod copies and, for FB_USED, per-pod process values: the card's own is the highest)."""
    return f"max by ({_CARD}) ({_dcgm(f'last_over_time(DCGM_FI_DEV_FB_{field}{{<node>}}[$window])')})"


# The card's memory: used + free + reserved where the exporter exports FB_RESERVED (in its default
# counters since 4.3.1-4.4.0, etc/dcp-metrics-included.csv), else used + free.
_USED_FREE = f"({_last('USED')} + {_last('FREE')})"
_CARD_MEMORY = f"(({_USED_FREE} + {_last('RESERVED')}) or {_USED_FREE})"
# The pods the exporter maps to each card's shares: with KUBERNETES_VIRTUAL_GPUS=true it copies a
# card's series to every pod sharing it, with the replica in `vgpu` (internal/pkg/transformation/
# kubernetes.go, toDeviceToSharingPods); behind the operator's ServiceMonitor the pod arrives as
# exported_namespace / exported_pod.
_SHARES = _dcgm('max_over_time(DCGM_FI_DEV_FB_USED{vgpu!="",<node>}[$window])')
_SHARE_PODS = (
    'group by (namespace, pod, UUID) (label_replace(label_replace('
    f'{_SHARES}, "namespace", "$$1", "exported_namespace", "(.+)"), "pod", "$$1", "exported_pod", "(.+)"))'
)

DEFAULT_QUERIES: dict[str, str] = {
    # The workload's own request counter over the physical GPUs that DCGM sees.
    "throughput_per_gpu": f"sum(rate(workload_requests_total[$window]) $on_nodes) / {_GPUS}",
    # The workload's own latency histogram, in milliseconds; evaluated once per latency window.
    "p99_ms": (
        "histogram_quantile(0.99, sum by (le) "
        "(rate(workload_request_duration_seconds_bucket[$window]) $on_nodes)) * 1000"
    ),
    # Mean wait before work starts (the workload's own summary; for Kueue use
    # kueue_admission_wait_time_seconds_sum/_count); evaluated once per latency window.
    "queue_time_s": (
        "sum(rate(workload_queue_wait_seconds_sum[$window]) $on_nodes) / "
        "sum(rate(workload_queue_wait_seconds_count[$window]) $on_nodes)"
    ),
    # kube-state-metrics: restarts of containers whose last termination was OOMKilled.
    "oom_kills": (
        "sum(increase(kube_pod_container_status_restarts_total[$window]) "
        "* on (namespace, pod, container) group_left () max by (namespace, pod, container) "
        '(max_over_time(kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}[$window])) '
        "$on_nodes) or (0 * sum(max_over_time(kube_pod_container_status_restarts_total[$window]) $on_nodes))"
    ),
    "restarts": "sum(increase(kube_pod_container_status_restarts_total[$window]) $on_nodes)",
    # Cards on which two or more sharing pods failed, where the exporter maps shares to cards.
    "correlated_failures_per_card": (
        f"sum((sum by (UUID) ({_SHARE_PODS} * on (namespace, pod) group_left () "
        "(max by (namespace, pod) (increase(kube_pod_container_status_restarts_total[$window])) > bool 0)"
        ")) >= bool 2)"
    ),
    # Otherwise nodes on which two or more containers failed: "the same card" approximated by
    # "the same node".
    "correlated_failures": (
        "sum((sum by (node) ((increase(kube_pod_container_status_restarts_total[$window]) > bool 0) "
        "* on (namespace, pod) group_left (node) max by (namespace, pod, node) "
        '(max_over_time(kube_pod_info{node=~"$nodes"}[$window])))) >= bool 2)'
    ),
    # Series the exporter copied to sharing pods: > 0 means failures are attributed per card.
    "shares_mapped": f"count({_SHARES}) or vector(0)",
    # DCGM_FI_DEV_XID_ERRORS holds the last Xid code: GPUs whose code changed to non-zero.
    "xid_errors": (
        f"sum(({_dcgm('changes(DCGM_FI_DEV_XID_ERRORS{<node>}[$window])')} > bool 0) "
        f"* ({_dcgm('max_over_time(DCGM_FI_DEV_XID_ERRORS{<node>}[$window])')} > bool 0))"
    ),
    # The highest FB peak of any card (or MIG instance) in the trial, in % of its memory.
    "fb_peak_pct": (
        f"100 * max(max by ({_CARD}) ({_dcgm('max_over_time(DCGM_FI_DEV_FB_USED{<node>}[$window])')}) "
        f"/ on ({_CARD}) {_CARD_MEMORY})"
    ),
    # Cards whose memory is counted without FB_RESERVED (the exporter does not export it).
    "fb_no_reserved": f"count({_last('USED')} unless {_last('RESERVED')}) or vector(0)",
    # The nodes with DCGM series in the window, one series each: a --node without any holds.
    "dcgm_nodes": f"group by (Hostname, hostname) ({_dcgm('last_over_time(DCGM_FI_DEV_FB_USED{<node>}[$window])')})",
    # The cards with DCGM series in the window, one series each: a --uuid without any holds.
    "dcgm_uuids": f"group by (UUID) ({_dcgm('last_over_time(DCGM_FI_DEV_FB_USED{<node>}[$window])')})",
    # Context reported with the throughput gate; they do not decide anything.
    # (per card: its highest series, the card's own beside its pods' process values)
    "gpu_util_pct": f"avg(max by ({_CARD}) ({_dcgm('avg_over_time(DCGM_FI_DEV_GPU_UTIL{<node>}[$window])')}))",
    "fb_used_mib": f"max({_dcgm('max_over_time(DCGM_FI_DEV_FB_USED{<node>}[$window])')})",
}

PLACEHOLDERS = ("window", "nodes", "on_nodes", "on_uuids")
# A GPU's UUID as NVML and DCGM's `UUID` label write it (and the DRA driver's `uuid` attribute).
GPU_UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def node_regex(nodes: Sequence[str]) -> str:
    """A PromQL-quoted regex matching exactly these node names (`.*` for all nodes)."""
    return "|".join(name.replace(".", r"\\.") for name in nodes) if nodes else ".*"


def render(text: str, window: str, nodes: Sequence[str], uuids: Sequence[str] = ()) -> str:
    """`text` with its placeholders; `uuids` must match GPU_UUID (checked by the caller, before any query)."""
    regex = node_regex(nodes)
    on_nodes = Template(_PODS_ON_NODES).substitute(nodes=regex, window=window) if nodes else ""
    on_uuids = f',UUID=~"{"|".join(uuids)}"' if uuids else ""
    return Template(text).substitute(window=window, nodes=regex, on_nodes=on_nodes, on_uuids=on_uuids)
