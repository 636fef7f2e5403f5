"""The release_gates role's filters (registered by plugins/filter/release_gates.py)."""

from __future__ import annotations

from typing import Any

from gpushare.ansible_values import plain
from gpushare.release_gates import plan, report


def release_gates_plan(inputs: dict[str, Any], cwd: str, nodes: list[str]) -> dict[str, Any]:
    return plan.plan(plain(inputs), str(cwd), plain(nodes))


def release_gates_scoped(gates: dict[str, Any], uuids: Any) -> dict[str, Any]:
    return plan.scoped(plain(gates), plain(uuids))


def release_gates_refusal(run: dict[str, Any], argv: list[str], preflight: bool) -> str:
    return report.refusal(plain(run), plain(argv), bool(preflight))


def release_gates_not_evaluated(gates: dict[str, Any]) -> dict[str, Any]:
    return report.not_evaluated(plain(gates))


def release_gates_result(run: dict[str, Any], gates: dict[str, Any]) -> dict[str, Any]:
    return report.result(plain(run), plain(gates))


def release_gates_table(result: dict[str, Any]) -> list[str]:
    return report.table(plain(result))


def release_gates_outcome(result: dict[str, Any], auto_rollback: Any, fail_on_hold: Any,
                          hosts: list[str], rollback_playbook: str = report.ROLLBACK_PLAYBOOK) -> dict[str, str]:
    return report.outcome(plain(result), plain(auto_rollback), plain(fail_on_hold), plain(hosts), str(rollback_playbook))


FILTERS = {
    "release_gates_plan": release_gates_plan,
    "release_gates_scoped": release_gates_scoped,
    "release_gates_refusal": release_gates_refusal,
    "release_gates_not_evaluated": release_gates_not_evaluated,
    "release_gates_result": release_gates_result,
    "release_gates_outcome": release_gates_outcome,
    "release_gates_table": release_gates_table,
}
