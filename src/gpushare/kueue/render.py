"""From the description to Kueue objects, and back: is Kueue there, are the queues ready, the report."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from gpushare.k8s.changes import Change
from gpushare.k8s.changes import LAST_APPLIED
from gpushare.kueue.description import Description, Team
from gpushare.kueue.kinds import API_VERSION, condition
from gpushare.kueue.status import parse_time
from gpushare.table import render_table

# The runbooks' label (deploy/rbac/61-admission-kueue.yaml lets the runbook identity write only objects
# that carry it). Objects an earlier release labelled gpushare-queue-backfill are read as the runbook's
# (roles/queue_backfill/vars/main.yml) and relabelled by the next run.
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpushare"}
# The kinds the runbook writes; the API must serve each of them.
KINDS = ("WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")
REPORT_HEADERS = ["queue", "local queue", "flavor", "resource", "nominal", "borrowing limit", "lending limit",
                  "admitted", "pending"]


def _object(kind: str, name: str, spec: dict[str, Any] | None = None, namespace: str | None = None,
            **top: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata,
            **({"spec": spec} if spec is not None else {}), **top}


def _resource_groups(team: Team) -> list[dict[str, Any]]:
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for flavor, resources in team.quotas.items():
        covered = tuple(sorted(resources))
        groups.setdefault(covered, []).append({"name": flavor, "resources": [
            {"name": resource, **resources[resource].text} for resource in covered]})
    return [{"coveredResources": list(covered), "flavors": flavors} for covered, flavors in groups.items()]


def cluster_queue(description: Description, team: Team) -> dict[str, Any]:
    return _object("ClusterQueue", team.name, {
        "cohortName": description.cohort,
        # Only the team's own namespace submits to its queue.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
        "queueingStrategy": team.queueing_strategy,
        "preemption": team.preemption,
        "resourceGroups": _resource_groups(team),
    })


def kueue_objects(description: Description) -> list[dict[str, Any]]:
    """Everything the runbook applies, in an order in which each object's references exist first."""
    objects = [_object("WorkloadPriorityClass", p.name, value=p.value,
                       **({"description": p.description} if p.description else {}))
               for p in description.priority_classes]
    for flavor in description.flavors:
        spec: dict[str, Any] = {"nodeLabels": flavor.node_labels} if flavor.node_labels else {}
        if flavor.tolerations:
            spec["tolerations"] = list(flavor.tolerations)
        objects.append(_object("ResourceFlavor", flavor.name, spec))
    objects.append(_object("Cohort", description.cohort, {}))
    objects += [cluster_queue(description, team) for team in description.teams]
    objects += [_object("LocalQueue", t.local_queue, {"clusterQueue": t.name}, namespace=t.namespace)
                for t in description.teams]
    return objects


def _contains(actual: Any, desired: Any) -> bool:
    """Every field of `desired` is in `actual` with the same value (the server adds defaults)."""
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and _contains(actual[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(actual, list) and len(actual) == len(desired)
                and all(_contains(a, d) for a, d in zip(actual, desired)))
    return actual == desired


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def plan(desired: Iterable[dict[str, Any]], existing: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The objects to apply: missing, changed by hand, or described differently than last applied
    (a removed field too). The others are left alone, so that a re-run sends no write: the apply of
    kubernetes.core would patch every object that holds a list."""
    current = {_key(obj): obj for obj in existing}
    changes = []
    for obj in desired:
        actual = current.get(_key(obj))
        annotations = (actual or {}).get("metadata", {}).get("annotations") or {}
        last_applied = annotations.get(LAST_APPLIED)
        if actual is None or not _contains(actual, obj) or last_applied is None or json.loads(last_applied) != obj:
            changes.append(obj)
    return changes


def namespaces(description: Description) -> list[str]:
    return sorted({t.namespace for t in description.teams})


def changes(planned: Iterable[dict[str, Any]], existing: Iterable[Mapping[str, Any]],
            missing_namespaces: Iterable[str]) -> list[Change]:
    """The writes: each missing namespace created, then each planned object created, or merge-patched
    from its last applied description as `kubectl apply` patches a custom resource (a field dropped
    from the description is removed; fields others set are kept)."""
    current = {_key(obj): obj for obj in existing}
    out = [Change("create", "Namespace", name, exists="keep", why="a team's namespace",
                  body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(MANAGED_BY)}})
           for name in missing_namespaces]
    for obj in planned:
        meta = obj["metadata"]
        applied = {**obj, "metadata": {**meta, "annotations": {LAST_APPLIED: json.dumps(obj, sort_keys=True)}}}
        actual = current.get(_key(obj))
        last = None if actual is None else (actual["metadata"].get("annotations") or {}).get(LAST_APPLIED)
        action, body = ("create", applied) if actual is None else (
            "merge", merge_patch_from(json.loads(last) if last else {}, applied, actual))
        out.append(Change(action, obj["kind"], meta["name"], meta.get("namespace"), body, why="as the description says"))
    return out


_UNSET = object()


def merge_patch_from(last: Any, desired: Mapping[str, Any], actual: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that takes `actual` to `desired`: what differs from it or from the last
    applied description is set (a list whole), and what the last applied description had but
    `desired` no longer has is removed."""
    last = last if isinstance(last, Mapping) else {}
    patch: dict[str, Any] = {key: None for key in last if key not in desired and key in actual}
    for key, value in desired.items():
        now = actual.get(key)
        if isinstance(value, Mapping) and isinstance(now, Mapping):
            nested = merge_patch_from(last.get(key), value, now)
            if nested:
                patch[key] = nested
        elif not _contains(now, value) or last.get(key, _UNSET) != value:
            patch[key] = value
    return patch


def kueue_problems(unserved_kinds: Iterable[str], lease: Mapping[str, Any] | None, lease_ref: str,
                   now: dt.datetime) -> list[str]:
    """Kueue must be installed (the API serves the kinds the runbook writes) and its controller running
    (it renews its leader-election Lease, as the Helm chart's deployment does)."""
    unserved = list(unserved_kinds)
    if unserved:
        return [f"Kueue is not installed: this cluster serves no {API_VERSION} {', '.join(unserved)}. Install Kueue "
                "v0.17 to v0.19 (the embedded cluster starts it unless `gpushare sim up --without kueue`)"]
    advice = ("start the Kueue controller, or point queue_backfill_kueue_lease_namespace/_name at the Lease it "
              "holds (its leader-election ID)")
    if lease is None:
        return [f"no Kueue controller is running: its leader-election Lease {lease_ref} does not exist; {advice}"]
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return [f"no Kueue controller is running: its Lease {lease_ref} has been released (the controller stopped); "
                f"{advice}"]
    duration = int(spec.get("leaseDurationSeconds") or 15)
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    age = (now - parse_time(renewed)).total_seconds() if renewed else None
    if age is None or age > 2 * duration:  # twice the lease: room for clock skew between machines
        when = f"last renewed {age:.0f}s ago" if age is not None else "never renewed"
        return [f"no Kueue controller is running: its Lease {lease_ref} was {when} (it lasts {duration}s); {advice}"]
    return []


def not_ready(description: Description, cluster_queues: Iterable[Mapping[str, Any]] | None,
              local_queues: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """What keeps the queues from taking work: a ClusterQueue not Active, a LocalQueue not bound to its
    ClusterQueue. A kind given as None is not looked at."""
    expected: list[tuple[str, Mapping | None]] = []
    if cluster_queues is not None:
        cqs = {q["metadata"]["name"]: q for q in cluster_queues}
        expected += [(f"ClusterQueue {t.name}", cqs.get(t.name)) for t in description.teams]
    if local_queues is not None:
        lqs = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in local_queues}
        expected += [(f"LocalQueue {t.namespace}/{t.local_queue}", lqs.get((t.namespace, t.local_queue)))
                     for t in description.teams]
    problems = []
    for what, obj in expected:
        active = condition(obj, "Active") if obj else None
        if obj is None:
            problems.append(f"{what} does not exist")
        elif not active or active.get("status") != "True":
            detail = f"{active.get('reason')}: {active.get('message')}" if active else "no status from Kueue yet"
            problems.append(f"{what} is not active ({detail})")
    return problems


def intended(changes: Iterable[Change]) -> str:
    """The plan's first line: what the run is to write."""
    names = [c.title for c in changes]
    return f"To write: {', '.join(names)}." if names else "Nothing to change: the queues are as described."


def writes(changes: Iterable[Change], check_mode: bool) -> str:
    """One line: what this run writes (or would write, in check mode)."""
    names = [c.title for c in changes]
    if not names:
        return "Nothing to change: the queues are as described."
    return f"{'CHECK MODE, nothing was changed. Would write' if check_mode else 'Written'}: {', '.join(names)}."


def _limit(value: str | None, unset: str) -> str:
    return value if value is not None else unset


def report(description: Description, cluster_queues: Iterable[Mapping[str, Any]]) -> str:
    """One block of rows per queue: its quotas and limits, and the workloads it admitted and holds."""
    status = {q["metadata"]["name"]: q.get("status", {}) for q in cluster_queues}
    rows = []
    for team in description.teams:
        counts = status.get(team.name, {})
        first = True
        for flavor, resources in team.quotas.items():
            for resource, quota in resources.items():
                rows.append([
                    team.name if first else "", f"{team.namespace}/{team.local_queue}" if first else "", flavor,
                    resource, quota.text["nominalQuota"], _limit(quota.text.get("borrowingLimit"), "no limit"),
                    _limit(quota.text.get("lendingLimit"), "all"),
                    str(counts.get("admittedWorkloads", 0)) if first else "",
                    str(counts.get("pendingWorkloads", 0)) if first else "",
                ])
                first = False
    return f"Cohort {description.cohort}\n" + render_table(REPORT_HEADERS, rows)
