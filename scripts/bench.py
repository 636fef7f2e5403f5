#!/usr/bin/env python3
"""Benchmarks of the embedded cluster, the simulator and the runbooks; writes BENCHMARKS.md.

Each figure is measured here, in one run, side by side where a ratio is reported."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpushare.kube import api_client  # noqa: E402
from gpushare.polling import wait_for  # noqa: E402
from scripts.bench_cluster import STATE, bench_sim_up, sh, sim, timed  # noqa: E402
import yaml  # noqa: E402
from kubernetes import client  # noqa: E402

# The seed's ConfigMap plus a no-sharing default key, so that only labelled nodes share.
_SEED = yaml.safe_load((REPO / "examples" / "seed" / "time-slicing-config.yaml").read_text())
REACTION_CONFIGMAP = yaml.safe_dump({**_SEED, "data": {"default": "version: v1", **_SEED["data"]}})


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def bench_cold_build() -> dict[str, Any]:
    """Build every binary into an empty cache with an empty Go build cache (modules already downloaded):
    first `make demo`'s (all but Kueue), then Kueue, as build-binaries.sh orders them; with what it
    recorded of Kueue's build."""
    from scripts.bench_kueue import kueue_cold_build  # noqa: PLC0415

    script = str(REPO / "scripts" / "build-binaries.sh")
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as gocache:
        env = {"GPUSHARE_CACHE": cache, "GOCACHE": gocache}
        demo = timed(lambda: sh(script, "--without", "kueue", env=env))
        seconds = demo + timed(lambda: sh(script, env=env))
        size = du(Path(cache))
        kueue = kueue_cold_build(cache)
    return {"cold_build_s": seconds, "demo_build_s": demo, "cache_mib": size / 2**20, **kueue}


def reaction(core: client.CoreV1Api, nodes: list[str], shared: bool) -> float:
    """Label `nodes` for the shared config (or remove the label); seconds until all are updated."""
    value = "shared" if shared else None
    began = time.perf_counter()
    for name in nodes:
        core.patch_node(name, {"metadata": {"labels": {"nvidia.com/device-plugin.config": value}}})

    def done() -> bool:
        for name in nodes:
            allocatable = core.read_node(name).status.allocatable or {}
            if ("nvidia.com/gpu.shared" in allocatable and allocatable["nvidia.com/gpu.shared"] != "0") != shared:
                return False
        return True

    wait_for(done, 120, "the simulator to publish the new config", interval_s=0.01)
    return time.perf_counter() - began


def point_policy_at_configmap(kubeconfig: Path, bin_dir: Path) -> None:
    kubectl = [str(bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}"]
    subprocess.run([*kubectl, "apply", "-f", "-"], input=REACTION_CONFIGMAP, text=True, check=True, capture_output=True)
    sh(*kubectl, "patch", "clusterpolicies.nvidia.com/cluster-policy", "--type", "merge", "-p",
       '{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"default"}},'
       '"daemonsets":{"rollingUpdate":{"maxUnavailable":"100%"}}}}')
    sh(*kubectl, "rollout", "status", "-n", "gpu-operator", "daemonset/nvidia-device-plugin-daemonset", "--timeout=900s")


def bench_reaction(samples: int, burst: int) -> dict[str, float]:
    info = json.loads((STATE / "cluster.json").read_text())
    kubeconfig = STATE / "kubeconfig"
    point_policy_at_configmap(kubeconfig, Path(info["bin_dir"]))
    core = client.CoreV1Api(api_client(kubeconfig))
    single = []
    for _ in range(samples):
        single.append(reaction(core, ["gpu-node"], shared=True))
        single.append(reaction(core, ["gpu-node"], shared=False))
    single.sort()
    result = {"reaction_median_s": statistics.median(single), "reaction_p95_s": single[int(len(single) * 0.95) - 1],
              "reaction_max_s": single[-1]}
    if burst:
        gpu_nodes = sorted(n.metadata.name for n in core.list_node(label_selector="nvidia.com/gpu.present=true").items)
        targets = gpu_nodes[:burst]
        result["burst_nodes"] = len(targets)
        result["burst_s"] = reaction(core, targets, shared=True)
        reaction(core, targets, shared=False)
    return result


CHECKPOINT = REPO / ".gpushare-bench-results.json"


def sections(skip_cold_build: bool) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """(name, measurement) in the order they run; each returns the results it adds."""
    from scripts.bench_baseline import bench_baseline  # noqa: PLC0415
    from scripts.bench_kueue import admission_latency  # noqa: PLC0415
    from scripts.bench_mig import bench_mig  # noqa: PLC0415
    from scripts.bench_rollout import bench_rollout  # noqa: PLC0415
    from scripts.bench_runbooks import bench_runbooks  # noqa: PLC0415

    def default_fleet() -> dict[str, Any]:
        up = bench_sim_up(None, runs=3)
        return {"up_default": up, "reaction_default": bench_reaction(samples=10, burst=0),
                "kueue_admission": admission_latency(STATE)}

    def without_kueue() -> dict[str, Any]:
        up = bench_sim_up(None, runs=3, extra=("--without", "kueue"))
        sim("down")
        return {"up_without_kueue": up}

    def fleet_500() -> dict[str, Any]:
        up = bench_sim_up(REPO / "fleets" / "scale-500.yaml", runs=1)
        result = {"up_500": up, "reaction_500": bench_reaction(samples=5, burst=100)}
        sim("down")
        return result

    def runbooks() -> dict[str, Any]:
        result = bench_runbooks(STATE)
        sim("down")
        return result

    return [
        *([] if skip_cold_build else [("cold build", lambda: {"cold_build": bench_cold_build()})]),
        ("sim up, default fleet; Kueue admission of 100 Jobs", default_fleet),
        ("sim up, default fleet, without Kueue", without_kueue),
        ("sim up, 500 GPU nodes", fleet_500),
        ("runbooks: floor, seed, enable, rollback; default and 500-node fleets", runbooks),
        ("MIG runbooks", lambda: bench_mig(STATE)),
        ("staged rollout over 50 and 200 nodes", lambda: bench_rollout(STATE)),
        ("baseline, 1 week x 500 GPUs", bench_baseline),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    parser.add_argument("--skip-cold-build", action="store_true", help="reuse the cold-build figures already in the output")
    parser.add_argument("--resume", action="store_true",
                        help=f"keep the sections an interrupted run finished (saved in {CHECKPOINT.name})")
    args = parser.parse_args()
    saved = json.loads(CHECKPOINT.read_text()) if args.resume and CHECKPOINT.exists() else {}
    results: dict[str, Any] = {"resumed": {"sections": sorted(saved)}}
    for name, measure in sections(args.skip_cold_build):
        if name in saved:
            print(f"{name}: kept from the interrupted run", file=sys.stderr)
        else:
            print(f"{name} ...", file=sys.stderr)
            saved[name] = measure()
            CHECKPOINT.write_text(json.dumps(saved))
        results.update(saved[name])
    shutil.rmtree(STATE, ignore_errors=True)
    results["machine"] = {"cpus": os.cpu_count() or 0}
    if args.skip_cold_build and args.output.exists():
        results["cold_build"] = previous_cold_build(args.output)
        results["cold_build_reused"] = {"reused": 1.0}
    args.output.write_text(render(results))
    CHECKPOINT.unlink(missing_ok=True)
    print(args.output.read_text())
    return 0


def previous_cold_build(path: Path) -> dict[str, float]:
    for line in path.read_text().splitlines():
        if line.startswith("<!-- cold-build "):
            return json.loads(line.removeprefix("<!-- cold-build ").removesuffix(" -->"))
    return {}


def last_make_test(record: Path) -> tuple[str, str]:
    """The test phase of the last `make test` on this machine (it records reports/make-test.json):
    too long to run inside the benchmarks, read back and dated instead."""
    what = "`make test`, its tests (the main suite, the external target and the lint side by side, after setup), last run here"
    if not record.exists():
        return what, "not run on this machine yet"
    run = json.loads(record.read_text())
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run["began"]))
    return what, (f"{max(run['main_s'], run['external_s']) / 60:.1f} min (main suite {run['main_s'] / 60:.1f}, external target "
                  f"{run['external_s'] / 60:.1f}; {'passed' if run['passed'] else 'FAILED'}; {when})")


def cpu_breakdown(cpu_s: dict[str, float]) -> str:
    """`total: name seconds, ...`, the largest first."""
    parts = ", ".join(f"{name} {seconds:.0f}" for name, seconds in sorted(cpu_s.items(), key=lambda kv: -kv[1]))
    return f"{sum(cpu_s.values()):.0f} in all: {parts}" if cpu_s else "not measured"


def render(r: dict[str, Any]) -> str:
    from scripts import bench_mig as mig, bench_rollout as rollout, bench_runbooks as runbooks  # noqa: PLC0415

    cold, up, up500 = r.get("cold_build", {}), r["up_default"], r["up_500"]
    react, react500 = r["reaction_default"], r["reaction_500"]
    no_kueue, admission = r["up_without_kueue"], r["kueue_admission"]
    baseline = r["baseline"]
    reused = ("\n- The cold-build figures were kept from an earlier measurement (`--skip-cold-build`): "
              "a cold build takes minutes and is not part of every run." if r.get("cold_build_reused") else "")
    resumed = (r.get("resumed") or {}).get("sections") or []
    if resumed:
        reused += (f"\n- Resumed run (`--resume`): {'; '.join(resumed)} come from the interrupted run before it; "
                   "every ratio compares figures of one section.")
    rows = [
        ("Cold build of all binaries (empty Go build cache, modules already downloaded)", f"{cold.get('cold_build_s', float('nan')):.0f} s"),
        ("Of which `make demo`'s binaries (all but Kueue), built first", f"{cold.get('demo_build_s', float('nan')):.0f} s"),
        (f"Of which Kueue {cold.get('kueue_version', '(version not recorded)')}, built last (recorded by build-binaries.sh; "
         f"-p {cold.get('kueue_build_jobs', 0):.0f})", f"{cold.get('kueue_build_s', float('nan')):.0f} s"),
        ("Binary cache size (`~/.cache/gpushare/bin`)", f"{cold.get('cache_mib', float('nan')):.0f} MiB"),
        ("`gpushare sim up`, default fleet, cached binaries, with Kueue (median of 3; min–max)",
         f"{up['up_median_s']:.1f} s ({up['up_min_s']:.1f}–{up['up_max_s']:.1f})"),
        ("`gpushare sim up --without kueue`, default fleet (median of 3; min–max)",
         f"{no_kueue['up_median_s']:.1f} s ({no_kueue['up_min_s']:.1f}–{no_kueue['up_max_s']:.1f})"),
        (f"Kueue admission, {admission['jobs']:.0f} suspended Jobs created at once → each Workload Admitted "
         "(median / p95 / max; until all admitted)",
         f"{admission['admission_median_s']:.2f} / {admission['admission_p95_s']:.2f} / "
         f"{admission['admission_max_s']:.2f} s; {admission['all_admitted_s']:.1f} s"),
        ("`gpushare sim up`, 500 GPU nodes + 1 CPU node", f"{up500['up_median_s']:.1f} s"),
        ("Peak RSS of the whole embedded cluster, default fleet (sum of VmHWM)", f"{up['peak_rss_mib']:.0f} MiB"),
        ("Peak RSS of the whole embedded cluster, 500 GPU nodes", f"{up500['peak_rss_mib']:.0f} MiB"),
        ("CPU the 500-node bring-up took, per process (CPU-s; the machine has "
         f"{os.cpu_count()} CPUs)", cpu_breakdown(up500.get("cpu_s") or {})),
        ("Simulator reaction, per-node config label → node allocatable updated, default fleet (median / p95 / max of 20)",
         f"{react['reaction_median_s'] * 1000:.0f} / {react['reaction_p95_s'] * 1000:.0f} / {react['reaction_max_s'] * 1000:.0f} ms"),
        ("Same on the 500-node fleet (median / p95 / max of 10)",
         f"{react500['reaction_median_s'] * 1000:.0f} / {react500['reaction_p95_s'] * 1000:.0f} / {react500['reaction_max_s'] * 1000:.0f} ms"),
        (f"Burst on the 500-node fleet: {react500.get('burst_nodes', 0):.0f} nodes relabelled at once → all updated",
         f"{react500.get('burst_s', float('nan')):.1f} s"),
        (f"`gpushare baseline`, 1 week × {baseline['gpus']:.0f} GPUs from a real Prometheus (median of 3; min–max)",
         f"{baseline['median_s']:.1f} s ({baseline['min_s']:.1f}–{baseline['max_s']:.1f})"),
        ("Same, with a PNG plot per GPU (`--plots`)", f"{baseline['plots_s']:.0f} s"),
        (f"Backfill of that week with promtool ({baseline['samples'] / 1e6:.1f} M samples, one every 5 min)",
         f"{baseline['backfill_s']:.0f} s"),
    ]
    rows.append(last_make_test(REPO / "reports" / "make-test.json"))
    table = "\n".join(f"| {what} | {value} |" for what, value in rows)
    return f"""# Benchmarks

Measured by `make bench` (`scripts/bench.py`) in one run on this project's machine kind
({r['machine']['cpus']} CPUs); every figure below comes from that run. Ratios compare runs made
side by side in the same `make bench`. Targets: `sim up` under 15 s for the default fleet; a
simulator change visible on a node within 2 s.

| measurement | value |
|---|---|
{table}

## Runbooks

Each column on a fresh embedded cluster; "writes" are the mutating API requests of the run (audit
log), "restarted elsewhere" the GPU Operator operand pods restarted on nodes other than the target.

{runbooks.render(r)}

## MIG runbooks

{mig.render(r)}

## Staged rollout

{rollout.render(r)}

Notes:
- The seed's kubectl sequence patches the ClusterPolicy `default` and so re-configures every GPU
  node; the playbook changes only `gpu-node` (per-node label) and additionally takes a lock, makes
  a backup, validates the config before writing and verifies every node afterwards.
- "Prepared": `prepare-timeslicing.yml` ran first, so the enable itself restarts no operand.
- The cold build excludes module downloads (the Go module cache was warm); on a fresh machine the
  downloads add their own time.{reused}

<!-- cold-build {json.dumps(cold)} -->
"""


if __name__ == "__main__":
    sys.exit(main())
