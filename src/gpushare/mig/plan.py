"""The plan of both MIG runbooks, from one read of the cluster: every refusal before a write, or
per node the steps (cordon, drain the pods that use its GPUs, label nvidia.com/mig.config, wait for
the MIG manager, verify, uncordon what the run cordoned), what the verify must find and the
profile-fit answer with its fragmentation table. The enable goes to the config asked for; the
rollback to the config the node had before the first enable (all-disabled when it has no mark)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpushare.k8s.changes import Change
from gpushare import mig_layout
from gpushare.clock import parse_time
from gpushare.mig import parted
from gpushare.mig.checks import stuck
from gpushare.mig.fit import WHOLE, Fit, fit, smallest_fit
from gpushare.gpu_catalog import MigProfile
from gpushare.mig.hardware import GpuModel, model
from gpushare.mig.settings import ENABLE, MARK, ROLLBACK, RUNBOOKS, Mark, MigSettings
from gpushare.mig_layout import Layout
from gpushare.mig_parted_config import MigConfigError, MigConfigSpec, parse_configs, yaml_key
from gpushare.model.node import CORDONED_BY, GPU, MIG_CONFIG, MIG_STATE, Node
from gpushare.model.pods import Pod, outlasting_drain
from gpushare.runbook.plan import Plan
from gpushare.runbook.inputs import NOTHING
from gpushare.runbook.records import Intent, Record, new_record, record_name, state_patch
from gpushare.runbook.state import ClusterState, operator_problems
from gpushare.timeslicing_common.mark import timeslicing_mark

STRATEGIES = ("single", "mixed")
PAUSED = "paused-for-mig-change"


@dataclass
class NodePlan:
    name: str
    gpus: int
    product: str
    config: str  # where the node goes
    current: str  # nvidia.com/mig.config now
    previous: str  # the config before the first enable (kept in the mark)
    source: parted.Source
    after: Layout
    fit: Fit
    evict: list[Pod] = field(default_factory=list)
    resources: tuple[str, ...] = ()  # the GPU resources a pod of the node may hold
    cordon: bool = False  # this run cordons (or holds a MIG runbook's cordon) and uncordons at the end
    relabel: bool = False
    mode_change: bool = False  # MIG mode goes on or off on a GPU: it takes effect only once the GPUs reset


@dataclass
class MigPlan(Plan):
    nodes: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    cordons: list[str] = field(default_factory=list)  # nodes this run cordons (they stay so if it fails)
    report_file: str = ""
    before: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        return bool(self.nodes)


def gpu_resources(node: Node) -> tuple[str, ...]:
    """Every GPU resource the node advertises (nvidia.com/gpu, .shared, mig-*): what a GPU pod holds."""
    return tuple(sorted({GPU} | set(node.resources("capacity", "nvidia.com/"))))


def advertised(layout: Layout, strategy: str) -> dict[str, int]:
    """What the device plugin advertises for a layout: single, nvidia.com/gpu per instance (or per
    GPU with MIG off); mixed, nvidia.com/mig-<profile> per instance and nvidia.com/gpu per whole GPU."""
    mig, whole = mig_layout.instances(layout), mig_layout.whole_gpus(layout)
    if strategy == "single":
        return {GPU: whole if whole == len(layout) else sum(mig.values())}
    return {GPU: whole, **{f"nvidia.com/mig-{p}": n for p, n in sorted(mig.items())}}


def product_label(product: str, layout: Layout, strategy: str) -> str:
    mig = mig_layout.instances(layout)
    if strategy == "single" and mig_layout.whole_gpus(layout) == 0 and len(mig) == 1:
        return f"{product}-MIG-{next(iter(mig))}"
    return product


def _pool(layout: Layout) -> Counter[str]:
    """Instances per kind (a GPU with MIG off is one whole-GPU instance); kinds with none left out."""
    return mig_layout.instances(layout) + Counter({WHOLE: mig_layout.whole_gpus(layout)})


def _profiles(gpu: GpuModel, memory_mib: int, layouts: list[Layout | None]) -> dict[str, MigProfile]:
    names = {p for layout in layouts if layout for g in layout if g for p in g}
    found = {name: gpu.profile(name) for name in names}
    return {WHOLE: MigProfile(WHOLE, 7, memory_mib, 1, True), **{k: v for k, v in found.items() if v is not None}}


def _physical_gpus(node: Node, mark: Mark | None, configs: dict[str, list[MigConfigSpec]]) -> int | None:
    """Physical GPUs: from the mark, GFD's count with MIG off (or under mixed), else the count of
    instances divided by those of one GPU of the current config (single)."""
    if mark and mark.gpus:
        return mark.gpus
    if not node.mig_enabled or node.labels.get("nvidia.com/mig.strategy") == "mixed":
        return node.gpus
    entries = configs.get(node.mig_config) or []
    per_gpu = {sum(e.mig_devices.values()) for e in entries if e.mig_enabled and e.devices is None}
    if node.gpus and len(per_gpu) == 1 and (n := per_gpu.pop()) and node.gpus % n == 0:
        return node.gpus // n
    return None


def _config_refusals(name: str, node: Node, state: ClusterState, settings: MigSettings, strategy: str,
                     target: str) -> tuple[NodePlan | None, list[str], list[str]]:
    """The node's plan to go to `target`, or what stops it; (plan, refusals, warnings)."""
    source = parted.source(state.spec, state.configmaps, name)
    where = f"ConfigMap {settings.namespace}/{source.configmap}"
    configmap = state.configmaps.get(source.configmap)
    if configmap is None:
        return None, [f"{name}: no mig-parted config: {where} ({source.why}) does not exist. Is the MIG manager "
                      f"enabled and running (ClusterPolicy migManager, kubectl -n {settings.namespace} get pods -l "
                      "app=nvidia-mig-manager)? With a custom config, create it first."], []
    try:
        configs = parse_configs(str((configmap.get("data") or {}).get("config.yaml") or ""))
    except MigConfigError as err:
        return None, [f"{name}: {where} key config.yaml is not a config the MIG manager can read: {err}."], []
    mark = Mark.parse(node.annotations.get(MARK))
    gpus = _physical_gpus(node, mark, configs)
    if not gpus:
        return None, [f"{name}: cannot tell how many physical GPUs it has (nvidia.com/gpu.count "
                      f"{node.labels.get('nvidia.com/gpu.count', 'missing')}, MIG config {node.mig_config}, no "
                      f"{MARK} mark): wait for GPU feature discovery, or roll MIG back by hand first."], []
    # GFD's nvidia.com/gpu.memory is the whole GPU's only with MIG off
    gpu = model(node.product, int(node.labels.get("nvidia.com/gpu.memory", "0") or 0) if not node.mig_enabled else 0)
    current = node.mig_config or mig_layout.DISABLED
    if target not in configs:
        usable = [c for c in sorted(configs) if not parted.apply(configs[c], gpu, [None] * gpus)[1]]
        read_as = yaml_key(target)
        hint = (f" A key written {target} there is read by mig-parted's YAML 1.1 as {read_as!r}: quote it in the file "
                f"(\"{target}\")." if read_as != target and read_as in configs else "")
        return None, [f"{name}: MIG config {target!r} is not in {where} ({source.why}). The configs there that apply "
                      f"to its {gpu.product} GPUs: {', '.join(usable) or 'none'}.{hint}"], []
    before = parted.apply(configs[current], gpu, [None] * gpus)[0] if current in configs else None
    after, refusals, warnings = parted.apply(configs[target], gpu, before or [None] * gpus)
    refusals = [f"{name}: MIG config {target} of {where} does not fit its {gpus} {gpu.product} GPU(s): {r}."
                for r in refusals]
    if strategy == "single" and not refusals:
        layouts = {tuple(sorted(g.items())) if g is not None else None for g in after}
        if len(layouts) > 1 or any(layout is not None and len(layout) != 1 for layout in layouts):
            refusals.append(
                f"{name}: MIG config {target} gives its GPUs {', '.join(_shape(g) for g in after)}; the ClusterPolicy's "
                "MIG strategy is single, under which every GPU of a node needs the same, single profile (else the "
                "device plugin advertises nothing: product ...-MIG-INVALID). Pick a single-profile config (all-1g.10gb, "
                "all-3g.20gb, ...), or switch the ClusterPolicy to spec.mig.strategy=mixed first.")
    if refusals:
        return None, refusals, warnings
    profiles = _profiles(gpu, gpu.memory_mib, [before, after])
    result = fit(settings.workloads if settings.runbook == ENABLE else [], profiles,
                 _pool(before) if before is not None else None, _pool(after))
    previous = mark.previous if mark else current
    plan = NodePlan(name, gpus, gpu.product, target, current, previous, source, after, result,
                    mode_change=_mode_change(configs, gpu, gpus, previous if current == target else current, after))
    if result.unfit:
        fitting = [c for c in sorted(configs) if c != mig_layout.DISABLED and _all_fit(configs[c], gpu, gpus, settings)]
        largest = max((profiles[k] for k in result.after), key=lambda p: p.memory_mib, default=None)
        unfit = ", ".join(f"{w.name} (needs {w.need_text})" for w in result.unfit)
        refusals.append(
            f"{name}: {unfit} {'fits' if len(result.unfit) == 1 else 'fit'} no instance of {target} "
            f"(the largest: {largest.name if largest else 'none'}, {largest.memory_gib if largest else 0:.2f} GiB). "
            f"{result.coverage()}. Configs of {where} that fit every listed workload: {', '.join(fitting) or 'none'}.")
    return plan, refusals, warnings


def _gave_up(state: ClusterState, node: Node, target: str, settings: MigSettings, now: dt.datetime) -> Record | None:
    """The run record of a MIG run whose MIG manager has given up on its GPU clients on `node` for
    sure: the node is pending on `target` with its clients paused, the run cordoned it, and the run
    started longer ago than its drain may take plus the MIG manager's wait (the label came after the
    drain). None when that is not certain (a re-run then waits again, and its wait tells)."""
    if node.mig_config != target or node.mig_state != "pending" or PAUSED not in node.deploy_labels.values():
        return None
    if node.cordoned_by not in RUNBOOKS:
        return None
    for record in state.interrupted():
        started = parse_time(record.started)
        if record.runbook in RUNBOOKS and node.name in record.intent.nodes and started is not None and (
                now - started).total_seconds() > settings.drain_timeout + settings.client_timeout:
            return record
    return None


def _mode_change(configs: dict[str, list[MigConfigSpec]], gpu: GpuModel, gpus: int, from_config: str,
                 after: Layout) -> bool:
    """Whether going from `from_config` to the layout `after` turns MIG mode on or off on a GPU."""
    before = parted.apply(configs[from_config], gpu, [None] * gpus)[0] if from_config in configs else [None] * gpus
    return mig_layout.mode_change(before, after)


def _shape(gpu: dict[str, int] | None) -> str:
    return "MIG off" if gpu is None else "+".join(f"{n}x{p}" for p, n in sorted(gpu.items())) or "no instance"


def _all_fit(entries: list[MigConfigSpec], gpu: GpuModel, gpus: int, settings: MigSettings) -> bool:
    layout, refusals, _ = parted.apply(entries, gpu, [None] * gpus)
    if refusals:
        return False
    profiles = _profiles(gpu, gpu.memory_mib, [layout])
    return all(smallest_fit(w, (profiles[k] for k in _pool(layout) if k in profiles)) for w in settings.workloads)


def _pod_refusals(name: str, node: Node, pods: list[Pod], settings: MigSettings) -> tuple[list[Pod], list[str], list[str]]:
    resources = gpu_resources(node)
    evict, refusals, warnings = [], [], []
    for pod in pods:
        if pod.node != name or pod.finished or not pod.holds(resources):
            continue
        if pod.daemonset:
            warnings.append(f"DaemonSet pod {pod.ref} uses a GPU of {name} and is not drained (a drain leaves DaemonSet "
                            "pods); the MIG manager waits until no workload uses the GPUs.")
            continue
        evict.append(pod)
        if not pod.controller and not settings.drain_force:
            refusals.append(f"Pod {pod.ref} uses a GPU of {name} and has no controller: evicting it deletes it for good. "
                            "Move it yourself, or confirm with -e mig_drain_force=true.")
        if pod.uses_emptydir and not settings.drain_delete_emptydir_data:
            refusals.append(f"Pod {pod.ref} on {name} uses an emptyDir volume, whose data an eviction deletes. Confirm "
                            "with -e mig_drain_delete_emptydir_data=true.")
    refusals += outlasting_drain(evict, settings.drain_grace_period, settings.drain_timeout, "mig_drain_timeout",
                                 "mig_drain_grace_period")
    if evict and not settings.confirm_eviction_window:
        refusals.append(
            f"{len(evict)} pod(s) use the GPUs of {name} ({', '.join(p.ref for p in evict)}): the MIG manager needs "
            "them gone, so the run evicts them (PodDisruptionBudgets honoured) and they wait, or run elsewhere, until "
            "the node is back. Confirm the eviction window with -e mig_confirm_eviction_window=true, or move them first.")
    return evict, refusals, warnings


def plan(state: ClusterState, pods: list[dict[str, Any]], settings: MigSettings, targets: list[str],
         invocation: dict[str, str], now: dt.datetime) -> MigPlan:
    result = MigPlan(warnings=state.record_warnings(settings.records_namespace))
    result.refusals = [f"{problem} {NOTHING}" for problem in settings.problems + operator_problems(
        state, settings.namespace, settings.clusterpolicy, settings.records_namespace)]
    if result.refusals:
        return result
    strategy = str((state.spec.get("mig") or {}).get("strategy") or "")
    result.refusals = [f"{problem} {NOTHING}" for problem in _cluster_problems(state, settings, strategy)]
    workload_pods = [Pod(p) for p in pods]
    plans: list[NodePlan] = []
    for name in targets:
        node_plan, refusals, warnings = _node_plan(name, state, settings, strategy, pods, workload_pods, now)
        result.refusals += [f"{message} {NOTHING}" for message in refusals]
        result.warnings += warnings
        if node_plan is not None:
            plans.append(node_plan)
    if result.refusals:
        return result
    if not plans:
        result.lines = [_nothing_line(state, targets, settings), *(f"  WARNING: {w}" for w in result.warnings)]
        return result
    _plan_writes(result, state, settings, strategy, plans, invocation, now)
    return result


def _cluster_problems(state: ClusterState, settings: MigSettings, strategy: str) -> list[str]:
    """What stops any MIG change: no MIG manager, or a MIG strategy under which no instance is advertised."""
    problems = []
    if (state.spec.get("migManager") or {}).get("enabled") is False:
        problems.append(f"The MIG manager is disabled (ClusterPolicy {settings.clusterpolicy} spec.migManager.enabled "
                        "false): nothing would apply a MIG config. Enable it first.")
    if strategy not in STRATEGIES:
        problems.append(f"ClusterPolicy {settings.clusterpolicy} has spec.mig.strategy {strategy or 'unset'}: the device "
                        "plugin then advertises no MIG instance. Set it to single or mixed first (it applies to every "
                        "GPU node).")
    return problems


def _node_plan(name: str, state: ClusterState, settings: MigSettings, strategy: str, pods: list[dict[str, Any]],
               workload_pods: list[Pod], now: dt.datetime) -> tuple[NodePlan | None, list[str], list[str]]:
    """A target's plan (None when it is where the run takes it, or refused), refusals and warnings."""
    node = state.nodes.get(name)
    refusal = _target_problem(name, node, settings)
    if refusal or node is None:
        return None, [refusal], []
    mark = Mark.parse(node.annotations.get(MARK))
    target = (settings.configs.get(name, "") if settings.runbook == ENABLE
              else settings.rollback_to or (mark.previous if mark else mig_layout.DISABLED))
    ours = node.unschedulable and node.cordoned_by in RUNBOOKS
    if node.mig_config == target and node.mig_state == "success" and not ours and (
            settings.runbook == ENABLE or mark is None):
        return None, [], []
    if not node.mig_capable:  # a rollback of a node without MIG: nothing is partitioned there
        return None, [], []
    refusal = _manager_problem(name, node, state, settings, strategy, target, pods, ours, now)
    if refusal:
        return None, [refusal], []
    node_plan, refusals, warnings = _config_refusals(name, node, state, settings, strategy, target)
    evict, pod_refusals, pod_warnings = _pod_refusals(name, node, workload_pods, settings)
    if node_plan is not None:
        node_plan.evict, node_plan.resources = evict, gpu_resources(node)
        node_plan.cordon = not node.unschedulable or ours
        node_plan.relabel = node.mig_config != target
    return node_plan, refusals + pod_refusals, warnings + pod_warnings


def _target_problem(name: str, node: Node | None, settings: MigSettings) -> str:
    """A target that is no GPU node, or that the enable cannot partition: not MIG-capable, or time-sliced."""
    if node is None or not node.gpu_present:
        why = "no such node" if node is None else "no nvidia.com/gpu.present=true label"
        return (f"{name} is not a GPU node of this cluster ({why}): check -l, the inventory, or the host's "
                "gpushare_node_name.")
    if not node.mig_capable and settings.runbook == ENABLE:
        return (f"{name} is not MIG-capable (nvidia.com/mig.capable={node.labels.get('nvidia.com/mig.capable', 'unset')}"
                f", product {node.product or 'unknown'}): MIG needs an A100, A30, H100, H200 or newer data-centre GPU.")
    if settings.runbook == ENABLE and (node.shares or timeslicing_mark(node) is not None):
        return (f"{name} is time-sliced (nvidia.com/gpu.replicas {node.replicas}, sharing strategy {node.strategy}): "
                "one change at a time. Roll time-slicing back first (playbooks/rollback-timeslicing.yml).")
    return ""


def _manager_problem(name: str, node: Node, state: ClusterState, settings: MigSettings, strategy: str, target: str,
                     pods: list[dict[str, Any]], ours: bool, now: dt.datetime) -> str:
    """The MIG manager failed on `target` already, an earlier run gave up on the node, or it is still applying another config."""
    if node.mig_config == target and node.mig_state == "failed":
        node_plan = _config_refusals(name, node, state, settings, strategy, target)[0]
        reboot = (f" It turns MIG mode on or off, which takes effect only once the GPUs are reset, and the MIG "
                  f"manager runs without WITH_REBOOT: if the node needs a reboot for that, reboot {name} (at its "
                  f"start the MIG manager applies {target} again) and re-run this command once it reports success."
                  if node_plan is not None and node_plan.mode_change else "")
        return (f"The MIG manager already failed to apply {target} on {name} (nvidia.com/mig.config.state=failed): "
                f"its log says why (kubectl -n {settings.namespace} logs -l app=nvidia-mig-manager).{reboot} Roll "
                "back with playbooks/rollback-mig.yml, or fix the cause and set the label again.")
    record = _gave_up(state, node, target, settings, now)
    if record is not None:
        return stuck(name, target, settings.namespace, [p for p in pods if (p.get("spec") or {}).get("nodeName") == name],
                     record.name, record.intent.node_labels.get(name))
    if node.mig_config != target and node.mig_state in ("pending", "rebooting") and not ours:
        return (f"The MIG manager is still applying {node.mig_config} on {name} (nvidia.com/mig.config.state="
                f"{node.mig_state}): wait until it reports success or failed, then re-run.")
    return ""


def _plan_writes(result: MigPlan, state: ClusterState, settings: MigSettings, strategy: str, plans: list[NodePlan],
                 invocation: dict[str, str], now: dt.datetime) -> None:
    """The record, the changes, what the verify must find and the lines of a run nothing refused."""
    result.nodes = [p.name for p in plans]
    result.resources = sorted({r for p in plans for r in p.resources})
    result.cordons = [p.name for p in plans if p.cordon]
    result.record = record_name(settings.runbook, now)
    more = f"-and-{len(plans) - 1}-more" if len(plans) > 1 else ""
    result.report_file = f"{settings.runbook}-{now.strftime('%Y%m%dT%H%M%SZ')}-{plans[0].name}{more}.md"
    result.changes = _changes(state, settings, plans, result.record, invocation, now)
    result.expected = {
        "strategy": strategy,
        "targets": {p.name: {"config": p.config, "resources": advertised(p.after, strategy),
                             "product": product_label(p.product, p.after, strategy),
                             "deploy": {k: v for k, v in state.nodes[p.name].deploy_labels.items() if v != PAUSED},
                             "mode_change": p.mode_change}
                    for p in plans},
        # what the waits' advice names: this run's record and the labels it kept of each node before
        "record": result.record, "before_labels": {p.name: _kept(state.nodes[p.name]) for p in plans},
        **state.bystanders(result.nodes),
    }
    result.before = {p.name: facts(state.nodes[p.name]) for p in plans}
    result.lines = _lines(state, settings, strategy, plans, result)


def _kept(node: Node) -> dict[str, str | None]:
    """The node labels a MIG run records before it changes them."""
    return {MIG_CONFIG: node.labels.get(MIG_CONFIG), MIG_STATE: node.labels.get(MIG_STATE), **node.deploy_labels}


def facts(node: Node) -> dict[str, Any]:
    """What the report compares before and after, for one node."""
    return {
        "nvidia.com/mig.config": node.mig_config or "-", "nvidia.com/mig.config.state": node.mig_state or "-",
        "nvidia.com/gpu.product": node.labels.get("nvidia.com/gpu.product", "-"),
        "nvidia.com/gpu.count": node.labels.get("nvidia.com/gpu.count", "-"),
        **{f"allocatable {k}": v for k, v in sorted(node.resources("allocatable", "nvidia.com/").items())},
        "schedulable": "no (cordoned)" if node.unschedulable else "yes",
    }


def _changes(state: ClusterState, settings: MigSettings, plans: list[NodePlan], record: str,
             invocation: dict[str, str], now: dt.datetime) -> dict[str, list[Change]]:
    saved = {p.name: _kept(state.nodes[p.name]) for p in plans}
    intent = Intent(settings.runbook, [p.name for p in plans], node_labels=saved)
    cordon, reconfigure, uncordon = [], [], []
    for p in plans:
        node = state.nodes[p.name]
        old = Mark.parse(node.annotations.get(MARK))
        mark = Mark(p.previous, p.config, p.gpus, old.run if old and settings.runbook == ENABLE else record)
        body: dict[str, Any] = {"metadata": {"annotations": {MARK: mark.text()}}}
        if p.cordon:
            body["spec"] = {"unschedulable": True}
            body["metadata"]["annotations"][CORDONED_BY] = settings.runbook
        cordon.append(Change("merge", "Node", p.name, body=body, why="stop new pods on the node (only if schedulable) and record its MIG config before"))
        if p.relabel:
            reconfigure.append(Change("merge", "Node", p.name, body={"metadata": {"labels": {MIG_CONFIG: p.config}}},
                                      why=f"ask the MIG manager for {p.config}"))
        finish: dict[str, Any] = {"metadata": {"annotations": {CORDONED_BY: None} if p.cordon else {}}}
        if p.cordon:
            finish["spec"] = {"unschedulable": None}
        if settings.runbook == ROLLBACK:
            finish["metadata"]["annotations"][MARK] = None
        if finish.get("spec") or finish["metadata"]["annotations"]:
            uncordon.append(Change("merge", "Node", p.name, body=finish, why="uncordon (only what the MIG runbooks cordoned)"))
    names = {p.name for p in plans}
    earlier = [r for r in state.records if r.runbook in RUNBOOKS and r.state == "in-progress" and set(r.intent.nodes) & names]
    undone = ([r for r in state.records if r.runbook == ENABLE and r.state in ("in-progress", "complete")
               and set(r.intent.nodes) <= names] if settings.runbook == ROLLBACK else [])
    finished = [Change("merge", "ConfigMap", r.name, namespace=settings.records_namespace, body=state_patch("rolled-back" if r in undone else "complete", now),
                       why="the enable is rolled back" if r in undone else "the interrupted run is finished by this one")
                for r in earlier + [u for u in undone if u not in earlier]]
    return {
        "record": [Change("create", "ConfigMap", record, namespace=settings.records_namespace,
                          body=new_record(record, settings.records_namespace, intent, None, now, invocation),
                          why="record the run and the node labels it changes")],
        "cordon": cordon, "reconfigure": reconfigure, "uncordon": uncordon,
        "finish": finished + [Change("merge", "ConfigMap", record, namespace=settings.records_namespace, body=state_patch("complete", now),
                                     why="mark the run complete")],
    }


def _nothing_line(state: ClusterState, targets: list[str], settings: MigSettings) -> str:
    parts = []
    for name in sorted(targets):
        node = state.nodes[name]
        parts.append(f"{name} runs MIG config {node.mig_config or mig_layout.DISABLED} "
                     f"(nvidia.com/mig.config.state={node.mig_state or 'unset'})")
    return f"Nothing to do: {'; '.join(parts)}. {NOTHING}"


def _lines(state: ClusterState, settings: MigSettings, strategy: str, plans: list[NodePlan],
           result: MigPlan) -> list[str]:
    from gpushare.table import render_table  # noqa: PLC0415

    configs = sorted({p.config for p in plans})
    lines = [f"Plan ({settings.runbook}): MIG config {', '.join(configs)} on {', '.join(result.nodes)}, {strategy} "
             f"strategy (ClusterPolicy {settings.clusterpolicy})"]
    lines += [f"  WARNING: {w}" for w in result.warnings]
    for p in plans:
        steps = (["cordon"] if p.cordon and not state.nodes[p.name].unschedulable else
                 ["keep the cordon"] if p.cordon else ["already cordoned by someone else (stays so)"])
        steps.append(f"evict {len(p.evict)} GPU pod(s) ({', '.join(x.ref for x in p.evict)})" if p.evict
                     else "no GPU pod to evict")
        steps.append(f"label nvidia.com/mig.config={p.config}" if p.relabel else f"nvidia.com/mig.config is already {p.config}")
        steps += [f"wait for the MIG manager (at most {settings.reconfigure_timeout} s)", "verify"]
        steps += ["uncordon"] if p.cordon else []
        resources = advertised(p.after, strategy)
        change = f"{p.current} -> {p.config}" if p.relabel else f"{p.config} (labelled already: this run finishes it)"
        lines += [f"- {p.name} ({p.gpus} x {p.product}): {change}",
                  f"  mig-parted config: ConfigMap {settings.namespace}/{p.source.configmap} ({p.source.why})",
                  f"  steps: {', '.join(steps)}",
                  f"  advertises afterwards: {', '.join(f'{k} {v}' for k, v in resources.items())}, product "
                  f"{product_label(p.product, p.after, strategy)}" + (
                      " (tell the quota and monitoring owners; DCGM reports MIG instances in "
                      "DCGM_FI_PROF_GR_ENGINE_ACTIVE, not DCGM_FI_DEV_GPU_UTIL)" if mig_layout.instances(p.after) else "")]
        if p.fit.workloads:
            lines.append(f"  workloads: {p.fit.coverage()}")
            lines += ["    " + line for line in render_table(
                ["workload", "needs", "smallest instance that fits", "replicas placed", "more that fit in what is left"],
                p.fit.workload_rows()).splitlines()]
            lines += [f"  WARNING: only {placed} of {w.replicas} replicas of {w.name} find an instance on {p.name}."
                      for w, placed in p.fit.short]
        elif settings.runbook == ENABLE:
            lines.append("  workloads: none listed (mig_workloads): which models fit is not checked")
        lines.append("  fragmentation (instances of the node):")
        lines += ["    " + line for line in render_table(
            ["instance", "memory", "before", "after", "for the listed workloads", "left free"],
            p.fit.fragmentation_rows()).splitlines()]
    others = [n.name for n in state.gpu_nodes if n.name not in result.nodes]
    lines.append(f"Not touched: {', '.join(others) or 'no other GPU node'}")
    lines.append(f"Record: ConfigMap {settings.records_namespace}/{result.record}, written before the first change")
    return lines
