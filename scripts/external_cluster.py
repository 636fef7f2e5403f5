#!/usr/bin/env python3
"""The second test target: the acceptance features against a cluster started on its own, reached
only through --kubeconfig (the tests' admin), --runbook-kubeconfig (the runbooks' identity of
deploy/rbac), --inventory and --operator-namespace, as a staging cluster would be.

The control plane is the embedded one started without its GPU Operator simulator; the simulator is
then run against it like against any cluster (`gpushare sim gpu-operator --kubeconfig`) in the
namespace NVIDIA's cloud-native stack uses, and the inventory's host names are not the node names.

    python scripts/external_cluster.py run -- [pytest arguments]   # up, pytest, down (always)
    python scripts/external_cluster.py up | down"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / ".gpushare-external"
NAMESPACE = "nvidia-gpu-operator"
INVENTORY = REPO / "inventories" / "external"
OPERATOR_PID = STATE / "external-gpu-operator.pid"
# The acceptance features, and the attacks on the runbook identity's write model.
TESTS = (*(f"features/{f}" for f in ("test_enable_timeslicing.py", "test_enable_mps.py", "test_resource_separation.py",
                                     "test_share_check.py", "test_rollback.py", "test_dra_readiness.py")),
         "security/test_write_model.py")
REPORTS = REPO / "reports"


def gpushare(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpushare", *args], check=True)


def up() -> None:
    gpushare("sim", "up", "--state-dir", str(STATE), "--operator-namespace", NAMESPACE,
             "--without", "gpu-operator-sim", "--without", "kueue")
    from gpushare import rbac  # noqa: PLC0415
    from gpushare_testbed import cluster_bootstrap, controlplane  # noqa: PLC0415
    from gpushare_testbed import kueue as kueue_embedded  # noqa: PLC0415
    from gpushare.polling import wait_for  # noqa: PLC0415

    ready = STATE / "external-gpu-operator.ready"
    with (STATE / "external-gpu-operator.log").open("ab") as log:
        operator = subprocess.Popen(
            [sys.executable, "-m", "gpushare", "sim", "gpu-operator", f"--kubeconfig={STATE / 'kubeconfig'}",
             f"--operator-namespace={NAMESPACE}", f"--ready-file={ready}",
             f"--configmap-refresh-seconds={controlplane.EMBEDDED_CONFIGMAP_REFRESH_S}",
             f"--mig-reboot-seconds={controlplane.EMBEDDED_MIG_REBOOT_S}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    OPERATOR_PID.write_text(str(operator.pid))
    wait_for(ready.exists, 120, "the GPU Operator simulator to sync")
    cluster_bootstrap.wait_gpu_operator(STATE / "kubeconfig", NAMESPACE)
    # as on any cluster: the runbooks' least-privilege identity, applied by an administrator
    rbac.apply(Path(kubectl_dir()) / "kubectl", STATE / "kubeconfig", NAMESPACE, (kueue_embedded.NAMESPACE,))


def down() -> None:
    if OPERATOR_PID.exists():
        try:
            os.killpg(int(OPERATOR_PID.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
        OPERATOR_PID.unlink()
    gpushare("sim", "down", "--state-dir", str(STATE))


def kubectl_dir() -> str:
    """Where the cluster's kubectl is: an operator's machine has one on the PATH."""
    return json.loads((STATE / "cluster.json").read_text())["bin_dir"]


def run(pytest_args: list[str]) -> int:
    REPORTS.mkdir(exist_ok=True)
    try:
        up()
        return subprocess.run([
            sys.executable, "-m", "pytest", *(str(REPO / "tests" / t) for t in TESTS),
            f"--kubeconfig={STATE / 'kubeconfig'}", f"--runbook-kubeconfig={STATE / 'kubeconfigs' / 'runbook.yaml'}",
            f"--inventory={INVENTORY}", f"--operator-namespace={NAMESPACE}",
            f"--junitxml={REPORTS / 'external-junit.xml'}", f"--cucumberjson={REPORTS / 'external-cucumber.json'}",
            *pytest_args,
        ], check=False, env={**os.environ, "PATH": f"{kubectl_dir()}{os.pathsep}{os.environ['PATH']}"}).returncode
    finally:
        down()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("up", "down", "run"))
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (run)")
    args = parser.parse_args()
    if args.action == "up":
        up()
        return 0
    if args.action == "down":
        down()
        return 0
    return run(args.pytest_args)


if __name__ == "__main__":
    sys.exit(main())
