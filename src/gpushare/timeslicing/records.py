"""Run records: before its first write a runbook writes, in the cluster, what it is about to
change (its intent) with the backup of the ClusterPolicy as it was; it marks the record complete
at the end. A record left `in-progress` is an interrupted run that any later run can see, report
and roll back or finish."""

from __future__ import annotations

import datetime as dt
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpushare.clock import stamp

RECORD_LABEL = "gpushare.io/run"
BACKUP_LABEL = "gpushare.io/backup"
STATE = "gpushare.io/state"
STARTED = "gpushare.io/started-at"
FINISHED = "gpushare.io/finished-at"
BACKUP_FILE = "gpushare.io/backup-file"  # the ClusterPolicy backup file on the control machine that ran it
STATES = ("in-progress", "complete", "rolled-back")
PREFIX = "gpushare-run-"


@dataclass(frozen=True)
class FieldChange:
    """One ClusterPolicy field the run changes, with its value before and after."""

    path: str
    before: Any
    after: Any

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Intent:
    runbook: str
    nodes: list[str] = field(default_factory=list)
    clusterpolicy: list[FieldChange] = field(default_factory=list)
    configmap: str = ""
    configmap_created: bool = False
    keys_added: list[str] = field(default_factory=list)  # ConfigMap keys the run adds (absent before)
    # node -> {label: value before the run} of the node labels the run changes (None: absent)
    node_labels: dict[str, dict[str, str | None]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = {"runbook": self.runbook, "nodes": self.nodes,
                "clusterpolicy": [c.as_dict() for c in self.clusterpolicy],
                "configmap": {"name": self.configmap, "created": self.configmap_created, "keys_added": self.keys_added}}
        if self.node_labels:
            data["node_labels"] = self.node_labels
        return data

    @classmethod
    def of(cls, data: dict[str, Any]) -> Intent:
        configmap = data.get("configmap") or {}
        return cls(str(data.get("runbook") or ""), [str(n) for n in data.get("nodes") or []],
                   [FieldChange(str(c["path"]), c.get("before"), c.get("after")) for c in data.get("clusterpolicy") or []],
                   str(configmap.get("name") or ""), bool(configmap.get("created")),
                   [str(k) for k in configmap.get("keys_added") or []],
                   {str(n): dict(labels) for n, labels in (data.get("node_labels") or {}).items()})

    def describe(self) -> str:
        parts = []
        if self.clusterpolicy:
            parts.append("ClusterPolicy " + ", ".join(c.path.removeprefix("/spec/") for c in self.clusterpolicy))
        if self.configmap_created:
            parts.append(f"ConfigMap {self.configmap} (created)")
        elif self.keys_added:
            parts.append(f"ConfigMap {self.configmap} keys {', '.join(self.keys_added)}")
        if self.nodes:
            parts.append("nodes " + ", ".join(self.nodes))
        return "; ".join(parts) or "nothing at the cluster level"


@dataclass(frozen=True)
class Record:
    name: str
    runbook: str
    state: str
    started: str
    finished: str
    intent: Intent
    clusterpolicy_backup: dict[str, Any] | None
    valid: bool = True
    backup_file: str = ""

    @staticmethod
    def is_record(configmap: dict[str, Any]) -> bool:
        return RECORD_LABEL in ((configmap.get("metadata") or {}).get("labels") or {})

    @classmethod
    def of(cls, configmap: dict[str, Any]) -> Record:
        metadata = configmap.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        data = configmap.get("data") or {}
        runbook = (metadata.get("labels") or {}).get(RECORD_LABEL, "")
        try:
            intent = Intent.of(json.loads(data.get("intent.json") or "{}"))
            backup = yaml.safe_load(data["clusterpolicy.yaml"]) if data.get("clusterpolicy.yaml") else None
            valid = backup is None or isinstance(backup, dict)
        except (ValueError, KeyError, TypeError, yaml.YAMLError):
            intent, backup, valid = Intent(runbook), None, False
        return cls(metadata["name"], runbook, annotations.get(STATE, "in-progress"), annotations.get(STARTED, ""),
                   annotations.get(FINISHED, ""), intent, backup if valid else None, valid,
                   annotations.get(BACKUP_FILE, ""))

    def summary(self, namespace: str) -> str:
        """What an interrupted run was doing and where its ClusterPolicy backup is, for the operator."""
        if self.clusterpolicy_backup is None:
            backup = "it holds no ClusterPolicy backup"
        else:
            backup = f"ClusterPolicy backup: ConfigMap {namespace}/{self.name} (key clusterpolicy.yaml)"
            if self.backup_file:
                backup += f" and file {self.backup_file} on the machine that ran it"
        return f"record {self.name}, started {self.started}, it was changing {self.intent.describe()}; {backup}."


def record_name(runbook: str, moment: dt.datetime) -> str:
    """gpushare-run-enable-..., gpushare-run-rollback-... for time-slicing; gpushare-run-enable-mig-... otherwise."""
    short = runbook.removesuffix("-timeslicing")
    return f"{PREFIX}{short}-{moment.strftime('%Y%m%dt%H%M%Sz')}-{secrets.token_hex(2)}"


def new_record(name: str, namespace: str, intent: Intent, clusterpolicy: dict[str, Any] | None,
               started: dt.datetime, invocation: dict[str, str], backup_file: str = "") -> dict[str, Any]:
    """The record ConfigMap, written before the run's first other write; `backup_file` names the
    ClusterPolicy backup the run writes on the control machine, if it writes one."""
    data = {"intent.json": json.dumps(intent.as_dict(), indent=2, sort_keys=True)}
    labels = {"app.kubernetes.io/managed-by": "gpushare", RECORD_LABEL: intent.runbook}
    if clusterpolicy is not None:
        data["clusterpolicy.yaml"] = yaml.safe_dump(clusterpolicy, sort_keys=True)
        labels[BACKUP_LABEL] = "clusterpolicy"
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": {
            STATE: "in-progress", STARTED: stamp(started),
            "gpushare.io/command": invocation.get("command", ""),
            "gpushare.io/operator": invocation.get("operator", ""),
            **({BACKUP_FILE: backup_file} if backup_file else {}),
        }},
        "data": data,
    }


def state_patch(state: str, finished: dt.datetime | None = None) -> dict[str, Any]:
    annotations: dict[str, Any] = {STATE: state}
    if finished is not None:
        annotations[FINISHED] = stamp(finished)
    return {"metadata": {"annotations": annotations}}
