"""The embedded cluster's Kueue is the pinned upstream release: its build says so (Kueue has no
--version flag; it logs the version stamped by the build at start-up) and its CRDs are served; the
configuration it runs with is published as the Helm chart publishes it, and read by the runbook as
Kueue applied it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpushare.kueue import controller
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster


def _pinned() -> dict[str, str]:
    versions = (Path(__file__).resolve().parents[2] / "build" / "versions.env").read_text()
    return dict(line.split("=", 1) for line in versions.splitlines() if "=" in line and not line.startswith("#"))


def test_kueue_reports_the_pinned_version(cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("checks the embedded cluster's own Kueue")
    pinned = _pinned()
    started = [json.loads(line) for line in (cluster.state_dir / "logs" / "kueue.log").read_text().splitlines()
               if '"msg":"Initializing"' in line]
    assert started and started[-1]["gitVersion"] == pinned["KUEUE_VERSION"], started
    served = cluster.kubectl("api-resources", "--api-group=kueue.x-k8s.io", "-o", "name").stdout.split()
    assert {"clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"} <= set(served)


def test_the_runbook_reads_wait_for_pods_ready_as_kueue_applied_it(cluster: Cluster) -> None:
    """The runbook's reading of the published configuration (gpushare.kueue.controller: Kueue's
    defaults of its release) against the configuration Kueue itself logged after defaulting it."""
    if not cluster.embedded:
        pytest.skip("reads the embedded cluster's Kueue log")
    loaded = [json.loads(line) for line in (cluster.state_dir / "logs" / "kueue.log").read_text().splitlines()
              if '"msg":"Configuration loaded"' in line]
    assert loaded, "Kueue logged no configuration"
    applied = yaml.safe_load(loaded[-1]["config"])["waitForPodsReady"]
    found = cluster.core.read_namespaced_config_map("kueue-manager-config", "kueue-system")
    read = controller.read(cluster.api.sanitize_for_serialization(found), "kueue-system/kueue-manager-config")
    setting = read.wait_for_pods_ready()
    assert isinstance(setting, controller.WaitForPodsReady), setting
    strategy = applied["requeuingStrategy"]
    assert (setting.timeout_s, setting.block_admission, setting.recovery_timeout_s, setting.backoff_base_s,
            setting.backoff_max_s, setting.backoff_limit_count) == (
        controller.duration_s(applied["timeout"]), applied["blockAdmission"],
        controller.duration_s(applied["recoveryTimeout"]), strategy["backoffBaseSeconds"],
        strategy["backoffMaxSeconds"], strategy.get("backoffLimitCount")), applied
    assert read.version_text == _pinned()["KUEUE_VERSION"]
