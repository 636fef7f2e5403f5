"""The share check's inputs, as the role passes them (its argument spec does not convert -e
strings), and what is wrong with them before the cluster is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpushare.model.node import Pool
from gpushare.runbook.inputs import DNS_LABEL, LABEL_KEY, LABEL_VALUE, as_bool


def _optional(value: Any) -> Any:
    return None if value is None or str(value).strip() in ("", "None", "null") else value


@dataclass(frozen=True)
class Inputs:
    """The role's variables, type-checked by its argument spec (which does not convert -e strings)."""

    namespace: str
    namespace_labels: dict[str, str]
    name: str
    replicas: int | None
    image: str
    command: list[str]
    image_pull_policy: str
    pool: Pool
    fail_requests_greater_than_one: bool | None
    overflow: bool
    exec: bool
    timeout: int
    poll_interval: int
    keep: bool
    operator_namespace: str

    @classmethod
    def of(cls, values: dict[str, Any]) -> Inputs:
        command = values.get("command") or []
        replicas, fail_gt_one = _optional(values.get("replicas")), _optional(values.get("fail_requests_greater_than_one"))
        return cls(
            namespace=str(values["namespace"]),
            namespace_labels={str(k): str(v) for k, v in (values.get("namespace_labels") or {}).items()},
            name=str(values["name"]), replicas=int(replicas) if replicas is not None else None,
            image=str(values["image"]),
            # -e gives a string: a shell command line.
            command=["bash", "-lc", command] if isinstance(command, str) else [str(c) for c in command],
            image_pull_policy=str(values.get("image_pull_policy") or "IfNotPresent"),
            pool=Pool.of({"label_key": values["pool_label_key"], "label_value": values["pool_label_value"],
                          "taint": {"key": values["pool_taint_key"], "value": values["pool_taint_value"]}}),
            fail_requests_greater_than_one=as_bool(fail_gt_one) if fail_gt_one is not None else None,
            overflow=as_bool(values.get("overflow", True)), exec=as_bool(values.get("exec", False)),
            timeout=int(values.get("timeout", 180)), poll_interval=int(values["poll_interval"]),
            keep=as_bool(values.get("keep", False)), operator_namespace=str(values["operator_namespace"]),
        )

    def problems(self) -> list[str]:
        problems = []
        if not DNS_LABEL.match(self.namespace):
            problems.append(f"share_check_namespace {self.namespace!r} is not a valid namespace name (a DNS label: "
                            "lower-case letters, digits and '-', at most 63).")
        if not DNS_LABEL.match(self.name):
            problems.append(f"share_check_name {self.name!r} must be a DNS label (it prefixes the check's objects and "
                            "is their pods' app label).")
        bad = [f"{k}={v}" for k, v in self.namespace_labels.items() if not LABEL_KEY.match(k) or not LABEL_VALUE.match(v)]
        if bad:
            problems.append(f"share_check_namespace_labels: {', '.join(bad)} is not a valid label.")
        if not self.command:
            problems.append("share_check_command is empty: give the check container's command (it must keep running).")
        if self.replicas is not None and self.replicas < 1:
            problems.append(f"share_check_replicas={self.replicas}: the Deployment needs at least 1 pod (or leave it "
                            "unset for every free replica).")
        if self.poll_interval < 1 or self.timeout < self.poll_interval:
            problems.append(f"share_check_timeout ({self.timeout} s) must be at least share_check_poll_interval "
                            f"({self.poll_interval} s), which must be at least 1.")
        return problems
