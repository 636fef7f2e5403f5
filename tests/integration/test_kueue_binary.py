"""The embedded cluster's Kueue is the pinned upstream release: its build says so (Kueue has no
--version flag; it logs the version stamped by the build at start-up) and its CRDs are served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster


def test_kueue_reports_the_pinned_version(cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("checks the embedded cluster's own Kueue")
    versions = (Path(__file__).resolve().parents[2] / "build" / "versions.env").read_text()
    pinned = dict(line.split("=", 1) for line in versions.splitlines() if "=" in line and not line.startswith("#"))
    started = [json.loads(line) for line in (cluster.state_dir / "logs" / "kueue.log").read_text().splitlines()
               if '"msg":"Initializing"' in line]
    assert started and started[-1]["gitVersion"] == pinned["KUEUE_VERSION"], started
    served = cluster.kubectl("api-resources", "--api-group=kueue.x-k8s.io", "-o", "name").stdout.split()
    assert {"clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"} <= set(served)
