"""The rollout's inputs, checked before anything is read or written: the canary, the batch size
(`serial` style: a number, a percentage, or a list of them whose last value repeats), the replica
schedule, the soak, the hold policy, what a rollback verdict rolls back, and the gates' sources."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushare.runbook.inputs import NOTHING, as_bool
from gpushare.runbook.records import RECORDS_NAMESPACE

ON_ROLLBACK = ("step", "all")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def _given(value: Any) -> bool:
    return value is not None and str(value).strip() not in ("", "None", "null")


def _as_list(value: Any) -> list[Any]:
    """-e gives strings: "1,25%" is two values."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def batch_size(value: Any, total: int) -> int:
    """One `serial` value: a count, or a percentage of all the rollout's nodes (rounded down, at
    least 1, as Ansible's serial does). ValueError names what is wrong."""
    text = str(value).strip()
    match = _PERCENT.match(text)
    if match:
        percent = float(match.group(1))
        if not 0 < percent <= 100:
            raise ValueError(f"{text}: a percentage is above 0% and at most 100%")
        return max(1, int(total * percent / 100))
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{text!r}: give a number of nodes (at least 1) or a percentage such as 25%")
    return int(text)


@dataclass(frozen=True)
class RolloutSettings:
    canary: list[str]
    serial: list[Any]
    replicas: list[int]
    soak: int
    canary_soak: int
    hold_retries: int
    hold_interval: int
    on_rollback: str
    thresholds_file: str
    metrics_files: dict[str, list[str]]
    prometheus_url: str
    start_over: bool
    lock_duration: int
    share_check: bool
    namespace: str  # the GPU Operator's
    cwd: str
    records_namespace: str = RECORDS_NAMESPACE  # the rollout record's (the runbooks' own)
    max_replicas: int = 16
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, inputs: dict[str, Any]) -> RolloutSettings:
        """From the role's variables without their prefix; what cannot be read becomes an error."""
        errors: list[str] = []

        def integer(key: str, default: int, minimum: int = 0) -> int:
            value = inputs.get(key)
            try:
                number = int(str(value).strip()) if _given(value) else default
            except ValueError:
                errors.append(f"rollout_{key} must be a whole number, got {value!r}")
                return default
            if number < minimum:
                errors.append(f"rollout_{key} must be at least {minimum}, got {number}")
            return number

        replicas: list[int] = []
        for value in _as_list(inputs.get("replicas")):
            try:
                replicas.append(int(str(value).strip()))
            except ValueError:
                errors.append(f"rollout_replicas: {value!r} is not a number of replicas")
        files: dict[str, list[str]] = {}
        raw_files = inputs.get("metrics_files")
        if _given(raw_files) and not isinstance(raw_files, dict):
            errors.append("rollout_metrics_files maps each step (canary, batch-1, ..., replicas-4, or default) to a "
                          f"metrics file or a list of them (one per evaluation), got {raw_files!r}")
        elif isinstance(raw_files, dict):
            files = {str(step): [str(f) for f in _as_list(paths)] for step, paths in raw_files.items()}
        soak = integer("soak", 1800)
        return cls(
            canary=[str(h) for h in _as_list(inputs.get("canary"))],
            serial=_as_list(inputs.get("serial")) or [1],
            replicas=replicas,
            soak=soak,
            canary_soak=integer("canary_soak", soak) if _given(inputs.get("canary_soak")) else soak,
            hold_retries=integer("hold_retries", 3),
            hold_interval=integer("hold_interval", 600),
            on_rollback=str(inputs.get("on_rollback") or "step"),
            thresholds_file=str(inputs.get("thresholds_file") or "") if _given(inputs.get("thresholds_file")) else "",
            metrics_files=files,
            prometheus_url=str(inputs.get("prometheus_url")) if _given(inputs.get("prometheus_url")) else "",
            start_over=as_bool(inputs.get("start_over", False)),
            lock_duration=integer("lock_duration", 900, 60),
            share_check=as_bool(inputs.get("share_check", True)),
            namespace=str(inputs.get("namespace") or "gpu-operator"),
            records_namespace=str(inputs.get("records_namespace") or RECORDS_NAMESPACE),
            cwd=str(inputs.get("cwd") or "."),
            max_replicas=integer("max_replicas", 16, 2),
            errors=errors,
        )

    def path(self, name: str) -> Path:
        """A file named on the command line: absolute, or relative to where ansible-playbook runs."""
        return (Path(self.cwd) / name).resolve()

    def problems(self) -> list[str]:
        """Everything wrong with the inputs alone, each message saying what to give instead."""
        problems = list(self.errors)
        if not self.replicas:
            problems.append("rollout_replicas is empty: give the replica schedule, e.g. [2, 4] (2 on the canary and "
                            "the batches, then 4 on every node)")
        elif any(r < 2 or r > self.max_replicas for r in self.replicas):
            problems.append(f"rollout_replicas {self.replicas}: each value is at least 2 (the device plugin's rule) and "
                            f"at most {self.max_replicas} (timeslicing_max_replicas)")
        elif any(b <= a for a, b in zip(self.replicas, self.replicas[1:])):
            problems.append(f"rollout_replicas {self.replicas}: a schedule only raises the replicas; each value is "
                            "above the one before (e.g. [2, 4])")
        for value in self.serial:
            try:
                batch_size(value, 1)
            except ValueError as err:
                problems.append(f"rollout_serial {err}")
        if self.on_rollback not in ON_ROLLBACK:
            problems.append(f"rollout_on_rollback must be step (roll back the step's nodes) or all (everything this "
                            f"rollout changed), got {self.on_rollback!r}")
        if bool(self.metrics_files) == bool(self.prometheus_url):
            problems.append("Every step is decided by the release gates: give ONE source of metrics, "
                            "rollout_prometheus_url (http(s)://host:port) or rollout_metrics_files (a metrics file per "
                            "step, for rehearsals; see examples/rollout/)")
        if self.prometheus_url and not re.match(r"^https?://", self.prometheus_url):
            problems.append(f"rollout_prometheus_url {self.prometheus_url!r} is not an http(s):// URL")
        if not self.thresholds_file:
            problems.append("rollout_thresholds_file is required: the SLOs the gates judge each step by "
                            "(see examples/gates/thresholds.yaml)")
        elif not self.path(self.thresholds_file).is_file():
            problems.append(f"rollout_thresholds_file {self.thresholds_file}: no such file (paths are absolute or "
                            f"relative to {self.cwd})")
        missing = sorted({f for files in self.metrics_files.values() for f in files if not self.path(f).is_file()})
        if missing:
            problems.append(f"rollout_metrics_files: no such file: {', '.join(missing)} (paths are absolute or "
                            f"relative to {self.cwd})")
        empty = sorted(step for step, files in self.metrics_files.items() if not files)
        if empty:
            problems.append(f"rollout_metrics_files: no file given for {', '.join(empty)}")
        return [f"{p}. {NOTHING}" for p in problems]

    def metrics_file(self, step: str, attempt: int) -> str:
        """The metrics file of a step's evaluation number `attempt` (0-based; the last file repeats)."""
        files = self.metrics_files.get(step) or self.metrics_files.get("default") or []
        return str(self.path(files[min(attempt, len(files) - 1)])) if files else ""
