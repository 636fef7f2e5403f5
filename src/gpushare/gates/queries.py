"""Default PromQL for each metrics key, and the placeholders an override may use.

Placeholders ($-style, because PromQL uses braces):
  $window    the range a value covers: the trial, one latency window, or the baseline
  $nodes     regex of the --node names (`.*` without --node), for DCGM's `Hostname` label
  $on_nodes  with --node: `* on (namespace, pod) group_left () ...kube_pod_info{node=~...}`,
             which keeps only pods that ran on those nodes; empty without --node

Each query must return one series (aggregate with sum/avg/max); counts must stay 0 rather than
vanish when nothing happened, so that "no series" reliably means "no data".
"""

from __future__ import annotations

from string import Template

_PODS_ON_NODES = (
    '* on (namespace, pod) group_left () max by (namespace, pod) '
    '(max_over_time(kube_pod_info{node=~"$nodes"}[$window]))'
)
_GPUS = 'count(count by (UUID) (max_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"$nodes"}[$window])))'

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
    # Nodes on which two or more containers failed: DCGM cannot attribute time-sliced pods to a
    # card, so on a shared node "the same card" is approximated by "the same node".
    "correlated_failures": (
        "sum((sum by (node) ((increase(kube_pod_container_status_restarts_total[$window]) > bool 0) "
        "* on (namespace, pod) group_left (node) max by (namespace, pod, node) "
        '(max_over_time(kube_pod_info{node=~"$nodes"}[$window])))) >= bool 2)'
    ),
    # DCGM_FI_DEV_XID_ERRORS holds the last Xid code: GPUs whose code changed to non-zero.
    "xid_errors": (
        'sum((changes(DCGM_FI_DEV_XID_ERRORS{Hostname=~"$nodes"}[$window]) > bool 0) '
        '* (max_over_time(DCGM_FI_DEV_XID_ERRORS{Hostname=~"$nodes"}[$window]) > bool 0))'
    ),
    # Context reported with the throughput gate; they do not decide anything.
    "gpu_util_pct": 'avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"$nodes"}[$window]))',
    "fb_used_mib": 'max(max_over_time(DCGM_FI_DEV_FB_USED{Hostname=~"$nodes"}[$window]))',
}

PLACEHOLDERS = ("window", "nodes", "on_nodes")


def node_regex(nodes: list[str]) -> str:
    """A PromQL-quoted regex matching exactly these node names (`.*` for all nodes)."""
    return "|".join(name.replace(".", r"\\.") for name in nodes) if nodes else ".*"


def render(text: str, window: str, nodes: list[str]) -> str:
    regex = node_regex(nodes)
    on_nodes = Template(_PODS_ON_NODES).substitute(nodes=regex, window=window) if nodes else ""
    return Template(text).substitute(window=window, nodes=regex, on_nodes=on_nodes)
