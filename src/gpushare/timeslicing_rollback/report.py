"""The end-of-run report of the rollback runbook (the node table: gpushare.timeslicing_common.report)."""

from __future__ import annotations

import json
from typing import Any

from gpushare.timeslicing_common.report import node_table


def _restored_field(path: str, value: Any) -> str:
    """`/spec/devicePlugin/config` and its saved value as `devicePlugin.config: removed`."""
    field = path.removeprefix("/spec/").replace("/", ".")
    return f"{field}: removed (unset before the trial)" if value is None else f"{field}: {json.dumps(value)}"


def rollback_report(nodes: list[dict[str, Any]], plan: dict[str, Any], whereabouts: list[str],
                    check_mode: bool) -> list[str]:
    expected = plan.get("expected") or {}
    rolled = sorted((expected.get("targets") or {}).keys())
    if not plan.get("writes"):
        return list(plan.get("lines") or [])
    lines = (["CHECK MODE: nothing was changed; the nodes as they are now:"] if check_mode else
             [f"Done: {', '.join(rolled)} back to whole cards." if rolled else "Done: the cluster-level changes are undone."])
    if rolled:
        lines += node_table(nodes, rolled, expected["pool"]).splitlines()
    if whereabouts:
        lines.append("Where the evicted workloads went:")
        lines += [f"  {w}" for w in whereabouts]
    restored = expected.get("clusterpolicy") or {}
    if restored:
        lines.append(("ClusterPolicy would be restored: " if check_mode else "ClusterPolicy restored: ")
                     + ", ".join(_restored_field(p, v) for p, v in sorted(restored.items())))
    else:
        lines.append("ClusterPolicy: unchanged by this run.")
    for change in (plan.get("changes") or {}).get("configmap") or []:
        lines.append(f"ConfigMap {change['name']}: {change['why']}.")
    if not check_mode:
        lines.append(f"Record: ConfigMap {plan.get('record')}. Backups and run records are kept.")
    return lines
