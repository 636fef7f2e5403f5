"""The release gates' plan in the runbook: the checked inputs and the `gpushare gate` argv (the
preflight's dry one too); the verdict it printed and what the run does on it are in report.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpushare.release_gates.report import ROLLBACK_PLAYBOOK
from gpushare.runbook.inputs import NOTHING, as_bool

DRY_TIMEOUT = 1  # the preflight's dry evaluation: bad input is refused before any query


def _given(value: Any) -> bool:
    return value is not None and str(value).strip() not in ("", "None", "null")


def _path(value: Any, cwd: str) -> str | None:
    """Modules and commands do not run where ansible-playbook was started: a relative path is taken
    from there ($PWD)."""
    return str((Path(cwd) / str(value)).resolve()) if _given(value) else None


def _words(value: Any) -> list[str]:
    """-e gives strings: "a,b" is two nodes, "python3 -m gpushare" three words."""
    if isinstance(value, str):
        return [w for w in re.split(r"[,\s]+", value) if w]
    return [str(v) for v in value or []]


def plan(inputs: dict[str, Any], cwd: str, nodes: list[str]) -> dict[str, Any]:
    """`inputs`: the role's variables without their prefix; `nodes`: the run's Kubernetes nodes.
    Returns {on, reason (why off), problems, argv, dry_argv (the preflight's), thresholds}."""
    metrics, prometheus = _given(inputs.get("metrics_file")), _given(inputs.get("prometheus_url"))
    enabled = inputs.get("enabled")
    on = as_bool(enabled) if _given(enabled) else metrics or prometheus
    problems = []
    if metrics and prometheus:
        problems.append("give ONE source of metrics: release_gates_metrics_file or release_gates_prometheus_url, not both")
    if prometheus and not re.match(r"^https?://", str(inputs["prometheus_url"])):
        problems.append(f"release_gates_prometheus_url {inputs['prometheus_url']!r} is not an http(s):// URL")
    if on and not (metrics or prometheus):
        problems.append("release_gates_enabled is true but no source of metrics is given: set release_gates_metrics_file "
                        "(a JSON metrics file) or release_gates_prometheus_url (http(s)://host:port)")
    rollback = str(inputs.get("rollback_playbook") or ROLLBACK_PLAYBOOK)
    if on and as_bool(inputs.get("auto_rollback") or False) and rollback != ROLLBACK_PLAYBOOK:
        problems.append(f"release_gates_auto_rollback runs the time-slicing rollback, not this runbook's: drop it and, "
                        f"on a rollback verdict, run {rollback}")
    if on and not _given(inputs.get("thresholds_file")):
        problems.append("release_gates_thresholds_file is required when the gates run (the SLOs, see "
                        "examples/gates/thresholds.yaml)")
    thresholds, metrics_path = _path(inputs.get("thresholds_file"), cwd), _path(inputs.get("metrics_file"), cwd)
    argv: list[str] = []
    dry: list[str] = []
    if on and not problems:
        base = _words(inputs.get("command") or ["gpushare"]) + ["gate", "--format", "json", "--thresholds", str(thresholds)]
        if metrics_path:
            argv = dry = [*base, "--metrics", metrics_path]
        else:
            query = [*base, "--prometheus", str(inputs["prometheus_url"]), "--window", str(inputs.get("window") or "1h")]
            for flag, key in (("--baseline-window", "baseline_window"), ("--trial-end", "trial_end")):
                if _given(inputs.get(key)):
                    query = [*query, flag, str(inputs[key])]
            query += [f"--node={n}" for n in (_words(inputs["nodes"]) if _given(inputs.get("nodes")) else nodes)]
            query += _uuid_flags(inputs.get("uuids"))
            dry = [*query, "--timeout", str(DRY_TIMEOUT)]
            argv = [*query, "--timeout", str(inputs.get("query_timeout") or 10)]
    reason = ("release_gates_enabled is false" if _given(enabled) else
              "no metrics source given (release_gates_metrics_file or release_gates_prometheus_url)")
    return {"on": bool(on), "reason": "" if on else reason, "argv": argv, "dry_argv": dry, "thresholds": thresholds,
            "problems": [f"Release gates: {p}. Or run without gates (release_gates_enabled=false). {NOTHING}"
                         for p in problems]}


def _uuid_flags(uuids: Any) -> list[str]:
    return [f"--uuid={u}" for u in (_words(uuids) if _given(uuids) else [])]


def scoped(plan: dict[str, Any], uuids: Any) -> dict[str, Any]:
    """The plan's gate command scoped to the cards a runbook names after its preflight (the DRA pilot's
    verify: the card its claim got), replacing any cards given before; the gate command checks them
    before any query. Unchanged without cards or with a metrics file (its values are already chosen)."""
    if not _given(uuids) or "--prometheus" not in plan["argv"]:
        return plan
    argv = [w for w in plan["argv"] if not w.startswith("--uuid=")]
    return {**plan, "argv": [*argv, *_uuid_flags(uuids)]}
