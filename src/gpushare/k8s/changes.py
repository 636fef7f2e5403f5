"""An ordered list of changes, applied one by one with the guarantees a runbook step needs:
nothing is sent when a change would change nothing (so `changed` tells the truth and a re-run
writes nothing), check mode asks the API server for a dry run (validated, never stored), each
change shows its before/after for `--diff`, and a failure says which changes were already made.
A write whose answer was lost (the API server restarted under it) is judged by reading the object
again: carried out, never arrived (sent again), or someone else changed it meanwhile (a failure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import yaml

from gpushare.k8s.patch import PatchConflict, json_patch, merge_patch
from gpushare.k8s.session import ApiError, Session, Unreachable
from gpushare.k8s.short_diff import bookkeeping_line, object_lines

ACTIONS = ("create", "merge", "json", "replace", "delete", "taint", "untaint")
VOLATILE_METADATA = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink")
# A copy of the object's own description (`kubectl apply`'s): one long line that repeats the diff.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PATCH_NOT_APPLICABLE = "the server rejected our request due to an error in our request"
TAINT_ATTEMPTS = 5  # a node's taints read again after its controllers changed them between read and write


@dataclass(frozen=True)
class Change:
    action: str
    kind: str
    name: str
    namespace: str | None = None
    body: Any = None  # create/replace: the object; merge: a merge patch; json: JSON-patch operations;
    # taint/untaint (nodes): the taint to add unless one with its key and effect exists / to remove
    exists: str = "fail"  # create: "fail" (never overwrite) or "keep" (leave an existing object as it is)
    preconditions: dict[str, str] = field(default_factory=dict)  # delete/replace: uid and/or resourceVersion
    why: str = ""  # one line for the operator

    def __post_init__(self) -> None:
        if not (self.kind and self.name):
            raise ValueError(f"a change needs a kind and a name: {self!r}")
        if self.action not in ACTIONS:
            raise ValueError(f"change action must be one of {', '.join(ACTIONS)}, got {self.action!r}")
        if self.exists not in ("fail", "keep"):
            raise ValueError(f"exists must be fail or keep, got {self.exists!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Change:
        if not isinstance(data, dict):
            raise ValueError(f"a change is a mapping, got {data!r}")
        unknown = set(data) - set(_FIELDS)
        if unknown:
            raise ValueError(f"unknown keys in change: {', '.join(sorted(unknown))}")
        missing = [k for k in ("action", "kind", "name") if not data.get(k)]
        if missing:
            raise ValueError(f"a change needs {', '.join(missing)}: {data!r}")
        return cls(**{k: v for k, v in data.items() if v is not None or k == "body"})

    def as_dict(self) -> dict[str, Any]:
        """The change as the plan hands it to Ansible (gpushare_apply reads it back with from_dict):
        its fields, those left at their defaults omitted."""
        return {name: getattr(self, name) for name, default in _FIELDS.items() if getattr(self, name) != default}

    @property
    def title(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


_FIELDS = {"action": "", "kind": "", "name": "", "namespace": None, "body": None, "exists": "fail", "preconditions": {},
           "why": ""}


@dataclass
class Outcome:
    change: Change
    changed: bool
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    def summary(self) -> dict[str, Any]:
        return {"object": self.change.title, "action": self.change.action, "changed": self.changed,
                "why": self.change.why}


class ChangeFailed(Exception):
    def __init__(self, change: Change, done: list[Outcome], reason: str) -> None:
        written = [o.change.title for o in done if o.changed]
        super().__init__(f"{change.action} of {change.title} failed: {reason}")
        self.change, self.done, self.reason, self.written = change, done, reason, written


def apply_changes(session: Session, changes: list[Change], check_mode: bool = False) -> list[Outcome]:
    done: list[Outcome] = []
    for change in changes:
        try:
            done.append(_apply(session, change, check_mode))
        except (ApiError, PatchConflict, KeyError, ValueError) as err:
            raise ChangeFailed(change, done, _explain(err)) from None
    return done


def _explain(err: Exception) -> str:
    if isinstance(err, PatchConflict):
        return f"someone changed it meanwhile: {err}"
    if isinstance(err, KeyError):
        return f"{err.args[0]} does not exist in the object"
    if _not_applicable(err):
        return "someone changed it meanwhile: the JSON patch built from what was read no longer applies (a value it " \
               "tests, or a list entry it removes, has changed)"
    return str(err)


def _not_applicable(err: Exception) -> bool:
    """The API server could not apply a JSON patch to the object as stored (a `test` failed, or a path
    is gone): 422 with this generic message and no details (apiserver endpoints/handlers/patch.go
    applyJSPatch, as Kubernetes 1.35 answers)."""
    return isinstance(err, ApiError) and err.status == 422 and err.message == PATCH_NOT_APPLICABLE


def _apply(session: Session, change: Change, check_mode: bool) -> Outcome:
    if change.action not in ("taint", "untaint"):
        return _apply_once(session, change, check_mode)
    for _ in range(TAINT_ATTEMPTS - 1):  # controllers change taints too: read the node again, redo the ops
        try:
            return _apply_once(session, change, check_mode)
        except ApiError as err:
            if not _not_applicable(err):
                raise
    return _apply_once(session, change, check_mode)


def _apply_once(session: Session, change: Change, check_mode: bool) -> Outcome:
    before = session.get(change.kind, change.name, change.namespace)

    def send(request: Callable[[], Any], wanted: dict[str, Any] | None = None) -> Any:
        return request() if check_mode else _answered(session, change, before, request, _landed(change, wanted))

    if change.action == "create":
        if before is not None:
            if change.exists == "keep":
                return Outcome(change, False, before, before)
            raise ValueError("it already exists and is never overwritten")
        return Outcome(change, True, None, send(lambda: session.create(change.body, dry_run=check_mode)))
    if change.action == "delete":
        if before is None or _replaced(before, change.preconditions):
            return Outcome(change, False, before, None)
        _check_version(before, change.preconditions)
        send(lambda: session.delete(change.kind, change.name, change.namespace, change.preconditions or None,
                                    dry_run=check_mode))
        return Outcome(change, True, before, None)
    if before is None:
        raise ValueError("it does not exist")
    if change.action == "replace":
        _check_version(before, change.preconditions)
        return Outcome(change, True, before, send(lambda: session.replace(change.body, dry_run=check_mode)))
    patch, patch_type = change.body, change.action
    if change.action in ("taint", "untaint"):
        patch, patch_type = _taint_ops(before, change.body, add=change.action == "taint"), "json"
    wanted = merge_patch(before, patch) if patch_type == "merge" else json_patch(before, patch)
    if _stored(wanted) == _stored(before):
        return Outcome(change, False, before, before)
    after = send(lambda: session.patch(change.kind, change.name, patch, change.namespace, patch_type=patch_type,
                                       dry_run=check_mode), wanted)
    return Outcome(change, True, before, after)


def _landed(change: Change, wanted: dict[str, Any] | None) -> Callable[[dict[str, Any] | None], bool]:
    """How the object, read again, shows that `change` was carried out (`wanted`: a patch's result)."""
    if change.action == "create":
        return lambda now: now is not None and _holds(now, change.body)
    if change.action == "delete":
        return lambda now: now is None or _replaced(now, change.preconditions) or _terminating(now)
    if change.action == "replace":
        return lambda now: now is not None and _holds(now, _unversioned(change.body))
    if change.action in ("taint", "untaint"):  # a node's other fields change all the time
        return lambda now: now is not None and not _taint_ops(now, change.body, add=change.action == "taint")
    return lambda now: now is not None and comparable(_stored(now)) == comparable(_stored(wanted or {}))


def _answered(session: Session, change: Change, before: dict[str, Any] | None, request: Callable[[], Any],
              landed: Callable[[dict[str, Any] | None], bool]) -> Any:
    """`request`'s answer. When the answer is lost after the request went out, the object read again
    (the read rides out the restart) tells what happened: the change is there (done), the object is
    as it was read (the request never arrived: sent once more), or it is neither (a failure naming it)."""
    try:
        return request()
    except Unreachable as err:
        if not err.sent:
            raise
        lost = err
    now = session.get(change.kind, change.name, change.namespace)
    if landed(now):
        return now
    if comparable(now) == comparable(before):
        return request()
    raise ApiError(0, "Unanswered", f"{lost.message}, and {change.title} has changed since it was read, but not as "
                                    "this change would change it: read it again and re-run")


def _holds(obj: dict[str, Any], part: Any) -> bool:
    """Whether every field of `part` has its value in `obj` (the server adds defaults and metadata)."""
    if isinstance(part, dict):
        return isinstance(obj, dict) and all(_holds(obj.get(key), value) for key, value in part.items())
    if isinstance(part, list):
        return isinstance(obj, list) and len(obj) == len(part) and all(map(_holds, obj, part))
    return obj == part


def _unversioned(body: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in (body.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**body, "metadata": metadata}


def _terminating(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server stores it: empty label and annotation maps are not kept."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if not (k in ("labels", "annotations") and v == {})}
    return {**obj, "metadata": metadata}


def _taint_ops(node: dict[str, Any], taint: dict[str, Any], add: bool) -> list[dict[str, Any]]:
    """JSON-patch operations that add the taint (unless one with its key and effect exists) or remove
    exactly it, each guarded by a test of what it relies on (taints are changed by controllers too)."""
    taints = (node.get("spec") or {}).get("taints") or []
    index = next((i for i, t in enumerate(taints) if t.get("key") == taint["key"] and t.get("effect") == taint["effect"]),
                 None)
    if add:
        if index is not None:
            return []
        if not taints:  # the test fails if a controller added a taint since the read (null: still absent)
            return [{"op": "test", "path": "/spec/taints", "value": (node.get("spec") or {}).get("taints")},
                    {"op": "add", "path": "/spec/taints", "value": [taint]}]
        return [{"op": "test", "path": "/spec/taints", "value": taints}, {"op": "add", "path": "/spec/taints/-",
                                                                           "value": taint}]
    if index is None or (taints[index].get("value") or "") != (taint.get("value") or ""):
        return []
    return [{"op": "test", "path": f"/spec/taints/{index}", "value": taints[index]},
            {"op": "remove", "path": f"/spec/taints/{index}"}]


def _replaced(current: dict[str, Any], preconditions: dict[str, str]) -> bool:
    uid = preconditions.get("uid")
    return bool(uid) and current["metadata"].get("uid") != uid


def _check_version(current: dict[str, Any], preconditions: dict[str, str]) -> None:
    version = preconditions.get("resourceVersion")
    if version and current["metadata"].get("resourceVersion") != version:
        raise ValueError(f"it changed since it was read (resourceVersion {version} is now "
                         f"{current['metadata'].get('resourceVersion')})")


def comparable(obj: dict[str, Any] | None) -> dict[str, Any]:
    """An object without the fields the API server maintains: what a diff should show."""
    if not obj:
        return {}
    shown = {k: v for k, v in obj.items() if k != "status"}
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in VOLATILE_METADATA}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED}
    shown["metadata"] = {**metadata, "annotations": annotations} if annotations else {
        k: v for k, v in metadata.items() if k != "annotations"}
    return shown


def diffs(outcomes: list[Outcome], bookkeeping: Callable[[dict[str, Any]], str] = lambda _: "") -> list[dict[str, Any]]:
    """Ansible's --diff entries, one per change that changed something, each with its short form
    (`summary`, gpushare.k8s.short_diff): one line for an object `bookkeeping` names (what it is),
    else its changed fields, under the object's header unless the entry before is of that object too."""
    entries: list[dict[str, Any]] = []
    for o in outcomes:
        if not o.changed:
            continue
        before, after = comparable(o.before), comparable(o.after)
        what = bookkeeping(after or before)
        summary = [bookkeeping_line(o.change.title, what, before, after)] if what else object_lines(
            o.change.title, before, after)
        if not what and entries and entries[-1]["after_header"] == o.change.title:
            summary = summary[1:]
        entries.append({
            "before_header": o.change.title, "after_header": o.change.title,
            "before": yaml.safe_dump(before, sort_keys=True) if o.before else "",
            "after": yaml.safe_dump(after, sort_keys=True) if o.after else "",
            "summary": summary,
        })
    return entries
