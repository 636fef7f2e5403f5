"""Gate reports for people (a table) and for machines (JSON, read by the playbook)."""

from __future__ import annotations

import json
from dataclasses import asdict

from gpushare.gates.model import Report
from gpushare.table import render_table


def to_json(report: Report) -> str:
    return json.dumps(
        {"verdict": report.verdict, "source": report.source, "gates": [asdict(gate) for gate in report.gates]},
        indent=2,
    )


def to_table(report: Report) -> str:
    rows = [
        (gate.name, gate.status, _observed(gate.observed), gate.threshold, gate.reason) for gate in report.gates
    ]
    source = ", ".join(f"{key} {_short(value)}" for key, value in report.source.items())
    table = render_table(("GATE", "STATUS", "OBSERVED", "THRESHOLD", "REASON"), rows)
    return f"{table}\n\nverdict: {report.verdict}  ({source})"


def _observed(values: dict[str, object]) -> str:
    return " ".join(f"{key}={_short(value)}" for key, value in values.items())


def _short(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ",".join(_short(item) for item in value) + "]"
    return "-" if value is None else str(value)
