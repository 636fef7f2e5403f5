"""The release gates' report in the runbook: why the gate command gave no verdict, the verdict it
printed (result), and what the run does on that verdict (outcome). Its table is the gate command's
own (gpushare.gates.report)."""

from __future__ import annotations

import json
from typing import Any

from gpushare.gates import report as gates_report
from gpushare.runbook.inputs import NOTHING, as_bool

EXIT_VERDICTS = (0, 3, 4)  # continue, rollback, hold
ROLLBACK_PLAYBOOK = "playbooks/rollback-timeslicing.yml"


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


def table(result: dict[str, Any]) -> list[str]:
    """The gate command's table of an evaluated `release_gates_result` (each gate's status, reason, threshold and
    what it saw; the cards it judged; the verdict), line by line; one line saying why when it was not evaluated."""
    if not result.get("evaluated"):
        return [f"Release gates: {result.get('verdict', 'not evaluated')} ({result.get('reason', '')})"]
    return gates_report.to_table(gates_report.from_dict(result)).splitlines()


def failing(result: dict[str, Any], status: str) -> str:
    """The gates that say `status`; their reasons are in the summary that follows."""
    return ", ".join(g["name"] for g in result.get("gates") or [] if g["status"] == status)


def outcome(result: dict[str, Any], auto_rollback: Any, fail_on_hold: Any, hosts: list[str],
            rollback_playbook: str = ROLLBACK_PLAYBOOK) -> dict[str, str]:
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
            f"{rollback_playbook} -l {limit}"
            f"{' (or re-run with -e release_gates_auto_rollback=true)' if rollback_playbook == ROLLBACK_PLAYBOOK else ''}.")}
    return {"action": "none", "failure": ""}
