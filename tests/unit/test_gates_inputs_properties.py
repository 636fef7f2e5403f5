"""Properties of the release gates' inputs on any input: the metrics file and the thresholds file
give Observations / Thresholds (which the gates then evaluate to a verdict) or a GateInputError with
a message, never another exception."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpushare.gates.evaluate import evaluate
from gpushare.gates.inputs import CONTEXT_KEYS, REQUIRED_KEYS, TRIAL_ONLY_KEYS, WINDOW_KEYS, load_metrics, parse_metrics
from gpushare.gates.model import GateInputError, Observations, Thresholds
from gpushare.gates.queries import DEFAULT_QUERIES
from gpushare.gates.thresholds import _FIELDS, load_thresholds, parse_thresholds

EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The numbers that break naive checks: huge ints (no float holds them), NaN, infinities, -0, bools.
NUMBERS = (st.integers() | st.floats() | st.sampled_from([10**400, -(10**400), 0, -0.0, 1e308, 5e-324])
           | st.booleans())
JUNK = st.none() | st.text(max_size=6) | NUMBERS
MEASURE = NUMBERS | st.none() | st.lists(NUMBERS | st.none(), max_size=4) | JUNK
ANY_JSON = st.recursive(JUNK, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                        max_leaves=10)
METRIC_KEYS = st.sampled_from([*REQUIRED_KEYS, *CONTEXT_KEYS, *TRIAL_ONLY_KEYS]) | st.text(max_size=6)


def side(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """A side of the metrics file: usually every required key, sometimes keys missing, extra or junk."""
    complete = st.fixed_dictionaries({key: MEASURE for key in REQUIRED_KEYS},
                                     optional={key: MEASURE for key in (*CONTEXT_KEYS, *TRIAL_ONLY_KEYS)})
    return complete | st.dictionaries(keys, MEASURE, max_size=8) | ANY_JSON


VALID_NUMBER = st.integers(0, 10**6) | st.floats(0, 1e9)
VALID_SIDE = st.fixed_dictionaries(
    {key: VALID_NUMBER | st.none() for key in REQUIRED_KEYS if key not in WINDOW_KEYS}
    | {key: VALID_NUMBER | st.none() | st.lists(VALID_NUMBER | st.none(), max_size=6) for key in WINDOW_KEYS},
    optional={key: VALID_NUMBER for key in CONTEXT_KEYS})
VALID_METRICS = st.fixed_dictionaries({"baseline": VALID_SIDE, "trial": VALID_SIDE})


def _spoilt(document: dict[str, Any], side_name: str, key: str, value: Any) -> dict[str, Any]:
    """A valid document with one measurement replaced (or added) by `value`."""
    return {**document, side_name: {**document[side_name], key: value}}


METRICS = (VALID_METRICS
           | st.builds(_spoilt, VALID_METRICS, st.sampled_from(["baseline", "trial"]), METRIC_KEYS, MEASURE)
           | st.fixed_dictionaries({"baseline": side(METRIC_KEYS), "trial": side(METRIC_KEYS)})
           | st.dictionaries(st.sampled_from(["baseline", "trial"]) | st.text(max_size=6), side(METRIC_KEYS),
                             max_size=3)
           | ANY_JSON)
DURATIONS = st.sampled_from(["5m", "1h30m", "0s", "7d", "", "1x", "99999999999999999999w"]) | st.text(max_size=6)
QUERY_TEXT = st.sampled_from(["up", "$node", "$$", "${window}", "$", "$unknown", " "]) | st.text(max_size=10)
THRESHOLD_VALUE = NUMBERS | JUNK
REQUIRED_THRESHOLDS = ("throughput_min_gain", "p99_slo_ms", "p99_breach_windows")
FRACTION = st.floats(0, 1)
VALID_THRESHOLDS_DOC = st.fixed_dictionaries(
    {"throughput_min_gain": st.floats(0, 10), "p99_slo_ms": st.floats(0.001, 1e6), "p99_breach_windows": st.integers(1, 50)},
    optional={"max_new_xid": st.integers(0, 10), "max_extra_oom_kills": st.floats(0, 10),
              "max_extra_restarts": st.integers(0, 10), "max_correlated_failures": st.integers(0, 10),
              "queue_time_min_drop": FRACTION, "jitter_max_headroom_used": FRACTION, "jitter_max_spread": FRACTION,
              "no_queue_s": st.floats(0, 10), "min_window_coverage": FRACTION, "fb_margin": st.floats(0, 0.9),
              "xid_required": st.booleans(),
              "latency_window": st.sampled_from(["30s", "5m", "1h30m", "7d"]),
              "queries": st.dictionaries(st.sampled_from(sorted(DEFAULT_QUERIES)), st.sampled_from(["up", "sum(up)"]),
                                         max_size=2)})
THRESHOLDS = (
    VALID_THRESHOLDS_DOC
    | st.builds(lambda doc, key, value: {**doc, key: value}, VALID_THRESHOLDS_DOC,
                st.sampled_from([*_FIELDS, "xid_required", "latency_window", "queries"]) | st.text(max_size=6),
                THRESHOLD_VALUE)
    | st.fixed_dictionaries({key: THRESHOLD_VALUE for key in REQUIRED_THRESHOLDS},
                          optional={**{key: THRESHOLD_VALUE for key in _FIELDS if key not in REQUIRED_THRESHOLDS},
                                    "latency_window": DURATIONS | JUNK, "xid_required": THRESHOLD_VALUE,
                                    "queries": st.dictionaries(st.sampled_from(sorted(DEFAULT_QUERIES)) | st.text(max_size=5),
                                                               QUERY_TEXT | JUNK, max_size=3) | JUNK,
                                    "queue_max_p99_increase": THRESHOLD_VALUE})
    | st.dictionaries(st.sampled_from([*_FIELDS, "latency_window", "queries"]) | st.text(max_size=6),
                      THRESHOLD_VALUE, max_size=6)
    | ANY_JSON
)
GATE_THRESHOLDS = Thresholds(throughput_min_gain=0.1, p99_slo_ms=500, p99_breach_windows=2)


def metrics_verdict(document: Any) -> Observations | str:
    try:
        observations = parse_metrics(document, source={"metrics": "generated"})
    except GateInputError as err:
        assert str(err).startswith("metrics:"), err
        event("refused")
        return str(err)
    assert isinstance(observations, Observations)
    event("accepted")
    return observations


def thresholds_verdict(document: Any) -> Thresholds | str:
    try:
        thresholds = parse_thresholds(document)
    except GateInputError as err:
        assert str(err).startswith("thresholds:"), err
        event("refused")
        return str(err)
    assert isinstance(thresholds, Thresholds)
    event("accepted")
    return thresholds


@EXAMPLES
@given(METRICS)
def test_any_metrics_document_gives_observations_the_gates_can_judge_or_a_clear_error(document: Any) -> None:
    verdict = metrics_verdict(document)
    if isinstance(verdict, Observations):
        assert evaluate(verdict, GATE_THRESHOLDS).verdict in ("continue", "hold", "rollback")


@EXAMPLES
@given(THRESHOLDS)
def test_any_thresholds_document_gives_thresholds_the_gates_can_use_or_a_clear_error(document: Any) -> None:
    verdict = thresholds_verdict(document)
    if isinstance(verdict, Thresholds):
        assert verdict.p99_slo_ms > 0 and verdict.p99_breach_windows >= 1 and verdict.latency_window_s > 0


def _written(content: bytes) -> Path:
    handle = tempfile.NamedTemporaryFile(suffix=".input", delete=False)  # noqa: SIM115 - removed by the caller
    with handle:
        handle.write(content)
    return Path(handle.name)


# File contents: the documents above written out, text that is almost JSON or YAML, deep nesting,
# bytes that are not UTF-8.
FILE_BYTES = (
    METRICS.map(lambda d: json.dumps(d, allow_nan=True).encode())
    | st.text(max_size=40).map(str.encode)
    | st.integers(1, 3000).map(lambda depth: ("[" * depth + "]" * depth).encode())
    | st.binary(max_size=40)
)
YAML_BYTES = (
    THRESHOLDS.map(lambda d: yaml.safe_dump(d).encode())
    | st.text(max_size=40).map(str.encode)
    | st.integers(1, 3000).map(lambda depth: ("[" * depth + "]" * depth).encode())
    | st.sampled_from([b"? [a]\n: 1\n", b"&a [*a]", b"!!python/object:os.system x", b"a: !!binary zz", b"\t"])
    | st.binary(max_size=40)
)


@EXAMPLES
@given(FILE_BYTES)
def test_any_metrics_file_gives_observations_or_a_clear_error(content: bytes) -> None:
    path = _written(content)
    try:
        load_metrics(path)
        event("accepted")
    except GateInputError as err:
        assert str(path) in str(err) or str(err).startswith("metrics:"), err
        event("refused")
    finally:
        path.unlink()


@EXAMPLES
@given(YAML_BYTES)
def test_any_thresholds_file_gives_thresholds_or_a_clear_error(content: bytes) -> None:
    path = _written(content)
    try:
        load_thresholds(path)
        event("accepted")
    except GateInputError as err:
        assert str(path) in str(err) or str(err).startswith("thresholds:"), err
        event("refused")
    finally:
        path.unlink()


@pytest.mark.parametrize("load", [load_metrics, load_thresholds])
def test_a_missing_file_is_named(load: Any) -> None:
    with pytest.raises(GateInputError, match="/nonexistent/gates-input"):
        load(Path("/nonexistent/gates-input"))
