"""Answers of Prometheus's query API (/api/v1/query and /api/v1/query_range), checked for shape
before anything is read from them.

A proxy, a wrong URL or a broken server can answer with JSON that is not a query result; reading
it blindly ends in a traceback or, worse, in a number taken from the wrong field. `read` returns
the series or raises `MalformedAnswer` saying what was wrong, which the callers report as missing
data for the query that got it (the format: prometheus/docs/querying/api.md, "Expression query
result formats").
"""

from __future__ import annotations

import math

Sample = tuple[float, float]
Series = tuple[dict[str, str], list[Sample]]


class PrometheusError(ValueError):
    """Prometheus answered `"status": "error"`; the message is its error text."""


class MalformedAnswer(ValueError):
    """JSON that is not a query result; the message says which part."""


def read(body: object) -> tuple[str, list[Series]]:
    """(resultType, series) of an answer: a vector's samples as one-point series, a matrix's
    series as they are, a scalar as one series without labels, a string as no series."""
    if not isinstance(body, dict) or "status" not in body:
        raise MalformedAnswer(f"expected an object with status and data, got {_short(body)}")
    if body["status"] == "error":
        raise PrometheusError(str(body.get("error") or body))
    if body["status"] != "success":
        raise MalformedAnswer(f"status is {_short(body['status'])}, neither success nor error")
    data = body.get("data")
    if not isinstance(data, dict) or "result" not in data:
        raise MalformedAnswer(f"data is {_short(data)}, not an object with resultType and result")
    kind, result = data.get("resultType"), data["result"]
    if kind == "scalar":
        return kind, [({}, [_sample(result, "result")])]
    if kind == "string":
        return kind, []
    if kind not in ("vector", "matrix") or not isinstance(result, list):
        raise MalformedAnswer(f"resultType {_short(kind)} with result {_short(result)}")
    series = []
    for index, item in enumerate(result):
        where = f"result[{index}]"
        if not isinstance(item, dict) or not _labels(item.get("metric")):
            raise MalformedAnswer(f"{where} is {_short(item)}, not an object with a metric of string labels")
        if kind == "vector":
            points = [_sample(item.get("value"), f"{where}.value")]
        elif isinstance(item.get("values"), list):
            points = [_sample(point, f"{where}.values[{i}]") for i, point in enumerate(item["values"])]
        else:
            raise MalformedAnswer(f"{where}.values is {_short(item.get('values'))}, not a list of samples")
        series.append((item["metric"], points))
    return kind, series


def _labels(metric: object) -> bool:
    return isinstance(metric, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items())


def _sample(point: object, where: str) -> Sample:
    """[unix time, "value"], the value as text ("NaN" and "+Inf" included), as Prometheus writes it."""
    if isinstance(point, list) and len(point) == 2 and isinstance(point[1], str):
        stamp, text = point
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and math.isfinite(stamp):
            try:
                return float(stamp), float(text)
            except ValueError:
                pass
    raise MalformedAnswer(f"{where} is {_short(point)}, not a [time, \"value\"] sample")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
