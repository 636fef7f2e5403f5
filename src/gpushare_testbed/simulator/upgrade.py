"""The driver upgrade controller, with no I/O: one pass of NVIDIA/k8s-operator-libs pkg/upgrade
`ApplyState` (upgrade_state.go, common_manager.go, upgrade_inplace.go) as the GPU Operator runs it
(controllers/upgrade_controller.go; cmd/gpu-operator/main.go enables GPU pod deletion and validation
by `app=nvidia-operator-validator`). Every node whose driver pod runs an older template than the
driver DaemonSet (OnDelete) goes upgrade-required -> cordon-required -> wait-for-jobs-required ->
pod-deletion-required -> pod-restart-required -> validation-required -> uncordon-required ->
upgrade-done, `maxParallelUpgrades` (and `maxUnavailable`) at a time. Each node moves one state per
pass, as in ApplyState, which reads the states once at the start. Which pods the GPU-pod deletion
and the drain can take is pod_deletion's (pod_manager.go, drain_manager.go, kubectl's
drain filters): a node they cannot empty goes upgrade-failed, or to drain-required first when
`drain.enable` (pod_manager.go updateNodeToDrainOrFailed).

From GPU Operator v26.7.0 (cmd/gpu-operator/main.go WithRestartOnlyPredicate; internal/predicates
restart_only.go DriverPodRestartOnly) a node in upgrade-required whose running driver pod and the
DaemonSet's template carry the same DRIVER_CONFIG_DIGEST takes the restart-only path: it is cordoned
and goes straight to pod-restart-required, with no GPU-pod deletion and no drain
(k8s-operator-libs upgrade_inplace.go nextStateForUpgradeRequiredNode, shouldRestartOnly: never for a
node whose upgrade was requested). The digest hashes only what installs the driver (images, env,
volumes: internal/config/driver_config_digest.go DriverInstallState), so a change of tolerations,
priority class or labels keeps it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# k8s-operator-libs pkg/upgrade consts.go (nvidia.com/%s-driver-upgrade-state, -.skip) with the GPU Operator's driver name "gpu"
STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
INITIAL_STATE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
REQUESTED_ANNOTATION = "nvidia.com/gpu-driver-upgrade-requested"
EVENT_REASON = "GPUDriverUpgrade"
DONE, REQUIRED, CORDON, WAIT_JOBS = "upgrade-done", "upgrade-required", "cordon-required", "wait-for-jobs-required"
POD_DELETION, DRAIN, POD_RESTART = "pod-deletion-required", "drain-required", "pod-restart-required"
VALIDATION, UNCORDON, FAILED = "validation-required", "uncordon-required", "upgrade-failed"
IN_PROGRESS = (CORDON, WAIT_JOBS, POD_DELETION, FAILED, DRAIN, POD_RESTART, UNCORDON, VALIDATION)


@dataclass(frozen=True)
class NodeUpgrade:
    """A node with a driver pod, as BuildState sees it."""
    name: str
    state: str  # the state label, "" when unset
    unschedulable: bool
    ready: bool
    driver_in_sync: bool  # the driver pod's controller-revision-hash is the DaemonSet's current one
    driver_ready: bool  # Running with every container ready
    driver_terminating: bool
    gpu_pods: int  # pods still using the node's GPUs (terminating ones included); counted in POD_DELETION only
    undeletable: int  # of those, the ones the GPU-pod deletion cannot delete (kubectl's drain filters)
    eviction_timed_out: bool  # the GPU-pod deletion's podDeletion.timeoutSeconds has passed
    drain_pods: int  # pods the drain still has to evict; counted in DRAIN only
    drain_errors: tuple[str, ...]  # kubectl's `cannot delete ...` for the pods the drain refuses
    drain_timed_out: bool
    validator_ready: bool  # read in VALIDATION only
    initial_unschedulable: bool  # INITIAL_STATE_ANNOTATION present
    skip: bool
    requested: bool
    restart_only: bool = False  # the restart-only predicate holds (v26.7.0 and later): same driver config digest


@dataclass(frozen=True)
class Step:
    node: str
    state: str | None = None  # new state label; "" removes it
    action: str | None = None  # cordon | uncordon | evict | drain | restart-driver | mark-initial | clear-initial | clear-requested
    event: str | None = None  # a Warning event on the node


def max_unavailable(policy: dict[str, Any], total: int) -> int:
    value = policy.get("maxUnavailable")
    if value is None:
        return total
    text = str(value)
    if text.endswith("%"):
        return math.ceil(total * int(text[:-1]) / 100)
    return int(text)


def _available(nodes: list[NodeUpgrade], policy: dict[str, Any]) -> int:
    """GetUpgradesAvailable."""
    total = len(nodes)
    in_progress = sum(1 for n in nodes if n.state in IN_PROGRESS)
    parallel = int(policy.get("maxParallelUpgrades") or 0)
    available = sum(1 for n in nodes if n.state == REQUIRED) if parallel == 0 else parallel - in_progress
    limit = max_unavailable(policy, total)
    unavailable = sum(1 for n in nodes if n.unschedulable or not n.ready) + sum(1 for n in nodes if n.state == CORDON)
    available = min(available, limit)
    if unavailable >= limit:
        return 0
    if limit < total and unavailable + available > limit:
        return limit - unavailable
    return available


def _finished(node: NodeUpgrade) -> list[Step]:
    """updateNodeToUncordonOrDoneState: a node cordoned before the upgrade stays cordoned."""
    if node.initial_unschedulable:
        return [Step(node.name, DONE), Step(node.name, action="clear-initial")]
    return [Step(node.name, UNCORDON)]


def _drain_enabled(policy: dict[str, Any]) -> bool:
    drain = policy.get("drain")
    return isinstance(drain, dict) and bool(drain.get("enable"))


def _pod_deletion(node: NodeUpgrade, policy: dict[str, Any]) -> list[Step]:
    """pod_manager.go SchedulePodEviction; a failure goes to drain-required or upgrade-failed."""
    failed = DRAIN if _drain_enabled(policy) else FAILED
    to_drain = "Pod deletion failed but drain is enabled in spec. Will attempt a node drain" if failed == DRAIN else None
    if node.gpu_pods == 0:
        return [Step(node.name, POD_RESTART)]
    if node.undeletable:  # "Cannot delete all required pods": logged only, no event of its own
        return [Step(node.name, failed, event=to_drain)]
    if node.eviction_timed_out:
        return [Step(node.name, failed, event="Failed to delete workload pods on the node for the driver upgrade, "
                                              "global timeout reached")]
    return [Step(node.name, action="evict")]


def _drain(node: NodeUpgrade, policy: dict[str, Any]) -> list[Step]:
    """common_manager.go ProcessDrainNodes (disabled: straight on) and drain_manager.go ScheduleNodesDrain."""
    if not _drain_enabled(policy):
        return [Step(node.name, POD_RESTART)]
    if node.drain_errors:
        errors = node.drain_errors[0] if len(node.drain_errors) == 1 else f"[{', '.join(node.drain_errors)}]"
        return [Step(node.name, FAILED, event=f"Failed to drain the node, {errors}")]
    if node.drain_pods == 0:
        return [Step(node.name, POD_RESTART)]
    if node.drain_timed_out:
        return [Step(node.name, FAILED, event="Failed to drain the node, global timeout reached")]
    return [Step(node.name, action="drain")]


def plan(nodes: list[NodeUpgrade], policy: dict[str, Any]) -> list[Step]:
    """The writes of one ApplyState pass; with autoUpgrade off, the state labels are removed."""
    if not policy.get("autoUpgrade"):
        return [Step(n.name, "") for n in nodes if n.state]
    steps: list[Step] = []
    available = _available(nodes, policy)
    for node in nodes:
        if node.state in ("", DONE):
            if not node.driver_in_sync or node.requested:
                if node.unschedulable:
                    steps.append(Step(node.name, action="mark-initial"))
                steps.append(Step(node.name, REQUIRED))
            elif node.state == "":
                steps.append(Step(node.name, DONE))
        elif node.state == REQUIRED:
            if node.requested:
                steps.append(Step(node.name, action="clear-requested"))
            if node.skip or (available <= 0 and not node.unschedulable):
                continue
            if node.restart_only and not node.requested:  # cordoned now, the driver pod restarted in place
                steps += [Step(node.name, action="cordon"), Step(node.name, POD_RESTART)]
            else:
                steps.append(Step(node.name, CORDON))
            available -= 1
        elif node.state == CORDON:
            steps += [Step(node.name, action="cordon"), Step(node.name, WAIT_JOBS)]
        elif node.state == WAIT_JOBS:  # no waitForCompletion.podSelector: nothing to wait for
            steps.append(Step(node.name, POD_DELETION))
        elif node.state == POD_DELETION:
            steps += _pod_deletion(node, policy)
        elif node.state == DRAIN:
            steps += _drain(node, policy)
        elif node.state == POD_RESTART:
            if not node.driver_in_sync:
                if not node.driver_terminating:
                    steps.append(Step(node.name, action="restart-driver"))
            elif node.driver_ready:
                steps.append(Step(node.name, VALIDATION))
        elif node.state == FAILED:
            if node.driver_in_sync and node.driver_ready:
                steps += _finished(node)
        elif node.state == VALIDATION:
            if node.validator_ready:
                steps += _finished(node)
        elif node.state == UNCORDON:
            steps += [Step(node.name, action="uncordon"), Step(node.name, DONE)]
    return steps


# The env the operator sets on the driver pod's driver-manager and driver containers from v26.3.0
# (controllers/object_controls.go TransformDriver), and the release whose upgrade controller reads it.
DIGEST_ENV = "DRIVER_CONFIG_DIGEST"
RESTART_ONLY_SINCE = (26, 7, 0)


def config_digest(pod_spec: dict[str, Any]) -> str:
    """DriverConfigDigestFromPodSpec: the first non-empty DRIVER_CONFIG_DIGEST, init containers first."""
    for container in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        value = next((e.get("value", "") for e in container.get("env") or [] if e.get("name") == DIGEST_ENV), "")
        if value:
            return value
    return ""


def restart_only(running: dict[str, Any], desired: dict[str, Any]) -> bool:
    """DriverPodRestartOnly: both pod specs carry a digest, and the same one (a missing one: the full flow)."""
    digest = config_digest(desired)
    return bool(digest) and digest == config_digest(running)
