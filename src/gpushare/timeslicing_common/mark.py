"""The enable runbook's annotation on a node it changed, and reading it off a node."""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpushare.bounded import Unreadable, load_json
from gpushare.model.node import Node

MARK = "gpushare.io/timeslicing"


@dataclass(frozen=True)
class Mark:
    """The enable runbook's annotation on a node it changed: what it set and what it found."""

    configmap: str = ""
    key: str = ""
    replicas: int = 0
    scope: str = "node"
    run: str = ""
    taint_added: bool = False  # the pool taint was added by the runbook (not the node's own)
    valid: bool = True
    raw: str = ""

    @classmethod
    def parse(cls, raw: str | None) -> Mark | None:
        if raw is None:
            return None
        try:
            data = load_json(raw)  # bounded: anyone holding the runbook identity can write it
            if not isinstance(data, dict):
                raise ValueError
            return cls(str(data.get("configmap") or ""), str(data.get("key") or ""),
                       int(data.get("replicas") or 0), str(data.get("scope") or "node"),
                       str(data.get("run") or ""), bool(data.get("taint_added", True)), True, raw)
        except (Unreadable, ValueError, TypeError):
            return cls(valid=False, raw=raw)

    def text(self) -> str:
        return json.dumps({"configmap": self.configmap, "key": self.key, "replicas": self.replicas,
                           "scope": self.scope, "run": self.run, "taint_added": self.taint_added}, sort_keys=True)


def timeslicing_mark(node: Node) -> Mark | None:
    """The node's time-slicing mark: None when it has none, invalid when it cannot be read."""
    return Mark.parse(node.annotations.get(MARK))
