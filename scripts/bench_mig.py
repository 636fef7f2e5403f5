"""MIG runbook timings on the embedded cluster (gpu-node-mig, 4 x A100-40GB), on a fresh cluster:
enable-mig all-1g.5gb, its idempotent re-run, rollback-mig to whole cards and its re-run; each with
its wall time, the mutating requests it sent and the operand pods restarted on other nodes.
scripts/bench.py calls `bench_mig(state)`; on its own: `python -m scripts.bench_mig`."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from gpushare.k8s.session import Session
from scripts.bench_runbooks import REPO, measured, sim

NODE = "gpu-node-mig"
RUNS = (
    ("enable", ("playbooks/enable-mig.yml", "-l", NODE, "-e", "mig_config=all-1g.5gb")),
    ("enable_rerun", ("playbooks/enable-mig.yml", "-l", NODE, "-e", "mig_config=all-1g.5gb")),
    ("rollback", ("playbooks/rollback-mig.yml", "-l", NODE)),
    ("rollback_rerun", ("playbooks/rollback-mig.yml", "-l", NODE)),
)


def bench_mig(state: Path, rounds: int = 3) -> dict[str, Any]:
    """{"mig": {run: {s (median of `rounds`), writes, restarted_elsewhere}}}, each round on a fresh cluster."""
    samples: dict[str, list[dict[str, float]]] = {name: [] for name, _ in RUNS}
    for _ in range(rounds):
        sim(state, "down")
        sim(state, "up")
        session = Session(state / "kubeconfig")
        for name, args in RUNS:
            samples[name].append(measured(state, session, NODE, *args, "-e", f"mig_report_dir={state / 'reports'}"))
    sim(state, "down")
    return {"mig": {name: {"s": statistics.median(r["s"] for r in runs), "writes": runs[-1]["writes"],
                           "restarted_elsewhere": max(r["restarted_elsewhere"] for r in runs)}
                    for name, runs in samples.items()}}


def render(results: dict[str, Any]) -> str:
    """The BENCHMARKS.md rows."""
    rows = ["| MIG runbook on gpu-node-mig (4 x A100-40GB) | wall time (median) | mutating requests | operand pods "
            "restarted on other nodes |", "|---|---|---|---|"]
    labels = {"enable": "enable-mig all-1g.5gb", "enable_rerun": "enable-mig re-run (nothing to change)",
              "rollback": "rollback-mig to all-disabled", "rollback_rerun": "rollback-mig re-run (nothing to change)"}
    for name, label in labels.items():
        run = results["mig"][name]
        rows.append(f"| {label} | {run['s']:.1f} s | {run['writes']} | {run['restarted_elsewhere']} |")
    return "\n".join(rows)


if __name__ == "__main__":
    measured_runs = bench_mig(REPO / ".gpushare-bench-mig")
    print(json.dumps(measured_runs, indent=2), file=sys.stderr)
    print(render(measured_runs))
