"""Every `_<role>_plan.<key>` a role's tasks read is in the plan its filter returns: a key renamed in
Python and not in YAML (or the reverse) fails here, not in a change window."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpushare.mig.filters import mig_plan
from gpushare.timeslicing.filters import timeslicing_enable_plan
from gpushare.timeslicing_rollback.filters import timeslicing_rollback_plan
from gpushare.release_gates.filters import release_gates_plan
from gpushare.rollout.filters import rollout_plan
from gpushare.share_check.filters import share_check_plan
from tests.unit import test_rollout_plan, test_share_check
from tests.unit.cluster_objects import INPUTS, enabled_read, read
from tests.unit.test_mig_plan import configmap, gpu_node
from tests.unit.test_timeslicing_rollback_plan import rollback_settings

ROLES = Path(__file__).resolve().parents[2] / "roles"


def _read(resources: dict[str, Any]) -> dict[str, Any]:
    return {"resources": resources, "caller": {"command": "ansible-playbook x.yml"}}


def _rollback_inputs() -> dict[str, Any]:
    settings = rollback_settings()
    return {"pool_label_key": settings.pool.label_key, "pool_label_value": settings.pool.label_value,
            "pool_taint_key": "nvidia.com/gpu", "pool_taint_value": "shared", "config_key": settings.config_key,
            "configmap_name": settings.configmap, "namespace": settings.namespace,
            "clusterpolicy_name": settings.clusterpolicy}


def _mig_read() -> dict[str, Any]:
    policy = {"metadata": {"name": "cluster-policy"}, "spec": {
        "migManager": {"enabled": True, "config": {"default": "all-disabled"}}, "mig": {"strategy": "single"}}}
    cluster = read([gpu_node()], policy=policy, configmaps=[configmap("default-mig-parted-config")])
    return _read({**cluster, "pods_on_targets": []})


def _rollout_inputs() -> dict[str, Any]:
    examples = test_rollout_plan.EXAMPLES / "gates"
    return {"replicas": [2, 4], "soak": 0, "thresholds_file": str(examples / "thresholds.yaml"),
            "metrics_files": {"default": str(examples / "metrics-continue.json")}}


PLANS = {
    "timeslicing": lambda: timeslicing_enable_plan(_read(read()), INPUTS, ["gpu-node"]),
    "timeslicing_rollback": lambda: timeslicing_rollback_plan(_read(enabled_read()), _rollback_inputs(), ["gpu-node"]),
    "mig": lambda: mig_plan(_mig_read(), "enable-mig", {"configs": {"gpu-node-mig": "all-1g.5gb"},
                                                         "namespace": "gpu-operator",
                                                         "clusterpolicy_name": "cluster-policy"}, ["gpu-node-mig"]),
    "rollout": lambda: rollout_plan(_read({"record": None, "nodes": test_rollout_plan.NODES}), _rollout_inputs(),
                                    [list(pair) for pair in test_rollout_plan.HOSTS], False),
    "share_check": lambda: share_check_plan(_read(test_share_check.cluster()), test_share_check.INPUTS,
                                            test_share_check.TARGETS),
    "release_gates": lambda: release_gates_plan({}, ".", []),
}


def _keys_read(role: str) -> set[str]:
    pattern = re.compile(rf"\b_{role}_plan\.([a-z_]+)")
    return {key for path in (ROLES / role).rglob("*.yml") for key in pattern.findall(path.read_text())}


@pytest.mark.parametrize("role", sorted(PLANS))
def test_every_plan_key_the_tasks_read_is_in_the_plan(role: str) -> None:
    wanted = _keys_read(role)
    assert wanted, f"roles/{role} reads no _{role}_plan key: the pattern is wrong"
    plan = PLANS[role]()
    assert not plan.get("refusals"), plan.get("refusals")
    assert sorted(wanted - set(plan)) == []
