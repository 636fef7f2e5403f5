#!/usr/bin/env python3
"""The second test target: the acceptance features against a cluster started on its own, reached
only through --kubeconfig (the tests' admin), --runbook-kubeconfig (the runbooks' identity of
deploy/rbac), --inventory and --operator-namespace, as a staging cluster would be.

The control plane is the embedded one started without its GPU Operator simulator; the simulator is
then run against it like against any cluster (`gpushare sim gpu-operator --kubeconfig`) in the
namespace NVIDIA's cloud-native stack uses, and the inventory's host names are not the node names.

The tests wait on their cluster more than they compute, so `--shards N run` starts N such
clusters and runs the test files split among them, side by side (one report for all).

    python scripts/external_cluster.py [--shards N] run -- [pytest arguments]   # up, pytest, down (always)
    python scripts/external_cluster.py up | down   # down: every shard's cluster a run left up"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "nvidia-gpu-operator"
INVENTORY = REPO / "inventories" / "external"
# The acceptance features, and the attacks on the runbook identity's write model; longest first (as
# measured), so that dealing them out in turn balances the shards of a first run.
TESTS = (*(f"features/{f}" for f in ("test_rollback.py", "test_share_check.py", "test_enable_timeslicing.py",
                                     "test_dra_pilot.py", "test_dra_readiness.py", "test_enable_mps.py",
                                     "test_operator_side_effects.py", "test_resource_separation.py",
                                     "test_idempotency.py")),
         "security/test_write_model.py")
REPORTS = REPO / "reports"
JUNIT = REPORTS / "external-junit.xml"


def state(shard: int) -> Path:
    """The state dir of the shard's cluster (the first one's is the one `up` starts)."""
    return REPO / (".gpushare-external" if shard == 0 else f".gpushare-external-{shard}")


def shards_on_disk() -> list[int]:
    """The first shard, and every other one whose state dir (as `state` names it) a `run` with
    --shards left (an interrupted run leaves its clusters up)."""
    suffixes = (path.name.rpartition("-")[2] for path in REPO.glob(".gpushare-external-*"))
    others = {int(s) for s in suffixes if s.isdigit() and int(s) > 0}
    return [0, *sorted(n for n in others if state(n).is_dir())]


def gpushare(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpushare", *args], check=True)


def up(shard: int = 0) -> None:
    where = state(shard)
    gpushare("sim", "up", "--state-dir", str(where), "--operator-namespace", NAMESPACE,
             "--without", "gpu-operator-sim", "--without", "kueue")
    from gpushare import rbac  # noqa: PLC0415
    from gpushare_testbed import cluster_bootstrap, controlplane  # noqa: PLC0415
    from gpushare_testbed import kueue as kueue_embedded  # noqa: PLC0415
    from gpushare.polling import wait_for  # noqa: PLC0415

    ready = where / "external-gpu-operator.ready"
    with (where / "external-gpu-operator.log").open("ab") as log:
        operator = subprocess.Popen(
            [sys.executable, "-m", "gpushare", "sim", "gpu-operator", f"--kubeconfig={where / 'kubeconfig'}",
             f"--operator-namespace={NAMESPACE}", f"--ready-file={ready}",
             f"--configmap-refresh-seconds={controlplane.EMBEDDED_CONFIGMAP_REFRESH_S}",
             f"--mig-reboot-seconds={controlplane.EMBEDDED_MIG_REBOOT_S}",
             f"--dra-wipe-seconds={controlplane.EMBEDDED_DRA_WIPE_S}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (where / "external-gpu-operator.pid").write_text(str(operator.pid))
    wait_for(ready.exists, 120, "the GPU Operator simulator to sync")
    cluster_bootstrap.wait_gpu_operator(where / "kubeconfig", NAMESPACE)
    # as on any cluster: the runbooks' least-privilege identity, applied by an administrator
    rbac.apply(Path(kubectl_dir(shard)) / "kubectl", where / "kubeconfig", NAMESPACE, (kueue_embedded.NAMESPACE,))


def down(shard: int = 0) -> None:
    pid_file = state(shard) / "external-gpu-operator.pid"
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
        pid_file.unlink()
    gpushare("sim", "down", "--state-dir", str(state(shard)))


def kubectl_dir(shard: int = 0) -> str:
    """Where the cluster's kubectl is: an operator's machine has one on the PATH."""
    return json.loads((state(shard) / "cluster.json").read_text())["bin_dir"]


def split(shards: int) -> list[list[str]]:
    """The test files dealt to the shards, longest first onto the least loaded, by their times in
    the last run's report (in TESTS' order where there is none)."""
    took: dict[str, float] = {}
    if JUNIT.exists():
        for case in ET.parse(JUNIT).iter("testcase"):  # noqa: S314 (our own pytest wrote it)
            test = case.get("classname", "").removeprefix("tests.").replace(".", "/") + ".py"
            took[test] = took.get(test, 0.0) + float(case.get("time", 0))
    groups: list[list[str]] = [[] for _ in range(shards)]
    loads = [0.0] * shards
    for test in sorted(TESTS, key=lambda t: -took.get(t, 0.0)):
        least = loads.index(min(loads))
        groups[least].append(test)
        loads[least] += took.get(test, 0.0) or 1.0
    return [group for group in groups if group]


def merge_reports(shards: int) -> None:
    """One JUnit and one cucumber JSON report for all shards."""
    suites = ET.Element("testsuites")
    features: list[object] = []
    for shard in range(shards):
        junit, cucumber = REPORTS / f"external-junit-{shard}.xml", REPORTS / f"external-cucumber-{shard}.json"
        if junit.exists():
            suites.extend(ET.parse(junit).getroot())  # noqa: S314 (our own pytest wrote it)
            junit.unlink()
        if cucumber.exists():
            features.extend(json.loads(cucumber.read_text() or "[]"))
            cucumber.unlink()
    ET.ElementTree(suites).write(JUNIT, encoding="utf-8", xml_declaration=True)
    (REPORTS / "external-cucumber.json").write_text(json.dumps(features, indent=1))


def pytest_on(shard: int, tests: list[str], pytest_args: list[str]) -> int:
    """The shard's tests against its cluster. Their output goes to reports/external-<shard>.log as
    it comes (what a killed run leaves to read) and is printed whole when they end."""
    where, log = state(shard), REPORTS / f"external-{shard}.log"
    with log.open("w") as out:
        code = subprocess.run([
            sys.executable, "-m", "pytest", *(str(REPO / "tests" / t) for t in tests),
            f"--kubeconfig={where / 'kubeconfig'}", f"--runbook-kubeconfig={where / 'kubeconfigs' / 'runbook.yaml'}",
            f"--inventory={INVENTORY}", f"--operator-namespace={NAMESPACE}",
            f"--junitxml={REPORTS / f'external-junit-{shard}.xml'}",
            f"--cucumberjson={REPORTS / f'external-cucumber-{shard}.json'}",
            *pytest_args,
        ], check=False, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PATH": f"{kubectl_dir(shard)}{os.pathsep}{os.environ['PATH']}"}).returncode
    print(f"== external target {shard + 1}: {' '.join(tests)}\n{log.read_text()}", flush=True)
    return code


def run(pytest_args: list[str], shards: int = 1) -> int:
    REPORTS.mkdir(exist_ok=True)
    groups = split(shards)
    with ThreadPoolExecutor(len(groups)) as pool:
        try:
            list(pool.map(up, range(len(groups))))
            codes = list(pool.map(pytest_on, range(len(groups)), groups, [pytest_args] * len(groups)))
        finally:
            list(pool.map(down, range(len(groups))))
    merge_reports(len(groups))
    return max(codes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("up", "down", "run"))
    parser.add_argument("--shards", type=int, default=1, help="run: this many clusters, the test files split among them")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (run)")
    args = parser.parse_args()
    if args.action == "up":
        up()
        return 0
    if args.action == "down":
        for shard in shards_on_disk():
            down(shard)
        return 0
    return run(args.pytest_args, args.shards)


if __name__ == "__main__":
    sys.exit(main())
