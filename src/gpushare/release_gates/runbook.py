"""The release gates in the runbook: the checked inputs and `gpushare gate` argv (plan), the
verdict it printed (result), and what the run does on that verdict (outcome)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpushare.gates.report import to_table
from gpushare.gates.model import GateResult, Report
from gpushare.runbook.inputs import NOTHING, as_bool

EXIT_VERDICTS = (0, 3, 4)  # continue, rollback, hold
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
            dry = [*query, "--timeout", str(DRY_TIMEOUT)]
            argv = [*query, "--timeout", str(inputs.get("query_timeout") or 10)]
    reason = ("release_gates_enabled is false" if _given(enabled) else
              "no metrics source given (release_gates_metrics_file or release_gates_prometheus_url)")
    return {"on": bool(on), "reason": "" if on else reason, "argv": argv, "dry_argv": dry, "thresholds": thresholds,
            "problems": [f"Release gates: {p}. Or run without gates (release_gates_enabled=false). {NOTHING}"
                         for p in problems]}


def refusal(run: dict[str, Any], argv: list[str], preflight: bool) -> str:
    """Why the gate command gave no verdict (empty when it did): its own error first. In the
    preflight nothing was changed yet; after the share check, the gates can be run again alone."""
    if run.get("rc") in EXIT_VERDICTS:
        return ""
    said = (run.get("stderr") or "").strip().splitlines()
    after = NOTHING if preflight else "The share check ran; evaluate again with the same command."
    if not said and not run.get("stdout"):
        return (f"Release gates: could not run `{' '.join(argv)}` ({run.get('msg', '')}). Is gpushare installed on "
                f"this machine? Set release_gates_command. {after}")
    return f"Release gates: {said[-1] if said else run.get('stdout', '')} (from `{' '.join(argv)}`). {after}"


def not_evaluated(gates: dict[str, Any]) -> dict[str, Any]:
    return {"evaluated": False, "verdict": "not evaluated", "reason": gates["reason"], "action": "none", "gates": [],
            "error": None, "source": {}}


def result(run: dict[str, Any], gates: dict[str, Any]) -> dict[str, Any]:
    """`release_gates_result` from the gate command's JSON report."""
    report = json.loads(run["stdout"])
    return {**report, "evaluated": True, "exit_code": run["rc"], "command": " ".join(gates["argv"]),
            "thresholds": gates["thresholds"], "action": "none"}


def report_of(result: dict[str, Any]) -> Report:
    """The gate report a `release_gates_result` was printed from."""
    return Report(result["verdict"], tuple(GateResult(**g) for g in result.get("gates") or []),
                  dict(result.get("source") or {}), result.get("error"))


def table(result: dict[str, Any]) -> str:
    """The gate command's own table of this result."""
    return to_table(report_of(result))


def failing(result: dict[str, Any], status: str) -> str:
    """The gates that say `status`; their reasons are in the summary that follows."""
    return ", ".join(g["name"] for g in result.get("gates") or [] if g["status"] == status)


def outcome(result: dict[str, Any], auto_rollback: Any, fail_on_hold: Any, hosts: list[str]) -> dict[str, str]:
    """{action, failure}: what the run does on the verdict, and the message it fails with (or "")."""
    verdict = result.get("verdict") if result.get("evaluated") else ""
    limit = ",".join(hosts)
    if verdict == "hold":
        if as_bool(fail_on_hold):
            return {"action": "failed the run", "failure": f"Release gates say hold ({failing(result, 'hold')}) and "
                                                           "release_gates_fail_on_hold is true: evaluate again later."}
        return {"action": "held", "failure": ""}
    if verdict == "rollback":
        if as_bool(auto_rollback):
            return {"action": "rollback started", "failure": ""}
        return {"action": "none", "failure": (
            f"Release gates say rollback ({failing(result, 'rollback')}): roll the trial back with ansible-playbook "
            f"playbooks/rollback-timeslicing.yml -l {limit} (or re-run with -e release_gates_auto_rollback=true).")}
    return {"action": "none", "failure": ""}
