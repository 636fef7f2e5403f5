"""Prometheus's query API over HTTP (standard library only): instant and range queries, each answer
checked for shape (`answer.read`). A query that gets no usable answer raises one `QueryFailure`
naming how it failed; the baseline and the gates each turn that into their own advice."""

from __future__ import annotations

import json
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from gpushare.prometheus.answer import MalformedAnswer, PrometheusError, Series, read


class QueryFailure(Exception):
    """A query without a usable answer."""


class HttpFailure(QueryFailure):
    """Prometheus answered with an HTTP error; `detail` is its error text."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"HTTP {code}: {detail}")
        self.code, self.detail = code, detail

    @property
    def refused(self) -> bool:
        """The query itself was refused (bad PromQL, a bad parameter), not the server failing."""
        return self.code in (400, 422)


class Unanswered(QueryFailure):
    """Nothing answered at the URL; `reason` says why."""

    def __init__(self, reason: object) -> None:
        super().__init__(str(reason))
        self.reason = reason


class NotJson(QueryFailure):
    """The answer was not JSON: not Prometheus at that URL."""


class Reported(QueryFailure):
    """Prometheus answered `"status": "error"`; the message is its error text."""


class Malformed(QueryFailure):
    """JSON that is not a query result; the message says which part."""


class Client:
    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def instant(self, query: str, at: float) -> tuple[str, list[Series]]:
        """(resultType, series) of `query` evaluated at unix time `at`."""
        return self._ask("query", {"query": query, "time": f"{at:.3f}"})

    def range(self, query: str, start: int, end: int, step_s: int) -> tuple[str, list[Series]]:
        """(resultType, series) of `query` from `start` to `end` every `step_s` seconds."""
        return self._ask("query_range", {"query": query, "start": str(start), "end": str(end), "step": str(step_s)})

    def _ask(self, path: str, form: dict[str, str]) -> tuple[str, list[Series]]:
        request = Request(f"{self.url}/api/v1/{path}", data=urlencode(form).encode())  # noqa: S310 - the operator's Prometheus
        try:
            with urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - the operator's URL
                body = json.load(response)
        except HTTPError as err:
            raise HttpFailure(err.code, _error_text(err)) from None
        except (URLError, OSError) as err:
            raise Unanswered(getattr(err, "reason", err)) from None
        except json.JSONDecodeError:
            raise NotJson(self.url) from None
        return result(body)


def result(body: object) -> tuple[str, list[Series]]:
    """(resultType, series) of a decoded answer; Reported or Malformed when it holds none."""
    try:
        return read(body)
    except PrometheusError as err:
        raise Reported(str(err)) from None
    except MalformedAnswer as err:
        raise Malformed(str(err)) from None


def _error_text(err: HTTPError) -> str:
    try:
        return str(json.load(err).get("error", err.reason))
    except (json.JSONDecodeError, AttributeError, OSError):
        return str(err.reason)
