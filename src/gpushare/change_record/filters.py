"""The change_record role's filters (registered by plugins/filter/change_record.py)."""

from __future__ import annotations

from typing import Any

from gpushare import output_dir
from gpushare.change_record import record, report
from gpushare.ansible_values import plain


def change_record_directory(given: str, cwd: str) -> dict[str, str]:
    """{path, problem}: the records' directory, and why the runbook cannot write into it (gpushare.output_dir)."""
    return output_dir.directory("change_record_dir", str(given), str(cwd))


def change_record_snapshot(read: dict[str, Any]) -> dict[str, Any]:
    return record.snapshot(plain(read))


def change_record_render(snapshot: dict[str, Any], after: dict[str, Any], check: dict[str, Any],
                         gates: dict[str, Any] | None, targets: dict[str, str], inputs: dict[str, Any]) -> dict[str, str]:
    """{path, content} of the record (gpushare.change_record.record); `after`: the final gpushare_read,
    whose caller names the operator with the kubeconfig's identity."""
    after = plain(after)
    snapshot = plain(snapshot)
    snapshot = {**snapshot, "caller": {**(snapshot.get("caller") or {}), **(after.get("caller") or {})}}
    return record.write(snapshot, after.get("resources") or {}, plain(check), plain(gates), plain(targets),
                        plain(inputs))


def change_record_summary(check: dict[str, Any], gates: dict[str, Any] | None, path: str, hosts: list[str],
                          command: str, check_mode: bool) -> list[str]:
    return report.summary(plain(check), plain(gates), str(path), plain(hosts), str(command), bool(check_mode))


FILTERS = {
    "change_record_directory": change_record_directory,
    "change_record_snapshot": change_record_snapshot,
    "change_record_render": change_record_render,
    "change_record_summary": change_record_summary,
}
