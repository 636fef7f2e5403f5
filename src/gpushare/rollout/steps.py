"""The rollout's steps: the canary, then batches of the other nodes (`serial` style), all at the
first replica count; then each later replica count on every node of the rollout at once (the
shared config is one ConfigMap key, so every node that uses it changes together)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from gpushare.rollout.settings import RolloutSettings, batch_size
from gpushare.runbook.inputs import NOTHING

CANARY = "canary"
WIDEN, RAISE = "widen", "raise"


@dataclass(frozen=True)
class Step:
    name: str
    kind: str  # widen: new nodes join the pool; raise: every node of the rollout gets more replicas
    hosts: tuple[str, ...]  # inventory hosts
    nodes: tuple[str, ...]  # their Kubernetes nodes, in the same order
    replicas: int
    soak: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "hosts": list(self.hosts), "nodes": list(self.nodes),
                "replicas": self.replicas, "soak": self.soak}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Step:
        return cls(str(data["name"]), str(data["kind"]), tuple(data["hosts"]), tuple(data["nodes"]),
                   int(data["replicas"]), int(data.get("soak") or 0))


def schedule(hosts: list[tuple[str, str]], settings: RolloutSettings) -> tuple[list[Step], list[str]]:
    """(steps, refusals) for the play's hosts, in play order, as (inventory host, node) pairs."""
    names = [h for h, _ in hosts]
    node_of = dict(hosts)
    if not hosts:
        return [], [f"No GPU host to roll out to: the play has no host (check -l and the inventory's gpu_nodes). {NOTHING}"]
    unknown = [h for h in settings.canary if h not in node_of]
    if unknown:
        return [], [f"rollout_canary names {', '.join(unknown)}, not among this run's hosts ({', '.join(names)}): name "
                    f"canary hosts of the inventory's gpu_nodes within -l. {NOTHING}"]
    canary = list(dict.fromkeys(settings.canary)) or names[:1]
    if len(canary) == len(names) and len(names) > 1:
        return [], [f"rollout_canary takes every host of the run ({', '.join(names)}): leave some for the batches, or "
                    f"enable them at once with enable-timeslicing.yml. {NOTHING}"]
    first = settings.replicas[0]
    steps = [Step(CANARY, WIDEN, tuple(canary), tuple(node_of[h] for h in canary), first, settings.canary_soak)]
    rest = [h for h in names if h not in canary]
    sizes = [batch_size(v, len(names)) for v in settings.serial]
    index = 0
    while rest:
        size = sizes[min(index, len(sizes) - 1)]
        batch, rest = rest[:size], rest[size:]
        index += 1
        steps.append(Step(f"batch-{index}", WIDEN, tuple(batch), tuple(node_of[h] for h in batch), first, settings.soak))
    for replicas in settings.replicas[1:]:
        steps.append(Step(f"replicas-{replicas}", RAISE, tuple(names), tuple(node_of[h] for h in names), replicas,
                          settings.soak))
    return steps, []


def fingerprint(steps: list[Step]) -> str:
    """What makes two plans the same rollout: each step's name, nodes (in order) and replicas."""
    text = json.dumps([[s.name, list(s.nodes), s.replicas] for s in steps])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def metrics_problems(steps: list[Step], settings: RolloutSettings) -> tuple[list[str], list[str]]:
    """(refusals, notes): rollout_metrics_files must give every step a file (its own key, or
    `default`); a key that names no step of this run (a plan file shared by several runs) is noted."""
    if not settings.metrics_files:
        return [], []
    names = [s.name for s in steps]
    stray = sorted(set(settings.metrics_files) - set(names) - {"default"})
    uncovered = [n for n in names if n not in settings.metrics_files] if "default" not in settings.metrics_files else []
    problems = [f"rollout_metrics_files gives no metrics file for {', '.join(uncovered)} (the steps of this run: "
                f"{', '.join(names)}): add them, or a `default` entry. {NOTHING}"] if uncovered else []
    notes = [f"rollout_metrics_files names {', '.join(stray)}, not a step of this run: not used."] if stray else []
    return problems, notes
