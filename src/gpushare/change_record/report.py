"""The few lines a verify-sharing run ends with: per node the share check's result with its pods and
shares, each release gate's verdict and reason (a Prometheus that did not answer said once), where
the change record is, and the command to run next."""

from __future__ import annotations

from typing import Any

from gpushare.change_record.record import NOT_EVALUATED, node_status, outcome
from gpushare.table import render_table, wrap

WIDTH = 120


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    return wrap(indent + text, WIDTH, indent + "  ")


def _line(text: str) -> list[str]:
    return wrap(text, WIDTH, "  ")


def _node_lines(node: dict[str, Any]) -> list[str]:
    lines = [f"Share check on {node['node']}: {node_status(node)}."]
    pods = ", ".join(p["name"] for p in node["pods"] if p["phase"] == "Running" and p["node"] == node["node"])
    lines += _wrapped(f"{node['running']} of {node['replicas']} pods ran on {node['node']}, 1 {node['resource']} each "
                      f"({node['allocatable']} allocatable, {node['free']} free)" + (f": {pods}" if pods else ""))
    for key, what in (("refuse", "The pod asking for 2"), ("overflow", "The pod beyond the free replicas")):
        part = node[key]
        if part["status"] == "passed":
            seen = "was refused by the kubelet" if key == "refuse" else "stayed Pending"
            lines += _wrapped(f"{what} {seen}: {part['reason']}: {part['message']}")
        elif part["status"] != "not run":
            lines += _wrapped(f"{what}: {part['status']}" + (f" ({part['reason']})" if part["reason"] else ""))
    if node["exec"]["status"] == "passed":
        lines += _wrapped(f"nvidia-smi -L: the pods see {', '.join(node['exec']['distinct'])}")
    elif node["exec"]["status"] == "failed":
        lines += _wrapped("nvidia-smi -L: the pods see more GPUs than the node has (see the change record)")
    return lines


def _gate_lines(gates: dict[str, Any]) -> list[str]:
    if not gates.get("evaluated"):
        return _line(f"Release gates: not evaluated ({gates.get('reason')}).")
    source = ", ".join(f"{k} {', '.join(v) if isinstance(v, list) else v}" for k, v in (gates.get("source") or {}).items())
    lines = _line(f"Release gates: {gates['verdict']} ({source}).")
    if gates.get("error"):
        lines += _wrapped(f"Prometheus: {gates['error']}.")
    rows = [(g["name"], g["status"], g["reason"]) for g in gates.get("gates") or []]
    return lines + ["  " + line for line in render_table(("gate", "verdict", "reason"), rows, WIDTH - 2).splitlines()]


def next_step(check: dict[str, Any], gates: dict[str, Any], hosts: list[str], command: str, check_mode: bool) -> str:
    limit = ",".join(hosts)
    verify = f"ansible-playbook playbooks/verify-sharing.yml -l {limit}"
    rollback = f"ansible-playbook playbooks/rollback-timeslicing.yml -l {limit}"
    if check_mode:
        return f"run it without --check: {verify}"
    if check.get("status") != "passed":
        return f"fix what the share check reports, then re-run: {verify}   (or roll back: {rollback})"
    if not gates.get("evaluated"):
        return (f"once the trial has run, evaluate the release gates: {verify} -e release_gates_prometheus_url=URL "
                f"-e release_gates_thresholds_file=examples/gates/thresholds.yaml   (or roll back: {rollback})")
    if gates["verdict"] in ("continue", "hold"):
        why = "the trial may continue" if gates["verdict"] == "continue" else "not enough data yet"
        return f"{why}; evaluate again later: {command}   (or roll back: {rollback})"
    if gates.get("action") == "rolled back":
        return f"nothing: {limit} {'is' if len(hosts) == 1 else 'are'} back on whole cards"
    return f"roll back: {rollback}"


def summary(check: dict[str, Any], gates: dict[str, Any] | None, record: str, hosts: list[str], command: str,
            check_mode: bool) -> list[str]:
    gates = gates or NOT_EVALUATED
    if check_mode:
        lines = ["CHECK MODE: nothing was changed; the share check above was planned, not run."]
    else:
        lines = [line for node in check["nodes"] for line in _node_lines(node)]
        lines.append(f"Cleanup: {check.get('cleanup', 'not run')}.")
    lines += _gate_lines(gates)
    lines += _line(f"Outcome: {outcome(check, gates)}.")
    # Not wrapped, so that it can be copied.
    lines.append(f"Change record: {record}" + (" (check mode: not written)" if check_mode else ""))
    return lines + _line(f"Next: {next_step(check, gates, hosts, command, check_mode)}")
