"""What the rollout prints and keeps: the plan (steps with their nodes and replicas), the final
summary (per step the nodes, the gates, the decision) and the change record of the whole rollout
(every evaluation's gate table), kept in the rollout record."""

from __future__ import annotations

from typing import Any

from gpushare.rollout import progress as pr
from gpushare.rollout.settings import RolloutSettings
from gpushare.rollout.steps import RAISE, Step
from gpushare.table import render_table, wrap

WIDTH = 120
MATRIX_STEPS = 6  # above this many steps the gate-by-step table goes to the change record only
STATUS = {"new": "a new rollout", "start-over": "a new rollout", "resume": "resuming", "finished": "finished"}


def nodes_text(step: Step, every: int = 0) -> str:
    if step.kind == RAISE and every and len(step.nodes) == every > 3:
        return f"all {every} nodes"
    shown = ", ".join(step.nodes[:3])
    return shown + (f" +{len(step.nodes) - 3}" if len(step.nodes) > 3 else "")


def _gates_source(step: Step, settings: RolloutSettings) -> str:
    if settings.prometheus_url:
        return "Prometheus, since the step's enable"
    files = settings.metrics_files.get(step.name) or settings.metrics_files.get("default") or []
    return ", ".join(f.rsplit("/", 1)[-1] for f in files)


def _seconds(value: int) -> str:
    """90 -> 1m30s, 3600 -> 1h, 0 -> 0s."""
    parts = [(value // 3600, "h"), (value % 3600 // 60, "m"), (value % 60, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0s"


def plan_lines(plan: dict[str, Any], settings: RolloutSettings, namespace: str, configmap: str) -> list[str]:
    progress = pr.Progress.of(plan["progress"])
    every = len({n for s in progress.steps for n in s.nodes})
    pending = {s.name for s in progress.pending}
    where = f"record {settings.records_namespace}/{pr.RECORD}"
    if plan["status"] == "finished":
        return [f"Nothing to do: this rollout is {progress.outcome} ({where}); its summary follows."]
    lines = [f"Rollout of time-slicing on {every} GPU node(s), {len(progress.steps)} steps: "
             f"{STATUS[plan['status']]} ({where})."]
    lines += [f"  note: {n}" for n in plan["notes"]]
    if plan["prepare"]:
        lines += wrap(f"- prepare: ConfigMap {namespace}/{configmap} and the ClusterPolicy's devicePlugin.config, once "
                      "for the cluster (prepare-timeslicing.yml; pointing it the first time restarts the device plugin "
                      "and GFD on every GPU node, one at a time)", WIDTH)
    rows = []
    for step in progress.steps:
        state = progress.state(step.name)
        rows.append((step.name, nodes_text(step, every), step.replicas, _seconds(step.soak), _gates_source(step, settings),
                     state.state if step.name in pending or state.state != "pending" else "done"))
    lines += render_table(("step", "nodes", "replicas", "soak", "gates", "state"), rows).splitlines()
    checked = "share check, " if settings.share_check else ""
    lines += wrap(f"Each step: enable on its nodes (the enable runbook), {checked}soak, then the release gates "
                  f"({settings.thresholds_file}): continue to the next step; on hold evaluate again up to "
                  f"{settings.hold_retries} time(s), {_seconds(settings.hold_interval)} apart, then stop; on rollback "
                  f"roll back {'the step' if settings.on_rollback == 'step' else 'everything this rollout changed'} "
                  "and stop.", WIDTH)
    return lines


def _evaluations(state: pr.StepState) -> str:
    return ", ".join(e["verdict"] for e in state.evaluations) or "-"


def summary_lines(record: dict[str, Any] | None, namespace: str, check_mode: bool,
                  plan: dict[str, Any] | None = None) -> list[str]:
    """The rollout as its record says (in check mode, as the plan says: nothing ran)."""
    if check_mode or record is None:
        progress = pr.Progress.of(plan["progress"]) if plan and plan.get("progress") else None
        steps = ", ".join(s.name for s in progress.pending) if progress else ""
        return [f"Preview only (--check): the record and the prepare were dry runs; the steps ({steps}) run for real "
                "only, each on what the one before changed."]
    rec = pr.RolloutRecord.of(record)
    progress = rec.progress
    every = len({n for s in progress.steps for n in s.nodes})
    done = sum(1 for s in progress.steps if progress.state(s.name).state == "continued")
    head = {"complete": "complete", "held": "stopped on hold", "rolled-back": "rolled back",
            "rolling-back": "rolling back", "in-progress": "in progress"}[progress.outcome]
    lines = [f"Rollout {head}: {done} of {len(progress.steps)} steps continued (started {rec.started})."]
    rows = [(s.name, nodes_text(s, every), s.replicas, progress.state(s.name).share_check or "-",
             _evaluations(progress.state(s.name)), progress.state(s.name).decision or progress.state(s.name).state)
            for s in progress.steps]
    lines += render_table(("step", "nodes", "replicas", "share check", "gates", "decision"), rows, WIDTH).splitlines()
    evaluated = [s for s in progress.steps if progress.state(s.name).evaluations]
    if evaluated and len(progress.steps) <= MATRIX_STEPS:
        names = [g["name"] for g in progress.state(evaluated[0].name).evaluations[-1]["gates"]]
        matrix = [(name, *(_status(progress.state(s.name), name) for s in progress.steps)) for name in names]
        lines += render_table(("gate (last evaluation)", *(s.name for s in progress.steps)), matrix).splitlines()
    if progress.undo:
        lines += wrap(f"Rolled back{' ' if progress.undo.get('state') == 'done' else ' (not yet) '}"
                      f"{', '.join(progress.undo['nodes'])}.", WIDTH)
    lines.append(f"Change record: kubectl -n {namespace} get cm {pr.RECORD} -o jsonpath='{{.data.change-record\\.md}}'")
    lines += _next(progress)
    return lines


def _status(state: pr.StepState, gate: str) -> str:
    if not state.evaluations:
        return "-"
    return next((g["status"] for g in state.evaluations[-1]["gates"] if g["name"] == gate), "-")


def _next(progress: pr.Progress) -> list[str]:
    if progress.outcome == "held":
        return ["Next: re-run the same command; it evaluates the held step again and goes on from there."]
    if progress.outcome == "rolled-back":
        return ["Next: find out why, then start a new rollout with -e rollout_start_over=true."]
    if progress.outcome in ("in-progress", "rolling-back"):
        return ["Next: re-run the same command; it goes on where this run stopped."]
    return []


def change_record(progress: pr.Progress, annotations: dict[str, str]) -> str:
    """The rollout's change record (Markdown): what ran, each step's gate tables, each decision."""
    lines = [f"# Change record: rollout of GPU time-slicing ({progress.outcome})", "",
             f"- Started: {annotations.get('gpushare.io/started-at', '')} by {annotations.get('gpushare.io/operator', '')}",
             f"- Command: `{annotations.get('gpushare.io/command', '')}`",
             f"- Steps: {', '.join(s.name for s in progress.steps)}"]
    if progress.reasons:
        lines.append(f"- Stopped: {progress.reasons}")
    if progress.undo:
        lines.append(f"- Rolled back ({progress.undo.get('scope')}, {progress.undo.get('state')}): "
                     f"{', '.join(progress.undo['nodes'])}")
    for step in progress.steps:
        state = progress.state(step.name)
        lines += ["", f"## {step.name}: {state.state}", "",
                  f"- Nodes ({len(step.nodes)}): {', '.join(step.nodes)}", f"- Replicas per GPU: {step.replicas}",
                  f"- Started: {state.started or '-'}; enabled: {state.enabled or '-'}; soak: {step.soak} s; "
                  f"share check: {state.share_check or '-'}"]
        if state.failure:
            lines.append(f"- Failed: {state.failure}")
        for number, evaluation in enumerate(state.evaluations, 1):
            source = ", ".join(f"{k} {v}" for k, v in (evaluation.get("source") or {}).items())
            lines += ["", f"Evaluation {number} at {evaluation['at']}: **{evaluation['verdict']}** ({source})", "",
                      "| gate | status | reason | threshold |", "|---|---|---|---|"]
            lines += [f"| {g['name']} | {g['status']} | {g['reason']} | {g.get('threshold') or ''} |"
                      for g in evaluation["gates"]]
            if evaluation.get("error"):
                lines.append(f"\nError: {evaluation['error']}")
        if state.decision:
            lines += ["", f"Decision: {state.decision}."]
    return "\n".join(lines) + "\n"
