"""Workload facts the metrics cannot give - retryable, checkpointed, latency-critical, owner -
kept in the inventory per namespace or pod label (`baseline_workloads`), and matched to the pods
the exporter mapped to each GPU.

An entry selects with `namespace`, `labels` (pod labels, as the exporter exports them with
pod-label mapping on: keys sanitized to [a-zA-Z0-9_]), or both; the first entry that matches a
pod wins, so put the narrow entries before the broad ones.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpushare.baseline.model import BaselineInputError, Workload, WorkloadFacts
from gpushare.runbook.inputs import read_document

FLAGS = ("retryable", "checkpointed", "latency_critical")
_KEYS = {*FLAGS, "owner", "namespace", "labels"}


def sanitize(label: str) -> str:
    """A pod label key as dcgm-exporter exports it (utils.SanitizeLabelName)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def load_facts(path: Path | None) -> list[WorkloadFacts]:
    """Facts from a YAML or JSON file (`-` reads standard input): a list, or {workloads: [...]}."""
    if path is None:
        return []
    document = read_document(path, "YAML", BaselineInputError, stdin=True,
                             unreadable="cannot read the workloads file {path}: {reason}; check the path",
                             malformed="workloads file {path} is not YAML or JSON ({error}); fix its syntax")
    if isinstance(document, dict) and set(document) == {"workloads"}:
        document = document["workloads"]
    return parse_facts(document or [])


def parse_facts(entries: object) -> list[WorkloadFacts]:
    if not isinstance(entries, list):
        raise BaselineInputError("workloads: expected a list of entries such as "
                                 "{namespace: ml-batch, retryable: true, checkpointed: true, latency_critical: false}")
    facts = []
    for position, entry in enumerate(entries, start=1):
        where = f"workloads[{position}]"
        if not isinstance(entry, dict):
            raise BaselineInputError(f"{where}: expected a mapping with namespace and/or labels and the facts")
        unknown = sorted(str(key) for key in set(entry) - _KEYS)
        if unknown:
            raise BaselineInputError(f"{where}: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(_KEYS))}")
        namespace, labels = entry.get("namespace"), entry.get("labels") or {}
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise BaselineInputError(f"{where}: namespace must be a namespace name")
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise BaselineInputError(f"{where}: labels must map pod label keys to string values")
        if namespace is None and not labels:
            raise BaselineInputError(f"{where}: give namespace, labels or both, to say which pods the facts are about")
        missing = [flag for flag in FLAGS if not isinstance(entry.get(flag), bool)]
        if missing:
            raise BaselineInputError(
                f"{where} ({namespace or labels}): {', '.join(missing)} must be true or false; "
                "ask the owner - the baseline cannot tell from metrics")
        owner = entry.get("owner", "")
        facts.append(WorkloadFacts(
            retryable=entry["retryable"], checkpointed=entry["checkpointed"],
            latency_critical=entry["latency_critical"], owner=str(owner or ""), namespace=namespace,
            labels={sanitize(str(k)): v for k, v in labels.items()},
        ))
    return facts


def label_keys(facts: list[WorkloadFacts]) -> list[str]:
    """The pod label keys the facts select on, for the workloads query."""
    return sorted({key for fact in facts for key in fact.labels})


def match(facts: list[WorkloadFacts], workload: Workload) -> WorkloadFacts | None:
    for fact in facts:
        if fact.namespace is not None and fact.namespace != workload.namespace:
            continue
        if any(workload.labels.get(key) != value for key, value in fact.labels.items()):
            continue
        return fact
    return None
