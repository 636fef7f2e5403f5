"""The rollout role's filters: each turns what a phase read, or the record as last written, into
a decision or a change (Jinja only wires the values)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from gpushare.clock import utc_now
from gpushare.ansible_values import invocation, plain
from gpushare.rollout import plan as planning
from gpushare.rollout import progress as pr
from gpushare.rollout import report
from gpushare.rollout.settings import RolloutSettings


def _record(record: dict[str, Any]) -> pr.RolloutRecord:
    rec = pr.RolloutRecord.of(plain(record))
    if rec.progress is None:
        raise ValueError(f"the rollout record {pr.RECORD} cannot be read any more (was it edited meanwhile?)")
    return rec


def rollout_plan(read: dict[str, Any], inputs: dict[str, Any], hosts: list[list[str]], check_mode: bool) -> dict[str, Any]:
    """The plan from the preflight's one read; `hosts`: [inventory host, node] pairs in play order."""
    read, inputs, hosts = plain(read), plain(inputs), plain(hosts)
    settings = RolloutSettings.of(inputs)
    now = utc_now()
    who = {**invocation(), **(read.get("caller") or read.get("invocation") or {})}
    result = planning.plan(read.get("resources") or {}, settings, [(str(h), str(n or h)) for h, n in hosts], now, who,
                           pr.holder_identity(now), bool(check_mode))
    plan = result.as_dict()
    if not result.refusals:
        plan["lines"] = report.plan_lines(plan, settings, settings.namespace, str(inputs.get("configmap") or ""))
    return plan


def rollout_step(record: dict[str, Any], name: str) -> dict[str, Any]:
    """The step and its state as the record says: {name, kind, hosts, nodes, replicas, soak, state, ...}."""
    progress = _record(record).progress
    return {**progress.step(name).as_dict(), **progress.state(name).as_dict()}


def rollout_record_update(record: dict[str, Any], event: str, step: str, details: dict[str, Any],
                          inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The write that records `event` of `step` (started, enabled, failed, evaluated, prepared, undone)."""
    rec, settings = _record(record), RolloutSettings.of(plain(inputs))
    now = utc_now()
    details = {**plain(details or {}), "on_rollback": settings.on_rollback}
    new = pr.apply_event(rec.progress, event, step, details, now)
    extra = 0
    if step and new.state(step).state == "enabled":
        extra = new.step(step).soak
    elif step and new.state(step).state == "held" and new.outcome == "in-progress":
        extra = settings.hold_interval
    valid = now + dt.timedelta(seconds=settings.lock_duration + extra)
    why = f"record {step or 'the rollout'}: {event}"
    changes = pr.write_changes(settings.records_namespace, new, rec.holder, valid, report.change_record(new, rec.annotations),
                               now, why)
    return [change.as_dict() for change in changes]


def rollout_wait(record: dict[str, Any], step: str, what: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return planning.wait(_record(record).progress, step, what, RolloutSettings.of(plain(inputs)), utc_now())


def rollout_gate_inputs(record: dict[str, Any], step: str, attempt: int, inputs: dict[str, Any]) -> dict[str, Any]:
    return planning.gate_inputs(_record(record).progress, step, int(attempt), RolloutSettings.of(plain(inputs)),
                                utc_now())


def rollout_summary(record: dict[str, Any] | None, namespace: str, check_mode: bool, plan: dict[str, Any]) -> list[str]:
    return report.summary_lines(plain(record) if record else None, namespace, bool(check_mode), plain(plan))


def rollout_undo_hosts(record: dict[str, Any]) -> list[str]:
    """The hosts the undo play rolls back (none unless the gates said rollback)."""
    undo = _record(record).progress.undo
    return list(undo.get("hosts") or []) if undo.get("state") == "pending" else []


def rollout_stop_message(record: dict[str, Any]) -> str:
    """Why the run fails at the end: the rollout stopped (held, rolled back) with the gates' reasons;
    empty when it completed."""
    progress = _record(record).progress
    if progress.outcome == "complete":
        return ""
    if progress.outcome == "in-progress":
        return "The rollout is not finished: re-run the same command to go on where it stopped."
    where = next((s.name for s in progress.steps if progress.state(s.name).state in ("held", "rollback", "rolled-back")),
                 "?")
    if progress.outcome == "held":
        return (f"The rollout stopped at {where}: the release gates still say hold. {progress.reasons} Re-run the same "
                "command later to evaluate again.")
    return (f"The rollout stopped at {where}: the release gates say rollback. {progress.reasons} Rolled back: "
            f"{', '.join(progress.undo.get('nodes') or [])}.")


FILTERS = {
    "rollout_plan": rollout_plan,
    "rollout_step": rollout_step,
    "rollout_record_update": rollout_record_update,
    "rollout_wait": rollout_wait,
    "rollout_gate_inputs": rollout_gate_inputs,
    "rollout_summary": rollout_summary,
    "rollout_undo_hosts": rollout_undo_hosts,
    "rollout_stop_message": rollout_stop_message,
}
