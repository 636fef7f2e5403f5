"""Reading the baseline's series from Prometheus (gpushare.prometheus), all queries at once, and
folding them into one GpuSeries per GPU or MIG instance."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpushare.baseline.model import BaselineInputError, GpuKey, GpuSeries, PrometheusUnavailable, Workload, duration
from gpushare.baseline.queries import DEFAULT_QUERIES, render
from gpushare.dcgm_labels import host_of
from gpushare.prometheus import client as prometheus
from gpushare.prometheus.answer import Series


@dataclass(frozen=True)
class Plan:
    url: str
    end: int
    window_s: int
    timeout_s: float = 30.0


class Client:
    """The baseline's queries: any failure but a refused query means the baseline cannot be read."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.prometheus = prometheus.Client(url, timeout_s)
        self.url = self.prometheus.url

    def query(self, key: str, promql: str, end: int, window_s: int, step_s: int | None) -> list[Series]:
        """Instant query at `end`, or range query over the window at `step_s`; every series with its points."""
        try:
            if step_s is None:
                kind, series = self.prometheus.instant(promql, end)
            else:
                first = end - (math.ceil(window_s / step_s) - 1) * step_s
                kind, series = self.prometheus.range(promql, first, end, step_s)
        except prometheus.HttpFailure as err:
            if err.refused:
                raise BaselineInputError(
                    f"queries.{key}: Prometheus refused the query (HTTP {err.code}: {err.detail}); "
                    "fix it in the thresholds file") from None
            raise PrometheusUnavailable(
                f"Prometheus at {self.url} answered HTTP {err.code} to queries.{key}: {err.detail}") from None
        except prometheus.Unanswered as err:
            raise PrometheusUnavailable(
                f"Prometheus at {self.url} did not answer ({err.reason}); "
                "check --prometheus and that the server runs") from None
        except prometheus.NotJson:
            raise PrometheusUnavailable(f"{self.url} did not answer with Prometheus JSON; check the URL") from None
        except prometheus.Reported as err:
            raise BaselineInputError(f"queries.{key}: Prometheus reported an error: {err}") from None
        except prometheus.Malformed as err:
            raise PrometheusUnavailable(
                f"queries.{key}: the answer of {self.url} is not a Prometheus query result ({err}); "
                "check that --prometheus is Prometheus's URL") from None
        if kind not in ("matrix", "vector"):
            raise BaselineInputError(f"queries.{key} returned a {kind}; write a query that returns series")
        return series


def key_of(labels: dict[str, str]) -> GpuKey:
    return GpuKey(host_of(labels), labels.get("gpu", ""), labels.get("UUID") or labels.get("uuid") or "",
                  labels.get("GPU_I_ID") or None)


def collect(plan: Plan, queries: dict[str, str], workload_labels: list[str],
            client: Client | None = None) -> dict[GpuKey, GpuSeries]:
    """Run every query (concurrently) and fold the answers into one GpuSeries per GPU."""
    client = client or Client(plan.url, plan.timeout_s)
    texts = {key: render(queries.get(key, query.promql), duration(plan.window_s), workload_labels)
             for key, query in DEFAULT_QUERIES.items()}
    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        futures = {key: pool.submit(client.query, key, text, plan.end, plan.window_s, DEFAULT_QUERIES[key].step_s)
                   for key, text in texts.items()}
        answers = {key: future.result() for key, future in futures.items()}
    gpus: dict[GpuKey, GpuSeries] = {}

    def gpu(labels: dict[str, str]) -> GpuSeries:
        key = key_of(labels)
        series = gpus.get(key)
        if series is None:
            series = gpus[key] = GpuSeries(key)
        series.model = series.model or labels.get("modelName", "")
        series.mig_profile = series.mig_profile or labels.get("GPU_I_PROFILE") or None
        return series

    folds: dict[str, tuple[str, Callable[[float, float], float]]] = {
        "util_1h": ("util_1h", _mean), "util_1h_mig": ("util_1h", _mean),
        "mem_copy_1h": ("mem_copy_1h", max), "mem_copy_1h_mig": ("mem_copy_1h", max),
        "fb_used_1h": ("fb_used_1h", max),
    }
    for key, (attribute, combine) in folds.items():
        for labels, points in answers[key]:
            target: dict[int, float] = getattr(gpu(labels), attribute)
            for t, value in points:
                if math.isfinite(value):
                    stamp = int(t)
                    target[stamp] = combine(target[stamp], value) if stamp in target else value
    # One value per GPU: the highest of its series and points (None: no series, not zero).
    for key, attribute in (("fb_used_free", "fb_used_free_mib"), ("fb_reserved", "fb_reserved_mib"), ("xid", "xid")):
        for labels, points in answers[key]:
            values = [int(v) if key == "xid" else v for _, v in points if math.isfinite(v)]
            if values:
                series = gpu(labels)
                known = getattr(series, attribute)
                setattr(series, attribute, max(values + ([] if known is None else [known])))
    for labels, _ in answers["workloads"]:
        workload = _workload(labels, workload_labels)
        series = gpu(labels)
        if workload is not None and workload not in series.workloads:
            series.workloads.append(workload)
    return gpus


def _workload(labels: dict[str, str], workload_labels: list[str]) -> Workload | None:
    """The pod on a series: exported_* behind the operator's ServiceMonitor, else the exporter's own
    labels; a series that names the exporter's own pod (scrape target labels) carries no workload."""
    namespace = labels.get("exported_namespace") or labels.get("namespace")
    pod = labels.get("exported_pod") or labels.get("pod")
    if not namespace or not pod or ("exported_pod" not in labels and pod.startswith("nvidia-dcgm-exporter")):
        return None
    return Workload(namespace, pod, {key: labels[key] for key in workload_labels if key in labels})


def _mean(a: float, b: float) -> float:
    return (a + b) / 2

