"""The queue-backfill runbook's questions over plain mappings, as Ansible passes them; the role's
filter plugin registers these. `description` is {cohort, flavors, teams, priority_classes}."""

from __future__ import annotations

from typing import Any

from gpushare.kueue import capacity, render
from gpushare.kueue.description import Description, DescriptionError, parse
from gpushare.kueue.status import parse_time


def _parsed(description: dict[str, Any]) -> Description:
    return parse(**description)


def description_problems(description: dict[str, Any]) -> list[str]:
    try:
        _parsed(description)
    except DescriptionError as err:
        return err.problems
    return []


def kueue_problems(unserved_kinds: list[str], lease: dict[str, Any] | None, lease_ref: str, now: str) -> list[str]:
    return render.kueue_problems(unserved_kinds, lease, lease_ref, parse_time(now))


def cluster_problems(description: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    return capacity.cluster_problems(_parsed(description), nodes)


def kueue_changes(description: dict[str, Any], existing: list[dict[str, Any]],
                  skip_namespaces: list[str] | None = None) -> list[dict[str, Any]]:
    """The Kueue objects to apply (see render.plan), without those in `skip_namespaces` (check mode:
    namespaces not created yet)."""
    skip = set(skip_namespaces or ())
    changes = render.plan(render.kueue_objects(_parsed(description)), existing)
    return [o for o in changes if o["metadata"].get("namespace") not in skip]


def missing_namespaces(description: dict[str, Any], existing: list[dict[str, Any]]) -> list[str]:
    names = {ns["metadata"]["name"] for ns in existing}
    return [name for name in render.namespaces(_parsed(description)) if name not in names]


def not_ready(description: dict[str, Any], cluster_queues: list[dict[str, Any]] | None,
              local_queues: list[dict[str, Any]] | None = None) -> list[str]:
    return render.not_ready(_parsed(description), cluster_queues, local_queues)


def report(description: dict[str, Any], cluster_queues: list[dict[str, Any]]) -> str:
    return render.report(_parsed(description), cluster_queues)
