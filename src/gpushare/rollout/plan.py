"""The rollout's plan, from one read of the cluster at the start of a run: every refusal (before
any write), whether this run starts, resumes or has nothing to do, the steps still to run and the
hosts of each play, the change that makes this run the rollout's holder, and what a step needs
(its gates' inputs, how long to wait)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Callable

from gpushare.k8s.changes import Change
from gpushare.clock import parse_time, stamp
from gpushare.model.node import Node
from gpushare.rollout import progress as pr
from gpushare.rollout import report
from gpushare.rollout.settings import RolloutSettings
from gpushare.runbook.plan import Plan
from gpushare.runbook.inputs import NOTHING
from gpushare.rollout.steps import RAISE, WIDEN, Step, fingerprint, metrics_problems, schedule


@dataclass
class RolloutPlan(Plan):
    status: str = ""  # new, start-over, resume, finished
    progress: pr.Progress | None = None
    prepare: bool = False
    holder: str = ""
    take: list[Change] = field(default_factory=list)
    hosts: dict[str, list[Any]] = field(default_factory=lambda: {"widen": [], "serial": [], "raise": [], "undo": []})
    raise_steps: list[str] = field(default_factory=list)
    batch_steps: dict[str, str] = field(default_factory=dict)  # first host of a widen batch -> its step

    @property
    def writes(self) -> bool:
        return bool(self.take)


def _node_problems(nodes: dict[str, Node], steps: list[Step]) -> list[str]:
    problems = []
    for name in dict.fromkeys(n for s in steps for n in s.nodes):
        node = nodes.get(name)
        if node is None:
            problems.append(f"{name} is not a GPU node of this cluster (no node of that name with "
                            "nvidia.com/gpu.present=true): check -l, the inventory, or the host's gpushare_node_name")
        elif node.mig_enabled:
            problems.append(f"{name} has MIG enabled (nvidia.com/mig.config={node.mig_config}): time-slicing shares "
                            "whole GPUs only; leave it out of the rollout (-l) or disable MIG first")
    return [f"{p}. {NOTHING}" for p in problems]


def _describe(record: pr.RolloutRecord) -> str:
    progress = record.progress
    steps = ", ".join(f"{s.name} ({', '.join(s.nodes)}, {s.replicas} replicas)" for s in progress.steps) if progress else "?"
    command = record.annotations.get("gpushare.io/command") or "?"
    return f"started {record.started} by `{command}`; steps: {steps}"


def plan(read: dict[str, Any], settings: RolloutSettings, hosts: list[tuple[str, str]], now: dt.datetime,
         invocation: dict[str, str], holder: str, check_mode: bool,
         live: Callable[[pr.RolloutRecord, dt.datetime], bool] = pr.holder_live) -> RolloutPlan:
    """`read`: {record: the rollout ConfigMap or None, nodes: the GPU nodes, clusterpolicy}."""
    result = RolloutPlan(holder=holder)
    result.refusals = settings.problems()
    if result.refusals:
        return result
    steps, result.refusals = schedule(hosts, settings)
    if result.refusals:
        return result
    result.refusals, result.notes = metrics_problems(steps, settings)
    nodes = {n["metadata"]["name"]: Node(n) for n in read.get("nodes") or []}
    result.refusals += _node_problems(nodes, steps)
    if result.refusals:
        return result
    raw = read.get("record")
    record = pr.RolloutRecord.of(raw) if raw else None
    refusal = _record_refusal(record, settings, live, now)
    if refusal:
        result.refusals.append(refusal)
        return result
    current = _current(result, record, pr.Progress(fingerprint(steps), steps), settings)
    if current is None:
        return result
    result.progress = current
    if result.status == "finished":
        return result
    valid = now + dt.timedelta(seconds=settings.lock_duration)
    started = {"gpushare.io/started-at": stamp(now), "gpushare.io/command": invocation.get("command", ""),
               "gpushare.io/operator": invocation.get("operator", "")}
    result.take = pr.take_changes(settings.records_namespace, record, current, holder, valid, now, invocation,
                                  report.change_record(current, started), result.status == "start-over")
    result.prepare = not current.prepared
    if not check_mode:
        _pending_hosts(result, current)
    return result


def _record_refusal(record: pr.RolloutRecord | None, settings: RolloutSettings,
                    live: Callable[[pr.RolloutRecord, dt.datetime], bool], now: dt.datetime) -> str:
    """A rollout record this runbook cannot read, or one another run holds."""
    if record is not None and record.progress is None:
        return (f"ConfigMap {settings.records_namespace}/{pr.RECORD}, the rollout record, cannot be read (its "
                f"{pr.DATA} is not what this runbook writes). Look at it, then start over with "
                f"-e rollout_start_over=true (it is kept as a copy). {NOTHING}")
    if record is not None and live(record, now):
        return (f"Another run holds the rollout: {record.holder}, valid until "
                f"{record.annotations.get(pr.VALID_UNTIL)} ({_describe(record)}). Wait for it to finish; "
                f"a killed run's hold ends at that time. {NOTHING}")
    return ""


def _current(result: RolloutPlan, record: pr.RolloutRecord | None, wanted: pr.Progress,
             settings: RolloutSettings) -> pr.Progress | None:
    """The rollout this run goes on with, its status in `result`: a new one, the recorded one resumed
    (or finished), or a new one over a finished or abandoned record; None (refused) over another plan in progress."""
    if record is None:
        result.status = "new"
        return wanted
    if settings.start_over:
        result.status = "start-over"
        result.notes.append(f"The earlier rollout ({record.state}; {_describe(record)}) is kept as ConfigMap "
                            f"{pr.archive_name(record)}; its nodes stay as they are.")
        return wanted
    if record.progress is not None and record.progress.fingerprint == wanted.fingerprint:
        result.status = "finished" if record.progress.outcome in pr.FINAL else "resume"
        return record.progress
    if record.state in pr.FINAL:
        result.status = "start-over"
        result.notes.append(f"A new rollout: the earlier one ({record.state}) is kept as ConfigMap "
                            f"{pr.archive_name(record)}.")
        return wanted
    result.refusals.append(
        f"A rollout with another plan is in progress ({_describe(record)}; {record.progress.outcome}). "
        "Finish it first: re-run it with its own inventory limit and rollout_* inputs; or abandon it (its "
        f"nodes stay as they are) with -e rollout_start_over=true. {NOTHING}")
    return None


def _pending_hosts(result: RolloutPlan, current: pr.Progress) -> None:
    """The hosts of the steps still to run: the widening batches, the raise, an undo pending."""
    pending = current.pending
    widen = [s for s in pending if s.kind == WIDEN]
    result.hosts["widen"] = [h for s in widen for h in s.hosts]
    result.hosts["serial"] = [len(s.hosts) for s in widen]
    result.batch_steps = {s.hosts[0]: s.name for s in widen}
    result.raise_steps = [s.name for s in pending if s.kind == RAISE]
    if result.raise_steps:
        result.hosts["raise"] = list(current.step(result.raise_steps[0]).hosts)
    if current.outcome == "rolling-back" and current.undo.get("state") == "pending":
        result.hosts["undo"] = list(current.undo["hosts"])


# ---- what a step needs ------------------------------------------------------------------------------
def wait(progress: pr.Progress, step: str, what: str, settings: RolloutSettings, now: dt.datetime) -> dict[str, Any]:
    """The bounded wait before an evaluation: the soak (from the step's enable) or, on hold, the
    hold interval (from the last evaluation): {until, timeout, interval} for gpushare_wait."""
    state = progress.state(step)
    if what == "soak":
        since, seconds = parse_time(state.enabled) or now, progress.step(step).soak
    else:
        since, seconds = parse_time(state.evaluations[-1]["at"]) if state.evaluations else now, settings.hold_interval
    until = since + dt.timedelta(seconds=seconds)
    left = max(0, int((until - now).total_seconds()))
    return {"until": until.strftime("%Y-%m-%dT%H:%M:%SZ"), "timeout": left + 10, "interval": min(60, max(1, left // 20))}


def gate_inputs(progress: pr.Progress, step: str, attempt: int, settings: RolloutSettings,
                now: dt.datetime) -> dict[str, Any]:
    """The release gates' inputs for this evaluation: the step's metrics file, or Prometheus over the
    window since the step's nodes were enabled, on those nodes."""
    state = progress.state(step)
    evaluations = len(state.evaluations)
    enabled = parse_time(state.enabled) or now
    window = max(60, int((now - enabled).total_seconds()))
    return {"metrics_file": settings.metrics_file(step, evaluations) or None,
            "prometheus_url": settings.prometheus_url or None,
            "window": f"{window}s", "trial_end": now.strftime("%Y-%m-%dT%H:%M:%SZ") if settings.prometheus_url else None,
            "nodes": list(progress.step(step).nodes), "last": attempt >= settings.hold_retries}
