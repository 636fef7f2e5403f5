"""Run records: before its first write a runbook writes, in the cluster, what it is about to
change (its intent) with the backup of the ClusterPolicy as it was; it marks the record complete
at the end. A record left `in-progress` is an interrupted run that any later run can see, report
and roll back or finish."""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpushare.bounded import MAX_BYTES, Unreadable, load_json, load_yaml
from gpushare.clock import stamp
from gpushare.model.node import CONFIG_LABEL, DEPLOY_PREFIX, MIG_CONFIG, MIG_STATE
from gpushare.runbook.inputs import DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE

RECORD_LABEL = "gpushare.io/run"
MANAGED_BY = "app.kubernetes.io/managed-by"
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
# What a record's schema reads: a record is written by the runbook identity, which anyone holding it
# can forge, so each of these is checked for size, depth and type before it is trusted.
INTENT, BACKUP = "intent.json", "clusterpolicy.yaml"
# The node labels a run keeps the value of (the MIG runbooks: what they change or pause; the DRA
# pilot: its kubelet plugin's label; every runbook: the operator's gpu.deploy.* labels).
DRA_PLUGIN_LABEL = "nvidia.com/dra-kubelet-plugin"  # the DRA pilot's (the label deploy/rbac lets it set)
KEPT_LABELS = (MIG_CONFIG, MIG_STATE, CONFIG_LABEL, DRA_PLUGIN_LABEL)
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}\Z")


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
    def of(cls, data: Any) -> Intent:
        """An intent as a run writes it, every field of its type and every name a valid one; else
        Unreadable naming the field."""
        if not isinstance(data, dict):
            raise Unreadable(f"{INTENT} is a JSON {type(data).__name__}, not an object")
        configmap = _typed(data, "configmap", dict, {})
        name = _typed(configmap, "name", str, "", "configmap.name")
        if name and not DNS_SUBDOMAIN.match(name):
            raise Unreadable(f"{INTENT} configmap.name {name[:80]!r} is not a ConfigMap name")
        return cls(_typed(data, "runbook", str, ""),
                   [_node_name(n, "nodes") for n in _typed(data, "nodes", list, [])],
                   [_field_change(c) for c in _typed(data, "clusterpolicy", list, [])],
                   name, _typed(configmap, "created", bool, False, "configmap.created"),
                   [_configmap_key(k) for k in _typed(configmap, "keys_added", list, [], "configmap.keys_added")],
                   {_node_name(n, "node_labels"): _kept_labels(n, labels)
                    for n, labels in _typed(data, "node_labels", dict, {}).items()})

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
    problem: str = ""  # why the record cannot be read ("": it can)
    backup_file: str = ""
    readers: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def is_record(configmap: dict[str, Any]) -> bool:
        return RECORD_LABEL in ((configmap.get("metadata") or {}).get("labels") or {})

    @classmethod
    def of(cls, configmap: dict[str, Any]) -> Record:
        """The record as written; one whose intent, state or size is not what a run writes comes
        back with `problem` saying why, and is trusted for nothing."""
        metadata = configmap.get("metadata") or {}
        runbook = str((metadata.get("labels") or {}).get(RECORD_LABEL, ""))
        try:
            annotations, data = _typed(metadata, "annotations", dict, {}), _typed(configmap, "data", dict, {})
            texts = {key: _typed(data, key, str, "") for key in (INTENT, BACKUP, READERS)}
            if sum(len(t) for t in texts.values()) > MAX_BYTES:
                raise Unreadable(f"its {', '.join(texts)} hold more than the {MAX_BYTES} characters a run writes")
            state, started, finished, backup_file = (_typed(annotations, key, str, default) for key, default in (
                (STATE, "in-progress"), (STARTED, ""), (FINISHED, ""), (BACKUP_FILE, "")))
            if state not in STATES:
                raise Unreadable(f"its state {state[:40]!r} is none of {', '.join(STATES)}")
            intent = Intent.of(_loaded(INTENT, texts[INTENT] or "{}"))
            if intent.runbook not in ("", runbook):
                raise Unreadable(f"{INTENT} names runbook {intent.runbook[:40]!r}, its label {runbook!r}")
        except Unreadable as err:
            return cls(str(metadata["name"]), runbook, "in-progress", "", "", Intent(runbook), problem=str(err))
        return cls(str(metadata["name"]), runbook, state, started, finished, intent, texts[BACKUP], "", backup_file,
                   _readers(texts[READERS]))

    def started_after(self, configmap: str, version: str) -> list[str]:
        """The readers this run restarted after the write of `configmap` at `version`, if it did."""
        same = self.readers.get("configmap") == configmap and self.readers.get("resourceVersion") == version
        return list(self.readers.get("pods") or []) if same and version else []

    @functools.cached_property
    def _backup(self) -> tuple[dict[str, Any] | None, str]:
        """(the ClusterPolicy backup, why it cannot be read): every run lists every record, few need a backup."""
        if not self.backup_text:
            return None, ""
        try:
            document = _loaded(BACKUP, self.backup_text, load_yaml)
        except Unreadable as err:
            return None, str(err)
        return (document, "") if isinstance(document, dict) else (None, f"{BACKUP} is not a mapping")

    @property
    def unreadable(self) -> str:
        """Why the record, its backup included, cannot be read; "" when it can."""
        return self.problem or self._backup[1]

    @property
    def valid(self) -> bool:
        return not self.unreadable

    @property
    def intent(self) -> Intent:
        """What the run changes; nothing for a record that cannot be read whole."""
        return self.parsed_intent if self.valid else Intent(self.runbook)

    @property
    def clusterpolicy_backup(self) -> dict[str, Any] | None:
        return self._backup[0] if self.valid else None

    def summary(self, namespace: str) -> str:
        """What an interrupted run was doing and where its ClusterPolicy backup is, for the operator."""
        if self.clusterpolicy_backup is None:
            backup = "it holds no ClusterPolicy backup"
        else:
            backup = f"ClusterPolicy backup: ConfigMap {namespace}/{self.name} (key clusterpolicy.yaml)"
            if self.backup_file:
                backup += f" and file {self.backup_file} on the machine that ran it"
        return f"record {self.name}, started {self.started}, it was changing {self.intent.describe()}; {backup}."


def _typed(data: dict[str, Any], key: str, kind: type, default: Any, where: str = "") -> Any:
    """data[key], which must be of `kind` when present (a bool is no int)."""
    value = data.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Unreadable(f"{where or key} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _loaded(key: str, text: str, load: Any = load_json) -> Any:
    try:
        return load(text)
    except Unreadable as err:
        raise Unreadable(f"{key}: {err}") from None


def _node_name(value: Any, where: str) -> str:
    if not (isinstance(value, str) and DNS_SUBDOMAIN.match(value)):
        raise Unreadable(f"{INTENT} {where} holds {str(value)[:80]!r}, which is not a node name")
    return value


def _configmap_key(value: Any) -> str:
    if not (isinstance(value, str) and CONFIGMAP_KEY.match(value)):
        raise Unreadable(f"{INTENT} configmap.keys_added holds {str(value)[:80]!r}, which is not a ConfigMap key")
    return value


def _field_change(value: Any) -> FieldChange:
    if not isinstance(value, dict):
        raise Unreadable(f"{INTENT} clusterpolicy holds a {type(value).__name__}, not an object")
    path = value.get("path")
    if not isinstance(path, str):
        raise Unreadable(f"{INTENT} clusterpolicy holds a change without a path")
    return FieldChange(path, value.get("before"), value.get("after"))


def _kept_labels(node: str, labels: Any) -> dict[str, str | None]:
    """The labels a run kept of a node: only those the runbooks change, each a label value or None."""
    if not isinstance(labels, dict):
        raise Unreadable(f"{INTENT} node_labels of {node} is a {type(labels).__name__}, not an object")
    for key, value in labels.items():
        if not (key in KEPT_LABELS or (key.startswith(DEPLOY_PREFIX) and LABEL_KEY.match(key))):
            raise Unreadable(f"{INTENT} node_labels of {node} names label {key[:80]!r}, which no runbook changes")
        if value is not None and not (isinstance(value, str) and LABEL_VALUE.match(value)):
            raise Unreadable(f"{INTENT} node_labels of {node} gives {key} {str(value)[:80]!r}, not a label value")
    return dict(labels)


def _readers(text: str) -> dict[str, Any]:
    """The readers a record names; nothing when it names none or cannot be read (a pod it does not
    name is judged by its creation time)."""
    try:
        readers = load_json(text) if text else {}
    except Unreadable:
        return {}
    if not isinstance(readers, dict) or not isinstance(readers.get("pods"), list):
        return {}
    return {"configmap": str(readers.get("configmap") or ""), "resourceVersion": str(readers.get("resourceVersion") or ""),
            "pods": [str(uid) for uid in readers["pods"] if isinstance(uid, str)]}


def readers_patch(configmap: str, restarted: dict[str, Any]) -> dict[str, Any]:
    """The record's data naming the readers a restart left running (`restarted`: its result)."""
    readers = {"configmap": configmap, "resourceVersion": restarted.get("configmap_version") or "",
               "pods": sorted(restarted.get("readers") or [])}
    return {"data": {READERS: json.dumps(readers, sort_keys=True)}}


def bookkeeping(obj: dict[str, Any]) -> str:
    """What `obj` is when it is the runbooks' own bookkeeping (a run record, with the ClusterPolicy
    backup or not; the runbook lock Lease, gpushare.runbook.lock), else "": a --diff shows a write of
    one in a line (gpushare.k8s.short_diff), whole only with -v."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if obj.get("kind") == "ConfigMap" and RECORD_LABEL in labels:
        return "run record with the ClusterPolicy backup" if BACKUP_LABEL in labels else "run record"
    if obj.get("kind") == "Lease" and labels.get(MANAGED_BY) == "gpushare":
        return "runbook lock"
    return ""


def forged_advice(namespace: str, record: str) -> str:
    """What to do about a run record that no run writes as it is."""
    return (f"It was edited or forged: find who wrote it (the API server's audit log), then delete it (kubectl -n "
            f"{namespace} delete configmap {record}) or restore it from its backup.")


def record_name(runbook: str, moment: dt.datetime) -> str:
    """gpushare-run-enable-..., gpushare-run-rollback-... for time-slicing; gpushare-run-enable-mig-... otherwise."""
    short = runbook.removesuffix("-timeslicing")
    return f"{PREFIX}{short}-{moment.strftime('%Y%m%dt%H%M%Sz')}-{secrets.token_hex(2)}"


def new_record(name: str, namespace: str, intent: Intent, clusterpolicy: dict[str, Any] | None,
               started: dt.datetime, invocation: dict[str, str], backup_file: str = "") -> dict[str, Any]:
    """The record ConfigMap, written before the run's first other write; `backup_file` names the
    ClusterPolicy backup the run writes on the control machine, if it writes one."""
    data = {INTENT: json.dumps(intent.as_dict(), indent=2, sort_keys=True)}
    labels = {MANAGED_BY: "gpushare", RECORD_LABEL: intent.runbook}
    if clusterpolicy is not None:
        data[BACKUP] = yaml.dump(clusterpolicy, Dumper=_NoAliases, sort_keys=True)
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


class _NoAliases(yaml.SafeDumper):
    """A backup written whole: a reader refuses YAML aliases (gpushare.bounded.load_yaml)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def state_patch(state: str, finished: dt.datetime | None = None) -> dict[str, Any]:
    annotations: dict[str, Any] = {STATE: state}
    if finished is not None:
        annotations[FINISHED] = stamp(finished)
    return {"metadata": {"annotations": annotations}}
