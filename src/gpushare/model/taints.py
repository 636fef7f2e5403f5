"""Taints and tolerations, matched exactly as the scheduler and the DaemonSet controller do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def of(cls, data: dict[str, Any]) -> Taint:
        return cls(str(data.get("key") or ""), str(data.get("value") or ""), str(data.get("effect") or ""))

    def as_dict(self) -> dict[str, str]:
        taint = {"key": self.key, "effect": self.effect}
        if self.value:
            taint["value"] = self.value
        return taint

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


def tolerates(toleration: dict[str, Any], taint: Taint) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint. A value that is not a string (an unquoted YAML
    number in an inventory's toleration) matches no taint: the API server would refuse it."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.key:
        return False
    if operator == "Exists":
        return True
    value = toleration.get("value")
    return bool(key) and operator == "Equal" and (value if value is not None else "") == taint.value


def tolerated(tolerations: list[dict[str, Any]], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations or [])
