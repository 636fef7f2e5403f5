"""`--tags preflight` on every runbook reads the cluster, shows its plan and writes nothing: not the
lock, not a run record, not the change itself (the audit log's writes of the runbook identity and
the objects the runbooks may write, before and after)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import written
from tests.support.ansible import run_playbook
from tests.support.cluster import Cluster
from tests.support.dra_driver import SHARING_GATES, set_driver_gates

pytestmark = pytest.mark.cluster
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Each with a plan that would write: the first ones on the cluster as installed, the last ones once
# gpu-node shares its card. (baseline.yml writes nothing to the cluster at all: its role is read-only.)
ON_A_FRESH_CLUSTER = [
    ("enable-timeslicing.yml", "gpu-node", ""),
    # per node, the chart's release (v26.7) is refused: its MPS daemon never loads a node's key
    ("enable-mps.yml", "gpu-node", "-e timeslicing_scope=cluster -e timeslicing_confirm_cluster_scope=true"),
    ("prepare-timeslicing.yml", None, ""),
    ("enable-mig.yml", "gpu-node-mig", "-e mig_config=all-1g.5gb"),
    ("rollout-timeslicing.yml", None, f"-e @{EXAMPLES / 'rollout' / 'rehearsal.yml'}"),
    ("queue-backfill.yml", None, ""),
    ("enable-dra-pilot.yml", "gpu-node", ""),
    ("verify-dra-pilot.yml", "gpu-node", ""),
]
ONCE_SHARED = [
    ("rollback-timeslicing.yml", "gpu-node", ""),
    ("verify-sharing.yml", "gpu-node", ""),
]


def _preflight_only(cluster: Cluster, playbook: str, limit: str | None, arguments: str, workdir: Path) -> None:
    before = written.take(cluster)
    mark = cluster.audit_mark()
    run = run_playbook(cluster, playbook, workdir, limit=limit, arguments=f"--tags preflight {arguments}".strip())
    assert run.ok, run.describe()
    assert written.differences(before, written.take(cluster)) == [], f"{playbook} --tags preflight wrote"
    if cluster.embedded:
        writes = [(e["verb"], e.get("requestURI")) for e in cluster.audit_writes(mark, cluster.runbook_user)]
        assert writes == [], f"{playbook} --tags preflight sent {writes}"


def test_preflight_writes_nothing_on_any_runbook(clean_cluster: Cluster, tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    # the DRA pilot's sharing needs its driver gate, which the chart leaves off
    request.addfinalizer(set_driver_gates(clean_cluster, {SHARING_GATES["timeslicing"]: True}))
    for playbook, limit, arguments in ON_A_FRESH_CLUSTER:
        _preflight_only(clean_cluster, playbook, limit, arguments, tmp_path / playbook)
    enabled = run_playbook(clean_cluster, "enable-timeslicing.yml", tmp_path / "enable", limit="gpu-node")
    assert enabled.ok, enabled.describe()
    for playbook, limit, arguments in ONCE_SHARED:
        _preflight_only(clean_cluster, playbook, limit, arguments, tmp_path / f"shared-{playbook}")
