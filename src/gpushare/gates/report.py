"""Gate reports for people (a table that fits 120 columns) and for machines (JSON, read by the playbook)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from gpushare.gates.model import GateResult, Report
from gpushare.table import render_table, wrap

WIDTH = 120


def to_json(report: Report) -> str:
    return json.dumps(
        {
            "verdict": report.verdict, "error": report.error, "source": report.source,
            "gates": [asdict(gate) for gate in report.gates],
        },
        indent=2,
    )


def from_dict(data: dict[str, Any]) -> Report:
    """A report as `to_json` wrote it, read back (extra keys, as the runbook adds, are ignored)."""
    return Report(data["verdict"], tuple(GateResult(**gate) for gate in data.get("gates") or []),
                  dict(data.get("source") or {}), data.get("error"))


def to_table(report: Report) -> str:
    """One row per gate: its reason, then its threshold and the values it saw; the verdict last."""
    rows = [
        (gate.name, gate.status, f"{gate.reason}\nthreshold: {gate.threshold}\nobserved: {_observed(gate.observed)}")
        for gate in report.gates
    ]
    table = render_table(("GATE", "STATUS", "REASON, THRESHOLD, OBSERVED"), rows, width=WIDTH)
    footer = [("error", report.error)] if report.error else []
    footer += [
        ("source", ", ".join(f"{key} {_short(value)}" for key, value in report.source.items())),
        ("verdict", report.verdict),
    ]
    lines = [line for label, text in footer for line in wrap(f"{label + ':':<9}{text}", WIDTH, " " * 9)]
    return table + "\n\n" + "\n".join(lines)


def _observed(values: dict[str, object]) -> str:
    return " ".join(f"{key}={_short(value)}" for key, value in values.items())


def _short(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ",".join(_short(item) for item in value) + "]"
    return "-" if value is None else str(value)
