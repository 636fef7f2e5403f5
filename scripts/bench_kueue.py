#!/usr/bin/env python3
"""Kueue figures: its cold build (recorded by scripts/build-binaries.sh when it built Kueue, not
rebuilt here), `sim up` without it, and admission latency (Job created -> admitted) for 100 Jobs
submitted at once. Run alone it prints them as JSON; scripts/bench.py puts them in BENCHMARKS.md."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpushare.kube import api_client  # noqa: E402
from gpushare.kueue.description import parse  # noqa: E402
from gpushare.kueue.kinds import GROUP, PLURALS, QUEUE_NAME_LABEL, VERSION, condition  # noqa: E402
from gpushare.kueue.render import kueue_objects  # noqa: E402
from gpushare.polling import wait_for  # noqa: E402
from scripts.bench_cluster import STATE, bench_sim_up, sim  # noqa: E402

NAMESPACE = "bench-kueue"


def kueue_cold_build(cache: str | None = None) -> dict[str, float | str]:
    """What build-binaries.sh measured when it built the cached Kueue (empty cache; modules downloaded);
    `cache`: that binary cache (GPUSHARE_CACHE) instead of the user's."""
    env = {**os.environ, "GPUSHARE_CACHE": cache} if cache else None
    combo = subprocess.run([str(REPO / "scripts" / "build-binaries.sh")], capture_output=True, text=True,
                           check=True, env=env).stdout.strip().splitlines()[-1]
    record = json.loads((Path(combo) / "kueue").resolve().with_name("build.json").read_text())
    return {"kueue_build_s": float(record["build_s"]), "kueue_build_jobs": float(record["build_jobs"]),
            "kueue_version": record["version"]}


def _queues(jobs: int) -> list[dict]:
    """One ClusterQueue with quota for every Job, over every GPU node: admission is quota only."""
    description = parse("bench", [{"name": "bench-gpus", "nodeLabels": {"nvidia.com/gpu.present": "true"}}],
                        [{"name": "bench", "namespace": NAMESPACE,
                          "quotas": {"bench-gpus": {"nvidia.com/gpu": {"nominalQuota": jobs}}}}])
    return kueue_objects(description)


def _create(custom: client.CustomObjectsApi, obj: dict) -> None:
    plural, namespace = PLURALS[obj["kind"]], obj["metadata"].get("namespace")
    if namespace:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)
    else:
        custom.create_cluster_custom_object(GROUP, VERSION, plural, obj)


def admission_latency(state: Path, jobs: int = 100) -> dict[str, float]:
    """Create `jobs` suspended 1-GPU Jobs as fast as possible; per Job, seconds until its Workload is Admitted."""
    api = api_client(state / "kubeconfig")
    core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    queues = _queues(jobs)
    for obj in queues:
        _create(custom, obj)
    wait_for(lambda: (condition(custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", "bench"), "Active")
                      or {}).get("status") == "True", 60, "the bench ClusterQueue to be active")
    created: dict[str, float] = {}
    for index in range(jobs):
        name = f"job-{index:03d}"
        batch.create_namespaced_job(NAMESPACE, {
            "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "gpu"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "work", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
        })
        created[name] = time.perf_counter()
    admitted: dict[str, float] = {}

    def all_admitted() -> bool:
        now = time.perf_counter()
        for workload in custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "workloads")["items"]:
            owner = next(o["name"] for o in workload["metadata"]["ownerReferences"] if o["kind"] == "Job")
            if owner not in admitted and (condition(workload, "Admitted") or {}).get("status") == "True":
                admitted[owner] = now
        return len(admitted) == jobs

    wait_for(all_admitted, 300, f"{jobs} Jobs to be admitted", interval_s=0.05)
    latencies = sorted(admitted[name] - created[name] for name in created)
    result = {"jobs": float(jobs), "admission_median_s": statistics.median(latencies),
              "admission_p95_s": latencies[int(len(latencies) * 0.95) - 1], "admission_max_s": latencies[-1],
              "all_admitted_s": max(admitted.values()) - min(created.values())}
    core.delete_namespace(NAMESPACE)  # with the Jobs, Workloads and the LocalQueue
    for obj in reversed(queues):
        if "namespace" not in obj["metadata"]:
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURALS[obj["kind"]], obj["metadata"]["name"])
    return result


def main() -> int:
    results = {"kueue_cold_build": kueue_cold_build(),
               "up_without_kueue": bench_sim_up(None, runs=3, extra=("--without", "kueue")),
               "up_with_kueue": bench_sim_up(None, runs=3)}
    results["kueue_admission"] = admission_latency(STATE)
    sim("down")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
