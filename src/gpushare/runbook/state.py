"""The cluster as every runbook's preflight reads it in one go (gpushare_read): the GPU Operator's
objects, the GPU nodes, the run records, the lock and, when read, the write model; and what is
refused when the operator or the runbooks' own namespace is missing."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gpushare.model.node import Node, Pool, packed, unpacked
from gpushare.bounded import Unreadable
from gpushare.model.operands import CONFIG_READERS, DEVICE_PLUGIN, Operand, OperandPod
from gpushare.rbac import Names
from gpushare.rbac.write_model import parsed as parsed_write_model
from gpushare.runbook import lock
from gpushare.runbook.records import Record, forged_advice

ASSET_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@dataclass
class ClusterState:
    namespace_exists: bool
    clusterpolicy: dict[str, Any] | None
    clusterpolicy_served: bool
    nodes: dict[str, Node]
    configmaps: dict[str, dict[str, Any]]
    operands: dict[str, Operand]
    pods: list[OperandPod]
    lease: dict[str, Any] | None
    records: list[Record] = field(default_factory=list)
    plugin_namespaces: list[str] = field(default_factory=list)  # where a device-plugin DaemonSet runs
    nodes_version: str = ""  # the resourceVersion `nodes` were listed at ("": read otherwise)
    workloads: list[dict[str, Any]] | None = None  # every pod not finished, when read (the driver upgrade's view)
    records_namespace_exists: bool = True
    stray_records: list[str] = field(default_factory=list)  # run records an earlier gpushare left in the operator namespace
    unreadable_records: dict[str, str] = field(default_factory=dict)  # record -> why no run trusts it (skipped)
    write_model: Names | None = None  # the admission policies' parameters (None: absent, unreadable or not read)
    write_model_problem: str = ""  # why the write model that is there cannot be read
    clusterpolicies: list[dict[str, Any]] | None = None  # every ClusterPolicy, when read (None: not read or not served)
    gpuclusters: list[str] = field(default_factory=list)  # the GPUClusters (none when the kind is not served)

    @classmethod
    def of(cls, read: dict[str, Any]) -> ClusterState:
        """From a `gpushare_read` result with keys namespace, clusterpolicy, nodes (packed or not),
        configmaps (the operator's), records_namespace and records (the ConfigMaps of the runbooks' own
        namespace), daemonsets, pods, lease (missing kinds come as None), nodes_version and, when read,
        workloads and write_model (the ConfigMap gpushare.rbac.write_model reads), clusterpolicies (every
        ClusterPolicy) and gpuclusters (a kind the cluster does not serve, as before v26.7, is none)."""
        configmaps = {c["metadata"]["name"]: c for c in read.get("configmaps") or []}
        records = [Record.of(c) for c in read.get("records") or [] if Record.is_record(c)]
        write_model, write_model_problem = _write_model(read.get("write_model"))
        return cls(
            namespace_exists=bool(read.get("namespace")),
            clusterpolicy=read.get("clusterpolicy"),
            clusterpolicy_served="clusterpolicy" not in (read.get("not_served") or []),
            nodes={n["metadata"]["name"]: Node(n) for n in unpacked(read.get("nodes")) or []},
            configmaps=configmaps,
            operands={d["metadata"]["name"]: Operand(d) for d in read.get("daemonsets") or []},
            pods=[OperandPod(p) for p in read.get("pods") or []],
            lease=read.get("lease"),
            records=sorted((r for r in records if not r.problem), key=lambda r: r.name),
            plugin_namespaces=sorted({d["metadata"]["namespace"] for d in read.get("plugin_anywhere") or []}),
            nodes_version=str(read.get("nodes_version") or ""),
            workloads=read.get("workloads"),
            records_namespace_exists=bool(read.get("records_namespace")),
            stray_records=sorted(name for name, c in configmaps.items() if Record.is_record(c)),
            unreadable_records={r.name: r.problem for r in sorted(records, key=lambda r: r.name) if r.problem},
            write_model=write_model,
            write_model_problem=write_model_problem,
            clusterpolicies=read.get("clusterpolicies"),
            gpuclusters=sorted(g["metadata"]["name"] for g in read.get("gpuclusters") or []),
        )

    def record_warnings(self, namespace: str) -> list[str]:
        """One warning per run record no run can read, hence skips (a run record is written by the
        runbook identity, which anyone holding it can forge)."""
        return [f"Run record {namespace}/{name} cannot be read ({why}); every run skips it. {forged_advice(namespace, name)}"
                for name, why in self.unreadable_records.items()]

    @property
    def spec(self) -> dict[str, Any]:
        return (self.clusterpolicy or {}).get("spec") or {}

    @property
    def plugin_config(self) -> tuple[str, str]:
        """(ConfigMap name, default key) the ClusterPolicy points the device plugin at."""
        config = (self.spec.get("devicePlugin") or {}).get("config") or {}
        return str(config.get("name") or ""), str(config.get("default") or "")

    @property
    def operand_tolerations(self) -> list[dict[str, Any]]:
        """What every operand DaemonSet tolerates: spec.daemonsets.tolerations when set, else the
        assets' own (gpu-operator applyCommonDaemonsetConfig replaces them only when non-empty)."""
        return list((self.spec.get("daemonsets") or {}).get("tolerations") or ASSET_TOLERATIONS)

    @property
    def driver_auto_upgrade(self) -> bool:
        driver = self.spec.get("driver") or {}
        return driver.get("enabled", True) is not False and bool((driver.get("upgradePolicy") or {}).get("autoUpgrade"))

    @property
    def driver_parallel_upgrades(self) -> int:
        """driver.upgradePolicy.maxParallelUpgrades (the CRD's default 1; 0 means no limit)."""
        return int(((self.spec.get("driver") or {}).get("upgradePolicy") or {}).get("maxParallelUpgrades", 1))

    @property
    def gpu_nodes(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.gpu_present), key=lambda n: n.name)

    def bystanders(self, targets: list[str], pool: Pool | None = None, rolls_fleet: bool = False) -> dict[str, Any]:
        """What a verify compares the GPU nodes but `targets` with (packed: their fingerprints), and
        where a watch of what changed since starts: the resourceVersion of this read and the targets'
        resourceVersions in it. Not for a run the operator's roll follows: every node changes then,
        and one list of them is less than the watch's events."""
        chosen = set(targets)
        return {"bystanders": packed({n.name: n.fingerprint(pool) for n in self.gpu_nodes if n.name not in chosen}),
                "since": "" if rolls_fleet else self.nodes_version,
                "versions": {name: self.nodes[name].resource_version for name in sorted(chosen) if name in self.nodes}}

    def config_readers(self) -> list[Operand]:
        """The operand DaemonSets that read the device-plugin config, as the operator rendered them."""
        return [self.operands[name] for name in CONFIG_READERS if name in self.operands]

    def operand_pods(self, node: str, daemonset: str) -> list[OperandPod]:
        return [p for p in self.pods if p.node == node and p.daemonset == daemonset]

    @property
    def device_plugin(self) -> Operand | None:
        return self.operands.get(DEVICE_PLUGIN)

    def configmap_data(self, name: str) -> dict[str, str]:
        return dict((self.configmaps.get(name) or {}).get("data") or {})

    def managed_keys(self, name: str) -> list[str]:
        annotations = ((self.configmaps.get(name) or {}).get("metadata") or {}).get("annotations") or {}
        return [k for k in (annotations.get("gpushare.io/managed-keys") or "").split(",") if k]

    def started_after(self, name: str) -> frozenset[str]:
        """The config-reader pods that complete runs restarted after ConfigMap `name` was last
        written (they named it at its current resourceVersion)."""
        version = ((self.configmaps.get(name) or {}).get("metadata") or {}).get("resourceVersion", "")
        return frozenset(uid for r in self.records if r.state == "complete" for uid in r.started_after(name, version))

    def interrupted(self, runbook: str | None = None) -> list[Record]:
        return [r for r in self.records if r.state == "in-progress" and (runbook is None or r.runbook == runbook)]

    def interrupted_note(self, record: Record, lead: str, namespace: str, now: dt.datetime) -> str:
        """`lead`, then what the interrupted run was changing and where its backup is. While the
        runbook lock is held, the run may be the one holding it, still at work."""
        held = " Unless it is the run that holds the runbook lock, still at work." if lock.status(self.lease, now)[
            "held"] else ""
        return f"{lead}: {record.summary(namespace)}{held}"


def _write_model(configmap: dict[str, Any] | None) -> tuple[Names | None, str]:
    """(the write model's names, why it cannot be read) of the ConfigMap read, if there is one."""
    if not configmap:
        return None, ""
    try:
        return parsed_write_model(configmap), ""
    except Unreadable as err:
        return None, str(err)


def operator_problems(state: ClusterState, namespace: str, clusterpolicy: str, records_namespace: str) -> list[str]:
    """What is missing of the GPU Operator, or of the runbooks' own namespace, for a runbook to work;
    empty when it is all there."""
    problems = records_problems(state, namespace, records_namespace)
    return problems or _operator_problems(state, namespace, clusterpolicy)


def records_problems(state: ClusterState, namespace: str, records_namespace: str) -> list[str]:
    """The runbooks' namespace is missing, or an earlier gpushare left run records in the operator
    namespace (a rollback would not see them: they are moved once, by an administrator)."""
    if not state.records_namespace_exists:
        return [f"Namespace {records_namespace!r}, where the runbooks keep their run records, backups and lock, does "
                "not exist: create it as a cluster administrator by applying deploy/rbac (deploy/rbac/README.md), or set "
                "gpu_operator_records_namespace to the one it was created as."]
    if state.stray_records:
        return [f"Run records of an earlier gpushare are in the operator namespace {namespace} "
                f"({', '.join(state.stray_records)}); the runbooks now keep them in {records_namespace}. Move them "
                f"as a cluster administrator (README.md \"Run records\"), then run this again."]
    return []


def _operator_problems(state: ClusterState, namespace: str, clusterpolicy: str) -> list[str]:
    if state.gpuclusters:
        return [_gpucluster_problem(state, clusterpolicy)]
    if not state.namespace_exists:
        where = (f"The device-plugin DaemonSet runs in namespace {state.plugin_namespaces[0]!r}: set "
                 f"gpu_operator_namespace={state.plugin_namespaces[0]}." if state.plugin_namespaces else
                 "No device-plugin DaemonSet runs in any namespace: install the GPU Operator first, or set "
                 "gpu_operator_namespace to its namespace (gpu-operator in NVIDIA's docs, nvidia-gpu-operator on "
                 "NVIDIA's cloud-native stack and OpenShift).")
        return [f"Namespace {namespace!r} does not exist, so the GPU Operator is not installed there. {where}"]
    if not state.clusterpolicy_served:
        return ["The ClusterPolicy API (nvidia.com/v1) is not served by this cluster: the GPU Operator is not installed."]
    if state.clusterpolicy is None:
        return [f"ClusterPolicy {clusterpolicy!r} not found (cluster-scoped, nvidia.com/v1): the GPU Operator's "
                "chart creates it; restore it, or set gpu_operator_clusterpolicy_name to the one this cluster uses "
                "(kubectl get clusterpolicies.nvidia.com)."]
    active = active_clusterpolicy(state.clusterpolicies or [])
    if active and active != clusterpolicy:
        return [f"ClusterPolicy {clusterpolicy!r} is not the one the GPU Operator reconciles: of several "
                f"ClusterPolicies it reconciles the oldest, {active!r}, and ignores the others, so a change to this "
                f"one would change nothing. Set gpu_operator_clusterpolicy_name={active}, or delete the ClusterPolicies "
                "nobody meant to keep (kubectl get clusterpolicies.nvidia.com)."]
    if state.device_plugin is None:
        return [f"DaemonSet {namespace}/nvidia-device-plugin-daemonset not found: the operator has not rendered "
                f"the device plugin (is spec.devicePlugin.enabled true in ClusterPolicy {clusterpolicy}, and is "
                "the operator running?)."]
    return []


def active_clusterpolicy(policies: list[dict[str, Any]]) -> str:
    """The ClusterPolicy the GPU Operator reconciles when there are several: the oldest, the lowest
    name among equals (gpu-operator v26.7 controllers/active_config.go getSingletonClusterPolicy; the
    others are left alone, their status unwritten). "" for none."""
    oldest = min(policies, default=None, key=lambda p: (str(p["metadata"].get("creationTimestamp") or ""),
                                                        p["metadata"]["name"]))
    return oldest["metadata"]["name"] if oldest else ""


def _gpucluster_problem(state: ClusterState, clusterpolicy: str) -> str:
    """A GPUCluster (GPU Operator v26.7's DRA stack, nvidia.com/v1alpha1) is there: with a ClusterPolicy
    beside it the operator reconciles neither (controllers/clusterpolicy_controller.go: "ClusterPolicy
    and GPUCluster cannot co-exist"; gpucluster_controller.go validatePrerequisites); without one, the
    GPUs are the DRA driver's, which these runbooks do not configure."""
    clusters = ", ".join(repr(name) for name in state.gpuclusters)
    if state.clusterpolicy is not None:
        return (f"GPUCluster {clusters} (the GPU Operator's DRA stack, nvidia.com/v1alpha1) exists beside ClusterPolicy "
                f"{clusterpolicy!r}: the GPU Operator reconciles neither while both exist (the ClusterPolicy is "
                "notReady, \"ClusterPolicy and GPUCluster cannot co-exist\"), so a change to the ClusterPolicy would "
                "change nothing. Keep one: to share GPUs through the device plugin (these runbooks), delete the "
                "GPUCluster; to run the DRA stack, delete the ClusterPolicy and share GPUs with the DRA driver's "
                "ResourceClaims, not these runbooks.")
    return (f"This cluster's GPU Operator runs the DRA stack (GPUCluster {clusters}, nvidia.com/v1alpha1), not a "
            "ClusterPolicy: its GPUs are allocated by the NVIDIA DRA driver, which time-slicing, MPS and MIG through "
            "the device plugin do not apply to. Share GPUs with the DRA driver's ResourceClaims instead, or run these "
            "runbooks on a cluster whose GPU Operator is managed by a ClusterPolicy.")
