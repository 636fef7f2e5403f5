"""The change record of one verify-sharing run, in Markdown: who ran which exact command when, the
outcome, each node before and after, what the share check saw, and the release gates' own report.
Every value in a table cell goes through `cell`, so a reason with a "|" cannot break the table."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpushare.clock import stamp, utc_now
from gpushare.model.node import GPU, PRODUCT, SHARED, Node, Pool, fingerprint_changes
from gpushare.gates.report import from_dict, to_table
from gpushare.runbook.records import BACKUP_LABEL, Record

NOT_EVALUATED = {"evaluated": False, "verdict": "not evaluated", "reason": "the run stopped before the gates",
                 "action": "none", "gates": []}


def cell(value: Any) -> str:
    """A value made safe for one Markdown table cell."""
    text = str(value if value is not None else "")
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


def _yes(value: bool) -> str:
    return "yes" if value else "no"


ROWS: list[tuple[str, Callable[[Node, Pool], Any]]] = [
    ("physical GPUs (`nvidia.com/gpu.count`)", lambda n, p: n.gpus if n.gpus is not None else "-"),
    ("GPU product", lambda n, p: n.labels.get(PRODUCT, "-")),
    ("replicas per GPU", lambda n, p: n.replicas),
    ("sharing strategy", lambda n, p: n.strategy),
    (f"allocatable `{GPU}`", lambda n, p: n.allocatable(GPU)),
    (f"allocatable `{SHARED}`", lambda n, p: n.allocatable(SHARED)),
    ("device-plugin config (`nvidia.com/device-plugin.config`)", lambda n, p: n.config_label or "(cluster default)"),
    ("in the shared pool ({pool})", lambda n, p: _yes(n.in_pool(p))),
    ("pool taint", lambda n, p: str(n.pool_taint(p) or "none")),
    ("schedulable", lambda n, p: _yes(not n.unschedulable)),
]


def snapshot(read: dict[str, Any]) -> dict[str, Any]:
    """The targeted nodes before the run's first write, who runs it and since when."""
    return {"started": stamp(utc_now()), "caller": read.get("caller") or {},
            "nodes": {n["metadata"]["name"]: n for n in (read.get("resources") or {}).get("nodes") or []}}


def path(directory: str, started: str, ticket: str, hosts: list[str]) -> str:
    """reports/verify-sharing-<UTC start>[-<ticket>]-<first host>[-and-<n>-more].md"""
    name = "verify-sharing-" + re.sub(r"[-:]", "", started)
    if ticket:
        name += "-" + re.sub(r"[^A-Za-z0-9._-]+", "-", ticket)
    name += f"-{hosts[0]}" + (f"-and-{len(hosts) - 1}-more" if len(hosts) > 1 else "")
    return f"{directory.rstrip('/')}/{name}.md"


def outcome(check: dict[str, Any], gates: dict[str, Any]) -> str:
    """The run's outcome in one sentence (the record's headline and the summary's last word)."""
    status = check.get("status")
    if status == "failed":
        return "share check failed: the release gates were not evaluated"
    if status != "passed":
        return f"share check not run to the end ({status})"
    if not gates.get("evaluated"):
        return "share check passed; release gates not evaluated"
    verdict, action = gates.get("verdict"), gates.get("action")
    if verdict == "continue":
        return "continue: the share check passed and every release gate says continue"
    if verdict == "hold":
        return "hold: not enough data to decide; the trial neither grows nor rolls back"
    if action == "rolled back":
        return "rollback: the release gates failed and the nodes were rolled back to whole cards"
    if action == "rollback started":
        return "rollback: the release gates failed; the automatic rollback did NOT finish (re-run rollback-timeslicing.yml)"
    return "rollback required: the release gates failed and the run stopped; roll back with rollback-timeslicing.yml"


def _backup(configmaps: list[dict[str, Any]], namespace: str) -> str:
    backups = sorted((c for c in configmaps if ((c.get("metadata") or {}).get("labels") or {}).get(BACKUP_LABEL)),
                     key=lambda c: (c["metadata"].get("creationTimestamp", ""), c["metadata"]["name"]))
    if not backups:
        return f"none found in namespace `{namespace}` (no ConfigMap labelled `{BACKUP_LABEL}=clusterpolicy`)"
    record = Record.of(backups[-1])
    saved = f", saved {record.started} by {record.runbook}" if record.started else ""
    return f"ConfigMap `{namespace}/{record.name}`{saved} (the newest labelled `{BACKUP_LABEL}=clusterpolicy`)"


def _node_section(name: str, before: dict[str, Any] | None, after: dict[str, Any] | None, pool: Pool) -> list[str]:
    lines = [f"### {name}", ""]
    if before is None and after is None:
        return lines + ["Not a node of the cluster.", ""]
    was, now = (Node(n) if n else None for n in (before, after))
    lines += ["| | before | after |", "|---|---|---|"]
    for label, value in ROWS:
        shown = [cell(value(n, pool)) if n else "-" for n in (was, now)]
        lines.append(f"| {label.format(pool=f'`{pool.label_key}={pool.label_value}`')} | {shown[0]} | {shown[1]} |")
    changes = fingerprint_changes(was.fingerprint(pool), now.fingerprint(pool)) if was and now else []
    return lines + ["", f"Changed by this run: {'; '.join(changes) if changes else 'nothing'}.", ""]


def _part(part: dict[str, Any]) -> str:
    if part["status"] == "passed":
        return f"passed: {part['phase']}, {part['reason']}"
    return part["status"] + (f": {part['reason']}" if part.get("reason") else "")


def node_status(node: dict[str, Any]) -> str:
    """passed, failed or not run, for one node's check."""
    parts = [node[k]["status"] for k in ("refuse", "overflow", "exec")]
    if "failed" in parts or (node["pods"] and node["running"] < node["replicas"]):
        return "failed"
    return "passed" if node["running"] == node["replicas"] and "not run" not in parts else "not run"


def _check_section(check: dict[str, Any]) -> list[str]:
    lines = ["## Share check", "",
             "Per node: a pod asking for 2 replicas must be refused by the device plugin (when "
             "`failRequestsGreaterThanOne` is on), a Deployment with one replica per pod must run every pod on the "
             "node, and one pod beyond the free replicas must stay Pending.", "",
             "| node | result | resource (allocatable / free) | pods running on the node | pod beyond the free replicas "
             "| pod asking for 2 | GPUs seen (`nvidia-smi -L`) |", "|---|---|---|---|---|---|---|"]
    for n in check["nodes"]:
        seen = ", ".join(n["exec"].get("distinct") or []) if n["exec"]["status"] == "passed" else _part(n["exec"])
        lines.append(f"| {n['node']} | **{node_status(n)}** | `{n['resource']}` ({n['allocatable']} / {n['free']}) | "
                     f"{n['running']}/{n['replicas']} | {cell(_part(n['overflow']))} | {cell(_part(n['refuse']))} | "
                     f"{cell(seen)} |")
    lines.append("")
    for n in check["nodes"]:
        for key, who in (("overflow", "the scheduler"), ("refuse", "the kubelet")):
            if n[key]["status"] == "passed" and n[key]["message"]:
                lines += [f"{n['node']}, {who} on `{n[key]['pod']}`:", "", f"> {n[key]['message']}", ""]
        for pod, uuids in sorted((n["exec"].get("uuids") or {}).items()):
            lines.append(f"- {n['node']}, `{pod}` sees {', '.join(uuids) or 'no GPU'}")
    if check.get("status") == "failed":
        lines += [f"**The share check failed** in \"{check.get('failed_task', '')}\":", "",
                  f"> {' '.join(str(check.get('message', '')).split())}", ""]
    return lines + [f"Cleanup: {check.get('cleanup', 'not run')}.", ""]


def _gates_section(gates: dict[str, Any], hosts: list[str]) -> list[str]:
    lines = ["## Release gates", ""]
    if not gates.get("evaluated"):
        return lines + [f"Not evaluated: {gates.get('reason')}.", ""]
    actions = {
        "rolled back": f"the rollback runbook (role timeslicing_rollback) rolled back {', '.join(hosts)}",
        "rollback started": f"the automatic rollback did not finish; re-run rollback-timeslicing.yml -l {','.join(hosts)}",
        "held": "none; the run ended with the reasons (hold)",
        "failed the run": "the run failed on hold (release_gates_fail_on_hold)",
    }
    action = actions.get(gates.get("action", ""), "the run stopped with the reasons; nothing was rolled back (run "
                         "rollback-timeslicing.yml, or re-run with release_gates_auto_rollback=true)"
                         if gates.get("verdict") == "rollback" else "none; the trial may continue")
    return lines + [f"Verdict: **{gates['verdict']}** (`gpushare gate` exit status {gates.get('exit_code')}); "
                    f"action: {action}.", "", f"Command: `{gates.get('command', '')}`", "",
                    "```", to_table(from_dict(gates)), "```", ""]


def render(snapshot: dict[str, Any], after: dict[str, Any], check: dict[str, Any], gates: dict[str, Any] | None,
           targets: dict[str, str], ticket: str, namespace: str, finished: str) -> str:
    """`after`: the `resources` of the final read (nodes, backups); `targets`: host -> node."""
    gates = gates or NOT_EVALUATED
    pool = Pool.of(check["pool"])
    hosts, nodes = list(targets), list(targets.values())
    named = ", ".join(n if n == h else f"{n} (inventory host {h})" for h, n in targets.items())
    who = snapshot.get("caller") or {}
    lines = [f"# Change record: GPU time-slicing verification on {', '.join(nodes)}", "", "| | |", "|---|---|"]
    if ticket:
        lines.append(f"| Change ticket | {cell(ticket)} |")
    lines += [
        f"| Command | `{cell(who.get('command', ''))}` |",
        f"| Operator | {cell(who.get('operator') or who.get('user') or 'unknown')} |",
        f"| Started (UTC) | {snapshot.get('started', '-')} |",
        f"| Finished (UTC) | {finished} |",
        f"| Nodes | {cell(named)} |",
        f"| **Outcome** | **{cell(outcome(check, gates))}** |",
        f"| ClusterPolicy backup | {cell(_backup(after.get('backups') or [], namespace))} |",
        "", "## Nodes before and after this run", "",
    ]
    now = {n["metadata"]["name"]: n for n in after.get("nodes") or []}
    for name in nodes:
        lines += _node_section(name, (snapshot.get("nodes") or {}).get(name), now.get(name), pool)
    lines += _check_section(check) + _gates_section(gates, hosts)
    return "\n".join(lines).rstrip() + "\n"


def write(snapshot: dict[str, Any], after: dict[str, Any], check: dict[str, Any], gates: dict[str, Any] | None,
          targets: dict[str, str], inputs: dict[str, Any]) -> dict[str, str]:
    """{path, content} of the record, finished now. `inputs`: dir (absolute), ticket, namespace."""
    return {"path": path(str(inputs["dir"]), snapshot["started"], str(inputs.get("ticket") or ""), list(targets)),
            "content": render(snapshot, after, check, gates, targets, str(inputs.get("ticket") or ""),
                              str(inputs["namespace"]), stamp(utc_now()))}
