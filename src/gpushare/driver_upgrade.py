"""Which pods the GPU Operator's driver upgrade can take off a node, under the ClusterPolicy's
`spec.driver.upgradePolicy`, with no I/O: the rules of the runbook's refusal (the simulated upgrade
controller models the same upstream code on its own, gpushare_testbed.simulator.pod_deletion).

The upgrade controller (NVIDIA/k8s-operator-libs pkg/upgrade) first deletes the node's GPU pods
(pod_manager.go SchedulePodEviction): the pods the GPU Operator calls GPU pods
(cmd/gpu-operator/main.go gpuPodSpecFilter: Running or Pending, asking for nvidia.com/gpu* or
nvidia.com/mig-*) must all pass kubectl's drain filters (k8s.io/kubectl pkg/drain filters.go, run
with IgnoreAllDaemonSets, `podDeletion.force` and `podDeletion.deleteEmptyDir`): a DaemonSet's pod
is skipped, so it can never be deleted; one with an emptyDir volume or without a controller is an
error. If any cannot, the node goes `upgrade-failed` (still cordoned) unless `drain.enable`, in
which case the drain (drain_manager.go) runs the same filters with `drain.force`,
`drain.deleteEmptyDir` over every pod `drain.podSelector` selects (all pods by default), where a
DaemonSet's pod is simply left alone and an error fails the node. A failed node counts against
`maxParallelUpgrades`: with the chart's 1, the upgrade of the whole fleet stops there.

From GPU Operator v26.7.0 a node whose driver pod differs from the template in nothing that installs
the driver (the same DRIVER_CONFIG_DIGEST, which the operator sets from v26.3.0: images, env, volumes;
not tolerations, priority class or labels) takes a restart-only path instead: cordoned, its driver pod
restarted in place, no GPU pod deleted and no drain (gpu-operator internal/predicates/restart_only.go
DriverPodRestartOnly; k8s-operator-libs upgrade_inplace.go nextStateForUpgradeRequiredNode).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpushare.model import releases

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
FAILED = "upgrade-failed"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
POLICY = "spec.driver.upgradePolicy"


DIGEST_ENV = "DRIVER_CONFIG_DIGEST"
RESTART_ONLY_SINCE: releases.Version = (26, 7, 0)


def restarts_in_place(validator_image: str, driver_template: dict[str, Any]) -> bool:
    """A change outside the driver's install config (a toleration, say) restarts the driver pods in
    place without eviction: the operator is v26.7.0 or later (its validator's image, which the chart
    tags with the operator's own release) and the driver template carries the digest that change keeps."""
    containers = [*(driver_template.get("initContainers") or []), *(driver_template.get("containers") or [])]
    digest = any(e.get("name") == DIGEST_ENV and e.get("value") for c in containers for e in c.get("env") or [])
    return digest and bool(validator_image) and releases.at_least(validator_image, RESTART_ONLY_SINCE)


def _section(value: Any, key: str) -> dict[str, Any]:
    found = (value or {}).get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class Policy:
    """The parts of `spec.driver.upgradePolicy` that decide what the upgrade evicts (chart defaults)."""

    auto_upgrade: bool = True
    max_parallel: int = 1
    deletion_force: bool = False
    deletion_empty_dir: bool = False
    drain: bool = False
    drain_force: bool = False
    drain_empty_dir: bool = False
    drain_selector: str = ""

    @classmethod
    def of(cls, spec: dict[str, Any]) -> Policy:
        """From a ClusterPolicy spec."""
        policy = _section(_section(spec, "driver"), "upgradePolicy")
        deletion, drain = _section(policy, "podDeletion"), _section(policy, "drain")
        parallel = policy.get("maxParallelUpgrades")  # the CRD's default is 1 (upgrade_spec.go)
        return cls(bool(policy.get("autoUpgrade")), 1 if parallel is None else int(parallel),
                   bool(deletion.get("force")), bool(deletion.get("deleteEmptyDir")), bool(drain.get("enable")),
                   bool(drain.get("force")), bool(drain.get("deleteEmptyDir")), str(drain.get("podSelector") or ""))


def gpu_pod(pod: dict[str, Any]) -> bool:
    """gpuPodSpecFilter: Running or Pending, a container asking for nvidia.com/gpu* or nvidia.com/mig-*."""
    if (pod.get("status") or {}).get("phase") not in ("Running", "Pending"):
        return False
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for names in (resources.get("limits") or {}, resources.get("requests") or {}):
            if any(n.startswith("nvidia.com/gpu") or n.startswith("nvidia.com/mig-") for n in names):
                return True
    return False


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)


def daemonset_of(pod: dict[str, Any]) -> str | None:
    """The DaemonSet that controls the pod (filters.go isControllerRefDaemonSet), if one does."""
    owner = _controller(pod)
    return owner.get("name", "") if owner and owner.get("kind") == "DaemonSet" and owner.get("apiVersion") == "apps/v1" else None


# k8s.io/kubectl pkg/drain filters.go: localStorageFatal, unmanagedFatal (its `cannot delete <fatal>: <pods>`)
EMPTY_DIR, UNREPLICATED = "Pods with local storage (use --delete-emptydir-data to override)", \
    "cannot delete Pods that declare no controller (use --force to override)"


def drain_filters(pod: dict[str, Any], force: bool, empty_dir: bool) -> str:
    """kubectl's drain filters in their order (the DaemonSet taken to exist): "delete", "skip", or
    the fatal message of the filter that refuses the pod."""
    finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    if (daemonset_of(pod) is not None and not finished) or MIRROR_ANNOTATION in (pod["metadata"].get("annotations") or {}):
        return "skip"
    if not finished and any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or []) and not empty_dir:
        return EMPTY_DIR
    if not finished and _controller(pod) is None and not force:
        return UNREPLICATED
    return "delete"


def _why(verdict: str, step: str) -> str | None:
    if verdict == EMPTY_DIR:
        return f"it uses an emptyDir volume and {POLICY}.{step}.deleteEmptyDir is false"
    if verdict == UNREPLICATED:
        return f"it has no controller and {POLICY}.{step}.force is false"
    return None


def deletion_refusal(pod: dict[str, Any], policy: Policy) -> str | None:
    """Why the upgrade's GPU-pod deletion cannot delete this GPU pod, None when it can."""
    verdict = drain_filters(pod, policy.deletion_force, policy.deletion_empty_dir)
    if verdict == "skip" and (daemonset := daemonset_of(pod)) is not None:
        return f"DaemonSet {daemonset} runs it, and the driver upgrade's GPU-pod deletion never deletes a DaemonSet's pod"
    if verdict == "skip":
        return "it is a static pod of the node's kubelet, which no drain deletes"
    return _why(verdict, "podDeletion")


def selects(selector: str, labels: dict[str, str]) -> bool:
    """A label selector string (apimachinery labels.Parse: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
    `k in (a,b)`, `k notin (a,b)`); the empty selector selects every pod."""
    for term in (t.strip() for t in re.findall(r"[^,(]+(?:\([^)]*\))?", selector)):
        if found := re.fullmatch(r"(\S+)\s+(in|notin)\s*\(([^)]*)\)", term):
            key, op, values = found.group(1), found.group(2), {v.strip() for v in found.group(3).split(",")}
            ok = (labels.get(key) in values) if op == "in" else (labels.get(key) not in values)
        elif found := re.fullmatch(r"(\S+?)\s*(==|!=|=)\s*(\S*)", term):
            key, op, value = found.groups()
            ok = (labels.get(key) == value) if op != "!=" else (labels.get(key) != value)
        elif term.startswith("!"):
            ok = term[1:].strip() not in labels
        else:
            ok = not term or term in labels
        if not ok:
            return False
    return True


def drain_refusal(pod: dict[str, Any], policy: Policy) -> str | None:
    """Why the upgrade's drain fails on this pod, None when it evicts or leaves it."""
    if not selects(policy.drain_selector, pod["metadata"].get("labels") or {}):
        return None
    return _why(drain_filters(pod, policy.drain_force, policy.drain_empty_dir), "drain")


def blockers(pods: list[dict[str, Any]], policy: Policy) -> list[tuple[dict[str, Any], str]]:
    """The pods of one node that make its driver upgrade fail (`upgrade-failed`), each with why:
    the GPU pods the pod deletion cannot delete, or, when it cannot and the drain is enabled, the
    pods the drain cannot. [] when the upgrade can take the node."""
    refused = [(p, why) for p in pods if gpu_pod(p) and (why := deletion_refusal(p, policy))]
    if not refused or not policy.drain:
        return refused
    return [(p, why) for p in pods if (why := drain_refusal(p, policy))]


def ways_out(policy: Policy, reasons: list[str]) -> list[str]:
    """What lets the upgrade through, for these reasons (from deletion_refusal / drain_refusal)."""
    ways = ["move or delete those pods first (or, for a DaemonSet, keep it off the GPU nodes during the upgrade)"]
    step = "drain" if policy.drain else "podDeletion"
    if any("emptyDir" in r for r in reasons):
        ways.append(f"allow deleting their emptyDir data: {POLICY}.{step}.deleteEmptyDir=true (for every GPU node)")
    if any("no controller" in r for r in reasons):
        ways.append(f"allow deleting pods nobody re-creates: {POLICY}.{step}.force=true (for every GPU node)")
    if any("DaemonSet" in r for r in reasons) and not policy.drain:
        ways.append(f"{POLICY}.drain.enable=true: when the GPU-pod deletion fails the upgrade drains the node instead "
                    "(every pod of drain.podSelector, all by default), and the drain leaves DaemonSet pods running")
    ways.append(f"keep the upgrade off those nodes: label them {SKIP_LABEL}=true (their driver stays as it is)")
    return ways


# --- what the runbooks say -----------------------------------------------------------------------


def upgraded_nodes(nodes: list[Any]) -> list[str]:
    """The GPU nodes (gpushare.model.node.Node) a driver upgrade walks: a driver pod runs there (not
    `nvidia.com/gpu.deploy.driver=false` or `pre-installed`) and no skip label keeps it out."""
    return [n.name for n in nodes if n.gpu_present and n.labels.get("nvidia.com/gpu.deploy.driver", "true") == "true"
            and n.labels.get(SKIP_LABEL) != "true"]


def _stop(policy: Policy) -> str:
    if policy.max_parallel == 1:
        return "and with maxParallelUpgrades 1 the upgrade of every other GPU node stops there"
    if policy.max_parallel:
        return f"and it holds one of the {policy.max_parallel} upgrade slots (maxParallelUpgrades) until dealt with"
    return "until someone deals with it"


def refusal(pods_by_node: dict[str, list[dict[str, Any]]], policy: Policy, change: str) -> str | None:
    """Why a change that starts a driver upgrade on these nodes must not be made now: the pods the
    upgrade cannot take off, each with its node and why, and the ways out; None when there are none."""
    found = [(node, pod, why) for node, pods in sorted(pods_by_node.items()) for pod, why in blockers(pods, policy)]
    if not found:
        return None
    named = "; ".join(f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']} on {node} ({why})"
                      for node, p, why in found)
    nodes = sorted({node for node, _, _ in found})
    return (f"{change} starts a driver upgrade on every GPU node ({POLICY}.autoUpgrade), and under the ClusterPolicy's "
            f"upgrade policy it cannot take these pods off their node: {named}. {', '.join(nodes)} would end "
            f"{FAILED}, still cordoned, {_stop(policy)}. Ways out: {'; '.join(ways_out(policy, [w for *_, w in found]))}.")


def failure(node: str, pods: list[dict[str, Any]], policy: Policy) -> str:
    """What the runbook says of a node it finds `upgrade-failed`: why, as far as its pods tell, and
    the way on (its state label set back to upgrade-required once the cause is gone)."""
    blocked = blockers(pods, policy)
    held = [p for p in pods if gpu_pod(p)]
    if blocked:
        cause = "the upgrade cannot take these pods off it: " + "; ".join(
            f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']} ({why})" for p, why in blocked)
        ways = ways_out(policy, [why for _, why in blocked])
    elif held:
        cause = (f"its GPU pods were not evicted within {POLICY}.podDeletion.timeoutSeconds: "
                 + ", ".join(f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']}" for p in held)
                 + " (a PodDisruptionBudget that allows no disruption, or pods slow to stop)")
        ways = ["let them go (relax the PodDisruptionBudget, or move them)"]
    else:
        cause = f"nothing on it blocks the upgrade now; its events say what did (kubectl describe node {node})"
        ways = []
    again = f"kubectl label node {node} {STATE_LABEL}=upgrade-required --overwrite (the upgrade starts over there)"
    return (f"{node}: its driver upgrade failed ({STATE_LABEL}={FAILED}) and it stays cordoned, {_stop(policy)}: "
            f"{cause}. " + (f"Ways on: {'; '.join(ways)}; then {again}." if ways else f"Way on: {again}."))
