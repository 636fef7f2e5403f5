"""The end-of-run report of the enable runbook (the node table: gpushare.timeslicing_common.report)."""

from __future__ import annotations

from typing import Any

from gpushare.timeslicing_common.report import node_table


def enable_report(nodes: list[dict[str, Any]], daemonsets: list[dict[str, Any]], plan: dict[str, Any],
                  check_mode: bool, hosts: list[str]) -> list[str]:
    """The summary an enable (or prepare) run ends with."""
    from gpushare.model.operands import CONFIG_READERS, Operand  # noqa: PLC0415

    expected = plan.get("expected") or {}
    targets = sorted((expected.get("targets") or {}).keys())
    pool = expected.get("pool") or {}
    if check_mode:
        lines = ["CHECK MODE: nothing was changed; the nodes as they are now:"]
    elif not plan.get("writes"):
        lines = []  # the plan said there is nothing to change
    else:
        mechanism = "MPS" if expected.get("strategy") == "mps" else "time-slicing"
        lines = [f"Done: {mechanism} with {expected.get('replicas')} replicas per GPU on {', '.join(targets)}."
                 if targets else "Done: the cluster is prepared for time-slicing trials."]
    if targets and pool:
        lines += node_table(nodes, targets, pool).splitlines()
    if plan.get("rolls_fleet"):
        for raw in daemonsets:
            operand = Operand(raw)
            if operand.name in CONFIG_READERS:
                updated, desired = operand.rollout()
                if not desired:  # no pod of it anywhere (the MPS daemon without MPS nodes)
                    continue
                lines.append(f"The operator's roll of {operand.name}: {updated} of {desired} GPU nodes done "
                             "(it goes on by itself, one node at a time).")
    if plan.get("writes") and not check_mode:
        lines.append(f"Run record and ClusterPolicy backup: ConfigMap {plan.get('record')}.")
    if targets and hosts and not check_mode:  # -l takes inventory host names
        limit = ",".join(sorted(hosts))
        lines.append(f"Next: ansible-playbook playbooks/verify-sharing.yml -l {limit}   "
                     f"(rollback: playbooks/rollback-timeslicing.yml -l {limit})")
    return lines
