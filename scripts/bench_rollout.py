"""Staged-rollout timings on the embedded cluster, two pool sizes in one run: the same plan (a
canary, two batches of half the pool each, then the replicas raised on every node: 4 steps) over
the first 50 and over all 200 GPU nodes of fleets/rollout-200.yaml, each on a fresh cluster of that
fleet; total wall time, mutating requests, and the marginal cost of a node; then the re-run of the
finished 200-node rollout (nothing to change). The gates read a metrics file, the soak is 0 and
the share check is off: what is measured is the rollout's own work and the enable runbook's."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_runbooks import playbook, sim, writes  # noqa: E402

FLEET = REPO / "fleets" / "rollout-200.yaml"
SIZES = (50, 200)
PLAN = {
    "rollout_serial": "50%", "rollout_replicas": [2, 4], "rollout_soak": 0, "rollout_hold_retries": 0,
    "rollout_hold_interval": 0, "rollout_share_check": False,
    "rollout_thresholds_file": str(REPO / "examples" / "gates" / "thresholds.yaml"),
    "rollout_metrics_files": {"default": str(REPO / "examples" / "gates" / "metrics-continue.json")},
}


def rollout(state: Path, size: int, plan: Path) -> dict[str, float]:
    """One run of the rollout over the first `size` GPU nodes: seconds and mutating requests."""
    mark = (state / "audit.log").stat().st_size
    seconds = playbook(state, "playbooks/rollout-timeslicing.yml", "-l", f"gpu_nodes[0:{size - 1}]", "-e", f"@{plan}")
    return {"s": seconds, "writes": writes(state, mark)}


def bench_rollout(state: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        plan = Path(scratch) / "plan.yml"
        plan.write_text(yaml.safe_dump({**PLAN, "timeslicing_backup_dir": str(Path(scratch) / "backups")}))
        runs: dict[str, Any] = {}
        for size in SIZES:
            sim(state, "down")
            sim(state, "up", "--fleet", str(FLEET))
            runs[str(size)] = rollout(state, size, plan)
        runs["rerun_200"] = rollout(state, SIZES[-1], plan)
        sim(state, "down")
    small, large = runs[str(SIZES[0])], runs[str(SIZES[-1])]
    extra = SIZES[-1] - SIZES[0]
    runs["marginal_s_per_node"] = (large["s"] - small["s"]) / extra
    runs["marginal_writes_per_node"] = (large["writes"] - small["writes"]) / extra
    return {"rollout": runs}


def render(results: dict[str, Any]) -> str:
    """The BENCHMARKS.md rows."""
    r = results["rollout"]
    rows = ["| staged rollout (canary, 2 batches of 50%, replicas 2 → 4) | wall time | mutating requests |",
            "|---|---|---|"]
    for size in SIZES:
        rows.append(f"| over {size} GPU nodes | {r[str(size)]['s']:.1f} s | {r[str(size)]['writes']} |")
    rows.append(f"| re-run of the finished {SIZES[-1]}-node rollout | {r[f'rerun_{SIZES[-1]}']['s']:.1f} s | "
                f"{r[f'rerun_{SIZES[-1]}']['writes']} |")
    rows.append(f"| marginal cost of a node ({SIZES[0]} → {SIZES[-1]}) | {r['marginal_s_per_node']:.2f} s | "
                f"{r['marginal_writes_per_node']:.1f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(json.dumps(bench_rollout(REPO / ".gpushare-bench-rollout"), indent=2))
