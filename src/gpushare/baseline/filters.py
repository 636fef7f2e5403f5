"""The baseline role's filters (registered by plugins/filter/baseline.py): the seed's readings as report
rows, the inputs' checks and the Markdown report, all from gpushare.baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpushare.baseline.model import BaselineInputError
from gpushare.baseline.readings import gpu_nodes, nvidia_smi, pending_pods, recent_events
from gpushare.baseline.report import summary_lines, to_markdown
from gpushare.baseline.thresholds import load_thresholds
from gpushare.baseline.workloads import parse_facts
from gpushare.prometheus import InputError


def baseline_facts_error(entries: Any) -> str:
    """Why baseline_workloads is refused ('' when it is fine)."""
    try:
        parse_facts(entries)
    except BaselineInputError as err:
        return str(err)
    return ""


def baseline_thresholds_error(path: str | None) -> str:
    """Why the thresholds file is refused ('' when it is fine, or none is given)."""
    try:
        load_thresholds(Path(path) if path else None)
    except InputError as err:
        return str(err)
    return ""


def baseline_markdown(document: dict[str, Any], readings: dict[str, Any], report_path: str) -> str:
    return to_markdown(document, readings, link_base=str(Path(report_path).parent))


FILTERS = {
    "baseline_facts_error": baseline_facts_error,
    "baseline_thresholds_error": baseline_thresholds_error,
    "baseline_pending_pods": pending_pods,
    "baseline_recent_events": recent_events,
    "baseline_gpu_nodes": gpu_nodes,
    "baseline_nvidia_smi": nvidia_smi,
    "baseline_markdown": baseline_markdown,
    "baseline_summary": summary_lines,
}
