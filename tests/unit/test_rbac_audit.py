"""The audit-log check of deploy/rbac (gpushare.rbac.audit) on a small audit log written here, and
the manifests as the embedded cluster applies them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpushare.rbac import RUNBOOK_USER, SERVICE_ACCOUNT_USER, manifests
from gpushare.rbac.audit import RUNBOOKS_ANNOTATION, AuditError, check, grants, read_events, read_requests, render

USER = "gpushare-runbook"
RBAC: list[dict[str, Any]] = [
    {"kind": "ClusterRole", "metadata": {"name": "reader", "annotations": {RUNBOOKS_ANNOTATION: "enable rollback"}},
     "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
    {"kind": "Role", "metadata": {"name": "lock", "namespace": "gpu-operator",
                                  "annotations": {RUNBOOKS_ANNOTATION: "enable"}},
     "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "delete"],
                "resourceNames": ["gpushare-runbook-lock"]},
               {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "reader"},
     "roleRef": {"kind": "ClusterRole", "name": "reader"}, "subjects": [{"kind": "User", "name": USER}]},
    {"kind": "RoleBinding", "metadata": {"name": "lock", "namespace": "gpu-operator"},
     "roleRef": {"kind": "Role", "name": "lock"},
     "subjects": [{"kind": "ServiceAccount", "name": "gpushare-runbook", "namespace": "gpushare-system"},
                  {"kind": "User", "name": USER}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "someone-else"},
     "roleRef": {"kind": "ClusterRole", "name": "reader"}, "subjects": [{"kind": "User", "name": "alice"}]},
]


def event(verb: str, resource: str, name: str = "", namespace: str = "", code: int = 200, group: str = "",
          user: str = USER, stage: str = "ResponseComplete", decision: str | None = None,
          subresource: str = "") -> dict[str, Any]:
    ref = {"resource": resource, "apiGroup": group, "apiVersion": "v1", "name": name, "namespace": namespace}
    if subresource:
        ref["subresource"] = subresource
    entry = {"kind": "Event", "stage": stage, "verb": verb, "user": {"username": user}, "objectRef": ref,
             "responseStatus": {"code": code}}
    if decision:
        entry["annotations"] = {"authorization.k8s.io/decision": decision}
    return entry


def write_log(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_a_denied_request_and_a_granted_verb_never_used_are_reported(tmp_path: Path) -> None:
    log = write_log(tmp_path / "audit.log", [
        event("get", "nodes", "gpu-node"),
        event("get", "nodes", "gpu-node", stage="ResponseStarted"),  # the same request, counted once
        event("get", "secrets", "token", "gpu-operator", code=403, decision="forbid"),
        event("get", "leases", "gpushare-runbook-lock", "gpu-operator", group="coordination.k8s.io", code=404),
        event("create", "configmaps", "gpushare-run-1", "gpu-operator", code=201),
        event("list", "secrets", user="alice", code=403),  # another user: not ours to judge
    ])
    report = check(read_requests(log, USER), grants(RBAC, USER))
    assert report.requests == 4
    assert [r.describe() for r in report.denied] == ["get secrets gpu-operator/token"]
    assert sorted(g.describe() for g in report.unused) == [
        "ClusterRole reader: list nodes (cluster-wide)",
        "Role lock: delete leases.coordination.k8s.io gpushare-runbook-lock (in gpu-operator)",
    ]
    assert not report.ok
    text = render(report)
    assert "denied: 1\n  get secrets gpu-operator/token (no recorded run, HTTP 403)" in text
    assert "ClusterRole reader: get nodes (cluster-wide): 1 (? 1)" in text


def test_a_named_grant_allows_only_that_name_and_never_a_create(tmp_path: Path) -> None:
    named = [g for g in grants(RBAC, USER) if g.verb == "get" and g.resource == "leases"]
    log = write_log(tmp_path / "audit.log", [
        event("get", "leases", "other-lock", "gpu-operator", group="coordination.k8s.io", code=403),
        event("get", "leases", "gpushare-runbook-lock", "kube-system", group="coordination.k8s.io", code=403),
        event("create", "leases", "gpushare-runbook-lock", "gpu-operator", group="coordination.k8s.io", code=403),
    ])
    requests = read_requests(log, USER)
    assert [any(g.allows(r) for g in named) for r in requests] == [False, False, False]
    assert requests[2].name == ""  # the authorizer never sees the name of an object being created


def test_the_service_account_gets_only_what_is_bound_to_it() -> None:
    granted = grants(RBAC, "system:serviceaccount:gpushare-system:gpushare-runbook")
    assert {g.role for g in granted} == {"Role lock"}
    assert all(g.namespace == "gpu-operator" for g in granted)


def test_a_request_allowed_only_by_another_runbooks_role_is_reported(tmp_path: Path) -> None:
    log = write_log(tmp_path / "audit.log", [event("create", "configmaps", "x", "gpu-operator", code=201)])
    report = check(read_requests(log, USER, runbook="rollback"), grants(RBAC, USER))
    assert [r.describe() for r in report.outside_runbook] == ["create configmaps in gpu-operator"]
    assert not report.ok
    # the reader role is for enable and rollback; only rollback ran, and read nothing
    assert sorted((g.describe(), runbook) for g, runbook in report.unused_by_runbook) == [
        ("ClusterRole reader: get nodes (cluster-wide)", "rollback"),
        ("ClusterRole reader: list nodes (cluster-wide)", "rollback")]


def test_a_forbidden_decision_counts_as_denied_even_without_403(tmp_path: Path) -> None:
    log = write_log(tmp_path / "audit.log", [event("get", "nodes", "gpu-node", code=0, decision="forbid"),
                                             event("get", "nodes", "x", code=403, decision="allow")])
    assert [r.denied for r in read_requests(log, USER)] == [True, False]


def test_a_broken_audit_log_is_named(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text('{"stage": "ResponseComplete"}\nnot json\n')
    with pytest.raises(AuditError, match="audit.log: line 2 after offset 0 is not an audit event"):
        read_requests(log, USER)
    with pytest.raises(AuditError, match="cannot read the audit log"):
        read_requests(tmp_path / "missing.log", USER)


def test_a_binding_of_an_undefined_role_is_refused() -> None:
    broken = [{"kind": "ClusterRoleBinding", "metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "x"},
               "subjects": [{"kind": "User", "name": USER}]}]
    with pytest.raises(AuditError, match="binds ClusterRole x, which deploy/rbac does not define"):
        grants(broken, USER)


def test_deploy_rbac_binds_every_role_to_the_service_account_and_the_embedded_user() -> None:
    objects = manifests("nvidia-gpu-operator")
    bindings = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert bindings
    for binding in bindings:
        subjects = {(s["kind"], s["name"]) for s in binding["subjects"]}
        assert subjects == {("ServiceAccount", "gpushare-runbook"), ("User", RUNBOOK_USER)}, binding["metadata"]
    roles = {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in ("Role", "ClusterRole")}
    assert roles == {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings}
    assert all(o["metadata"].get("namespace") != "gpu-operator" for o in objects)  # moved to the one in use
    assert {g.role for g in grants(objects, RUNBOOK_USER)} == {g.role for g in grants(objects, SERVICE_ACCOUNT_USER)}
    assert all((o["metadata"].get("annotations") or {}).get(RUNBOOKS_ANNOTATION) for o in objects
               if o["kind"] in ("Role", "ClusterRole")), "every role names the runbooks it is for"


def test_a_last_line_still_being_written_is_not_read_yet(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(json.dumps({"stage": "ResponseComplete", "verb": "get"}) + "\n" + '{"stage": "Respo')
    assert read_events(log) == [{"stage": "ResponseComplete", "verb": "get"}]
    with log.open("a") as more:
        more.write('nseComplete", "verb": "patch"}\n')
    assert [e["verb"] for e in read_events(log)] == ["get", "patch"]


def test_a_mark_taken_while_a_line_was_being_written_starts_at_the_next_line(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    first = json.dumps({"stage": "ResponseComplete", "verb": "get"}) + "\n"
    second = json.dumps({"stage": "ResponseComplete", "verb": "patch"}) + "\n"
    log.write_text(first + second)
    assert [e["verb"] for e in read_events(log, len(first))] == ["patch"]  # a mark at a line start
    assert [e["verb"] for e in read_events(log, len(first) - 3)] == ["patch"]  # inside the line before it
    assert [e["verb"] for e in read_events(log, 5, len(first))] == []
    assert read_events(log, len(first) + len(second)) == []
