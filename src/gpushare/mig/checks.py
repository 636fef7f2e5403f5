"""What the MIG runbooks wait for, as problem lists (empty: done), polled by `gpushare_wait`.

`expected` is the plan's: {strategy, targets: {node: {config, resources, product, deploy}},
bystanders: {node: fingerprint}}."""

from __future__ import annotations

from typing import Any

from gpushare.clock import parse_time, utc_now
from gpushare.k8s.session import Session
from gpushare.model.node import MIG_CONFIG, MIG_STATE, Node, unpacked
from gpushare.model.operands import DEVICE_PLUGIN, OperandPod
from gpushare.polling import DeadEnd
from gpushare.runbook.checks import bystander_problems, bystanders_now

PAUSED = "paused-for-mig-change"
MIG_MANAGER = "nvidia-mig-manager"
# The GPU clients the MIG manager waits for (mig-parted pkg/mig/reconfigure waitForPodsToBeDeleted).
CLIENT_APPS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-dcgm")
CLIENT_LABEL = "nvidia.com/gpu.deploy.client"


def _clients_left(pods: list[dict[str, Any]], namespace: str) -> list[str]:
    """The GPU clients' pods still on the node, as `namespace/name` (terminating ones say so)."""
    left = []
    for pod in pods:
        meta = pod["metadata"]
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), {})
        mine = meta.get("namespace") == namespace and (meta.get("labels") or {}).get("app") in CLIENT_APPS
        client = owner.get("kind") == "DaemonSet" and CLIENT_LABEL in ((pod.get("spec") or {}).get("nodeSelector") or {})
        if mine or client:
            left.append(f"{meta.get('namespace')}/{meta['name']}" + (" (terminating since "
                                                                     f"{meta['deletionTimestamp']})"
                                                                     if meta.get("deletionTimestamp") else ""))
    return left


def stuck(node: str, config: str, namespace: str, pods: list[dict[str, Any]], record: str = "",
          before: dict[str, Any] | None = None) -> str:
    """What to say of a node whose MIG manager gave up waiting for its GPU clients: it left the node
    pending with its clients paused and runs again only when nvidia.com/mig.config changes or its
    pod restarts (mig-parted cmd/nvidia-mig-manager, pkg/mig/reconfigure); the way out, with what the
    run record kept of the node before."""
    left = _clients_left(pods, namespace)
    managers = [p["metadata"]["name"] for p in pods if p["metadata"].get("namespace") == namespace
                and (p["metadata"].get("labels") or {}).get("app") == MIG_MANAGER]
    restart = (f"kubectl -n {namespace} delete pod {managers[0]}" if managers
               else f"kubectl -n {namespace} delete pod -l app={MIG_MANAGER} --field-selector spec.nodeName={node}")
    cause = (f"these GPU client pods did not go: {', '.join(left)}; make them go first (kubectl delete pod "
             "--grace-period=0 --force, or remove a finalizer that holds them)" if left else
             "its GPU client pods have gone since, but it does not look again")
    kept = ", ".join(f"{k}={v}" for k, v in sorted((before or {}).items()) if v is not None)
    back = (f"; or give the change up with playbooks/rollback-mig.yml -l {node}" + (
        f" (run record {record} keeps the node as it was: {kept})" if record else "")) if record or kept else ""
    return (f"{node}: the MIG manager gave up waiting for its GPU clients to stop and left {MIG_STATE}=pending with "
            f"their nvidia.com/gpu.deploy.* labels paused ({PAUSED}); it does not retry until {MIG_CONFIG} changes "
            f"or its pod restarts. Cause: {cause}. Way out: restart the node's MIG manager ({restart}), which applies "
            f"{config} again at its start, and re-run this command{back}.")


def _nodes(session: Session, names: list[str]) -> dict[str, Node]:
    return {n: Node(raw) for n in names if (raw := session.get("Node", n)) is not None}


def _resource_problems(node: Node, wanted: dict[str, int]) -> list[str]:
    problems = [f"allocatable {k} is {node.allocatable(k)}, expected {v}" for k, v in sorted(wanted.items())
                if node.allocatable(k) != v]
    problems += [f"allocatable {k} is {node.allocatable(k)}, expected 0 (no such instance any more)"
                 for k in sorted(node.resources("capacity", "nvidia.com/mig-")) if k not in wanted and node.allocatable(k)]
    return problems


def mig_settled(session: Session, expected: dict[str, Any], namespace: str = "", started: str = "",
                client_timeout: float | str = 0) -> list[str]:
    """The MIG manager has finished on every target: failed, or success with the device plugin
    advertising the new instances (a success left from the previous config does not count). A target
    still pending with its GPU clients paused `client_timeout` seconds after `started` (the wait's
    start, right after the label was set) is a dead end: the MIG manager gave up on its clients."""
    problems = []
    since = parse_time(started)
    gave_up = bool(since and float(client_timeout) and (utc_now() - since).total_seconds() > float(client_timeout))
    for name, want in sorted(expected["targets"].items()):
        node = _nodes(session, [name]).get(name)
        if node is None:
            problems.append(f"{name}: the node is gone")
        elif node.mig_config != want["config"]:
            problems.append(f"{name}: {MIG_CONFIG} is {node.mig_config!r} now, not {want['config']!r}: someone else "
                            "changed it; the run stops here")
        elif node.mig_state != "failed":
            if node.mig_state == "pending" and gave_up and PAUSED in node.deploy_labels.values():
                raise DeadEnd([stuck(name, want["config"], namespace, session.pods_on([name]),
                                     expected.get("record", ""), expected.get("before_labels", {}).get(name))])
            if node.mig_state != "success":
                problems.append(f"{name}: {MIG_STATE} is {node.mig_state or 'unset'}, the MIG manager has not finished "
                                f"{want['config']}")
            else:
                problems += [f"{name}: the MIG manager reports success and the device plugin still shows {p}"
                             for p in _resource_problems(node, want["resources"])]
    return problems


# mig-parted pkg/mig/reconfigure: without WITH_REBOOT (the GPU Operator does not set it) a MIG mode
# change that cannot take effect without a reset of the GPUs ends failed instead of rebooting.
REBOOT_ADVICE = (". This change turns MIG mode on or off, which takes effect only once the GPUs are reset; where they "
                 "cannot be reset in place (most often a reboot is needed), the MIG manager, which the GPU Operator "
                 "runs without WITH_REBOOT, fails instead of rebooting the node. Reboot {node} (it stays cordoned; at "
                 "its start the MIG manager applies {config} again), then re-run this command")


def mig_applied(session: Session, namespace: str, expected: dict[str, Any]) -> list[str]:
    """No target's MIG manager reports failed; for one that does, where to read why."""
    problems = []
    for name, want in sorted(expected["targets"].items()):
        node = _nodes(session, [name]).get(name)
        if node is None or node.mig_state != "failed":
            continue
        managers = [OperandPod(p).name for p in session.pods_on([name], namespace) if OperandPod(p).daemonset == MIG_MANAGER]
        events = sorted((e for e in session.list("Event", field_selector=f"involvedObject.kind=Node,involvedObject.name={name}")
                         if e.get("type") == "Warning"), key=lambda e: e.get("lastTimestamp") or "")
        said = f" It said: {events[-1].get('message')}." if events else ""
        where = (f"kubectl -n {namespace} logs {managers[0]}" if managers
                 else f"kubectl -n {namespace} logs -l app={MIG_MANAGER}")
        problems.append(f"{name}: the MIG manager could not apply {want['config']} ({MIG_STATE}=failed).{said} Its log "
                        f"says why: {where}" + (REBOOT_ADVICE.format(node=name, config=want["config"])
                                                 if want.get("mode_change") else ""))
    return problems


def mig_verified(session: Session, namespace: str, expected: dict[str, Any]) -> list[str]:
    """Each target shows the plan for the strategy, its GPU clients are deployed as before, its
    device plugin is Ready, and every other GPU node is unchanged in what sharing changes."""
    problems = []
    targets, bystanders = sorted(expected["targets"]), unpacked(expected["bystanders"])
    nodes = _nodes(session, targets)
    plugins = {OperandPod(p).node for p in session.pods_on(targets, namespace)
               if OperandPod(p).daemonset == DEVICE_PLUGIN and OperandPod(p).ready}
    for name in targets:
        want, node = expected["targets"][name], nodes.get(name)
        if node is None:
            problems.append(f"{name}: the node is gone")
            continue
        checks = [(MIG_CONFIG, node.mig_config, want["config"]), (MIG_STATE, node.mig_state, "success"),
                  ("nvidia.com/gpu.product", node.labels.get("nvidia.com/gpu.product"), want["product"])]
        problems += [f"{name}: {what} is {got!r}, expected {wanted!r}" for what, got, wanted in checks if got != wanted]
        problems += [f"{name}: {p}" for p in _resource_problems(node, want["resources"])]
        for label, value in sorted(want["deploy"].items()):
            now = node.labels.get(label)
            if now != value:
                problems.append(f"{name}: {label} is {now!r}, expected {value!r} as before the change"
                                + (" (the MIG manager has not restored it)" if now == PAUSED else ""))
        if name not in plugins:
            problems.append(f"{name}: no Ready {DEVICE_PLUGIN} pod")
    if problems or not bystanders:  # every other GPU node is compared once the targets are done
        return problems
    return bystander_problems(bystanders_now(session, expected, nodes, bystanders), bystanders, None,
                              compare_allocatable=True)


CHECKS = {"mig_settled": mig_settled, "mig_applied": mig_applied, "mig_verified": mig_verified}
