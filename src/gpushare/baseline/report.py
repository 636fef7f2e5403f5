"""Baseline reports: a dict (the JSON the playbook reads), a table for people, and Markdown."""

from __future__ import annotations

import json
import os
from typing import Any

from gpushare.baseline.evaluate import Report, thresholds_dict
from gpushare.baseline.model import CANDIDATE, INSUFFICIENT, NOT_CANDIDATE, GpuVerdict, duration
from gpushare.prometheus.timespec import format_time
from gpushare.table import render_table

VERDICTS = (CANDIDATE, NOT_CANDIDATE, INSUFFICIENT)


def to_dict(report: Report) -> dict[str, Any]:
    plan = report.plan
    return {
        "window": {"duration": duration(plan.window_s), "start": format_time(plan.end - plan.window_s),
                   "end": format_time(plan.end), "hours": plan.window_s // 3600},
        "prometheus": plan.url,
        "nodes": list(report.nodes) or None,
        "thresholds": thresholds_dict(report.thresholds),
        "summary": {verdict: sum(g.verdict == verdict for g in report.gpus) for verdict in VERDICTS},
        "gpus": [_gpu(g) for g in report.gpus],
    }


def _gpu(g: GpuVerdict) -> dict[str, Any]:
    s, cov = g.series, g.coverage
    return {
        "node": s.key.node, "gpu": s.key.gpu, "uuid": s.key.uuid, "model": s.model,
        "mig_profile": s.mig_profile, "gpu_instance": s.key.instance,
        "util_1h_p50": g.util_1h_p50, "util_1h_p95": g.util_1h_p95, "idle_hours_share": g.idle_share,
        "mem_copy_1h_p95": g.mem_copy_1h_p95, "mem_copy_peak_pct": g.mem_copy_peak_pct,
        "fb_peak_mib": None if g.fb_peak_mib is None else round(g.fb_peak_mib),
        "fb_total_mib": None if s.fb_total_mib is None else round(s.fb_total_mib),
        "fb_reserved_exported": s.fb_reserved_mib is not None,
        "xid": s.xid, "absent": g.absent,
        "coverage": {"hours": cov.hours, "expected_hours": cov.expected_hours,
                     "first": format_time(cov.first - 3600) if cov.first else None,
                     "last": format_time(cov.last) if cov.last else None,
                     "longest_gap_h": max(cov.leading_h, cov.trailing_h, cov.longest_gap_h)},
        "workloads": [f"{w.namespace}/{w.pod}" for w in s.workloads], "owners": g.owners,
        "verdict": g.verdict, "reasons": g.reasons, "recommended_replicas": g.recommended_replicas,
        "replicas_by_memory": g.replicas_by_memory, "replicas_by_compute": g.replicas_by_compute,
        "plot": g.plot, "mode": g.mode, "mode_reason": g.mode_reason,
    }


def to_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2)


def gpu_name(gpu: dict[str, Any]) -> str:
    instance = f" MIG {gpu['mig_profile']} #{gpu['gpu_instance']}" if gpu.get("gpu_instance") else ""
    return f"{gpu['gpu'] or '-'}{instance}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value / 1024:.1f}"


def rows(document: dict[str, Any]) -> list[list[str]]:
    out = []
    for gpu in document["gpus"]:
        cov = gpu["coverage"]
        out.append([
            gpu["node"], gpu_name(gpu), gpu["model"] or "-",
            f"{_pct(gpu['util_1h_p50'])} / {_pct(gpu['util_1h_p95'])}",
            _pct(None if gpu["idle_hours_share"] is None else 100 * gpu["idle_hours_share"]),
            f"{_mib(gpu['fb_peak_mib'])} / {_mib(gpu['fb_total_mib'])}",
            "?" if gpu["xid"] is None else str(gpu["xid"] or "-"), f"{cov['hours']}/{cov['expected_hours']} h",
            gpu["verdict"], "-" if gpu["recommended_replicas"] is None else str(gpu["recommended_replicas"]),
        ])
    return out


HEADERS = ["NODE", "GPU", "MODEL", "UTIL 1H P50/P95", "IDLE HOURS", "FB PEAK/TOTAL GiB", "XID", "COVERAGE",
           "VERDICT", "REPLICAS"]


def to_table(document: dict[str, Any]) -> str:
    table = render_table([*HEADERS, "FIRST REASON"],
                         [row + [gpu["reasons"][0] if gpu["reasons"] else ""]
                          for row, gpu in zip(rows(document), document["gpus"])])
    window = document["window"]
    summary = ", ".join(f"{count} {verdict}" for verdict, count in document["summary"].items())
    return f"{table}\n\nbaseline {window['duration']} to {window['end']}: {summary}  (prometheus {document['prometheus']})"


def summary_lines(document: dict[str, Any]) -> list[str]:
    """One line per GPU (verdict, replicas, first reason) under the window's summary: the end of a run."""
    window = document["window"]
    lines = [f"baseline {window['duration']} to {window['end']}: "
             + ", ".join(f"{count} {verdict}" for verdict, count in document["summary"].items())]
    for gpu in document["gpus"]:
        replicas = f", {gpu['recommended_replicas']} replicas" if gpu["verdict"] == CANDIDATE else ""
        lines.append(f"{gpu['node']} GPU {gpu_name(gpu)}: {gpu['verdict']}{replicas} - "
                     + (gpu["reasons"][0] if gpu["reasons"] else ""))
    return lines


def md_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def md_table(headers: list[str], body: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in body]
    return lines


def to_markdown(document: dict[str, Any], readings: dict[str, Any] | None = None,
                link_base: str | None = None) -> str:
    """The report: verdict table, each GPU's reasons and plot, then (from the playbook) the readings.
    Plot paths are made relative to `link_base`, the directory the Markdown file lives in."""
    window = document["window"]
    lines = [f"# GPU baseline before sharing - {window['end']}", "",
             f"Window {window['duration']}: {window['start']} to {window['end']}, from {document['prometheus']}"
             + (f", nodes {', '.join(document['nodes'])}" if document.get("nodes") else "") + ".",
             "", "Summary: " + ", ".join(f"{n} {v}" for v, n in document["summary"].items()) + ".", "",
             "## Verdicts", ""]
    lines += md_table(HEADERS, rows(document))
    for gpu in document["gpus"]:
        replicas = gpu["recommended_replicas"]
        lines += ["", f"### {gpu['node']} GPU {gpu_name(gpu)} - {gpu['verdict']}"
                  + (f", {replicas} replicas" if gpu["verdict"] == CANDIDATE else ""), "",
                  "No series in the window." if gpu.get("absent") else
                  f"`{gpu['uuid']}` {gpu['model']}; workloads: {', '.join(gpu['workloads']) or 'none'}"
                  + (f"; owners: {', '.join(gpu['owners'])}" if gpu["owners"] else "") + ".", ""]
        lines += [f"- {reason}" for reason in gpu["reasons"]]
        if gpu.get("mode"):
            lines.append(f"- recommended mode: {gpu['mode']} - {gpu['mode_reason']}")
        if gpu.get("plot"):
            path = os.path.relpath(gpu["plot"], link_base) if link_base else gpu["plot"]
            lines += ["", f"![{gpu['node']} GPU {gpu_name(gpu)}]({path})"]
    if readings:
        lines += ["", *readings_markdown(readings)]
    thresholds = document["thresholds"]
    lines += ["", "## Thresholds", "",
              ", ".join(f"{key} {value}" for key, value in thresholds.items() if key != "queries_overridden")
              + (f"; queries overridden: {', '.join(thresholds['queries_overridden'])}"
                 if thresholds["queries_overridden"] else "") + "."]
    return "\n".join(lines) + "\n"


def readings_markdown(readings: dict[str, Any]) -> list[str]:
    """The seed's readings, as the playbook gathered them (see gpushare.baseline.readings)."""
    pending, events, nodes, smi = (readings.get(k) or {} for k in ("pending", "events", "nodes", "nvidia_smi"))
    lines = [f"## Pending pods ({len(pending.get('rows', []))})", ""]
    lines += md_table(pending["headers"], pending["rows"]) if pending.get("rows") else ["None."]
    lines += ["", f"## Last {len(events.get('rows', []))} events, oldest first", ""]
    lines += md_table(events["headers"], events["rows"]) if events.get("rows") else ["None."]
    lines += ["", "## GPU nodes: capacity, allocatable, GPU labels", ""]
    lines += md_table(nodes["headers"], nodes["rows"]) if nodes.get("rows") else ["None."]
    lines += ["", "## nvidia-smi", ""]
    if smi.get("skipped"):
        lines.append(f"Skipped: {smi['skipped']}")
    else:
        lines += md_table(smi["headers"], smi["rows"]) if smi.get("rows") else ["No output."]
    return lines
