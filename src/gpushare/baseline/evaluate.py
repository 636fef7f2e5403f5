"""One baseline run: read the window from Prometheus, judge every GPU, keep the asked-for nodes."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpushare.baseline.model import GpuVerdict, PrometheusUnavailable, Thresholds, WorkloadFacts, duration
from gpushare.baseline.prometheus import Client, Plan, collect
from gpushare.baseline.verdict import judge
from gpushare.baseline.workloads import label_keys


@dataclass
class Report:
    plan: Plan
    thresholds: Thresholds
    nodes: tuple[str, ...]
    gpus: list[GpuVerdict]


def evaluate(plan: Plan, thresholds: Thresholds, facts: list[WorkloadFacts], nodes: tuple[str, ...] = (),
             client: Client | None = None) -> Report:
    series = collect(plan, thresholds.queries, label_keys(facts), client)
    if not series:
        raise PrometheusUnavailable(
            f"Prometheus at {plan.url} holds no DCGM series (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, ...) "
            "in the window: is the DCGM exporter scraped, and is --end inside the data?")
    pods_mapped = any(s.workloads for s in series.values())
    selected = [s for key, s in series.items() if not nodes or key.node in nodes]
    if not selected:
        seen = sorted({key.node for key in series})
        raise PrometheusUnavailable(
            f"no DCGM series for node(s) {', '.join(nodes)} (Hostname / hostname label); "
            f"Prometheus has GPUs of {', '.join(seen[:10])}{' ...' if len(seen) > 10 else ''}")
    verdicts = [judge(s, thresholds, facts, plan.end, plan.window_s, pods_mapped)
                for s in sorted(selected, key=lambda s: s.key.sort_key())]
    return Report(plan, thresholds, nodes, verdicts)


def thresholds_dict(thresholds: Thresholds) -> dict:
    values = asdict(thresholds)
    values["min_history"], values["max_gap"] = duration(values.pop("min_history_s")), duration(values.pop("max_gap_s"))
    values["queries_overridden"] = sorted(values.pop("queries"))
    return values

