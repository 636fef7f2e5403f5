"""The share check's plan: from one read of the trial nodes, their pods, the check's namespace and
the device-plugin config, every refusal (before any write) or the check of each node - which pods,
asking for what, and what each must show - as change lists for `gpushare_apply`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from gpushare.k8s.changes import Change
from gpushare import device_plugin_config as dpc
from gpushare import mps
from gpushare.model.node import GPU, Node
from gpushare.model.pods import Pod
from gpushare.runbook.plan import Plan
from gpushare.runbook.inputs import DNS_SUBDOMAIN, NOTHING
from gpushare.runbook.state import ClusterState
from gpushare.share_check.settings import Inputs
from gpushare.timeslicing_common.mark import timeslicing_mark

CREATED_BY = {"gpushare.io/created-by": "verify-sharing"}
MANAGED = {"app.kubernetes.io/managed-by": "gpushare"}
# Pod Security admission "restricted" (enforced, audited, warned) on the namespace the check creates,
# as deploy/rbac/00-namespaces.yaml sets it on the one it ships: the runbook identity may create
# pods there, so a privileged or host-namespace pod must be refused by the API server itself.
POD_SECURITY = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
# What the restricted profile asks of every container (the check needs no privilege): a non-root
# user (the CUDA base image runs as root unless told; nvidia-smi needs no root), no privilege
# escalation, every capability dropped, the runtime's default seccomp profile.
POD_SECURITY_CONTEXT = {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                        "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                              "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
NODE_LABEL = "gpushare.io/share-check-node"
ROLE_LABEL = "gpushare.io/share-check"  # replica | two | overflow
HOSTNAME = "kubernetes.io/hostname"


@dataclass
class NodeCheck:
    """The check of one node: its shared resource, what is free, and the pods that prove sharing."""

    node: str
    host: str
    hostname: str
    resource: str
    gpus: int | None
    replicas_per_gpu: int
    allocatable: int
    free: int
    replicas: int
    fail_gt_one: bool
    deployment: str
    two: str
    two_skipped: str  # why the pod asking for 2 is not created ("" when it is)
    overflow: str
    overflow_skipped: str
    toleration: dict[str, str]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class SharePlan(Plan):
    nodes: list[NodeCheck] = field(default_factory=list)
    namespace_ours: bool = True
    leftovers: bool = False


def is_check_pod(pod: Pod, namespace: str, name: str, node: str) -> bool:
    labels = pod.raw["metadata"].get("labels") or {}
    return pod.namespace == namespace and labels.get("app") == name and labels.get(NODE_LABEL) == node


def held(pods: list[dict[str, Any]], resource: str, exclude: Any = None) -> int:
    """Units of `resource` the scheduler counts as taken by these pods (finished pods hold none),
    leaving out the pods `exclude` names (an earlier check this run replaces)."""
    return sum(Pod(p).holds((resource,)).get(resource, 0) for p in pods
               if not Pod(p).finished and not (exclude and exclude(Pod(p))))


def fail_requests_greater_than_one(state: ClusterState, node: Node) -> tuple[bool | None, str]:
    """Whether the node's device plugin refuses a container asking for more than one replica, read
    from the config it loads (the node's config label, else the ClusterPolicy's default key, in the
    ConfigMap the ClusterPolicy names); (None, why) when that cannot be told."""
    configmap, default = state.plugin_config
    mark = timeslicing_mark(node)
    if not configmap and mark and mark.valid:
        configmap = mark.configmap
    key = node.config_label or default
    text = state.configmap_data(configmap).get(key, "") if configmap and key else ""
    where = f"key {key or '(none)'!r} of ConfigMap {configmap or '(none)'}"
    if not text:
        return None, f"no device-plugin config under {where}"
    try:
        sharing = dpc.parse(text).sharing
    except dpc.ConfigError as err:
        return None, f"the device plugin cannot load {where}: {err}"
    if sharing.strategy == "none":
        return None, f"{where} configures no sharing"
    return sharing.fail_requests_greater_than_one, ""


def _node_check(inputs: Inputs, state: ClusterState, read: dict[str, Any], host: str, name: str,
                refuse: list[str]) -> NodeCheck | None:
    node = state.nodes.get(name)
    if node is None:
        refuse.append(f"{name} is not a node of this cluster (kubectl get node {name} finds nothing): check -l, the "
                      "inventory, or the host's gpushare_node_name.")
        return None
    enable = f"ansible-playbook playbooks/enable-timeslicing.yml -l {host}"
    if not node.shares:
        refuse.append(f"{name} does not share its GPUs: it advertises {node.allocatable(GPU)} {GPU}, {node.replicas} "
                      f"replica(s) per GPU, sharing strategy {node.strategy}. Run the enable runbook first: {enable}.")
        return None
    if not node.in_pool(inputs.pool):
        refuse.append(f"{name} shares its GPUs but is not in the shared pool (label {inputs.pool.label_key}="
                      f"{inputs.pool.label_value}), which the check's pods select. Run the enable runbook first: {enable}.")
        return None
    prefix = f"{inputs.name}-{name}"
    if len(name) > 63 or not DNS_SUBDOMAIN.match(f"{prefix}-overflow"):
        refuse.append(f"{name}: the check's pod names ({prefix}-overflow) must be DNS subdomains and the node name "
                      "a label value (at most 63 characters); shorten share_check_name.")
        return None
    resource = node.shared_resource  # renamed, or still nvidia.com/gpu
    mine = lambda pod: is_check_pod(pod, inputs.namespace, inputs.name, name)  # noqa: E731
    pods = [p for p in read.get("node_pods") or [] if Pod(p).node == name]
    allocatable = node.allocatable(resource)
    per_node_mps = node.strategy == "mps" and bool(node.config_label)  # cluster scope needs no signal
    dead = mps.never_serves(name, host, resource, allocatable, pods) if per_node_mps else None
    if dead:
        refuse.append(dead)
        return None
    free = allocatable - held(pods, resource, mine)
    replicas = inputs.replicas if inputs.replicas is not None else free
    if not 1 <= replicas <= free:
        need = "Lower share_check_replicas or free replicas first" if inputs.replicas is not None else "Free replicas first"
        refuse.append(f"{name} has {max(free, 0)} of its {allocatable} {resource} free (running pods hold the rest: "
                      f"kubectl describe node {name}); the check needs {max(replicas, 1)}. {need}.")
        return None
    fail_gt_one, unknown = ((inputs.fail_requests_greater_than_one, "") if inputs.fail_requests_greater_than_one
                            is not None else fail_requests_greater_than_one(state, node))
    if fail_gt_one is None:
        refuse.append(f"Cannot tell whether the device plugin on {name} refuses requests for more than one replica: "
                      f"{unknown}. Set share_check_fail_requests_greater_than_one (true or false).")
        return None
    taint = node.pool_taint(inputs.pool) or inputs.pool.taint
    return NodeCheck(
        node=name, host=host, hostname=node.labels.get(HOSTNAME, name), resource=resource, gpus=node.gpus,
        replicas_per_gpu=node.replicas, allocatable=allocatable, free=free, replicas=replicas, fail_gt_one=fail_gt_one,
        deployment=prefix, two=f"{prefix}-two", overflow=f"{prefix}-overflow",
        two_skipped=_two_skipped(fail_gt_one, free, resource),
        overflow_skipped=("share_check_overflow is off" if not inputs.overflow else
                          f"the Deployment leaves {free - replicas} {resource} free" if replicas < free else ""),
        toleration={"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect} if taint else {},
    )


def _two_skipped(fail_gt_one: bool, free: int, resource: str) -> str:
    if not fail_gt_one:
        return "failRequestsGreaterThanOne is off: the device plugin hands a pod 2 replicas"
    if free < 2:
        return f"only {free} {resource} free: a pod asking for 2 could not be scheduled"
    return ""


def labels(inputs: Inputs, check: NodeCheck, role: str) -> dict[str, str]:
    return {"app": inputs.name, **MANAGED, NODE_LABEL: check.node, ROLE_LABEL: role}


def pod_spec(inputs: Inputs, check: NodeCheck, request: int) -> dict[str, Any]:
    """One container asking for `request` of the node's shared resource, on that node of the shared
    pool, tolerating the pool taint. `sleep` under a shell ignores SIGTERM: a short grace keeps the
    cleanup quick."""
    return {
        "nodeSelector": {inputs.pool.label_key: inputs.pool.label_value, HOSTNAME: check.hostname},
        "tolerations": [check.toleration] if check.toleration else [],
        "terminationGracePeriodSeconds": 5,
        "securityContext": copy.deepcopy(POD_SECURITY_CONTEXT),
        "containers": [{"name": "check", "image": inputs.image, "imagePullPolicy": inputs.image_pull_policy,
                        "command": inputs.command, "resources": {"limits": {check.resource: request}},
                        "securityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT)}],
    }


def _pod(inputs: Inputs, check: NodeCheck, name: str, role: str, request: int, why: str) -> Change:
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": inputs.namespace, "labels": labels(inputs, check, role),
                         "annotations": CREATED_BY},
            "spec": pod_spec(inputs, check, request)}
    return Change("create", "Pod", name, namespace=inputs.namespace, body=body, why=why)


def _deployment(inputs: Inputs, check: NodeCheck) -> Change:
    pod_labels = labels(inputs, check, "replica")
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": check.deployment, "namespace": inputs.namespace,
                         "labels": {k: v for k, v in pod_labels.items() if k != ROLE_LABEL}, "annotations": CREATED_BY},
            "spec": {"replicas": check.replicas, "selector": {"matchLabels": pod_labels},
                     "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec(inputs, check, 1)}}}
    return Change("create", "Deployment", check.deployment, namespace=inputs.namespace, body=body,
                  why=f"{check.replicas} pods asking for 1 {check.resource} each")


def _removal(inputs: Inputs, checks: list[NodeCheck], ours: bool, why: str) -> list[Change]:
    if ours:
        return [Change("delete", "Namespace", inputs.namespace, why=why)]
    return [Change("delete", kind, name, namespace=inputs.namespace, why=why)
            for c in checks for kind, name in (("Deployment", c.deployment), ("Pod", c.two), ("Pod", c.overflow))]


def selector(inputs: Inputs, nodes: list[str]) -> str:
    """The label selector of every object of the check of these nodes."""
    return f"app={inputs.name},{NODE_LABEL} in ({','.join(sorted(nodes))})"


def plan(read: dict[str, Any], inputs: Inputs, targets: dict[str, str]) -> SharePlan:
    """`read`: the `resources` of one gpushare_read (nodes, node_pods: the pods on them,
    check_namespace, check_pods, check_deployments, clusterpolicy, configmaps: the operator's);
    `targets`: inventory host -> Kubernetes node."""
    result = SharePlan()
    refuse = list(inputs.problems())
    state = ClusterState.of(read)
    checks = [] if refuse else [_node_check(inputs, state, read, host, node, refuse) for host, node in targets.items()]
    if refuse:
        result.refusals = [f"{problem} {NOTHING}" for problem in refuse]
        return result
    namespace = read.get("check_namespace")
    if namespace and (namespace.get("metadata") or {}).get("deletionTimestamp"):
        result.refusals = [f"Namespace {inputs.namespace} is being deleted (the cleanup of an earlier check): re-run "
                           f"once it is gone (kubectl get namespace {inputs.namespace}). {NOTHING}"]
        return result
    result.nodes = [c for c in checks if c]
    names = [c.node for c in result.nodes]
    result.namespace_ours = namespace is None or ((namespace.get("metadata") or {}).get("annotations") or {}).get(
        "gpushare.io/created-by") == "verify-sharing"
    # A kept check of these nodes: its Deployment (which takes its pods along) and its single pods.
    kept = [o for o in (read.get("check_deployments") or []) + (read.get("check_pods") or [])
            if ((o.get("metadata") or {}).get("labels") or {}).get(NODE_LABEL) in names
            and not (o["kind"] == "Pod" and Pod(o).controller)]
    result.leftovers = bool(kept) or any(((p.get("metadata") or {}).get("labels") or {}).get(NODE_LABEL) in names
                                         for p in read.get("check_pods") or [])
    prepare = [] if namespace else [Change("create", "Namespace", inputs.namespace, body={"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": inputs.namespace, "labels": {**inputs.namespace_labels, **MANAGED, **POD_SECURITY},
            "annotations": CREATED_BY}}, why="the share check's namespace")]
    prepare += [Change("delete", o["kind"], o["metadata"]["name"], namespace=inputs.namespace, why="an earlier check of this node, kept") for o in kept]
    result.changes = {
        "prepare": prepare,
        "two": [_pod(inputs, c, c.two, "two", 2, "asks for 2: the device plugin must refuse it")
                for c in result.nodes if not c.two_skipped],
        "deploy": [_deployment(inputs, c) for c in result.nodes],
        "overflow": [_pod(inputs, c, c.overflow, "overflow", 1, "one beyond the free replicas: must stay Pending")
                     for c in result.nodes if not c.overflow_skipped],
        "cleanup": [] if inputs.keep else _removal(inputs, result.nodes, result.namespace_ours, "remove the check"),
    }
    result.lines = _lines(inputs, result, namespace is not None)
    return result


def _lines(inputs: Inputs, result: SharePlan, namespace_exists: bool) -> list[str]:
    ns = inputs.namespace
    lines = []
    for c in result.nodes:
        gpus = f"{c.gpus} GPU(s) x {c.replicas_per_gpu} replicas" if c.gpus is not None else f"{c.replicas_per_gpu} replicas per GPU"
        lines += [
            f"Share check on {c.node}: {c.free} of {c.allocatable} {c.resource} free ({gpus}).",
            f"- pod {c.two} asks for 2: the device plugin must refuse it" if not c.two_skipped
            else f"- pod asking for 2: skipped ({c.two_skipped})",
            f"- Deployment {c.deployment}: {c.replicas} pods x 1 {c.resource}, every one must run on {c.node}",
            f"- pod {c.overflow}, one beyond the free replicas: must stay Pending" if not c.overflow_skipped
            else f"- pod beyond the free replicas: skipped ({c.overflow_skipped})",
        ]
    if inputs.exec:
        lines.append("- nvidia-smi -L in each pod: together they see no more GPUs than the node has")
    where = (f"namespace {ns}" + (" (created for the check)" if not namespace_exists else "")
             if result.namespace_ours else f"namespace {ns} (not the check's own: it is kept)")
    lines.append(f"In {where}; " + ("the check is kept afterwards (share_check_keep)." if inputs.keep
                                   else "removed afterwards."))
    return lines
