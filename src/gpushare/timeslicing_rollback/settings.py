"""The rollback runbook's inputs, as its role passes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpushare.model.node import Pool
from gpushare.runbook.inputs import optional_int
from gpushare.runbook.records import RECORDS_NAMESPACE


@dataclass(frozen=True)
class RollbackSettings:
    pool: Pool
    config_key: str
    configmap: str
    namespace: str
    clusterpolicy: str
    confirm_cluster_scope: bool
    confirm_overwrite: bool
    drain_force: bool
    drain_delete_emptydir_data: bool
    backup_name: str  # an explicit backup: a run record ConfigMap, or a backup file (then backup_text)
    backup_text: str
    unprepare: bool = False  # undo the prepare runs too (the operator then rolls the fleet's plugin and GFD)
    drain_timeout: int = 300
    drain_grace_period: int | None = None  # the grace given to each evicted pod (None: its own)
    records_namespace: str = RECORDS_NAMESPACE  # the run records' (the runbooks' own)

    @classmethod
    def of(cls, values: dict[str, Any]) -> RollbackSettings:
        taint = ({"key": values["pool_taint_key"], "value": values["pool_taint_value"]}
                 if values["pool_taint_key"] else None)
        return cls(Pool.of({"label_key": values["pool_label_key"], "label_value": values["pool_label_value"],
                            "taint": taint}),
                   str(values.get("config_key") or "shared"), str(values["configmap_name"] or ""),
                   str(values["namespace"]), str(values["clusterpolicy_name"]),
                   bool(values.get("confirm_cluster_scope")), bool(values.get("confirm_overwrite")),
                   bool(values.get("drain_force")), bool(values.get("drain_delete_emptydir_data")),
                   str(values.get("backup") or ""), str(values.get("backup_text") or ""),
                   bool(values.get("unprepare")), int(values.get("drain_timeout") or 300),
                   optional_int(values.get("drain_grace_period")),
                   str(values.get("records_namespace") or RECORDS_NAMESPACE))
