"""Default PromQL for each series the baseline reads, and the placeholders an override may use.

Every query keeps the labels that identify a GPU as the DCGM exporter sets them (`GPU_LABELS`):
a GPU's series are split by the pod labels of whatever ran on it, so each query aggregates them
back to one series per GPU. Range queries are evaluated at the step of their window: the 1 h
queries every hour (168 points a week), the 24 h ones every day.
They are written to stay cheap over a fleet-week (see BENCHMARKS.md): one range selector per query,
none longer than a day in the range queries.

Placeholders ($-style, because PromQL uses braces):
  $window           the --window (e.g. 7d), for the instant queries over the whole window
  $workload_labels  ", key, ..." of the pod labels that workload facts select on (may be empty)
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

from gpushare.dcgm_labels import HOST_LABELS

GPU_LABELS = ", ".join([*HOST_LABELS, "gpu", "UUID", "modelName", "GPU_I_PROFILE", "GPU_I_ID"])
_BY = f"by ({GPU_LABELS})"
_MIG = '{GPU_I_ID!=""}'


@dataclass(frozen=True)
class Query:
    step_s: int | None  # range query at this step; None: one instant query at the end
    promql: str
    what: str


DEFAULT_QUERIES: dict[str, Query] = {
    # The seed's avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h]), the highest of the GPU's series: from
    # 4.5.3-4.8.2 with KUBERNETES_VIRTUAL_GPUS the exporter writes each sharing pod's own processes'
    # utilisation beside the card's (process_metrics.go), a part of it that an average would mix in;
    # other series of a GPU are copies of the card's value. An hour a pod change splits over two
    # series counts as its busier part, on the safe side for sharing.
    "util_1h": Query(3600, f"max {_BY} (avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h]))", "1 h average utilisation, %"),
    # MIG instances report no DCGM_FI_DEV_GPU_UTIL: the graphics engine's active ratio instead.
    "util_1h_mig": Query(3600, f"100 * avg {_BY} (avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{_MIG}[1h]))",
                         "1 h average graphics-engine activity of MIG instances, %"),
    # The seed's max_over_time(DCGM_FI_DEV_MEM_COPY_UTIL[1h]).
    "mem_copy_1h": Query(3600, f"max {_BY} (max_over_time(DCGM_FI_DEV_MEM_COPY_UTIL[1h]))",
                         "1 h peak memory-copy utilisation, %"),
    "mem_copy_1h_mig": Query(3600, f"100 * max {_BY} (max_over_time(DCGM_FI_PROF_DRAM_ACTIVE{_MIG}[1h]))",
                             "1 h peak DRAM activity of MIG instances, %"),
    # The seed's max_over_time(DCGM_FI_DEV_FB_USED[24h]) is the daily peak of these hourly peaks;
    # hourly, so that memory's coverage is judged like utilisation's.
    "fb_used_1h": Query(3600, f"max {_BY} (max_over_time(DCGM_FI_DEV_FB_USED[1h]))", "1 h FB used peak, MiB"),
    # The card's memory is used + free + reserved, once a day. FB_RESERVED is in the exporter's
    # default counters only since 4.3.1-4.4.0 (etc/dcp-metrics-included.csv): read apart, so that a
    # card without it is still sized by used + free (an `or` of both sums costs more than every
    # other query together). Each is the GPU's highest series before the sum: with
    # KUBERNETES_VIRTUAL_GPUS the exporter adds per-pod FB_USED series (process values, their own
    # labels) beside the card's own.
    "fb_used_free": Query(86400, f"max {_BY} (DCGM_FI_DEV_FB_USED) + max {_BY} (DCGM_FI_DEV_FB_FREE)",
                          "FB used + free, MiB"),
    "fb_reserved": Query(86400, f"max {_BY} (DCGM_FI_DEV_FB_RESERVED)", "FB reserved, MiB"),
    # DCGM_FI_DEV_XID_ERRORS holds the last Xid code: the highest code seen in the window.
    "xid": Query(None, f"max {_BY} (max_over_time(DCGM_FI_DEV_XID_ERRORS[$window]))", "last Xid code"),
    # The pods the exporter mapped to each GPU during the window (Kubernetes mapping; behind the
    # operator's ServiceMonitor they arrive as exported_namespace / exported_pod).
    "workloads": Query(None, (
        f"group by ({GPU_LABELS}, namespace, pod, exported_namespace, exported_pod$workload_labels) "
        "(last_over_time(DCGM_FI_DEV_FB_USED[$window]))"
    ), "pods seen on each GPU"),
}
PLACEHOLDERS = ("window", "workload_labels")
# Query keys older thresholds files may still override, with what replaced them.
RETIRED = {
    "fb_used_24h": "the daily peak is read from hourly peaks now; override fb_used_1h instead",
    "fb_total": "the card's memory is read as fb_used_free + fb_reserved now (reserved only where the exporter "
                "exports it); override those instead",
}


def render(text: str, window: str, workload_labels: list[str]) -> str:
    extra = "".join(f", {label}" for label in workload_labels)
    return Template(text).substitute(window=window, workload_labels=extra)
