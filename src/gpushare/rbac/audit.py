"""Checking deploy/rbac against what the runbooks really did: the API server's audit log gives every
request of the runbook identity; each must be allowed (no denial), each by a role meant for the
runbook that sent it, and every granted verb must have been used by some request."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUNBOOKS_ANNOTATION = "gpushare.io/runbooks"  # on a role: the playbooks (file stems) it is for
# Requests whose name the authorizer does not see (RBAC resourceNames cannot restrict them).
UNNAMED_VERBS = ("create", "deletecollection")


class AuditError(ValueError):
    """An audit log or an RBAC manifest that cannot be read; the message says where and why."""


@dataclass(frozen=True)
class Request:
    verb: str
    api_group: str
    resource: str  # with its subresource: pods/eviction
    namespace: str  # "" for a cluster-scoped object
    name: str  # what the authorizer matches resourceNames against ("" when it sees none)
    code: int
    denied: bool
    runbook: str = ""  # the playbook that sent it, when known

    def describe(self) -> str:
        group = f".{self.api_group}" if self.api_group else ""
        target = (f"{self.namespace}/{self.name}" if self.namespace and self.name else self.name
                  or (f"in {self.namespace}" if self.namespace else ""))
        return f"{self.verb} {self.resource}{group} {target}".rstrip()


@dataclass(frozen=True)
class Grant:
    """One verb on one resource (one name, or any), cluster-wide or in one namespace, from one role."""

    role: str
    namespace: str | None  # None: every namespace and the cluster-scoped objects
    api_group: str
    resource: str
    verb: str
    name: str  # "" = any name
    runbooks: tuple[str, ...] = ()

    def allows(self, request: Request) -> bool:
        return ((self.namespace is None or self.namespace == request.namespace)
                and self.api_group in ("*", request.api_group) and self.resource in ("*", request.resource)
                and self.verb in ("*", request.verb) and (not self.name or self.name == request.name))

    def describe(self) -> str:
        scope = f"in {self.namespace}" if self.namespace else "cluster-wide"
        group = f".{self.api_group}" if self.api_group else ""
        return f"{self.role}: {self.verb} {self.resource}{group}{' ' + self.name if self.name else ''} ({scope})"


@dataclass
class Report:
    denied: list[Request] = field(default_factory=list)
    outside_runbook: list[Request] = field(default_factory=list)  # allowed, but only by another runbook's role
    unused: list[Grant] = field(default_factory=list)
    # (grant, runbook): granted for a runbook that was run, never used by it
    unused_by_runbook: list[tuple[Grant, str]] = field(default_factory=list)
    uses: dict[Grant, Counter] = field(default_factory=dict)  # grant -> runbook -> requests
    requests: int = 0

    @property
    def ok(self) -> bool:
        return not self.denied and not self.outside_runbook


def read_events(path: Path, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
    """The audit events between byte offsets `start` and `end` of an audit log. An offset taken
    while the API server was writing a line falls inside it: a line begun before `start` belongs
    before it, a last line not finished yet (no newline) after `end`."""
    try:
        with path.open("rb") as log:
            log.seek(max(start - 1, 0))
            data = log.read(None if end is None else max(end - start + (start > 0), 0))
    except OSError as err:
        raise AuditError(f"cannot read the audit log {path}: {err.strerror or err}") from None
    if start > 0:  # data begins with the byte before start: a newline there means start begins a line
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    events = []
    for number, line in enumerate(data[:data.rfind(b"\n") + 1].splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError("not a JSON object")
        except ValueError as err:
            raise AuditError(f"{path}: line {number} after offset {start} is not an audit event: {err}") from None
        events.append(event)
    return events


def read_requests(path: Path, user: str, start: int = 0, end: int | None = None, runbook: str = "") -> list[Request]:
    """The completed requests of `user` between byte offsets `start` and `end` of an audit log."""
    return [_request(e, runbook) for e in read_events(path, start, end)
            if e.get("stage") == "ResponseComplete" and (e.get("user") or {}).get("username") == user]


def _request(event: dict[str, Any], runbook: str) -> Request:
    ref = event.get("objectRef") or {}
    subresource = ref.get("subresource") or ""
    resource = (ref.get("resource") or "") + (f"/{subresource}" if subresource else "")
    verb = event.get("verb") or ""
    # The audit log names a created object; the authorizer saw only its collection.
    name = "" if verb in UNNAMED_VERBS and not subresource else ref.get("name") or ""
    code = int((event.get("responseStatus") or {}).get("code") or 0)
    decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
    denied = decision == "forbid" if decision else code == 403
    return Request(verb, ref.get("apiGroup") or "", resource, ref.get("namespace") or "", name, code, denied, runbook)


def read_runs(path: Path, audit_log: Path, user: str) -> list[Request]:
    """The requests of each recorded run ({"playbook", "start", "end"} per line: audit log offsets)."""
    requests = []
    for line in path.read_text().splitlines():
        if line.strip():
            run = json.loads(line)
            requests += read_requests(audit_log, user, run["start"], run["end"], Path(run["playbook"]).stem)
    return requests


def grants(objects: Iterable[dict[str, Any]], username: str) -> list[Grant]:
    """Every verb the bindings among `objects` give `username` (a User, or a ServiceAccount's user)."""
    objects = list(objects)
    roles = {(o["kind"], (o["metadata"].get("namespace") or ""), o["metadata"]["name"]): o for o in objects
             if o.get("kind") in ("Role", "ClusterRole")}
    result = []
    for binding in objects:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding") or not _binds(binding, username):
            continue
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace or "" if ref["kind"] == "Role" else "", ref["name"]))
        if role is None:
            raise AuditError(f"{binding['kind']} {binding['metadata']['name']} binds {ref['kind']} {ref['name']}, "
                             "which deploy/rbac does not define")
        label = f"{role['kind']} {role['metadata']['name']}"
        runbooks = tuple(((role["metadata"].get("annotations") or {}).get(RUNBOOKS_ANNOTATION) or "").split())
        for rule in role.get("rules") or []:
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        for name in rule.get("resourceNames") or [""]:
                            result.append(Grant(label, namespace, group, resource, verb, name, runbooks))
    return result


def _binds(binding: dict[str, Any], username: str) -> bool:
    for subject in binding.get("subjects") or []:
        if subject.get("kind") == "User" and subject.get("name") == username:
            return True
        if (subject.get("kind") == "ServiceAccount"
                and f"system:serviceaccount:{subject.get('namespace')}:{subject.get('name')}" == username):
            return True
    return False


def check(requests: Iterable[Request], granted: list[Grant]) -> Report:
    requests = list(requests)
    report = Report(uses={g: Counter() for g in granted})
    for request in requests:
        report.requests += 1
        if request.denied:
            report.denied.append(request)
            continue
        allowing = [g for g in granted if g.allows(request)]
        for grant in allowing:
            report.uses[grant][request.runbook or "?"] += 1
        if request.runbook and allowing and not any(request.runbook in g.runbooks for g in allowing):
            report.outside_runbook.append(request)
    report.unused = [g for g, used in report.uses.items() if not used]
    ran = {r.runbook for r in requests if r.runbook}
    report.unused_by_runbook = [(g, runbook) for g, used in report.uses.items() for runbook in g.runbooks
                                if runbook in ran and not used[runbook]]
    return report


def render(report: Report) -> str:
    lines = [f"{report.requests} requests of the runbook identity"]
    lines.append(f"denied: {len(report.denied)}")
    lines += [f"  {r.describe()} ({r.runbook or 'no recorded run'}, HTTP {r.code})" for r in _unique(report.denied)]
    lines.append(f"allowed only by another runbook's role: {len(report.outside_runbook)}")
    lines += [f"  {r.describe()} ({r.runbook})" for r in _unique(report.outside_runbook)]
    lines.append(f"granted, never used: {len(report.unused)}")
    lines += [f"  {g.describe()}" for g in report.unused]
    lines.append(f"granted for a runbook that ran, never used by it: {len(report.unused_by_runbook)}")
    lines += [f"  {runbook}: {g.describe()}" for g, runbook in report.unused_by_runbook]
    lines.append("uses per grant, by the runbooks it is for (or unattributed: ?):")
    for grant, used in report.uses.items():
        own = {rb: n for rb, n in used.items() if rb in grant.runbooks or rb == "?" or not grant.runbooks}
        if own:
            by = ", ".join(f"{runbook} {count}" for runbook, count in sorted(own.items()))
            lines.append(f"  {grant.describe()}: {sum(own.values())} ({by})")
    return "\n".join(lines)


def _unique(requests: list[Request]) -> list[Request]:
    return list(dict.fromkeys(requests))
