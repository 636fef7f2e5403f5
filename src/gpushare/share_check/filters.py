"""The share_check role's filters (registered by plugins/filter/share_check.py)."""

from __future__ import annotations

from typing import Any

from gpushare.ansible_values import plain
from gpushare.runbook.inputs import NOTHING
from gpushare.share_check import plan as planning
from gpushare.share_check import report
from gpushare.share_check.settings import Inputs


def share_check_plan(read: dict[str, Any], inputs: dict[str, Any], targets: dict[str, str]) -> dict[str, Any]:
    """The plan (gpushare.share_check.plan) from the preflight's gpushare_read, with the result it starts from."""
    read, values, targets = plain(read), Inputs.of(plain(inputs)), plain(targets)
    resources = read.get("resources") or {}
    planned = planning.plan(resources, values, targets).as_dict()
    return {**planned, "namespace_exists": resources.get("check_namespace") is not None,
            "selector": planning.selector(values, list(targets.values())),
            "replicas": {c["node"]: c["replicas"] for c in planned["nodes"]},
            "result": report.start(planned, values.namespace, values.pool.as_dict(), values.exec)}


def share_check_input_problems(inputs: dict[str, Any]) -> list[str]:
    """What is wrong with the inputs alone, before the cluster is read (a namespace the runbook may
    not read would otherwise answer 403 instead of saying its name is invalid)."""
    return [f"{problem} {NOTHING}" for problem in Inputs.of(plain(inputs)).problems()]


def share_check_judge(check: dict[str, Any], read: dict[str, Any], stage: str, operator_namespace: str) -> dict[str, Any]:
    """share_check_result after the pods of `stage` (refusal or sharing) were read back."""
    check, pods = plain(check), (plain(read).get("resources") or {}).get("pods") or []
    if stage == "refusal":
        return report.judge_refusal(check, pods, str(operator_namespace))
    return report.judge_sharing(check, pods)


def share_check_exec_targets(check: dict[str, Any]) -> list[dict[str, str]]:
    return report.exec_targets(plain(check))


def share_check_judge_exec(check: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    return report.judge_exec(plain(check), plain(runs))


FILTERS = {
    "share_check_plan": share_check_plan,
    "share_check_input_problems": share_check_input_problems,
    "share_check_judge": share_check_judge,
    "share_check_exec_targets": share_check_exec_targets,
    "share_check_judge_exec": share_check_judge_exec,
}
