"""How a MIG run ends: per node a before/after table for the operator, and the change record (one
Markdown file for the change ticket) with the command, the plan, the outcome and the same tables."""

from __future__ import annotations

from typing import Any

from gpushare.mig.plan import facts
from gpushare.model.node import Node
from gpushare.table import render_table


def _rows(before: dict[str, Any], after: dict[str, Any]) -> list[list[str]]:
    keys = [k for k in before if k != "schedulable"] + [k for k in after if k not in before] + ["schedulable"]
    return [[k, str(before.get(k, "-")), str(after.get(k, "-"))] for k in keys]


def node_tables(nodes: list[dict[str, Any]], plan: dict[str, Any]) -> dict[str, list[list[str]]]:
    """node -> rows (what, before, after) for the nodes the plan changes."""
    now = {n["metadata"]["name"]: facts(Node(n)) for n in nodes}
    return {name: _rows(before, now.get(name, {})) for name, before in sorted((plan.get("before") or {}).items())}


def report(nodes: list[dict[str, Any]], plan: dict[str, Any], runbook: str, check_mode: bool,
           change_record: str) -> list[str]:
    if not plan.get("writes"):
        return list(plan.get("lines") or [])
    targets = plan.get("expected", {}).get("targets") or {}
    if check_mode:
        lines = ["CHECK MODE: nothing was changed; the nodes as they are now:"]
    else:
        lines = [f"Done ({runbook}): " + "; ".join(f"{n} runs MIG config {t['config']}" for n, t in sorted(targets.items()))
                 + f", {plan['expected']['strategy']} strategy."]
    for name, rows in node_tables(nodes, plan).items():
        lines += render_table([name, "before", "after"], rows).splitlines()
    if not check_mode:
        lines.append(f"Run record: ConfigMap {plan.get('record')}. Change record: {change_record}")
        hosts = ",".join(sorted(targets))
        lines.append(f"Roll back with: ansible-playbook playbooks/rollback-mig.yml -l {hosts}" if runbook == "enable-mig"
                     else f"Partition again with: ansible-playbook playbooks/enable-mig.yml -l {hosts} -e mig_config=<name>")
    return lines


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _markdown(headers: list[str], rows: list[list[Any]]) -> list[str]:
    return (["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows])


def change_record(nodes: list[dict[str, Any]], plan: dict[str, Any], runbook: str, invocation: dict[str, str],
                  started: str, finished: str, failure: str) -> str:
    """The change record of a run that wrote something (a failed one too)."""
    outcome = f"**failed**: {failure}" if failure else "**done**: " + ", ".join(
        f"{n} runs {t['config']}" for n, t in sorted((plan.get("expected") or {}).get("targets", {}).items()))
    lines = [f"# Change record: {runbook} on {', '.join(plan.get('nodes') or [])}", ""]
    lines += _markdown(["", ""], [
        ["Runbook", f"`{invocation.get('command', '')}`"], ["Operator", invocation.get("operator") or invocation.get("user", "")],
        ["Started (UTC)", started], ["Finished (UTC)", finished], ["Outcome", outcome],
        ["Run record", f"ConfigMap `{plan.get('record')}` (the node labels before the change)"]])
    lines += ["", "## Nodes before and after", ""]
    for name, rows in node_tables(nodes, plan).items():
        lines += [f"### {name}", ""] + _markdown(["", "before", "after"], rows) + [""]
    lines += ["## The plan", "", "```", *(plan.get("lines") or []), "```", ""]
    return "\n".join(lines)
