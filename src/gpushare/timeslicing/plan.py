"""The enable runbook's plan: from the cluster as read and the inputs, every refusal (before any
write) or the ordered changes, the pod restarts they need, and what the verify must find."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gpushare import device_plugin_config as dpc
from gpushare import driver_upgrade as du
from gpushare import mps
from gpushare.k8s.changes import Change
from gpushare.model.node import CONFIG_LABEL, Node
from gpushare.model.operands import CONFIG_READERS, DRIVER, MPS
from gpushare.model.taints import Taint, tolerated
from gpushare.rbac import Names
from gpushare.rbac.access import configmap_refusal, identity
from gpushare.rbac.write_model import pool_taint_mismatch, run_names, unreadable_refusal
from gpushare.runbook.plan import Plan
from gpushare.runbook.inputs import NOTHING
from gpushare.timeslicing.xid import XidCheck
from gpushare.runbook.records import FieldChange, Intent, new_record, record_name, state_patch
from gpushare.runbook.state import ClusterState, operator_problems
from gpushare.timeslicing.settings import DEFAULT_CONFIG, Settings
from gpushare.timeslicing_common.mark import MARK, Mark, timeslicing_mark
from gpushare.timeslicing_common.sharing import (CONFIG, CONFIG_DEFAULT, CONFIG_NAME, DEFAULT_KEY, ENABLE, ROLLBACK,
                                                 TOLERATIONS, driver_upgrades, driver_walk, field_ops,
                                                 on_delete_line, operator_roll, restart_lines,
                                                 restarts_driver_in_place, rolls, spread, upgrades_driver)

RUNBOOK = ENABLE


@dataclass
class EnablePlan(Plan):
    interrupted: list[str] = field(default_factory=list)  # the interrupted run, also told with a refusal
    restart_nodes: list[str] = field(default_factory=list)
    # {"resourceVersion", "pods"}: reader pods known to have read the ConfigMap at that version
    known_readers: dict[str, Any] = field(default_factory=dict)
    rolls_fleet: bool = False
    backup_file: str = ""  # where the ClusterPolicy goes on the control machine before it changes
    needs_workloads: bool = False  # the pods of every GPU node decide it: read them, then plan again
    needs_fleet: bool = False  # made from the first read, it is not decided without every node (needs_fleet())

    @property
    def writes(self) -> bool:
        return super().writes or bool(self.restart_nodes)


@dataclass(frozen=True)
class Wanted:
    """What the run asks of the cluster, before it is judged: the nodes it affects, the ConfigMap's
    data it wants, the ClusterPolicy fields it changes and whether that rolls the fleet."""

    affected: list[str]  # the targets; with cluster scope every GPU node too
    data: dict[str, str]  # the ConfigMap's data as read
    desired: dict[str, str]  # ... and as this run leaves it
    wanted_default: str  # the ClusterPolicy's default key this run leaves
    field_changes: list[FieldChange]
    untolerated: Taint | None  # the pool taint, when the operands do not tolerate it
    rolls_fleet: bool  # spec.devicePlugin.config changes: the operator restarts the readers everywhere
    readers: list[str]  # the operand DaemonSets that read the ConfigMap
    rerenders: bool = False  # spec.devicePlugin.config changes under OnDelete: re-rendered, no roll

    @classmethod
    def of(cls, state: ClusterState, settings: Settings, targets: list[str]) -> Wanted:
        data = state.configmap_data(settings.configmap)
        policy_name, policy_default = state.plugin_config
        affected = sorted(set(targets) | ({n.name for n in state.gpu_nodes} if settings.scope == "cluster" else set()))
        if settings.scope == "cluster":
            wanted_default = settings.key
        else:
            wanted_default = policy_default if policy_name == settings.configmap and policy_default else DEFAULT_KEY
        desired = {**data, settings.key: settings.config.text}
        if DEFAULT_KEY not in desired:
            desired[DEFAULT_KEY] = DEFAULT_CONFIG
        taint = settings.pool_taint
        untolerated = taint if taint is not None and not tolerated(state.operand_tolerations, taint) else None
        field_changes = _config_changes(state, settings, wanted_default)
        if untolerated is not None and settings.confirm_operand_roll:
            field_changes.append(FieldChange(TOLERATIONS, (state.spec.get("daemonsets") or {}).get("tolerations"),
                                             state.operand_tolerations + [{"key": untolerated.key, "operator": "Exists",
                                                                           "effect": "NoSchedule"}]))
        rerenders = any(c.path.startswith(CONFIG) for c in field_changes)
        readers = state.config_readers()
        on_delete = bool(readers) and all(o.on_delete for o in readers)
        return cls(affected, data, desired, wanted_default, field_changes, untolerated, rerenders and not on_delete,
                   [o.name for o in readers] or list(CONFIG_READERS[:2]), rerenders and on_delete)

    def operand_roll(self, settings: Settings) -> bool:
        """The confirmed toleration change: every operand DaemonSet re-renders."""
        return self.untolerated is not None and settings.confirm_operand_roll

    def needs_workloads(self, state: ClusterState, settings: Settings) -> bool:
        """The driver upgrade the operand roll starts must evict every GPU pod: read them first (not on
        the restart-only path, which evicts none)."""
        return (self.operand_roll(settings) and upgrades_driver(state) and not restarts_driver_in_place(state)
                and state.workloads is None)

    def notes(self, state: ClusterState, settings: Settings) -> list[str]:
        if not self.operand_roll(settings):
            return []
        return [f"Confirmed: adding the toleration for {self.untolerated} to spec.daemonsets.tolerations "
                f"{_operand_roll_cost(state)}."]


def plan(state: ClusterState, settings: Settings, targets: list[str], invocation: dict[str, str],
         now: dt.datetime, access: dict[str, Any] | None = None, partial: bool = False,
         xid: XidCheck | None = None) -> EnablePlan:
    """The refusals, else the changes. `partial`: the state's nodes are only the targets and the nodes
    with a device-plugin config label (the preflight's first read; see `needs_fleet`). `xid`: what
    the preflight read of the targets' Xid codes (None: not run)."""
    xid = xid or XidCheck("", settings.xid_window)
    result = EnablePlan(warnings=state.record_warnings(settings.records_namespace))
    adopted = next(iter(reversed(state.interrupted(RUNBOOK))), None)
    if adopted:
        result.interrupted = [state.interrupted_note(adopted, "An earlier enable run was interrupted",
                                                     settings.records_namespace, now)]
        result.notes.append(f"{result.interrupted[0]} This run finishes that change and keeps its backup (roll back "
                            "instead with playbooks/rollback-timeslicing.yml).")
    result.refusals, wanted = refusals(state, settings, targets, invocation, access, xid)
    if wanted:
        result.notes += wanted.notes(state, settings) + ([xid.note()] if targets else [])
        result.needs_workloads = wanted.needs_workloads(state, settings)
        if not result.refusals:
            _plan_changes(result, state, settings, targets, wanted, invocation, now,
                          adopted.name if adopted else record_name(RUNBOOK, now), adopted.intent if adopted else None)
    result.needs_fleet = partial and needs_fleet(result, settings)
    return result


def needs_fleet(result: EnablePlan, settings: Settings) -> bool:
    """The fleet-read rule. The preflight first reads the targets and the nodes with a device-plugin
    config label; a plan made from that is the plan only when it writes nothing, refuses nothing and
    has node scope. Every other node counts only for a change (its fingerprint for the verify, the
    users of a key or of the default, the fleet's size) or for the refusal of a cluster-scope run:
    for those the preflight reads every node and plans again."""
    return not (settings.scope == "node" and not result.writes and not result.refusals)


def refusals(state: ClusterState, settings: Settings, targets: list[str], invocation: dict[str, str],
             access: dict[str, Any] | None = None, xid: XidCheck | None = None) -> tuple[list[str], Wanted | None]:
    """Every reason to refuse the run before any write, each ending "Nothing was changed.", in the
    order the operator reads them, and what the run wants once its preconditions hold (None until
    they do). Each stage's refusals hide the later stages', which assume the earlier ones passed.
    `access`: the authorizer's answers to the preflight's questions (gpushare.rbac.access), if asked."""
    problems = _precondition_problems(state, settings, targets, invocation, access, xid)
    wanted = None if problems else Wanted.of(state, settings, targets)
    if wanted:
        problems = _change_problems(state, settings, targets, wanted)
    return [f"{problem} {NOTHING}" for problem in problems], wanted


def _precondition_problems(state: ClusterState, settings: Settings, targets: list[str], invocation: dict[str, str],
                           access: dict[str, Any] | None, xid: XidCheck | None) -> list[str]:
    """The inputs, the operator, the identity's access, an interrupted rollback and the targets (a
    card DCGM saw fall off the bus is named by the Xid check, not again as an unhealthy count)."""
    problems = settings.problems() + operator_problems(state, settings.namespace, settings.clusterpolicy,
                                                       settings.records_namespace)
    if problems:
        return problems
    denied = configmap_refusal(access, identity(invocation), writes_configmap(state, settings), rbac_names(settings))
    if denied:
        return [denied]
    unheld = _write_model_refusal(state, settings)
    if unheld:
        return [unheld]
    return ([f"A rollback was interrupted (record {record.name}, started {record.started}, on "
             f"{', '.join(record.intent.nodes) or 'the cluster level'}): finish it first by re-running "
             "playbooks/rollback-timeslicing.yml for those nodes." for record in state.interrupted(ROLLBACK)]
            + (xid.problems() if xid else [])
            + _target_problems(state, targets, settings.strategy, {card.node for card in xid.fallen} if xid else set())
            + _mps_problems(state, settings, targets))


def _target_problems(state: ClusterState, targets: list[str], strategy: str = "time-slicing",
                     fallen: set[str] | frozenset[str] = frozenset()) -> list[str]:
    problems = []
    for name in targets:
        node = state.nodes.get(name)
        if node is None:
            problems.append(f"{name} is not a node of this cluster (kubectl get node {name} finds nothing): check -l, "
                            "the inventory, or the host's gpushare_node_name.")
        elif not node.gpu_present:
            problems.append(f"{name} has no nvidia.com/gpu.present=true label: it is not a GPU node managed by the "
                            "GPU Operator. Limit the run (-l) to GPU nodes.")
        elif node.gpus is None:
            problems.append(f"{name} has no nvidia.com/gpu.count label yet (GPU feature discovery has not run): "
                            "wait for the GPU Operator to finish with it.")
        elif node.mig_enabled and strategy != "mps":  # MPS says it in its own words (_mps_problems)
            problems.append(f"{name} has MIG enabled (nvidia.com/mig.config={node.mig_config}): this runbook "
                            "time-slices whole GPUs only; roll MIG back first (playbooks/rollback-mig.yml).")
        elif node.unhealthy is not None and name not in fallen:
            problems.append(_unhealthy_problem(node, strategy))
    return problems


def _unhealthy_problem(node: Node, strategy: str) -> str:
    """An unhealthy card is out of service only until the device plugin reloads (its health state
    lives in its process: k8s-device-plugin internal/rm/health.go), and enabling sharing reloads it."""
    resource, allocatable, capacity = node.unhealthy or ("", 0, 0)
    replicas = max(1, node.replicas)
    cards = -(-(capacity - allocatable) // replicas)
    of = f" of its {node.gpus}" if node.gpus else ""
    noun = "GPU" if (node.gpus or cards) == 1 else "GPUs"
    return (f"{node.name}: {cards}{of} {noun} unhealthy ({resource} allocatable {allocatable} "
            f"of capacity {capacity}): the device plugin took {'them' if cards != 1 else 'it'} out after an Xid error, "
            f"or it does not serve them. Enabling {'MPS' if strategy == 'mps' else strategy} reloads the plugin, which forgets the fault and "
            "advertises the card again, once per share. Find the card (the device plugin's log on the node says "
            "\"marked unhealthy\" with its UUID; DCGM_FI_DEV_XID_ERRORS), drain the node and repair or reset it (an "
            "Xid 79, fallen off the bus, needs a reboot), then run this again.")


def _mps_problems(state: ClusterState, settings: Settings, targets: list[str]) -> list[str]:
    """What stops MPS (or a switch between MPS and time-slicing) on the targets, before any write."""
    problems = []
    if settings.strategy == "mps" and (state.spec.get("mig") or {}).get("strategy") == "mixed":
        problems.append(f"the ClusterPolicy's mig.strategy is mixed: {mps.MIXED_UNSUPPORTED} (the operator sets "
                        "MIG_STRATEGY=mixed on every device plugin, over the config file, so the plugin on "
                        f"{', '.join(targets)} would exit and the node advertise no GPUs). Share these cards with "
                        "time-slicing (playbooks/enable-timeslicing.yml), or set the ClusterPolicy's mig.strategy to "
                        "single first (the device plugin and GFD restart on every GPU node).")
    other = "time-slicing" if settings.strategy == "mps" else "mps"
    rollback = "playbooks/rollback-timeslicing.yml"
    daemon = state.operands.get(MPS)
    if settings.strategy == "mps" and settings.scope == "node" and daemon is not None:
        problems += _per_node_mps_problems(daemon.template, settings, targets)
    for name in targets:
        node = state.nodes.get(name)
        if node is None or not node.gpu_present or node.gpus is None:
            continue  # _target_problems says why
        current = _strategy_of(state, settings, node)
        if current == other:
            problems.append(f"{name} already shares its cards with {'MPS' if other == 'mps' else 'time-slicing'}: "
                            f"switching it to {settings.mechanism} in place would restart its shared pods under "
                            f"other limits. Roll back first ({rollback}, limited to this node), then enable {settings.mechanism}.")
        if settings.strategy != "mps":
            continue
        if node.mig_enabled:
            problems.append(f"{name} has MIG enabled (nvidia.com/mig.config={node.mig_config}): {mps.MIG_UNSUPPORTED} "
                            "(the MPS control daemon starts no server for them and the device plugin would wait for "
                            "it forever). Roll MIG back first (playbooks/rollback-mig.yml), or keep MIG.")
        elif node.mig_in_hardware:
            problems.append(f"{name} has MIG enabled on its cards ({node.mig_in_hardware}), though not by the MIG "
                            f"manager (nvidia.com/mig.config={node.mig_config or '<unset>'}): {mps.MIG_UNSUPPORTED} (the "
                            "device plugin exits there and GFD fails). Disable MIG on the node first (nvidia-smi -mig 0 "
                            "on each card, with the node drained, or let the MIG manager apply all-disabled), or keep MIG.")
        elif daemon is None:
            problems.append(f"the GPU Operator runs no {MPS} DaemonSet: this operator cannot run MPS (GPU Operator "
                            "v24.3 and later with device plugin v0.15 and later can). Upgrade it first.")
        elif not daemon.selects({**node.labels, "nvidia.com/mps.capable": "true"}):
            selector = daemon.template.get("nodeSelector") or {}
            problems.append(f"{name}: the MPS control daemon cannot run there (its DaemonSet {MPS} selects "
                            + ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
                            + "; the node has " + ", ".join(f"{k}={node.labels.get(k, '<unset>')}" for k in sorted(selector)
                                                           if k != "nvidia.com/mps.capable")
                            + ") and the device plugin would wait for it forever. Fix the node's labels first.")
        else:
            memory = node.labels.get("nvidia.com/gpu.memory")
            problem = settings.memory_problem(name, node.product, int(memory) if memory and memory.isdigit() else None)
            if problem:
                problems.append(problem)
    return problems


def _strategy_of(state: ClusterState, settings: Settings, node: Node) -> str:
    """The sharing strategy the node's device-plugin config gives, else the one GFD labels."""
    if node.config_label:
        mark = timeslicing_mark(node)
        text = state.configmap_data(mark.configmap if mark and mark.configmap
                                    else settings.configmap).get(node.config_label)
        try:
            return dpc.parse(text).sharing.strategy if text is not None else node.strategy
        except dpc.ConfigError:
            return node.strategy
    return node.strategy


def _per_node_mps_problems(template: dict[str, Any], settings: Settings, targets: list[str]) -> list[str]:
    """A per-node MPS config the operator's MPS control daemon can never load (gpushare.mps)."""
    failure = mps.per_node_failure(template)
    if failure is None:
        return []
    version, why = failure
    return [f"per-node MPS cannot work on this GPU Operator: its MPS control daemon runs device plugin {version}, "
            "whose config-manager-init starts the daemon on the ClusterPolicy's default config (v0.18.2 and later) "
            f"and whose sidecar cannot signal it to load key `{settings.key}`: {why}. The daemon would wait forever "
            f'("{mps.NOT_CONFIGURED}"), the device plugin run on retrying every 30 s, and '
            f"{', '.join(sorted(set(targets)))} advertise 0 GPUs. What works: {mps.WHAT_WORKS}."]


def _change_problems(state: ClusterState, settings: Settings, targets: list[str], wanted: Wanted) -> list[str]:
    """What the change itself would harm: other configs, other nodes, the fleet, a roll under way."""
    return (_label_problems(state, settings, targets) + _config_problems(state, settings, targets, wanted)
            + _roll_problems(state, settings, wanted))


def _label_problems(state: ClusterState, settings: Settings, targets: list[str]) -> list[str]:
    """Labels of the targets that the enable would overwrite (it records no backup of a label)."""
    problems = []
    for name in targets:
        node = state.nodes[name]
        own, mark = node.config_label, timeslicing_mark(node)
        if settings.scope == "node" and own and own != settings.key and not (mark and mark.valid):
            problems.append(f"{name} already uses its own device-plugin config ({CONFIG_LABEL}={own}): the trial would "
                            "replace it. Remove that label first, or leave this node out of the trial.")
        pool = node.labels.get(settings.pool.label_key)
        if pool is not None and pool != settings.pool.label_value:
            problems.append(f"{name} already carries {settings.pool.label_key}={pool}: the shared-pool label would "
                            f"replace it. Choose another label with timeslicing_pool_label_key, or remove it first.")
    return problems


def _config_problems(state: ClusterState, settings: Settings, targets: list[str], wanted: Wanted) -> list[str]:
    """The ConfigMap's keys and the ClusterPolicy's config that the change would overwrite or strand."""
    problems = []
    data, shared = wanted.data, settings.config.text
    managed = state.managed_keys(settings.configmap)
    policy_name, policy_default = state.plugin_config
    gpu_nodes = state.gpu_nodes
    blocked = [n for n in gpu_nodes if n.config_label not in ("", settings.key) or n.mig_enabled or n.gpus is None]
    if settings.scope == "cluster" and blocked:
        problems.append("timeslicing_scope=cluster changes the default config of every GPU node, but "
                        + ", ".join(f"{n.name} ({'MIG enabled' if n.mig_enabled else 'no GPU count yet' if n.gpus is None else f'its own label {CONFIG_LABEL}={n.config_label}'})"  # noqa: E501
                                    for n in blocked)
                        + ". Remove that label / disable MIG there, or use timeslicing_scope=node.")
    if settings.key in data and data[settings.key] != shared and settings.key not in managed:
        problems.append(f"ConfigMap {settings.namespace}/{settings.configmap} already has a key `{settings.key}` with a "
                        "different config, and it was not written by this runbook (annotation gpushare.io/managed-keys: "
                        f"{','.join(managed) or 'none'}). Overwriting it would change every node that uses it. Choose "
                        "another key with timeslicing_config_key, or remove that key yourself first.")
    if policy_name and policy_name != settings.configmap:
        problems.append(f"ClusterPolicy {settings.clusterpolicy} already points the device plugin at ConfigMap "
                        f"`{policy_name}` (default key `{policy_default}`). Switching it to `{settings.configmap}` would "
                        f"reload every GPU node. Add the shared config to that ConfigMap instead: "
                        f"-e timeslicing_configmap_name={policy_name}.")
    if settings.scope == "node" and wanted.wanted_default != policy_default:
        try:
            if dpc.parse(wanted.desired[wanted.wanted_default]).sharing.strategy != "none":
                raise dpc.ConfigError("it enables sharing")
        except dpc.ConfigError as err:
            problems.append(f"ConfigMap {settings.namespace}/{settings.configmap} already has a `{wanted.wanted_default}` "
                            f"key that is not a valid no-sharing config ({err}). Pointing the ClusterPolicy at it would "
                            "change every GPU node without a per-node label. Fix or remove that key first.")
    if data.get(settings.key, shared) != shared:
        bystanders = sorted(set(_key_users(state, settings, settings.key)) - set(wanted.affected))
        if bystanders:
            problems.append(f"The `{settings.key}` config already in ConfigMap {settings.configmap} differs from this "
                            f"run's ({settings.replicas} replicas). Changing it would also change GPU node(s) "
                            f"outside the limit that use it: {', '.join(bystanders)}. Add them to the limit "
                            f"(-l {','.join(sorted(set(targets) | set(bystanders)))}), or give this trial its own "
                            "timeslicing_config_key.")
    relabelled = set(targets) if settings.scope == "node" else set()
    orphans = [n for n in gpu_nodes if n.name not in relabelled and n.config_label and n.config_label not in wanted.desired]
    if orphans:
        problems.append(", ".join(f"{n.name} carries {CONFIG_LABEL}={n.config_label}" for n in orphans)
                        + f", but ConfigMap {settings.configmap} has no such key: once the device plugin reads that "
                        "ConfigMap, its config-manager there would crash-loop (\"specified config does not exist\"). "
                        "Remove the label or add the key first.")
    return problems


def _key_users(state: ClusterState, settings: Settings, key: str) -> list[str]:
    name, default = state.plugin_config
    users = [n.name for n in state.gpu_nodes if n.config_label == key]
    if name == settings.configmap and default == key:
        users += [n.name for n in state.gpu_nodes if not n.config_label]
    return sorted(set(users))


def _roll_problems(state: ClusterState, settings: Settings, wanted: Wanted) -> list[str]:
    """The operator's rolls the change starts (operands, driver upgrade, the fleet's readers) or would
    start during one under way."""
    problems = []
    if (wanted.operand_roll(settings) and upgrades_driver(state) and not restarts_driver_in_place(state)
            and state.workloads is not None):
        problems += _unevictable(state, f"Adding the toleration for {wanted.untolerated} to spec.daemonsets.tolerations")
    if wanted.untolerated is not None and not settings.confirm_operand_roll:
        problems.append(f"The operand DaemonSets do not tolerate the pool taint {wanted.untolerated} "
                        f"(spec.daemonsets.tolerations: {state.operand_tolerations}): after a restart the device plugin "
                        f"could not come back on the tainted node. Adding that toleration {_operand_roll_cost(state)}. "
                        "Use a pool taint the operands already tolerate (the default: -e timeslicing_pool_taint_key="
                        "nvidia.com/gpu), or -e timeslicing_pool_taint=false, or confirm the fleet-wide change with "
                        "-e timeslicing_confirm_operand_roll=true.")
    gpu_nodes = state.gpu_nodes
    if (wanted.rerenders and settings.scope == "cluster" and len(gpu_nodes) > settings.fleet_roll_confirm_above
            and not settings.confirm_fleet_roll):
        problems.append(f"Under daemonsets.updateStrategy OnDelete the operator restarts no pod of "
                        f"{' and '.join(wanted.readers)}: with timeslicing_scope=cluster this run restarts them itself "
                        f"on all {len(gpu_nodes)} GPU nodes at once (above timeslicing_fleet_roll_confirm_above="
                        f"{settings.fleet_roll_confirm_above}). Confirm with -e timeslicing_confirm_fleet_roll=true, or "
                        "keep timeslicing_scope=node.")
    if wanted.rolls_fleet and len(gpu_nodes) > settings.fleet_roll_confirm_above and not settings.confirm_fleet_roll:
        problems.append(f"This cluster has not been prepared for time-slicing: pointing spec.devicePlugin.config at "
                        f"{settings.configmap} re-renders {' and '.join(wanted.readers)}, whose pods then restart on all "
                        f"{len(gpu_nodes)} GPU nodes, one node at a time (above timeslicing_fleet_roll_confirm_above="
                        f"{settings.fleet_roll_confirm_above}). Run playbooks/prepare-timeslicing.yml first (a separate, "
                        "fleet-wide change), or confirm with -e timeslicing_confirm_fleet_roll=true.")
    rolling = [o for o in state.config_readers() if o.rolling]
    if rolling:
        problems.append("The GPU Operator is still rolling out an earlier change: " + ", ".join(
            f"DaemonSet {o.name} has {o.rollout()[0]} of {o.rollout()[1]} GPU nodes on its current template"
            for o in rolling) + ". A trial started during the roll could not tell its own effect on the other nodes "
            f"from the roll's. Wait for it (kubectl -n {settings.namespace} rollout status daemonset/{rolling[0].name}), "
            "then re-run.")
    return problems


def _operand_roll_cost(state: ClusterState) -> str:
    operands = sorted(state.operands)
    return (f"re-renders every operand DaemonSet ({spread(state, operands)})"
            + ("; the driver DaemonSet's template changes, and with driver.upgradePolicy.autoUpgrade=true "
               + driver_walk(state, len(du.upgraded_nodes(state.gpu_nodes))) if upgrades_driver(state) else ""))


def _unevictable(state: ClusterState, change: str) -> list[str]:
    """The driver upgrade that `change` starts must be able to take every GPU pod off its node
    (gpushare.driver_upgrade); `state.workloads` holds them."""
    nodes = set(du.upgraded_nodes(state.gpu_nodes))
    pods: dict[str, list[dict[str, Any]]] = {}
    for pod in state.workloads or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in nodes:
            pods.setdefault(node, []).append(pod)
    problem = du.refusal(pods, du.Policy.of(state.spec), change)
    return [problem + " Or use a pool taint the operands already tolerate (the default: "
            "-e timeslicing_pool_taint_key=nvidia.com/gpu), or -e timeslicing_pool_taint=false."] if problem else []


def _config_changes(state: ClusterState, settings: Settings, wanted_default: str) -> list[FieldChange]:
    """spec.devicePlugin.config as this run wants it."""
    policy_name, policy_default = state.plugin_config
    config = (state.spec.get("devicePlugin") or {}).get("config")
    if config is None:  # the chart renders no config block until a ConfigMap is named
        return [FieldChange(CONFIG, None, {"name": settings.configmap, "default": wanted_default})]
    changes = []
    if policy_name != settings.configmap:
        changes.append(FieldChange(CONFIG_NAME, config.get("name"), settings.configmap))
    if policy_default != wanted_default:
        changes.append(FieldChange(CONFIG_DEFAULT, config.get("default"), wanted_default))
    return changes


def _plan_changes(result: EnablePlan, state: ClusterState, settings: Settings, targets: list[str], wanted: Wanted,
                  invocation: dict[str, str], now: dt.datetime, record: str, adopted: Intent | None) -> None:
    """The changes of a run nothing refused, in the order the phases write them. `adopted`: the
    intent of the interrupted run this one finishes (its record is `record`)."""
    cm = state.configmaps.get(settings.configmap)
    configmap_changes = _configmap_changes(state, settings, wanted)
    policy_changes = ([Change("json", "ClusterPolicy", settings.clusterpolicy, body=field_ops(state.clusterpolicy or {}, wanted.field_changes),
                              why="point the device plugin at the ConfigMap")] if wanted.field_changes else [])
    node_changes, changing_nodes = _node_changes(result, state, settings, targets, record)
    restart = _restarts(state, settings, targets, wanted, bool(configmap_changes))
    result.restart_nodes = sorted(restart)
    result.known_readers = {"resourceVersion": ((cm or {}).get("metadata") or {}).get("resourceVersion", ""),
                            "pods": sorted(state.started_after(settings.configmap))}
    result.rolls_fleet = wanted.rolls_fleet or wanted.operand_roll(settings)
    result.record = record
    result.backup_file = (f"{settings.backup_dir}/clusterpolicy-{now.strftime('%Y%m%dT%H%M%SZ')}.yaml"
                          if policy_changes else "")
    if not (configmap_changes or policy_changes or node_changes or restart) and adopted is None:
        result.lines = [f"Nothing to change: {settings.mechanism} is already enabled as asked ({settings.replicas} "
                        f"replicas, key {settings.key}, scope {settings.scope}) on {', '.join(sorted(set(targets)))}."
                        if targets else f"Nothing to change: the cluster is prepared for time-slicing trials "
                        f"(ConfigMap {settings.namespace}/{settings.configmap}, key {settings.key})."]
        result.expected = _expected(state, settings, wanted.affected, targets, False, False)
        return
    intent = Intent(RUNBOOK, sorted(set(changing_nodes) | set(restart)), wanted.field_changes, settings.configmap,
                    cm is None, sorted(k for k in wanted.desired if k not in wanted.data))
    result.changes = {
        "record": _record_changes(state, settings, record, intent, adopted, invocation, now, result.backup_file),
        "configmap": configmap_changes, "clusterpolicy": policy_changes, "nodes": node_changes,
        "finish": [Change("merge", "ConfigMap", record, namespace=settings.records_namespace, body=state_patch("complete", now), why="mark this run complete")],
    }
    result.expected = _expected(state, settings, wanted.affected, targets, result.rolls_fleet,
                                driver_upgrades(state, wanted.field_changes))
    result.lines = _lines(state, settings, result, wanted.affected, targets, wanted.field_changes, wanted.readers,
                          cm is None, wanted.data)


def _configmap_changes(state: ClusterState, settings: Settings, wanted: Wanted) -> list[Change]:
    """Create the ConfigMap with the configs, or merge in the keys that differ."""
    cm = state.configmaps.get(settings.configmap)
    data, desired = wanted.data, wanted.desired
    managed = state.managed_keys(settings.configmap)
    managed_wanted = ",".join(sorted(set(managed) | {settings.key} | ({DEFAULT_KEY} if DEFAULT_KEY not in data else set())))
    if cm is None:
        return [Change("create", "ConfigMap", settings.configmap, namespace=settings.namespace, body={
                     "apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": settings.configmap, "namespace": settings.namespace,
                                  "labels": {"app.kubernetes.io/managed-by": "gpushare"},
                                  "annotations": {"gpushare.io/managed-keys": managed_wanted,
                                                  "gpushare.io/created-by": RUNBOOK}},
                     "data": desired}, why="the device-plugin configs")]
    annotations = (cm.get("metadata") or {}).get("annotations") or {}
    if desired == data and annotations.get("gpushare.io/managed-keys") == managed_wanted:
        return []
    return [Change("merge", "ConfigMap", settings.configmap, namespace=settings.namespace,
                   body={"metadata": {"annotations": {"gpushare.io/managed-keys": managed_wanted}},
                      "data": {k: v for k, v in desired.items() if data.get(k) != v}}, why="the device-plugin configs")]


def _node_changes(result: EnablePlan, state: ClusterState, settings: Settings, targets: list[str],
                  record: str) -> tuple[list[Change], list[str]]:
    """Each target's label, annotation and taint patches, and the targets that change."""
    node_changes: list[Change] = []
    changing_nodes = []
    for name in sorted(set(targets)):
        changes, keeps_own = _node_change(state.nodes[name], settings, record)
        if keeps_own:
            result.notes.append(f"{name} keeps its own taint {state.nodes[name].pool_taint(settings.pool)}: it already "
                                f"keeps pods without a {settings.pool.taint.key} toleration away; the runbook adds none.")
        if changes:
            changing_nodes.append(name)
        node_changes += changes
    return node_changes, changing_nodes


def _node_change(node: Node, settings: Settings, record: str) -> tuple[list[Change], bool]:
    """The node's label/annotation merge patch and, when the pool taint is missing, the taint patch."""
    pool = settings.pool
    labels: dict[str, str] = {}
    if settings.scope == "node" and node.config_label != settings.key:
        labels[CONFIG_LABEL] = settings.key
    if not node.in_pool(pool):
        labels[pool.label_key] = pool.label_value
    previous = timeslicing_mark(node)
    existing = node.pool_taint(pool)
    add_taint = pool.taint is not None and existing is None
    taint_added = add_taint or bool(existing and previous and previous.valid and previous.taint_added
                                    and existing == pool.taint)
    mark = Mark(settings.configmap, settings.key, settings.replicas, settings.scope,
                previous.run if previous and previous.valid and previous.run else record, taint_added)
    annotations = {MARK: mark.text()} if not previous or previous.text() != mark.text() else {}
    changes = []
    if labels or annotations:
        body: dict[str, Any] = {"metadata": {}}
        if labels:
            body["metadata"]["labels"] = labels
        if annotations:
            body["metadata"]["annotations"] = annotations
        changes.append(Change("merge", "Node", node.name, body=body, why="select the shared config and join the shared pool"))
    if add_taint:
        changes.append(Change("taint", "Node", node.name, body=pool.taint.as_dict(), why=f"taint the shared pool ({pool.taint})"))
    return changes, bool(existing and existing != pool.taint)


def _restarts(state: ClusterState, settings: Settings, targets: list[str], wanted: Wanted,
              writes_configmap: bool) -> list[str]:
    """The nodes whose ConfigMap readers the run restarts. Pods read the ConfigMap as mounted: a node
    may use a key its pods can see."""
    if wanted.rolls_fleet and settings.scope == "cluster":
        return []  # the operator's roll restarts every node's readers from the new template
    if writes_configmap or wanted.rolls_fleet or wanted.rerenders:
        return [n for n in wanted.affected if n in set(targets) or settings.scope == "cluster"]
    cm = state.configmaps.get(settings.configmap)
    started_after = state.started_after(settings.configmap)
    return [n for n in wanted.affected if any(not pod.sees(cm, started_after) or not state.operands[pod.daemonset].current(pod)
                                              for pod in state.pods if pod.node == n and pod.daemonset in wanted.readers
                                              and pod.daemonset in state.operands)]


def _record_changes(state: ClusterState, settings: Settings, record: str, intent: Intent, adopted: Intent | None,
                    invocation: dict[str, str], now: dt.datetime, backup_file: str) -> list[Change]:
    """The run record, written before the first change (or the interrupted run's, extended)."""
    if adopted is not None:
        return [Change("merge", "ConfigMap", record, namespace=settings.records_namespace,
                       body={"data": {"intent.json": _intent_json(_merge(adopted, intent))}}, why="extend the interrupted run's record")]
    body = new_record(record, settings.records_namespace, intent, state.clusterpolicy, now, invocation, backup_file)
    cm = state.configmaps.get(settings.configmap)
    if cm is not None:
        body["data"]["configmap.yaml"] = _dump(cm)
    return [Change("create", "ConfigMap", record, namespace=settings.records_namespace, body=body, why="record this run and back up the ClusterPolicy")]


def _merge(old: Intent, new: Intent) -> Intent:
    paths: dict[str, FieldChange] = {c.path: c for c in old.clusterpolicy}
    for change in new.clusterpolicy:
        first = paths.get(change.path)
        paths[change.path] = FieldChange(change.path, first.before if first else change.before, change.after)
    return Intent(old.runbook, sorted(set(old.nodes) | set(new.nodes)), list(paths.values()),
                  old.configmap or new.configmap, old.configmap_created or new.configmap_created,
                  sorted(set(old.keys_added) | set(new.keys_added)))


def _intent_json(intent: Intent) -> str:
    import json  # noqa: PLC0415

    return json.dumps(intent.as_dict(), indent=2, sort_keys=True)


def _dump(obj: dict[str, Any]) -> str:
    import yaml  # noqa: PLC0415

    return yaml.safe_dump(obj, sort_keys=True)


def _expected(state: ClusterState, settings: Settings, affected: list[str], targets: list[str],
              rolls_fleet: bool, upgrades: bool) -> dict[str, Any]:
    return {
        "targets": {n: {"gpus": state.nodes[n].gpus, "pool": n in set(targets)} for n in affected},
        "replicas": settings.replicas, "rename": settings.rename_by_default, "strategy": settings.strategy,
        "pool": settings.pool.as_dict(), "scope": settings.scope, "key": settings.key,
        **state.bystanders(affected, settings.pool, rolls_fleet),
        "compare_allocatable": not rolls_fleet, "compare_schedulable": not upgrades,
        "driver_upgrade": settings.clusterpolicy if upgrades else "",  # its upgrade-failed nodes end the waits
    }


def _lines(state: ClusterState, settings: Settings, result: EnablePlan, affected: list[str], targets: list[str],
           field_changes: list[FieldChange], readers: list[str], creates_cm: bool, data: dict[str, str]) -> list[str]:
    lines = [f"Plan: {settings.mechanism} with {settings.replicas} replicas per GPU on {', '.join(sorted(set(targets)))} "
             f"(key {settings.key} of {settings.namespace}/{settings.configmap}, scope {settings.scope})" if targets else
             f"Plan: prepare the cluster for time-slicing trials (ConfigMap {settings.namespace}/{settings.configmap}, "
             f"key {settings.key} with {settings.replicas} replicas)"]
    lines += [f"  note: {n}" for n in result.notes]
    lines += [f"  WARNING: {w}" for w in result.warnings]
    lines += share_lines(state, settings, targets)
    if result.changes.get("configmap"):
        added = [k for k in sorted({settings.key, DEFAULT_KEY}) if k not in data]
        changed = [settings.key] if settings.key in data and data[settings.key] != settings.config.text else []
        lines.append(f"- ConfigMap {settings.namespace}/{settings.configmap}: "
                     + ("create" if creates_cm else "update")
                     + (f", add {', '.join(added)}" if added else "") + (f", change {', '.join(changed)}" if changed else ""))
    for change in field_changes:
        lines.append(f"- ClusterPolicy {settings.clusterpolicy}: {change.path.removeprefix('/spec/')} "
                     f"{change.before or '-'} -> {change.after}")
    rerendered = sorted(state.operands) if any(c.path == TOLERATIONS for c in field_changes) else (
        readers if any(c.path.startswith(CONFIG) for c in field_changes) else [])
    if rerendered and not rolls(state, rerendered):  # daemonsets.updateStrategy OnDelete: no roll comes
        lines.append(on_delete_line(readers, result.restart_nodes, settings.scope == "cluster"))
        if driver_upgrades(state, field_changes):
            lines.append(f"  {DRIVER}'s template changes too, and with driver.upgradePolicy.autoUpgrade on "
                         + driver_walk(state, state.operands[DRIVER].rollout()[1]))
    elif result.rolls_fleet:
        lines.append(operator_roll(state, rerendered or readers))
    lines += restart_lines(state, state.pods, readers, result.restart_nodes, "they must read the ConfigMap as it is now")
    for name in sorted(set(targets)):
        node = state.nodes[name]
        parts = []
        if settings.scope == "node" and node.config_label != settings.key:
            parts.append(f"label {CONFIG_LABEL}={settings.key}")
        if not node.in_pool(settings.pool):
            parts.append(f"label {settings.pool.label_key}={settings.pool.label_value}")
        if settings.pool.taint and node.pool_taint(settings.pool) is None:
            parts.append(f"taint {settings.pool.taint}")
        if parts:
            lines.append(f"- {name}: " + ", ".join(parts))
    others = [n.name for n in state.gpu_nodes if n.name not in set(affected)]
    lines.append("Not touched: " + (", ".join(others) if others else "no other GPU node")
                 + (" (only the operator's roll above restarts pods there)" if result.rolls_fleet and others else ""))
    lines.append(f"Record and ClusterPolicy backup: ConfigMap {settings.records_namespace}/{result.record}"
                 + (", written before the first change" if result.changes["record"][0].action == "create"
                    else " (the interrupted run's)"))
    return lines


def share_lines(state: ClusterState, settings: Settings, targets: list[str]) -> list[str]:
    """MPS: each target's per-share limits, as the daemon will set them."""
    if settings.strategy != "mps":
        return []
    lines = []
    for name in sorted(set(targets)):
        node = state.nodes[name]
        memory = node.labels.get("nvidia.com/gpu.memory")
        if memory and memory.isdigit():
            lines.append(f"- {name}: {mps.describe(node.product, int(memory), settings.replicas)}")
    return lines


def writes_configmap(state: ClusterState, settings: Settings) -> list[str]:
    """What an enable may send to the time-slicing ConfigMap: patch (a key merged in), and create
    when it does not exist yet."""
    return ["patch"] + (["create"] if settings.configmap not in state.configmaps else [])


def rbac_names(settings: Settings) -> Names:
    """The names deploy/rbac must be rendered for, for this run."""
    return run_names(settings.namespace, settings.configmap, settings.pool.label_key, settings.pool_taint)


def _write_model_refusal(state: ClusterState, settings: Settings) -> str:
    """Why the write model, where there is one, cannot hold this enable: it cannot be read, or it allows
    another pool taint than the one the enable writes; "" when it can, or there is none."""
    if state.write_model_problem:
        return unreadable_refusal(state.write_model_problem, rbac_names(settings))
    return pool_taint_mismatch(state.write_model, settings.pool_taint, "timeslicing_pool_taint") if state.write_model else ""
