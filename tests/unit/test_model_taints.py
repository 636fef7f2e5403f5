"""Toleration matching (gpushare.model.taints) as k8s.io/api core/v1 Toleration.ToleratesTaint
decides it (v0.35: effect, then key, then the operator; Lt/Gt only behind the alpha
TaintTolerationComparisonOperators gate, off by default)."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.model.taints import Taint, tolerated, tolerates

POOL = Taint("nvidia.com/gpu", "shared", "NoSchedule")
BARE = Taint("nvidia.com/gpu", "", "NoSchedule")


@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    # upstream TestTolerationToleratesTaint's cases, on the runbooks' taints
    pytest.param({"key": "nvidia.com/gpu", "operator": "Exists", "value": "ignored", "effect": "NoSchedule"}, POOL,
                 True, id="exists-ignores-the-value"),
    pytest.param({"key": "nvidia.com/gpu", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}, POOL,
                 True, id="equal-value"),
    pytest.param({"key": "nvidia.com/gpu", "operator": "Equal", "value": "dedicated", "effect": "NoSchedule"}, POOL,
                 False, id="equal-other-value"),
    pytest.param({"key": "nvidia.com/gpu", "value": "shared", "effect": "NoSchedule"}, POOL, True,
                 id="no-operator-means-equal"),
    pytest.param({"key": "nvidia.com/gpu", "effect": "NoSchedule"}, POOL, False, id="equal-no-value-vs-a-value"),
    pytest.param({"key": "nvidia.com/gpu", "effect": "NoSchedule"}, BARE, True, id="equal-no-value-vs-no-value"),
    pytest.param({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, POOL, False,
                 id="other-effect"),
    pytest.param({"key": "nvidia.com/gpu", "operator": "Exists"}, POOL, True, id="no-effect-matches-every-effect"),
    pytest.param({"key": "nvidia.com/mig", "operator": "Exists", "effect": "NoSchedule"}, POOL, False,
                 id="other-key"),
    pytest.param({"operator": "Exists"}, POOL, True, id="no-key-exists-tolerates-everything"),
    pytest.param({"operator": "Exists", "effect": "NoExecute"}, POOL, False, id="no-key-exists-other-effect"),
    pytest.param({"key": "nvidia.com/gpu", "operator": "Gt", "value": "1", "effect": "NoSchedule"},
                 Taint("nvidia.com/gpu", "5", "NoSchedule"), False, id="comparison-operators-gated-off"),
    pytest.param({"key": "nvidia.com/gpu", "operator": "exists"}, POOL, False, id="operators-are-case-sensitive"),
    pytest.param({"key": "nvidia.com/gpu", "value": None}, BARE, True, id="a-null-value-is-no-value"),
    pytest.param({"key": "nvidia.com/gpu", "value": 1}, Taint("nvidia.com/gpu", "1", "NoSchedule"), False,
                 id="an-unquoted-number-is-no-string"),
])
def test_tolerates(toleration: dict[str, Any], taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_tolerated_by_any_of_the_tolerations() -> None:
    operand = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
               {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert tolerated(operand, POOL)
    assert not tolerated(operand, Taint("gpu-mode", "shared", "NoSchedule"))
    assert not tolerated([], POOL)


def test_taints_from_the_api() -> None:
    taint = Taint.of({"key": "nvidia.com/gpu", "value": "shared", "effect": "NoSchedule",
                      "timeAdded": "2026-12-01T09:00:00Z"})
    assert taint == POOL
    assert taint.as_dict() == {"key": "nvidia.com/gpu", "value": "shared", "effect": "NoSchedule"}
    assert Taint.of({"key": "nvidia.com/gpu", "effect": "NoSchedule"}).as_dict() == {"key": "nvidia.com/gpu",
                                                                                    "effect": "NoSchedule"}
    assert (str(POOL), str(BARE)) == ("nvidia.com/gpu=shared:NoSchedule", "nvidia.com/gpu:NoSchedule")
