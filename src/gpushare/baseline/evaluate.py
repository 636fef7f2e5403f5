"""One baseline run: read the window from Prometheus, judge every GPU, keep the asked-for nodes.

A node or GPU that was asked for (--node, --gpus) but has no series in the window is not left out:
it is a row of its own, insufficient-data, and the command exits EXIT_ABSENT.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpushare.baseline.model import (
    GpuKey, GpuSeries, GpuVerdict, PrometheusUnavailable, Thresholds, WorkloadFacts, duration,
)
from gpushare.baseline.prometheus import Client, Plan, collect
from gpushare.baseline.verdict import absent, judge
from gpushare.baseline.workloads import label_keys


@dataclass
class Report:
    plan: Plan
    thresholds: Thresholds
    nodes: tuple[str, ...]
    gpus: list[GpuVerdict]
    gpu_counts: dict[str, int] = field(default_factory=dict)


def evaluate(plan: Plan, thresholds: Thresholds, facts: list[WorkloadFacts], nodes: tuple[str, ...] = (),
             client: Client | None = None, gpu_counts: dict[str, int] | None = None) -> Report:
    """`gpu_counts`: node -> how many GPUs it holds (indices 0..n-1); asks for that node too."""
    gpu_counts = gpu_counts or {}
    asked = (*nodes, *(node for node in gpu_counts if node not in nodes))
    series = collect(plan, thresholds.queries, label_keys(facts), client)
    if not series:
        raise PrometheusUnavailable(
            f"Prometheus at {plan.url} holds no DCGM series (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, ...) "
            "in the window: is the DCGM exporter scraped, and is --end inside the data?")
    pods_mapped = any(s.workloads for s in series.values())
    selected = [s for key, s in series.items() if not asked or key.node in asked]
    verdicts = [judge(s, thresholds, facts, plan.end, plan.window_s, pods_mapped) for s in selected]
    verdicts += _absent(series, asked, gpu_counts, plan)
    verdicts.sort(key=lambda verdict: verdict.series.key.sort_key())
    return Report(plan, thresholds, asked, verdicts, gpu_counts)


def _absent(series: dict[GpuKey, GpuSeries], asked: tuple[str, ...], gpu_counts: dict[str, int],
            plan: Plan) -> list[GpuVerdict]:
    """A row for each node asked for without any series, and for each GPU of a counted node without any."""
    seen = sorted({key.node for key in series})
    others = [node for node in seen if node not in asked]
    where = (f"Prometheus has GPUs of {', '.join(others[:10])}{' ...' if len(others) > 10 else ''}" if others
             else "no other node has any either")
    rows = []
    for node in asked:
        indices = {key.gpu for key in series if key.node == node}
        if node not in gpu_counts and not indices:
            rows.append(absent(GpuKey(node, "", ""), (
                f"no DCGM series for node {node} in the window (Hostname / hostname label): is dcgm-exporter "
                f"running there and scraped? ({where})"), plan.end, plan.window_s))
        for index in range(gpu_counts.get(node, 0)):
            if str(index) not in indices:
                rows.append(absent(GpuKey(node, str(index), ""), (
                    f"no DCGM series for GPU {index} of node {node} in the window (the node holds "
                    f"{gpu_counts[node]}): is the exporter collecting it? A GPU in MIG mode without instances "
                    "reports none"), plan.end, plan.window_s))
    return rows


def thresholds_dict(thresholds: Thresholds) -> dict:
    values = asdict(thresholds)
    values["min_history"], values["max_gap"] = duration(values.pop("min_history_s")), duration(values.pop("max_gap_s"))
    values["queries_overridden"] = sorted(values.pop("queries"))
    return values
