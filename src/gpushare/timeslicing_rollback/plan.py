"""The rollback runbook's plan, in the seed's order: stop new scheduling (cordon and leave the
shared pool), drain the shared pods, confirm they moved, restore the node (per-node config label,
pool taint), and, once no node uses the shared config any more, restore exactly the cluster-level
fields the enable runs changed (each guarded by a test of the value they set) and remove the
ConfigMap keys they added; verify, uncordon what this run cordoned."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field, replace
from typing import Any

from gpushare.bounded import Unreadable, load_yaml
from gpushare.k8s.changes import Change
from gpushare.k8s.patch import PatchConflict, json_patch, resolve
from gpushare.model.node import CONFIG_LABEL, CORDONED_BY, Node, Pool
from gpushare.model.operands import DRIVER, OperandPod
from gpushare.model.pods import Pod, outlasting_drain
from gpushare.rbac import Names
from gpushare.rbac.access import configmap_refusal, identity
from gpushare.rbac.write_model import (WHERE as WRITE_MODEL_AT, configmap_mismatch, pool_taint_mismatch, render_fix, run_names,
                                       unreadable_refusal)
from gpushare.runbook.plan import Plan
from gpushare.runbook.drain import admits, shared_resources
from gpushare.runbook.inputs import DNS_SUBDOMAIN, NOTHING
from gpushare.runbook.records import (CONFIGMAP_KEY, FieldChange, Intent, Record, forged_advice, new_record,
                                      record_name, state_patch)
from gpushare.runbook.state import ASSET_TOLERATIONS, ClusterState, operator_problems
from gpushare.timeslicing_common.mark import MARK, Mark, timeslicing_mark
from gpushare.timeslicing_common.sharing import (CONFIG, CONFIG_DEFAULT, CONFIG_NAME, DEFAULT_KEY, ENABLE, ROLLBACK,
                                                 TOLERATIONS, driver_upgrades, driver_walk, field_ops,
                                                 on_delete_line, operator_roll, restart_lines, rolls)
from gpushare.timeslicing_rollback.settings import RollbackSettings

RUNBOOK = ROLLBACK
_ABSENT = object()
_SET_BY_RUNS = object()  # with an explicit backup: whatever the field holds now is overwritten


def explicit_backup(state: ClusterState, settings: RollbackSettings) -> tuple[dict[str, Any] | None, str, str]:
    """(the ClusterPolicy backup the operator named, where it is, the refusal when it is unusable)."""
    if not settings.backup_name:
        return None, "", ""
    if settings.backup_text:
        try:
            backup = load_yaml(settings.backup_text)
        except Unreadable as err:
            return None, "", f"The backup file {settings.backup_name} is not valid YAML: {err}."
        source = f"file {settings.backup_name}"
    else:
        record = next((r for r in state.records if r.name == settings.backup_name), None)
        if record is None or record.clusterpolicy_backup is None:
            names = [r.name for r in state.records if r.clusterpolicy_backup is not None]
            return None, "", (f"No run record {settings.backup_name!r} with a ClusterPolicy backup in "
                              f"{settings.records_namespace} (records with one: {', '.join(names) or 'none'}).")
        backup, source = record.clusterpolicy_backup, f"record {settings.records_namespace}/{record.name}"
    if not (isinstance(backup, dict) and backup.get("kind") == "ClusterPolicy"
            and isinstance(backup.get("metadata"), dict) and backup["metadata"].get("name") == settings.clusterpolicy
            and isinstance(backup.get("spec"), dict)):
        return None, "", f"The backup ({source}) is not a ClusterPolicy named {settings.clusterpolicy} with a spec."
    return backup, source, ""


@dataclass
class RollbackPlan(Plan):
    interrupted: list[str] = field(default_factory=list)  # interrupted enable runs, also told with a refusal
    nodes: list[str] = field(default_factory=list)
    restore_cluster: bool = False
    finish_records: list[str] = field(default_factory=list)  # interrupted rollbacks this run completes
    rolls_fleet: bool = False  # the operator re-renders operands on every GPU node, and rolls their pods
    restores_config: bool = False  # ... because devicePlugin.config goes back (it unmounts the ConfigMap)
    rerenders: bool = False  # the re-render of the config readers rolls no pod (daemonsets.updateStrategy OnDelete)

    @property
    def writes(self) -> bool:
        return bool(self.nodes) or self.restore_cluster or bool(self.finish_records)


def shared_keys(state: ClusterState, settings: RollbackSettings) -> set[str]:
    """Config keys the enable runbook wrote (every managed key but `default`), and the marks' keys."""
    keys = {settings.config_key}
    for name in {settings.configmap, state.plugin_config[0]} - {""}:
        keys |= set(state.managed_keys(name)) - {DEFAULT_KEY}
    keys |= {mark.key for mark in _marks(state) if mark.valid and mark.key}
    return keys


def _marks(state: ClusterState) -> list[Mark]:
    """The time-slicing marks the nodes carry."""
    return [mark for mark in map(timeslicing_mark, state.nodes.values()) if mark]


def _has_sharing(node: Node, keys: set[str], pool: Pool) -> bool:
    mark = timeslicing_mark(node)
    return bool(mark or node.config_label in keys or node.in_pool(pool) or node.shares
                or node.cordoned_by == RUNBOOK)


def _live_enables(state: ClusterState) -> list[Record]:
    return [r for r in state.records if r.runbook == ENABLE and r.state in ("in-progress", "complete") and r.valid]


def _unreadable_backups(state: ClusterState, namespace: str) -> list[str]:
    """A warning for each enable record skipped for its ClusterPolicy backup (read only by a rollback)."""
    return [f"Run record {namespace}/{r.name} cannot be read ({r.unreadable}); this rollback skips it. "
            f"{forged_advice(namespace, r.name)}" for r in state.records
            if r.runbook == ENABLE and r.state in ("in-progress", "complete") and not r.valid]


def _prepared(record: Record) -> bool:
    """A prepare run: an enable run that targeted no node (the ClusterPolicy and the ConfigMap only)."""
    return not record.intent.nodes and record.state == "complete"


def _restore_fields(records: list[Record], backup: dict[str, Any] | None) -> tuple[list[FieldChange], dict[str, str]]:
    """For each ClusterPolicy field the enable runs changed: (the value they set, the original), and
    the record that original comes from (none: from the backup the operator named)."""
    fields: dict[str, FieldChange] = {}
    sources: dict[str, str] = {}
    for record in records:  # oldest first
        for change in record.intent.clusterpolicy:
            first = fields.get(change.path)
            fields[change.path] = FieldChange(change.path, change.after, first.after if first else change.before)
            sources.setdefault(change.path, record.name)
    if backup is not None:  # the operator named the backup: its device-plugin config (and what else the runs changed)
        paths = {p for p in fields if not p.startswith(CONFIG)} | {CONFIG}
        return [FieldChange(p, _SET_BY_RUNS, resolve(backup, p, None)) for p in sorted(paths)], {}
    # FieldChange(path, before=value the runs set, after=value to restore)
    return list(fields.values()), sources


# The only ClusterPolicy fields an enable run changes, hence the only ones a rollback restores. A run
# record is a ConfigMap others with rights in its namespace may write: one naming any other path (say
# /spec/driver/repository, which the next rollback, often an administrator's, would then write) or a
# value of another shape than the enable writes is refused before any write.
RESTORABLE = {
    CONFIG: lambda v: v is None or (isinstance(v, dict) and set(v) <= {"name", "default"}
                                    and all(isinstance(x, str) for x in v.values())),
    CONFIG_NAME: lambda v: v is None or isinstance(v, str),
    CONFIG_DEFAULT: lambda v: v is None or isinstance(v, str),
    TOLERATIONS: lambda v: v is None or (isinstance(v, list) and all(
        isinstance(t, dict) and set(t) <= {"key", "operator", "value", "effect", "tolerationSeconds"} for t in v)),
}


def unrestorable(records: list[Record], settings: RollbackSettings) -> list[str]:
    """A refusal for each ClusterPolicy path (or value) of these records that no enable run writes,
    and for each record naming a ConfigMap other than the time-slicing one this rollback may change."""
    namespace = settings.records_namespace
    problems = []
    for record in records:
        where = f"Run record {namespace}/{record.name} (intent.json)"
        advice = f"A rollback restores nothing from it. {forged_advice(namespace, record.name)} {NOTHING}"
        if record.intent.configmap not in ("", settings.configmap):
            problems.append(
                f"{where} names ConfigMap {record.intent.configmap} as the one its run wrote; this rollback may change "
                f"only the time-slicing ConfigMap {settings.configmap or '(none given)'} (timeslicing_configmap_name): "
                f"if that enable ran with -e timeslicing_configmap_name={record.intent.configmap}, re-run the rollback "
                f"with the same. {advice}")
        for change in record.intent.clusterpolicy:
            if change.path not in RESTORABLE:
                problems.append(
                    f"{where} names ClusterPolicy path {change.path}, which no enable run changes (only "
                    f"{', '.join(sorted(RESTORABLE))}). {advice}")
            elif not (RESTORABLE[change.path](change.before) and RESTORABLE[change.path](change.after)):
                problems.append(
                    f"{where} gives ClusterPolicy path {change.path} a value of a shape no enable run writes "
                    f"(before {json.dumps(change.before)}, after {json.dumps(change.after)}). {advice}")
    return problems


# GPU Operator ConfigMaps that are no device-plugin config (mig-parted's, the MIG manager's clients',
# the operands' entrypoint scripts): a restored spec.devicePlugin.config never names one.
OPERATOR_CONFIGMAPS = ("default-mig-parted-config", "default-gpu-clients")


def _operators_own(state: ClusterState, configmap: dict[str, Any]) -> bool:
    metadata = configmap["metadata"]
    manager = state.spec.get("migManager") or {}
    named = {(manager.get(part) or {}).get("name") for part in ("config", "gpuClientsConfig")}
    return (metadata["name"] in named | set(OPERATOR_CONFIGMAPS) or metadata["name"].endswith("-entrypoint")
            or any(ref.get("kind") == "ClusterPolicy" for ref in metadata.get("ownerReferences") or []))


def _config_name_problem(state: ClusterState, settings: RollbackSettings, name: Any) -> str:
    """Why spec.devicePlugin.config.name may not be set to `name`; "" when it may: none (""), the
    time-slicing ConfigMap, or the write model's original-device-plugin-config (without a write model:
    any ConfigMap of the operator namespace), an existing one that is not the operator's own. The value
    before the first enable named a config the device plugin read, so it exists."""
    if name is None or name in ("", settings.configmap):
        return ""
    if not isinstance(name, str):
        return "a name is text"
    model = state.write_model
    if model is not None and name != model.original_device_plugin_config:
        fix = (f"; if {name} was the device-plugin config before any gpushare run, a cluster administrator "
               f"allows it with {render_fix(replace(model, original_device_plugin_config=name))}"
               if DNS_SUBDOMAIN.fullmatch(name) else "")
        return (f"the write model {WRITE_MODEL_AT} allows only none, {settings.configmap} or its "
                f"original-device-plugin-config ({model.original_device_plugin_config or 'none'}){fix}")
    configmap = state.configmaps.get(name)
    if configmap is None:
        return f"no ConfigMap {settings.namespace}/{name} exists"
    if _operators_own(state, configmap):
        return f"ConfigMap {name} is the GPU Operator's own, not a device-plugin config"
    return ""


def _default_key_problem(key: Any) -> str:
    return "" if key is None or key == "" or (isinstance(key, str) and CONFIGMAP_KEY.match(key)) else \
        "the default config is a ConfigMap key"


def _tolerations_problem(state: ClusterState, settings: RollbackSettings, value: Any) -> str:
    """Why spec.daemonsets.tolerations may not become `value`; "" when it may: what the operands
    tolerate now, less exactly the pool taint's toleration that the enable adds (or nothing less)."""
    if value is not None and not (isinstance(value, list) and all(isinstance(t, dict) for t in value)):
        return "tolerations are a list of objects"
    restored = list(value or ASSET_TOLERATIONS)  # the operator renders its assets' own for none
    remaining = list(state.operand_tolerations)
    if restored == remaining:
        return ""
    taint = settings.pool.taint
    if taint is None:
        return "no pool taint is set (timeslicing_pool_taint_key), so the rollback removes no toleration"
    added = {"key": taint.key, "operator": "Exists", "effect": "NoSchedule"}
    if added not in remaining:
        return f"the operands' tolerations hold no {json.dumps(added)}, the pool taint's toleration, the only one a rollback removes"
    remaining.remove(added)
    return "" if restored == remaining else (
        f"a rollback only removes the pool taint's toleration {json.dumps(added)}: that leaves {json.dumps(remaining)}")


def _unwritable(state: ClusterState, settings: RollbackSettings, path: str, value: Any) -> str:
    """Why the rollback's write model does not allow ClusterPolicy `path` to become `value` ("": it does)."""
    if path == CONFIG:
        if value is None:
            return ""
        if not (isinstance(value, dict) and set(value) <= {"name", "default"}):
            return "the device-plugin config is an object with a name and a default only"
        return _config_name_problem(state, settings, value.get("name")) or _default_key_problem(value.get("default"))
    if path == CONFIG_NAME:
        return _config_name_problem(state, settings, value)
    if path == CONFIG_DEFAULT:
        return _default_key_problem(value)
    if path == TOLERATIONS:
        return _tolerations_problem(state, settings, value)
    return f"no enable run changes {path}"


def _outside_write_model(state: ClusterState, settings: RollbackSettings, restore: list[FieldChange],
                         sources: dict[str, str], backup_source: str) -> list[str]:
    """A refusal for each value the restore would write that the runbooks' write model does not allow,
    whoever runs the rollback, naming the record (`sources`: path -> record) or backup it comes from."""
    problems = []
    for change in restore:
        why = _unwritable(state, settings, change.path, change.after)
        if not why:
            continue
        record = sources.get(change.path, "")
        where, advice = ((f"Run record {settings.records_namespace}/{record} (intent.json)",
                          forged_advice(settings.records_namespace, record)) if record else
                         (f"The backup ({backup_source})", "Name another backup with -e timeslicing_rollback_backup, "
                                                           "or none for the enable runs' records."))
        problems.append(f"{where} would have the rollback set ClusterPolicy {settings.clusterpolicy} field "
                        f"{change.path.removeprefix('/spec/')} to {json.dumps(change.after)}, which no rollback "
                        f"writes: {why}. {advice} {NOTHING}")
    return problems


def _comeback_warning(pod: Pod, node: Node, pool: Pool) -> str:
    """The replacement comes back if it tolerates the cordon and the taints that stay during the
    drain (the pool taint), and its selection admits the node without the pool label."""
    if not pod.controller or pod.daemonset or not admits(node, pod, dropped_label=pool.label_key):
        return ""
    selection = pod.selection()
    admitted = (f"its {selection} still admits {node.name} without the {pool.label_key} label" if selection
                else "it has no node selector or required node affinity")
    return (f"{pod.workload} (pod {pod.name}) will come back to {node.name} after its eviction: it tolerates the "
            f"cordon ({pod.cordon_toleration()}) and the node's taints, and {admitted}. The drain will stop; first "
            "scale it down, or change its selector or tolerations.")


def _rbac_names(settings: RollbackSettings) -> Names:
    return run_names(settings.namespace, settings.configmap, settings.pool.label_key, settings.pool.taint)


def _write_model_refusal(state: ClusterState, settings: RollbackSettings) -> str:
    """Why the write model, where there is one, cannot hold this rollback: it cannot be read, or it was
    rendered for another time-slicing ConfigMap or pool taint; "" when it can, or there is none."""
    if state.write_model_problem:
        return unreadable_refusal(state.write_model_problem, _rbac_names(settings))
    if state.write_model is None:
        return ""
    return (configmap_mismatch(state.write_model, settings.configmap)
            or pool_taint_mismatch(state.write_model, settings.pool.taint, "timeslicing_rollback_pool_taint"))


def _without_write_model(state: ClusterState, settings: RollbackSettings, restore: list[FieldChange]) -> list[str]:
    """A note for a device-plugin config name the restore writes that only a write model would decide
    (neither none nor the time-slicing ConfigMap), on a cluster without one."""
    if state.write_model is not None:
        return []
    names = [c.after.get("name") if isinstance(c.after, dict) else None for c in restore if c.path == CONFIG]
    names += [c.after for c in restore if c.path == CONFIG_NAME]
    return [f"There is no write model {WRITE_MODEL_AT} (deploy/rbac is not applied), so the device-plugin config "
            f"goes back to {name}, checked only to be an existing device-plugin config of {settings.namespace}. "
            "With deploy/rbac applied (`gpushare rbac render --original-device-plugin-config NAME`), a rollback "
            "restores only the config NAME the cluster had before gpushare."
            for name in names if isinstance(name, str) and name not in ("", settings.configmap)]


def writes_configmap(state: ClusterState, settings: RollbackSettings) -> list[str]:
    """What a rollback may send to the time-slicing ConfigMap: patch (its keys removed) and delete
    (one the enable created); nothing when it does not exist."""
    return ["patch", "delete"] if settings.configmap and settings.configmap in state.configmaps else []


@dataclass(frozen=True)
class ClusterRestore:
    """What the rollback puts back at the cluster level: nothing while other nodes still use a shared key."""

    users: list[str]  # the GPU nodes outside the rollback that still use a shared key
    live: list[Record]  # the enable runs it rolls back (a prepare run the trial keeps aside)
    fields: list[FieldChange]  # the ClusterPolicy fields it restores
    configmap: list[Change]  # the ConfigMap deleted, or the keys removed from it


def plan(state: ClusterState, pods: list[dict[str, Any]], settings: RollbackSettings, targets: list[str],
         invocation: dict[str, str], now: dt.datetime, access: dict[str, Any] | None = None) -> RollbackPlan:
    """`access`: the authorizer's answers to the preflight's questions (gpushare.rbac.access), if asked.
    Each step below may refuse; the plan stops after the first step that does."""
    result = RollbackPlan()
    result.interrupted = [state.interrupted_note(r, "An enable run was interrupted", settings.records_namespace, now)
                          for r in state.interrupted(ENABLE)]
    result.notes = [f"{note} This rollback undoes it." for note in result.interrupted]
    result.warnings = (state.record_warnings(settings.records_namespace)
                       + _unreadable_backups(state, settings.records_namespace))
    result.refusals = _precondition_refusals(state, settings, targets, invocation, access)
    if result.refusals:
        return result
    keys = shared_keys(state, settings)
    rolled, refusal = _rolled_nodes(state, settings, targets, keys)
    if refusal:
        result.refusals.append(refusal)
        return result
    result.nodes = rolled
    cluster = _cluster_restore(result, state, settings, rolled, keys)
    if cluster is None or result.refusals:
        return result
    result.finish_records = [r.name for r in state.interrupted(RUNBOOK)]
    for name in result.finish_records:
        result.notes.append(f"An earlier rollback was interrupted after its last change (record {name}): this run "
                            "finishes it.")
    if not result.writes:
        result.lines = [_nothing_line(state, targets), *(f"  WARNING: {w}" for w in result.warnings)]
        return result
    evictable = _evictable(result, state, settings, pods, rolled)
    if result.refusals:
        return result
    _plan_writes(result, state, settings, keys, cluster, evictable, [OperandPod(p) for p in pods], invocation, now)
    return result


def _precondition_refusals(state: ClusterState, settings: RollbackSettings, targets: list[str],
                           invocation: dict[str, str], access: dict[str, Any] | None) -> list[str]:
    """The operator and the targets, then the identity's access to the ConfigMap, then the write model."""
    refusals = [f"{problem} {NOTHING}" for problem in operator_problems(
        state, settings.namespace, settings.clusterpolicy, settings.records_namespace)]
    unknown = [t for t in targets if t not in state.nodes]
    if unknown:
        refusals.append(f"{', '.join(unknown)}: not a node of this cluster (kubectl get nodes). Check the "
                        f"inventory, the -l limit and the hosts' gpushare_node_name. {NOTHING}")
    if refusals:
        return refusals
    denied = configmap_refusal(access, identity(invocation), writes_configmap(state, settings), _rbac_names(settings))
    if denied:
        return [f"{denied} {NOTHING}"]
    unheld = _write_model_refusal(state, settings)
    return [f"{unheld} {NOTHING}"] if unheld else []


def _rolled_nodes(state: ClusterState, settings: RollbackSettings, targets: list[str],
                  keys: set[str]) -> tuple[list[str], str]:
    """The nodes the rollback changes: the targets that share, or every shared node when the shared key
    is the cluster's default (refused unless confirmed)."""
    policy_name, policy_default = state.plugin_config
    cluster_scope = policy_default in keys and policy_name in {settings.configmap, ""} | {
        mark.configmap for mark in _marks(state)}
    if not cluster_scope:
        return sorted(t for t in targets if _has_sharing(state.nodes[t], keys, settings.pool)), ""
    rolled = sorted({n.name for n in state.nodes.values() if _has_sharing(n, keys, settings.pool)})
    if settings.confirm_cluster_scope:
        return rolled, ""
    return rolled, (
        f"The ClusterPolicy's default device-plugin config is the shared key ({policy_default} of {policy_name}): "
        f"time-slicing is enabled cluster-wide, and restoring the ClusterPolicy rolls back every shared GPU "
        f"node ({', '.join(rolled)}), not only the one(s) named with -l. Re-run with "
        f"-e timeslicing_confirm_cluster_scope=true to cordon, drain and roll back all of them. {NOTHING}")


def _cluster_restore(result: RollbackPlan, state: ClusterState, settings: RollbackSettings, rolled: list[str],
                     keys: set[str]) -> ClusterRestore | None:
    """The ClusterPolicy fields and ConfigMap keys to restore, with their refusals and notes in `result`;
    None when the enable runs' records or the named backup cannot be used."""
    users = sorted(n.name for n in state.gpu_nodes if n.name not in rolled and n.config_label in keys)
    live = _live_enables(state)
    result.refusals += unrestorable(live, settings)
    if result.refusals:
        return None
    # A trial's rollback keeps the cluster prepared: undoing a prepare run rolls the whole fleet.
    kept = [] if settings.unprepare else [r for r in live if _prepared(r)]
    live = [r for r in live if r not in kept]
    backup, backup_source, problem = explicit_backup(state, settings)
    if problem:
        result.refusals.append(f"{problem} Name another one with -e timeslicing_rollback_backup=<record ConfigMap or "
                               f"clusterpolicy-<stamp>.yaml file>, or leave it empty for the enable runs' records. {NOTHING}")
        return None
    fields, sources = _restore_fields(live, backup) if not users else ([], {})
    restore_ops, refusals = _fields_to_restore(state, settings, fields)
    result.refusals += refusals + _outside_write_model(state, settings, restore_ops, sources, backup_source)
    result.notes += _without_write_model(state, settings, restore_ops)
    kept_keys = {k for r in kept for k in r.intent.keys_added}
    configmap_changes = [] if users else _configmap_cleanup(state, settings, live, keys, restore_ops, kept_keys)
    if kept and not users:
        result.notes.append(f"The cluster stays prepared for trials (prepare record {kept[-1].name}: ClusterPolicy "
                            f"devicePlugin.config, ConfigMap key(s) {', '.join(sorted(kept_keys)) or 'none'}). To undo "
                            "the preparation as well, re-run with -e timeslicing_rollback_unprepare=true: the operator "
                            "then restarts the device plugin and GFD on every GPU node.")
    result.restore_cluster = bool(restore_ops or configmap_changes or (not users and live))
    result.restores_config = any(c.path.startswith(CONFIG) for c in restore_ops)
    rerendered = sorted(state.operands) if any(c.path == TOLERATIONS for c in restore_ops) else (
        [o.name for o in state.config_readers()] if result.restores_config else [])
    result.rolls_fleet = rolls(state, rerendered) or driver_upgrades(state, restore_ops)
    result.rerenders = bool(rerendered) and not rolls(state, rerendered)
    return ClusterRestore(users, live, restore_ops, configmap_changes)


def _fields_to_restore(state: ClusterState, settings: RollbackSettings,
                       fields: list[FieldChange]) -> tuple[list[FieldChange], list[str]]:
    """The fields that differ from the backup, each from what it holds now; a field someone else changed
    since the enable is refused unless the overwrite is confirmed."""
    policy = state.clusterpolicy or {}
    restore_ops: list[FieldChange] = []
    refusals = []
    for change in fields:
        current = resolve(policy, change.path, None)
        if current == change.after:
            continue
        if change.before is _SET_BY_RUNS:
            change = FieldChange(change.path, current, change.after)
        elif current != change.before:
            if not settings.confirm_overwrite:
                refusals.append(
                    f"ClusterPolicy {settings.clusterpolicy} field {change.path.removeprefix('/spec/')} was changed by "
                    f"someone else since the enable run: it is {json.dumps(current)}, the enable set "
                    f"{json.dumps(change.before)}, the backup has {json.dumps(change.after)}. Restoring it would undo "
                    "that change. Confirm with -e timeslicing_rollback_confirm_overwrite=true, or set it yourself. "
                    f"{NOTHING}")
                continue
            change = FieldChange(change.path, current, change.after)
        restore_ops.append(change)
    return restore_ops, refusals


def _evictable(result: RollbackPlan, state: ClusterState, settings: RollbackSettings, pods: list[dict[str, Any]],
               rolled: list[str]) -> list[Pod]:
    """The pods holding a shared replica on the rolled nodes that the drain evicts, with their
    refusals and warnings in `result`."""
    evictable = []
    for pod in (Pod(p) for p in pods):
        if pod.node not in rolled or pod.finished or not pod.holds(shared_resources(state.nodes[pod.node])):
            continue
        if pod.daemonset:
            result.warnings.append(f"DaemonSet pod {pod.ref} holds a shared replica and stays (a drain leaves "
                                   "DaemonSet pods); change its DaemonSet to ask for whole cards.")
            continue
        evictable.append(pod)
        if not pod.controller and not settings.drain_force:
            result.refusals.append(f"Pod {pod.ref} holds a shared replica and has no controller: evicting it deletes "
                                   "it for good. Move it yourself, or confirm with "
                                   f"-e timeslicing_rollback_drain_force=true. {NOTHING}")
        if pod.uses_emptydir and not settings.drain_delete_emptydir_data:
            result.refusals.append(f"Pod {pod.ref} uses an emptyDir volume, whose data an eviction deletes. Confirm "
                                   f"with -e timeslicing_rollback_drain_delete_emptydir_data=true. {NOTHING}")
        warning = _comeback_warning(pod, state.nodes[pod.node], settings.pool)
        if warning:
            result.warnings.append(warning)
    result.refusals += [f"{r} {NOTHING}" for r in outlasting_drain(
        evictable, settings.drain_grace_period, settings.drain_timeout, "timeslicing_rollback_drain_timeout",
        "timeslicing_rollback_drain_grace_period")]
    return evictable


def _plan_writes(result: RollbackPlan, state: ClusterState, settings: RollbackSettings, keys: set[str],
                 cluster: ClusterRestore, evictable: list[Pod], operand_pods: list[OperandPod],
                 invocation: dict[str, str], now: dt.datetime) -> None:
    """The record, the changes in order, what the verify must find and the lines of a run nothing refused."""
    rolled, restore_ops = result.nodes, cluster.fields
    result.record = record_name(RUNBOOK, now)
    intent = Intent(RUNBOOK, rolled, restore_ops, settings.configmap if cluster.configmap else "")
    result.changes = _changes(state, settings, result, rolled, restore_ops, cluster.configmap, cluster.live, intent,
                              invocation, now)
    result.expected = {
        "targets": {n: {"gpus": state.nodes[n].gpus or 0} for n in rolled},
        "pool": settings.pool.as_dict(), "keys": sorted(keys),
        **state.bystanders(rolled, settings.pool, result.rolls_fleet),
        "compare_allocatable": not result.rolls_fleet, "compare_schedulable": not driver_upgrades(state, restore_ops),
        "driver_upgrade": settings.clusterpolicy if driver_upgrades(state, restore_ops) else "",
        "clusterpolicy": {c.path: c.after for c in restore_ops},
    }
    result.lines = _lines(state, settings, result, rolled, cluster.users, restore_ops, cluster.configmap, evictable,
                          operand_pods)


def _configmap_cleanup(state: ClusterState, settings: RollbackSettings, live: list[Record], keys: set[str],
                       restore_ops: list[FieldChange], kept_keys: set[str]) -> list[Change]:
    """Delete the ConfigMap the enable runs created once nothing points at it, else remove the keys
    they added (never the `default` key a ClusterPolicy still points at, nor `kept_keys`)."""
    names = {settings.configmap} - {""}  # never another a record names (unrestorable refuses those)
    changes = []
    for name in sorted(names):
        cm = state.configmaps.get(name)
        if cm is None:
            continue
        created = any(r.intent.configmap == name and r.intent.configmap_created for r in live) or (
            (cm["metadata"].get("annotations") or {}).get("gpushare.io/created-by") == ENABLE)
        try:
            restored = json_patch(state.clusterpolicy or {}, _restore_ops(state.clusterpolicy or {}, restore_ops))
        except PatchConflict:  # the restore's guards fail (a record claims values the ClusterPolicy lacks): it stays
            restored = state.clusterpolicy or {}
        still_pointed = resolve(restored, CONFIG_NAME, None) == name
        added = {k for r in live if r.intent.configmap == name for k in r.intent.keys_added} | (
            set(state.managed_keys(name)))
        data = set((cm.get("data") or {}).keys())
        if created and not still_pointed and data <= (added | keys):
            changes.append(Change("delete", "ConfigMap", name, namespace=settings.namespace, preconditions={"uid": cm["metadata"]["uid"]},
                                  why="delete the ConfigMap the enable runbook created, nothing uses it any more"))
        else:
            removable = sorted((data & (added | keys)) - ({DEFAULT_KEY} if still_pointed else set()) - kept_keys)
            if removable:
                left = sorted(set(state.managed_keys(name)) - set(removable))
                body = {"data": {k: None for k in removable},
                        "metadata": {"annotations": {"gpushare.io/managed-keys": ",".join(left) or None}}}
                changes.append(Change("merge", "ConfigMap", name, namespace=settings.namespace, body=body,
                                      why=f"remove the key(s) {', '.join(removable)} the enable runbook added"))
    return changes


def _changes(state: ClusterState, settings: RollbackSettings, result: RollbackPlan, rolled: list[str],
             restore_ops: list[FieldChange], configmap_changes: list[Change], live: list[Record],
             intent: Intent, invocation: dict[str, str], now: dt.datetime) -> dict[str, list[Change]]:
    keys = shared_keys(state, settings)
    record = new_record(result.record, settings.records_namespace, intent, state.clusterpolicy if restore_ops else None,
                        now, invocation)
    stop, restore, uncordon = [], [], []
    for name in rolled:
        node = state.nodes[name]
        cordon = not node.unschedulable or node.cordoned_by == RUNBOOK
        body: dict[str, Any] = {"metadata": {"labels": {settings.pool.label_key: None}}}
        if cordon:
            body["spec"] = {"unschedulable": True}
            body["metadata"]["annotations"] = {CORDONED_BY: RUNBOOK}
        stop.append(Change("merge", "Node", name, body=body, why="stop new shared scheduling: cordon and leave the shared pool"))
        labels = {CONFIG_LABEL: None} if node.config_label in keys else {}
        if labels:
            restore.append(Change("merge", "Node", name, body={"metadata": {"labels": labels}}, why="back to the default (whole-card) config"))
        mark = timeslicing_mark(node)
        taint = node.pool_taint(settings.pool)
        if taint and (mark is None or not mark.valid or mark.taint_added) and (taint == settings.pool.taint):
            restore.append(Change("untaint", "Node", name, body=taint.as_dict(), why=f"remove the pool taint {taint}"))
        finish: dict[str, Any] = {"metadata": {"annotations": {MARK: None, CORDONED_BY: None}}}
        if cordon:
            finish["spec"] = {"unschedulable": None}
        uncordon.append(Change("merge", "Node", name, body=finish, why="uncordon (only what this run cordoned) and drop the runbook's marks"))
    policy = []
    if restore_ops:
        policy.append(Change("json", "ClusterPolicy", settings.clusterpolicy, body=_restore_ops(state.clusterpolicy or {}, restore_ops),
                             why="restore the fields the enable runs changed"))
    records = [Change("merge", "ConfigMap", r.name, namespace=settings.records_namespace, body=state_patch("rolled-back", now),
                      why="the enable run is rolled back") for r in live]
    return {
        "record": [Change("create", "ConfigMap", result.record, namespace=settings.records_namespace, body=record, why="record this rollback")],
        "stop": stop, "restore": restore, "clusterpolicy": policy, "configmap": configmap_changes,
        "records": records if result.restore_cluster else [], "uncordon": uncordon,
        "finish": [Change("merge", "ConfigMap", name, namespace=settings.records_namespace, body=state_patch("complete", now), why="mark the rollback complete")
                   for name in [r.name for r in state.interrupted(RUNBOOK)] + [result.record]],
    }


def _restore_ops(policy: dict[str, Any], restore: list[FieldChange]) -> list[dict[str, Any]]:
    """Test each field still holds what the enable set, then put the original back (or remove it)."""
    ops: list[dict[str, Any]] = []
    for change in restore:
        present = resolve(policy, change.path, _ABSENT) is not _ABSENT
        if change.after is None:
            if present:
                ops += [{"op": "test", "path": change.path, "value": change.before},
                        {"op": "remove", "path": change.path}]
        else:
            ops += field_ops(policy, [FieldChange(change.path, change.before, change.after)])
    return ops


def _nothing_line(state: ClusterState, targets: list[str]) -> str:
    parts = []
    for name in sorted(targets):
        done = [r for r in state.records if r.runbook == RUNBOOK and r.state == "complete" and name in r.intent.nodes]
        parts.append(f"{name} was rolled back at {done[-1].finished or done[-1].started} (record {done[-1].name})"
                     if done else f"{name} never shared (no gpushare.io/timeslicing mark, no shared config label, "
                     "no shared allocatable)")
    return f"Nothing to do: {'; '.join(parts)}. Nothing was changed."


def _lines(state: ClusterState, settings: RollbackSettings, result: RollbackPlan, rolled: list[str], users: list[str],
           restore_ops: list[FieldChange], configmap_changes: list[Change], evictable: list[Pod],
           operand_pods: list[OperandPod]) -> list[str]:
    lines = [f"Plan: roll back time-slicing on {', '.join(rolled) or 'no node (cluster-level cleanup only)'}"]
    lines += [f"  note: {n}" for n in result.notes]
    lines += [f"  WARNING: {w}" for w in result.warnings]
    for name in rolled:
        node = state.nodes[name]
        drained = sorted(p.ref for p in evictable if p.node == name)
        lines.append(f"- {name}: " + ("cordon, " if not node.unschedulable else "already cordoned (stays so), ")
                     + f"leave the shared pool, evict {len(drained)} shared pod(s)"
                     + (f" ({', '.join(drained)})" if drained else "") + ", back to whole cards, uncordon"
                     + (" (only if this run cordoned it)" if node.unschedulable else ""))
    for change in restore_ops:
        lines.append(f"- ClusterPolicy {settings.clusterpolicy}: {change.path.removeprefix('/spec/')} "
                     f"{json.dumps(change.before)} -> {json.dumps(change.after)} (only if it is still "
                     f"{json.dumps(change.before)})")
    readers = [o.name for o in state.config_readers()]
    if result.rerenders:
        lines.append(on_delete_line(readers, rolled, False))
        if driver_upgrades(state, restore_ops):
            lines.append(f"  {DRIVER}'s template changes too, and with driver.upgradePolicy.autoUpgrade on "
                         + driver_walk(state, state.operands[DRIVER].rollout()[1]))
        lines += restart_lines(state, operand_pods, readers, rolled, "on the whole-card template")
    elif result.rolls_fleet:
        lines.append(operator_roll(state, sorted(state.operands) if any(c.path == TOLERATIONS for c in restore_ops)
                                   else readers))
    lines += [f"- {c.title}: {c.why}" for c in configmap_changes]
    if users:
        lines.append(f"- ClusterPolicy and ConfigMap stay: {', '.join(users)} still use(s) the shared config")
    others = [n.name for n in state.gpu_nodes if n.name not in rolled]
    lines.append("Not touched: " + (", ".join(others) or "no other GPU node")
                 + (" (only the operator's roll above restarts pods there)" if result.rolls_fleet and others else ""))
    lines.append(f"Record: ConfigMap {settings.records_namespace}/{result.record}, written before the first change")
    return lines


PHASES = ("cordon", "drain", "confirm", "restore node", "restore cluster", "verify", "uncordon")


def progress(phase: str, stopped_after: str) -> dict[str, Any]:
    """From the id of the phase a failed run stopped in (one of PHASES, which each phase's first task
    sets; "" before the first): the phases done and not done, and whether the ClusterPolicy was
    touched. `stopped_after` is set when it was a rehearsal stop."""
    index = PHASES.index(phase) if phase in PHASES else -1
    done = list(PHASES[:index + 1] if stopped_after else PHASES[:max(index, 0)])
    if stopped_after == "clusterpolicy":
        done = list(PHASES[:PHASES.index("restore cluster") + 1])
    policy = ("restored" if "restore cluster" in done else
              "partly restored (the re-run finishes it)" if phase == "restore cluster" else "untouched")
    return {"done": done, "not_done": [p for p in PHASES if p not in done], "policy": policy,
            "cordoned": index >= 0 and "uncordon" not in done}  # a failure before the first phase cordoned nothing
