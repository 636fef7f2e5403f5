"""The rollout's progress, kept in the cluster: one run record (gpushare.runbook.records) of the
`rollout-timeslicing` runbook, RolloutRecord, that also says which nodes are at which step and each
step's verdict, so that a re-run after a stop or a crash continues where it was.

The record is also the rollout's exclusivity: its name is fixed, so creating it is atomic (a second
rollout gets a conflict), and every write first tests that this run still holds it (a JSON-patch
`test` of the holder annotation), so two runs of the same rollout never both write. A finished
record stays until a new rollout archives it (a copy under its start stamp; records are kept)."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from gpushare.k8s.changes import Change
from gpushare.bounded import load_json
from gpushare.clock import parse_time, stamp
from gpushare.k8s.patch import escape
from gpushare.rollout.steps import Step
from gpushare.runbook import lock
from gpushare.runbook.records import FINISHED, STATE, Intent, Record, new_record

RUNBOOK = "rollout-timeslicing"
RECORD = "gpushare-rollout-timeslicing"
HOLDER = "gpushare.io/rollout-holder"
VALID_UNTIL = "gpushare.io/rollout-valid-until"
ARCHIVED = "gpushare.io/archived-at"
DATA, CHANGE_RECORD = "rollout.json", "change-record.md"
# A step's states, in order; `failed` is retried from the start, `held` is re-evaluated.
STEP_STATES = ("pending", "started", "enabled", "held", "continued", "failed", "rollback", "rolled-back")
OUTCOMES = ("in-progress", "held", "complete", "rolling-back", "rolled-back")
FINAL = ("complete", "rolled-back")


@dataclass
class StepState:
    state: str = "pending"
    started: str = ""
    enabled: str = ""
    share_check: str = ""
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    decision: str = ""
    failure: str = ""

    @property
    def verdict(self) -> str:
        return self.evaluations[-1]["verdict"] if self.evaluations else ""

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "started": self.started, "enabled": self.enabled, "share_check": self.share_check,
                "evaluations": self.evaluations, "decision": self.decision, "failure": self.failure}


@dataclass
class Progress:
    fingerprint: str
    steps: list[Step]
    prepared: bool = False
    states: dict[str, StepState] = field(default_factory=dict)
    undo: dict[str, Any] = field(default_factory=dict)  # {step, scope, hosts, nodes, state: pending|done}
    outcome: str = "in-progress"
    reasons: str = ""

    def state(self, step: str) -> StepState:
        return self.states.setdefault(step, StepState())

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)

    def as_dict(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "steps": [s.as_dict() for s in self.steps], "prepared": self.prepared,
                "states": {k: v.as_dict() for k, v in self.states.items()}, "undo": self.undo,
                "outcome": self.outcome, "reasons": self.reasons}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Progress:
        return cls(str(data["fingerprint"]), [Step.of(s) for s in data["steps"]], bool(data.get("prepared")),
                   {k: StepState(**v) for k, v in (data.get("states") or {}).items()}, dict(data.get("undo") or {}),
                   str(data.get("outcome") or "in-progress"), str(data.get("reasons") or ""))

    @property
    def pending(self) -> list[Step]:
        """The steps still to run, in order: those not continued (none once the rollout stopped for good)."""
        if self.outcome in ("rolling-back", "rolled-back", "complete"):
            return []
        return [s for s in self.steps if self.state(s.name).state != "continued"]


@dataclass(frozen=True)
class RolloutRecord(Record):
    """The rollout's run record as read: a run record whose data also holds the progress, and whose
    holder annotation names the one run that may write it."""

    raw: dict[str, Any] = field(default_factory=dict)
    progress: Progress | None = None  # None: unreadable (edited by hand)

    @classmethod
    def of(cls, configmap: dict[str, Any]) -> RolloutRecord:
        try:
            progress = Progress.of(load_json((configmap.get("data") or {})[DATA]))
        except (KeyError, ValueError, TypeError, AttributeError):  # Unreadable is a ValueError
            progress = None
        return dataclasses.replace(super().of(configmap), raw=configmap, progress=progress)

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.raw["metadata"].get("annotations") or {})

    @property
    def holder(self) -> str:
        return self.annotations.get(HOLDER, "")


# ---- the holder ------------------------------------------------------------------------------------
def holder_identity(now: dt.datetime) -> str:
    """`rollout-timeslicing@<host>/<pid of ansible-playbook>/<stamp>-<hex>`: the filters run in a
    worker forked from ansible-playbook, whose pid tells a crashed run from a live one on this host."""
    return lock.holder_identity(RUNBOOK, now, os.getppid())


def holder_live(record: RolloutRecord, now: dt.datetime, host: str = "",
                alive: Callable[[int], bool] = lock.pid_alive) -> bool:
    """Another run holds the record: it is in progress, its validity has not run out, and its
    process is not known dead (same host, pid gone: a killed run)."""
    if record.state in FINAL or not record.holder:
        return False
    until = parse_time(record.annotations.get(VALID_UNTIL))
    if until is None or now >= until:
        return False
    return lock.holder_process_alive(record.holder, host, alive)


# ---- writes ----------------------------------------------------------------------------------------
def _annotation(key: str) -> str:
    return f"/metadata/annotations/{escape(key)}"


def new_record_body(namespace: str, progress: Progress, holder: str, valid_until: dt.datetime, now: dt.datetime,
                    invocation: dict[str, str], change_record: str) -> dict[str, Any]:
    nodes = sorted({n for s in progress.steps for n in s.nodes})
    body = new_record(RECORD, namespace, Intent(RUNBOOK, nodes), None, now, invocation)
    body["metadata"]["annotations"].update({HOLDER: holder, VALID_UNTIL: stamp(valid_until)})
    body["data"].update({DATA: json.dumps(progress.as_dict(), sort_keys=True), CHANGE_RECORD: change_record})
    return body


def take_changes(namespace: str, record: RolloutRecord | None, progress: Progress, holder: str, valid_until: dt.datetime,
                 now: dt.datetime, invocation: dict[str, str], change_record: str, start_over: bool) -> list[Change]:
    """The changes that make this run the rollout's holder: create the record; or, for a new
    rollout over a finished one, archive that one first; or take over the one it resumes."""
    create = Change("create", "ConfigMap", RECORD, namespace=namespace,
                    body=new_record_body(namespace, progress, holder, valid_until, now, invocation, change_record),
                    why="record the rollout (a second rollout cannot create it too)")
    if record is None:
        return [create]
    if start_over:
        metadata = record.raw["metadata"]
        archive = copy.deepcopy({k: v for k, v in record.raw.items() if k in ("apiVersion", "kind", "data")})
        archive["metadata"] = {"name": archive_name(record), "namespace": namespace,
                               "labels": dict(metadata.get("labels") or {}),
                               "annotations": {**record.annotations, ARCHIVED: stamp(now)}}
        archive.setdefault("apiVersion", "v1")
        archive.setdefault("kind", "ConfigMap")
        return [Change("create", "ConfigMap", archive["metadata"]["name"], namespace=namespace, body=archive, exists="keep",
                       why="keep the earlier rollout's record"),
                Change("delete", "ConfigMap", RECORD, namespace=namespace,
                       preconditions={"uid": metadata["uid"], "resourceVersion": metadata["resourceVersion"]},
                       why="make room for the new rollout's record"), create]
    ops = [{"op": "test", "path": _annotation(HOLDER), "value": record.holder},
           {"op": "add", "path": _annotation(HOLDER), "value": holder},
           {"op": "add", "path": _annotation(VALID_UNTIL), "value": stamp(valid_until)}]
    return [Change("json", "ConfigMap", RECORD, namespace=namespace, body=ops, why="resume the rollout (this run holds its record now)")]


def archive_name(record: RolloutRecord) -> str:
    """Its start stamp and uid: one name per record, so archiving it twice (a re-run) writes it once."""
    moment = parse_time(record.started)
    when = moment.strftime("%Y%m%dt%H%M%Sz") if moment else "unstarted"
    return f"{RECORD}-{when}-{record.raw['metadata'].get('uid', '')[:5]}"


def write_changes(namespace: str, progress: Progress, holder: str, valid_until: dt.datetime, change_record: str,
                  now: dt.datetime, why: str) -> list[Change]:
    """One write of the progress, only while this run still holds the record."""
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": _annotation(HOLDER), "value": holder},
        {"op": "add", "path": _annotation(VALID_UNTIL), "value": stamp(valid_until)},
        {"op": "add", "path": f"/data/{escape(DATA)}", "value": json.dumps(progress.as_dict(), sort_keys=True)},
        {"op": "add", "path": f"/data/{escape(CHANGE_RECORD)}", "value": change_record},
    ]
    if progress.outcome in FINAL:
        ops += [{"op": "add", "path": _annotation(STATE), "value": progress.outcome},
                {"op": "add", "path": _annotation(FINISHED), "value": stamp(now)}]
    return [Change("json", "ConfigMap", RECORD, namespace=namespace, body=ops, why=why)]


# ---- events ----------------------------------------------------------------------------------------
def _reasons(evaluation: dict[str, Any], status: str) -> str:
    return " ".join(f"{g['name']}: {g['reason']}." for g in evaluation["gates"] if g["status"] == status) or (
        evaluation.get("error") or "")


def evaluation_of(result: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """What the record keeps of a `release_gates_result`."""
    gates = [{k: g.get(k) for k in ("name", "status", "reason", "threshold", "observed")} for g in result.get("gates") or []]
    verdict = str(result.get("verdict")) if result.get("evaluated") else "not evaluated"
    return {"at": stamp(now), "verdict": verdict, "gates": gates, "source": result.get("source") or {},
            "error": result.get("error")}


def apply_event(progress: Progress, event: str, step: str, details: dict[str, Any], now: dt.datetime) -> Progress:
    """The progress after `event` of `step`: prepared, started, enabled, failed, evaluated or undone."""
    new = Progress.of(copy.deepcopy(progress.as_dict()))
    at = stamp(now)
    if event == "prepared":
        new.prepared = True
        return new
    if event == "undone":
        for name in new.undo.get("steps") or []:
            new.state(name).state = "rolled-back"
        new.undo["state"] = "done"
        new.outcome = "rolled-back"
        return new
    state = new.state(step)
    if event == "started":
        state.state, state.failure = ("started", "") if state.state in ("pending", "failed") else (state.state, "")
        state.started = state.started or at
    elif event == "enabled":
        state.state, state.enabled, state.share_check = "enabled", at, str(details.get("share_check") or "")
    elif event == "failed":
        state.state, state.failure = "failed", str(details.get("message") or "")
    elif event == "evaluated":
        _evaluated(new, step, details, now)
    else:
        raise ValueError(f"unknown rollout event {event!r}")
    return new


def _evaluated(progress: Progress, step: str, details: dict[str, Any], now: dt.datetime) -> None:
    state = progress.state(step)
    evaluation = evaluation_of(details["result"], now)
    state.evaluations.append(evaluation)
    verdict = evaluation["verdict"]
    names = [s.name for s in progress.steps]
    if verdict == "continue":
        state.state = "continued"
        following = names[names.index(step) + 1:]
        state.decision = f"continue to {following[0]}" if following else "rollout complete"
        progress.outcome, progress.reasons = ("in-progress" if following else "complete"), ""
        return
    if verdict == "rollback":
        scope = str(details.get("on_rollback") or "step")
        undo = [step] if scope == "step" else [n for n in names if progress.state(n).state != "pending" or n == step]
        hosts = list(dict.fromkeys(h for n in undo for h in progress.step(n).hosts))
        nodes = list(dict.fromkeys(x for n in undo for x in progress.step(n).nodes))
        state.state = "rollback"
        state.decision = f"roll back {'this step' if scope == 'step' else 'everything this rollout changed'}, stop"
        progress.undo = {"step": step, "scope": scope, "steps": undo, "hosts": hosts, "nodes": nodes, "state": "pending"}
        progress.outcome, progress.reasons = "rolling-back", _reasons(evaluation, "rollback")
        return
    state.state = "held"
    if details.get("last"):
        state.decision = f"stop: still hold after {len(state.evaluations)} evaluation(s)"
        progress.outcome, progress.reasons = "held", _reasons(evaluation, "hold")
    else:
        state.decision = "hold: evaluate again"
        progress.outcome = "in-progress"
