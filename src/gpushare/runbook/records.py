"""Run records: before its first write a runbook writes, in the cluster, what it is about to
change (its intent) with the backup of the ClusterPolicy as it was; it marks the record complete
at the end. A record left `in-progress` is an interrupted run that any later run can see, report
and roll back or finish."""

from __future__ import annotations

import datetime as dt
import functools
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
# The config readers a run restarted, each started after the config ConfigMap's write at a version:
# {"configmap", "resourceVersion", "pods": [uid]}.
READERS = "readers.json"
STATES = ("in-progress", "complete", "rolled-back")
PREFIX = "gpushare-run-"
# The namespace the runbooks own (deploy/rbac/00-namespaces.yaml): run records, backups, the lock.
# Not the operator's: nothing there needs a write the runbooks cannot name.
RECORDS_NAMESPACE = "gpushare-system"
# libyaml's parser where PyYAML has it (eight times faster): every run reads every record, and each
# holds a ClusterPolicy backup.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    parsed_intent: Intent
    backup_text: str = ""  # the ClusterPolicy backup as written, parsed only when asked for
    intent_valid: bool = True
    backup_file: str = ""
    readers: dict[str, Any] = field(default_factory=dict)

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
            intent, intent_valid = Intent.of(json.loads(data.get("intent.json") or "{}")), True
        except (ValueError, KeyError, TypeError):
            intent, intent_valid = Intent(runbook), False
        return cls(metadata["name"], runbook, annotations.get(STATE, "in-progress"), annotations.get(STARTED, ""),
                   annotations.get(FINISHED, ""), intent, str(data.get("clusterpolicy.yaml") or ""), intent_valid,
                   annotations.get(BACKUP_FILE, ""), _readers(data.get(READERS)))

    def started_after(self, configmap: str, version: str) -> list[str]:
        """The readers this run restarted after the write of `configmap` at `version`, if it did."""
        same = self.readers.get("configmap") == configmap and self.readers.get("resourceVersion") == version
        return list(self.readers.get("pods") or []) if same and version else []

    @functools.cached_property
    def _backup(self) -> tuple[bool, dict[str, Any] | None]:
        """(readable, the ClusterPolicy backup): every run lists every record, few need a backup."""
        if not self.backup_text:
            return True, None
        try:
            document = yaml.load(self.backup_text, Loader=_LOADER)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            return False, None
        return (True, document) if isinstance(document, dict) else (False, None)

    @property
    def valid(self) -> bool:
        return self.intent_valid and self._backup[0]

    @property
    def intent(self) -> Intent:
        """What the run changes; nothing for a record that cannot be read whole."""
        return self.parsed_intent if self.valid else Intent(self.runbook)

    @property
    def clusterpolicy_backup(self) -> dict[str, Any] | None:
        return self._backup[1] if self.valid else None

    def summary(self, namespace: str) -> str:
        """What an interrupted run was doing and where its ClusterPolicy backup is, for the operator."""
        if self.clusterpolicy_backup is None:
            backup = "it holds no ClusterPolicy backup"
        else:
            backup = f"ClusterPolicy backup: ConfigMap {namespace}/{self.name} (key clusterpolicy.yaml)"
            if self.backup_file:
                backup += f" and file {self.backup_file} on the machine that ran it"
        return f"record {self.name}, started {self.started}, it was changing {self.intent.describe()}; {backup}."


def _readers(text: Any) -> dict[str, Any]:
    """The readers a record names; nothing when it names none or cannot be read (a pod it does not
    name is judged by its creation time)."""
    try:
        readers = json.loads(text) if text else {}
    except (ValueError, TypeError):
        return {}
    if not isinstance(readers, dict) or not isinstance(readers.get("pods"), list):
        return {}
    return {"configmap": str(readers.get("configmap") or ""), "resourceVersion": str(readers.get("resourceVersion") or ""),
            "pods": [str(uid) for uid in readers["pods"]]}


def readers_patch(configmap: str, restarted: dict[str, Any]) -> dict[str, Any]:
    """The record's data naming the readers a restart left running (`restarted`: its result)."""
    readers = {"configmap": configmap, "resourceVersion": restarted.get("configmap_version") or "",
               "pods": sorted(restarted.get("readers") or [])}
    return {"data": {READERS: json.dumps(readers, sort_keys=True)}}


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
