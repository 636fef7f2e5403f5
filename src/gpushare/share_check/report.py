"""What the share check saw, node by node, and whether it proves sharing: the pod asking for 2 is
refused by the kubelet, every pod of the Deployment runs on the node, one pod beyond the free
replicas stays Pending for lack of the shared resource, and (on real GPUs) the pods see the node's
cards. The result is `share_check_result`, which the change record and the summary read."""

from __future__ import annotations

import re
from typing import Any

from gpushare.model.pods import Pod
from gpushare.share_check.plan import NODE_LABEL, ROLE_LABEL

REFUSED = "UnexpectedAdmissionError"
UUID = re.compile(r"\(UUID:\s*(GPU-[0-9A-Za-z-]+)\)")


def start(plan: dict[str, Any], namespace: str, pool: dict[str, Any], exec_on: bool) -> dict[str, Any]:
    """The result before the first write: what each node's check will do, nothing seen yet."""
    nodes = []
    for c in plan["nodes"]:
        nodes.append({
            **{k: c[k] for k in ("node", "host", "resource", "gpus", "replicas_per_gpu", "allocatable", "free",
                                 "replicas", "deployment")},
            "pods": [], "running": 0,
            "refuse": _part(c["two"], c["two_skipped"]),
            "overflow": _part(c["overflow"], c["overflow_skipped"]),
            "exec": {**_part("", "" if exec_on else "share_check_exec is off"), "uuids": {}},
        })
    return {"status": "pending", "message": "", "failed_task": "", "problems": [], "namespace": namespace,
            "pool": pool, "cleanup": "not run", "nodes": nodes}


def _part(pod: str, skipped: str) -> dict[str, str]:
    return {"status": "skipped" if skipped else "not run", "pod": "" if skipped else pod, "phase": "",
            "reason": skipped, "message": ""}


def describe(pod: Pod) -> str:
    """A pod's state in one phrase: phase, node, reason and message."""
    where = f" on {pod.node}" if pod.node else ""
    said = ": ".join(p for p in (pod.reason, pod.message) if p)
    return f"{pod.name} {pod.phase}{where}" + (f" ({said})" if said else "")


def _seen(pod: Pod | None) -> dict[str, str]:
    if pod is None:
        return {"phase": "missing", "reason": "", "message": ""}
    return {"phase": pod.phase, "reason": pod.reason, "message": pod.message}


def role_of(pod: Pod) -> tuple[str, str]:
    """(replica | two | overflow, node) of a check pod."""
    labels = pod.raw["metadata"].get("labels") or {}
    return labels.get(ROLE_LABEL, ""), labels.get(NODE_LABEL, "")


def _by_name(pods: list[dict[str, Any]]) -> dict[str, Pod]:
    return {Pod(p).name: Pod(p) for p in pods if not Pod(p).terminating}


def judge_refusal(result: dict[str, Any], pods: list[dict[str, Any]], operator_namespace: str) -> dict[str, Any]:
    """Each pod asking for 2 must have been failed by the kubelet with UnexpectedAdmissionError."""
    found, problems, nodes = _by_name(pods), [], []
    for node in result["nodes"]:
        refuse = dict(node["refuse"])
        if refuse["status"] == "not run":
            pod = found.get(refuse["pod"])
            refuse.update(_seen(pod))
            refused = pod is not None and pod.phase == "Failed" and pod.reason == REFUSED
            refuse["status"] = "passed" if refused else "failed"
            if not refused:
                hint = (f" The device plugin on {node['node']} does not run the config its label or the ClusterPolicy "
                        f"names (kubectl logs -n {operator_namespace} -l app=nvidia-device-plugin-daemonset)."
                        if pod is not None and pod.phase == "Running" else "")
                problems.append(f"{refuse['pod']} asked for 2 {node['resource']} with failRequestsGreaterThanOne on, and "
                                f"{node['node']} did not refuse it with {REFUSED}: it is "
                                f"{describe(pod) if pod else 'missing'}.{hint}")
        nodes.append({**node, "refuse": refuse})
    return {**result, "nodes": nodes, "problems": problems}


def judge_sharing(result: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """Every pod of each Deployment runs on its node; the pod beyond the free replicas stays Pending,
    unplaced, with the scheduler's "Insufficient <resource>"."""
    found, problems, nodes = _by_name(pods), [], []
    for node in result["nodes"]:
        mine = sorted((p for p in found.values() if role_of(p) == ("replica", node["node"])), key=lambda p: p.name)
        running = [p for p in mine if p.phase == "Running" and p.node == node["node"]]
        if len(running) != node["replicas"]:
            problems.append(f"{len(running)} of {node['replicas']} pods of {result['namespace']}/{node['deployment']} run "
                            f"on {node['node']}: {'; '.join(describe(p) for p in mine) or 'no pod at all'}. See kubectl "
                            f"get pods -n {result['namespace']} -o wide.")
        overflow = dict(node["overflow"])
        if overflow["status"] == "not run":
            pod = found.get(overflow["pod"])
            overflow.update(_seen(pod))
            insufficient = f"Insufficient {node['resource']}"
            pending = pod is not None and pod.phase == "Pending" and not pod.node and insufficient in pod.message
            overflow["status"] = "passed" if pending else "failed"
            if not pending:
                problems.append(f"{overflow['pod']}, one pod beyond the {node['free']} free {node['resource']} of "
                                f"{node['node']}, should stay Pending with the scheduler's \"{insufficient}\", but it is "
                                f"{describe(pod) if pod else 'missing'}. The node hands out more replicas than it "
                                "advertises, or other pods freed some meanwhile.")
        nodes.append({**node, "overflow": overflow, "running": len(running),
                      "pods": [{"name": p.name, "phase": p.phase, "node": p.node} for p in mine]})
    return {**result, "nodes": nodes, "problems": problems}


def exec_targets(result: dict[str, Any]) -> list[dict[str, str]]:
    """The (node, pod) pairs to run `nvidia-smi -L` in: every running pod of each Deployment."""
    return [{"node": n["node"], "pod": p["name"]} for n in result["nodes"] for p in n["pods"] if p["phase"] == "Running"]


def gpu_uuids(stdout: str | None) -> list[str]:
    """GPU UUIDs listed by `nvidia-smi -L`."""
    return UUID.findall(stdout or "")


def judge_exec(result: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """`runs`: {item: {node, pod}, stdout} per exec. Each pod sees one GPU, and the pods of a node
    together no more GPUs than it has (on a one-card node: all the same UUID)."""
    problems, nodes = [], []
    for node in result["nodes"]:
        uuids = {r["item"]["pod"]: gpu_uuids(r.get("stdout")) for r in runs if r["item"]["node"] == node["node"]}
        distinct = sorted({u for seen in uuids.values() for u in seen})
        ok = all(len(seen) == 1 for seen in uuids.values()) and len(distinct) <= max(node["gpus"] or 0, 1)
        if not ok:
            seen = "; ".join(f"{pod} sees {', '.join(u) or 'no GPU'}" for pod, u in sorted(uuids.items()))
            problems.append(f"nvidia-smi -L in the check pods on {node['node']} ({node['gpus']} physical GPU(s)): "
                            f"{seen}. Each shared replica must map to one GPU of this node.")
        nodes.append({**node, "exec": {"status": "passed" if ok else "failed", "pod": "", "phase": "", "reason": "",
                                       "message": "", "uuids": uuids, "distinct": distinct}})
    return {**result, "nodes": nodes, "problems": problems}
