"""A token given on the command line (`-e x_token=...`, and the other forms ansible-playbook takes:
`--extra=...`, `-ve ...`) is kept nowhere the runbooks write: not in the run records'
`gpushare.io/command` annotation nor any other object of the cluster, not in any file under the
run's output folder (backups, change records); the documented inputs stay as typed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ansible import run_playbook
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
SECRET = "s3cret-d0-not-keep-7f1c"


def _cluster_text(cluster: Cluster) -> str:
    """Every ConfigMap (run records, backups, the time-slicing config) and every Node, as JSON."""
    api = cluster.api
    objects = [*cluster.core.list_config_map_for_all_namespaces().items, *cluster.core.list_node().items]
    return json.dumps(api.sanitize_for_serialization(objects))


def test_a_token_given_with_minus_e_is_kept_nowhere(clean_cluster: Cluster, tmp_path: Path) -> None:
    # Each form ansible-playbook accepts: an abbreviated --extra-vars, -e last among combined short flags.
    arguments = f"-e timeslicing_replicas=2 -e x_token={SECRET} --extra-vars=api_key={SECRET} --extra=x_key={SECRET} -ve x_pass={SECRET}"
    runs = []
    for playbook in ("enable-timeslicing.yml", "verify-sharing.yml"):
        run = run_playbook(clean_cluster, playbook, tmp_path / playbook, limit="gpu-node", arguments=arguments)
        assert run.ok, run.describe()
        runs.append(run)
    records = [c for c in clean_cluster.core.list_namespaced_config_map(clean_cluster.records_namespace).items
               if "gpushare.io/command" in (c.metadata.annotations or {})]
    assert records, "no run record names its command"
    command = records[0].metadata.annotations["gpushare.io/command"]
    assert "-e timeslicing_replicas=2" in command and "x_token=<redacted>" in command, command
    assert all(f"{name}=<redacted>" in command for name in ("api_key", "x_key", "x_pass")), command
    assert SECRET not in _cluster_text(clean_cluster)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "output" in p.relative_to(tmp_path).parts]
    assert any(p.suffix == ".md" for p in written), f"no change record among {written}"
    holding = [str(p) for p in written if SECRET in p.read_text(errors="replace")]
    assert not holding, f"the token is written in {holding}"
