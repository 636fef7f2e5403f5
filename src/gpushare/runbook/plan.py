"""What every runbook's plan is, before its own fields: the refusals that stop it before any write
(each ends "Nothing was changed."), the notes and warnings told with it, the lines printed before
the first write, the changes in the order they are applied (kind -> changes), the run record written
first, and what the verify must find afterwards. Its filter hands the YAML `as_dict()`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from gpushare.k8s.changes import Change


@dataclass
class Plan:
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    changes: dict[str, list[Change]] = field(default_factory=dict)
    record: str = ""  # the run record, written before the first change
    expected: dict[str, Any] = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        """Whether applying the plan changes anything (a runbook with writes beyond `changes` says more)."""
        return any(self.changes.values())

    def as_dict(self) -> dict[str, Any]:
        """Every field as plain data, and `writes`."""
        return {**{f.name: _plain(getattr(self, f.name)) for f in fields(self)}, "writes": self.writes}


def _plain(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
