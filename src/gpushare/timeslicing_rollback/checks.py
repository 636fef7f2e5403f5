"""What the rollback runbook waits for, as problem lists: empty means done. Each check reads the
cluster through a Session; `gpushare_wait` polls one until it is empty or time runs out. And where
the evicted workloads went, for its report."""

from __future__ import annotations

from typing import Any

from gpushare.k8s.patch import resolve
from gpushare.k8s.session import Session
from gpushare.model.node import CONFIG_LABEL, GPU, SHARED, Node, Pool
from gpushare.model.pods import Pod
from gpushare.polling import DeadEnd
from gpushare.runbook.drain import comeback, read_nodes, replacement_standing
from gpushare.runbook.checks import bystanders_unchanged, driver_upgrade_dead_ends, gpu_nodes, reader_problems
from gpushare.timeslicing_common.mark import timeslicing_mark


def whole_cards(session: Session, nodes: dict[str, Any], found: dict[str, Node] | None = None) -> list[str]:
    """`nodes`: name -> {gpus}: each advertises its physical GPUs as whole cards, nothing shared
    (`found`: those nodes as just read)."""
    found = found if found is not None else gpu_nodes(session, nodes)
    problems = []
    for name, want in sorted(nodes.items()):
        node = found.get(name)
        if node is None:
            problems.append(f"{name}: not a GPU node any more")
            continue
        checks = [(f"allocatable {GPU}", node.allocatable(GPU), int(want["gpus"])),
                  (f"allocatable {SHARED}", node.allocatable(SHARED), 0),
                  ("label nvidia.com/gpu.replicas", node.replicas, 1),
                  ("label nvidia.com/gpu.sharing-strategy", node.strategy, "none")]
        problems += [f"{name}: {what} is {got!r}, expected {wanted!r}" for what, got, wanted in checks if got != wanted]
    return problems


def timeslicing_disabled(session: Session, namespace: str, expected: dict[str, Any], clusterpolicy: str) -> list[str]:
    """The targets are whole again, their readers Ready on the current template, the ClusterPolicy
    restored; once the targets are (the fleet is read only then), every other GPU node is as it was.
    In a run that starts a driver upgrade, a node it leaves upgrade-failed ends the wait."""
    if expected.get("driver_upgrade"):
        driver_upgrade_dead_ends(session, clusterpolicy)

    nodes = gpu_nodes(session, expected["targets"])
    pool = Pool.of(expected["pool"])
    keys = set(expected["keys"])
    problems = whole_cards(session, expected["targets"], nodes)
    for name in sorted(expected["targets"]):
        node = nodes.get(name)
        if node is None:
            continue
        if node.config_label in keys:
            problems.append(f"{name}: still labelled {CONFIG_LABEL}={node.config_label}")
        if node.in_pool(pool):
            problems.append(f"{name}: still labelled {pool.label_key}={pool.label_value}")
        mark = timeslicing_mark(node)
        if pool.taint and node.pool_taint(pool) == pool.taint and (mark is None or mark.taint_added):
            problems.append(f"{name}: still tainted {pool.taint}")
    problems += reader_problems(session, namespace, sorted(expected["targets"]))
    if expected.get("clusterpolicy"):
        policy = session.get("ClusterPolicy", clusterpolicy) or {}
        for path, value in sorted(expected["clusterpolicy"].items()):
            if resolve(policy, path, None) != value:
                problems.append(f"ClusterPolicy {path.removeprefix('/spec/')} is {resolve(policy, path, None)!r}, "
                                f"expected {value!r}")
    return problems or bystanders_unchanged(session, expected, pool, nodes)


UNSETTLED = {"untried": "not yet tried by the scheduler",
             "admitted": "Pending, and {nodes} would admit it once the evicted pods are gone"}


def scheduler_tried(session: Session, evicted: list[dict[str, str]], nodes: list[str]) -> list[str]:
    """The evicted workloads' pods moved off `nodes`: each placed elsewhere, or Pending where no drained
    node admits it (see gpushare.runbook.drain.replacement_standing); one back on a drained node ends
    the wait (DeadEnd): the pods did not move."""
    problems, back = [], []
    drained = read_nodes(session, nodes)
    for namespace in sorted({e["namespace"] for e in evicted}):
        owners = {e["controller_uid"]: e["workload"] for e in evicted if e["namespace"] == namespace and e["controller_uid"]}
        for raw in session.list("Pod", namespace):
            pod = Pod(raw)
            # an evicted pod is terminating or gone; a StatefulSet's replacement may bear its name
            standing = pod.controller.get("uid") in owners and replacement_standing(pod, drained)
            if standing == "back":
                back.append(pod)
            elif standing:
                problems.append(f"{owners[pod.controller['uid']]}: pod {pod.ref} "
                                + UNSETTLED[standing].format(nodes=", ".join(nodes)))
    if back:
        raise DeadEnd([comeback(back)])
    return problems


def whereabouts(pods: list[dict[str, Any]], evicted: list[dict[str, str]]) -> list[str]:
    """Where each evicted workload's pods are now, one line per workload."""
    lines = []
    for uid, workload in sorted({(e["controller_uid"], e["workload"]) for e in evicted}, key=lambda x: x[1]):
        mine = [Pod(p) for p in pods if Pod(p).controller.get("uid") == uid and not Pod(p).terminating]
        places = sorted(f"{p.name} on {p.node} ({p.phase})" if p.node else f"{p.name} Pending: {p.pending_reason() or 'not yet tried by the scheduler'}"
                        for p in mine)
        lines.append(f"{workload}: " + ("; ".join(places) if places else "no pod (scaled down or deleted)"))
    unowned = sorted(e["pod"] for e in evicted if not e["controller_uid"])
    if unowned:
        lines.append(f"Pods without a controller, deleted for good: {', '.join(unowned)}")
    return lines


CHECKS = {"whole_cards": whole_cards, "timeslicing_disabled": timeslicing_disabled, "scheduler_tried": scheduler_tried}
