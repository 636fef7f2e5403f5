"""The dra_pilot role's filters (registered by plugins/filter/dra.py)."""

from __future__ import annotations

from typing import Any

from gpushare.dra import readiness
from gpushare.dra.settings import Settings
from gpushare.ansible_values import plain
from gpushare.runbook.inputs import NOTHING


def dra_readiness(probe: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """The readiness report (gpushare.dra.readiness.report) from the gpushare_dra_probe result."""
    return readiness.report(plain(probe).get("facts") or {}, Settings.of(plain(inputs)))


def dra_readiness_input_problems(inputs: dict[str, Any]) -> list[str]:
    """What is wrong with the inputs alone, before the cluster is read."""
    return [f"{problem} {NOTHING}" for problem in Settings.of(plain(inputs)).problems()]


FILTERS = {"dra_readiness": dra_readiness, "dra_readiness_input_problems": dra_readiness_input_problems}
