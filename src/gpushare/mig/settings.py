"""The MIG runbooks' inputs, checked beyond what the argument spec can say, and the runbook's own
mark on the nodes it changed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpushare.bounded import Unreadable, load_json
from gpushare.mig.fit import Workload, parse_workloads
from gpushare.runbook.inputs import as_bool, optional_int
from gpushare.runbook.records import RECORDS_NAMESPACE

ENABLE, ROLLBACK = "enable-mig", "rollback-mig"
RUNBOOKS = (ENABLE, ROLLBACK)
MARK = "gpushare.io/mig"
# A label value: what nvidia.com/mig.config can hold.
CONFIG_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
MAX_GPUS = 64  # physical GPUs of one node, as a mark may say (a node has 8 or 16)


@dataclass(frozen=True)
class Mark:
    """gpushare.io/mig on a node the enable changed: the config it had before the first enable (the
    rollback's target), the config set, its physical GPUs and the run."""

    previous: str
    config: str
    gpus: int
    run: str

    @classmethod
    def parse(cls, raw: str | None) -> Mark | None:
        """The mark as the enable writes it; None for none, or one that is not (a node annotation is
        written by the runbook identity, which anyone holding it can forge): configs that are label
        values, a count of GPUs a node can have."""
        try:
            data = load_json(raw or "")
        except Unreadable:
            return None
        if not isinstance(data, dict):
            return None
        previous, config, gpus, run = data.get("previous"), data.get("config"), data.get("gpus"), data.get("run") or ""
        if not (all(isinstance(c, str) and CONFIG_NAME.match(c) for c in (previous, config)) and isinstance(run, str)
                and isinstance(gpus, int) and not isinstance(gpus, bool) and 0 < gpus <= MAX_GPUS):
            return None
        return cls(previous, config, gpus, run)

    def text(self) -> str:
        return json.dumps({"previous": self.previous, "config": self.config, "gpus": self.gpus, "run": self.run},
                          sort_keys=True)


@dataclass(frozen=True)
class MigSettings:
    runbook: str
    configs: dict[str, str]  # enable: node -> the config asked for
    rollback_to: str  # rollback: "" = the config the node had before the enable (else all-disabled)
    workloads: list[Workload]
    confirm_eviction_window: bool
    drain_force: bool
    drain_delete_emptydir_data: bool
    reconfigure_timeout: int
    drain_timeout: int
    client_timeout: int  # how long the MIG manager waits for its GPU clients to stop (mig_manager_client_timeout)
    namespace: str
    clusterpolicy: str
    problems: list[str] = field(default_factory=list)
    drain_grace_period: int | None = None  # the grace given to each evicted pod (None: its own)
    records_namespace: str = RECORDS_NAMESPACE  # the run records' (the runbooks' own)

    @classmethod
    def of(cls, runbook: str, values: dict[str, Any]) -> MigSettings:
        workloads, problems = parse_workloads(values.get("workloads"))
        configs = {str(n): str(c or "").strip() for n, c in (values.get("configs") or {}).items()} if (
            runbook == ENABLE) else {}
        rollback_to = str(values.get("rollback_to") or "").strip()
        for node, config in sorted(configs.items()):
            if not config:
                problems.append(f"No MIG config given for {node}: name one with -e mig_config=<name> (for example "
                                "all-1g.10gb or all-balanced; the node's mig-parted config lists them).")
            elif not CONFIG_NAME.match(config):
                problems.append(f"mig_config={config!r} for {node} is not a valid node label value, so it cannot be a "
                                "MIG config name.")
        if rollback_to and not CONFIG_NAME.match(rollback_to):
            problems.append(f"mig_rollback_to={rollback_to!r} is not a valid node label value, so it cannot be a MIG "
                            "config name.")
        return cls(runbook, configs, rollback_to, workloads, as_bool(values.get("confirm_eviction_window")),
                   as_bool(values.get("drain_force")), as_bool(values.get("drain_delete_emptydir_data")),
                   int(values.get("reconfigure_timeout") or 600), int(values.get("drain_timeout") or 300),
                   int(values.get("client_timeout") or 300), str(values["namespace"]),
                   str(values["clusterpolicy_name"]), problems, optional_int(values.get("drain_grace_period")),
                   str(values.get("records_namespace") or RECORDS_NAMESPACE))
