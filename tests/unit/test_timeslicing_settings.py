"""The enable runbook's inputs (gpushare.timeslicing.settings): the config they render, and each
input problem, named in the operator's terms, firing when (and only when) it is there."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpushare import device_plugin_config as dpc
from gpushare.model.taints import Taint
from gpushare.runbook.state import ClusterState
from gpushare.timeslicing.plan import plan
from gpushare.timeslicing.settings import Settings, SharedConfig
from tests.unit.cluster_objects import INPUTS, NOW, read, settings

MPS = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"


def test_the_defaults_render_the_seeds_config() -> None:
    chosen = settings()
    assert chosen.problems() == []
    assert yaml.safe_load(chosen.config.text) == {
        "version": "v1", "flags": {"migStrategy": "none"},
        "sharing": {"timeSlicing": {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                                    "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    assert dpc.parse(chosen.config.text).sharing == dpc.Sharing("time-slicing", True, True, 2)
    assert chosen.config == SharedConfig(chosen.config.text, strategy="time-slicing")
    assert chosen.resource == "nvidia.com/gpu.shared"
    assert chosen.pool_taint == Taint("nvidia.com/gpu", "shared", "NoSchedule")


def test_values_as_ansible_passes_them() -> None:
    """Extra vars given on the command line arrive as strings."""
    chosen = Settings.of({**INPUTS, "replicas": "4", "rename_by_default": "false", "pool_taint": "False",
                          "confirm_cluster_scope": "yes", "fleet_roll_confirm_above": "3"})
    assert (chosen.replicas, chosen.rename_by_default, chosen.pool_taint, chosen.confirm_cluster_scope,
            chosen.fleet_roll_confirm_above) == (4, False, None, True, 3)
    assert chosen.resource == "nvidia.com/gpu"
    assert dpc.parse(chosen.config.text).sharing.replicas == 4


def test_an_override_is_used_as_given() -> None:
    text = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n"
    chosen = settings(config_override=text, replicas=2)
    # one name for the count: the replicas the ConfigMap gets, the override's
    assert chosen.config.text == text and chosen.replicas == 3 and chosen.problems() == []
    as_mapping = settings(config_override=yaml.safe_load(text))
    assert yaml.safe_load(as_mapping.config.text) == yaml.safe_load(text)
    assert as_mapping.resource == "nvidia.com/gpu"


@pytest.mark.parametrize("inputs", [{}, {"replicas": 4}, {"config_override": MPS.replace("mps", "timeSlicing")}])
def test_the_plan_takes_the_config_as_read_and_never_parses_it_again(inputs: dict[str, Any],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, parse, parsed = settings(**inputs), dpc.parse, []
    monkeypatch.setattr(dpc, "parse", lambda text, *args: parsed.append(text) or parse(text, *args))
    result = plan(ClusterState.of(read()), chosen, ["gpu-node"], {"command": "ansible-playbook"}, NOW)
    assert result.refusals == [] and result.changes["configmap"][0].body["data"]["shared"] == chosen.config.text
    assert chosen.config.text not in parsed


@pytest.mark.parametrize(("inputs", "problem"), [
    pytest.param({"max_replicas": 1, "replicas": 1}, "timeslicing_max_replicas must be at least 2, got 1.",
                 id="max-replicas-below-2"),
    pytest.param({"replicas": 17}, "timeslicing_replicas=17 is above the bound of 16 shares per GPU", id="above-max"),
    pytest.param({"replicas": 1}, "number of replicas must be >= 2", id="one-replica"),
    pytest.param({"scope": "cluster"}, "Confirm with -e timeslicing_confirm_cluster_scope=true", id="cluster-scope"),
    pytest.param({"configmap_name": "Time_Slicing"}, "timeslicing_configmap_name 'Time_Slicing' is not a valid "
                                                     "ConfigMap name", id="configmap-name"),
    pytest.param({"config_key": "default"}, "timeslicing_config_key must not be `default`", id="key-default"),
    pytest.param({"config_key": "shared config"}, "timeslicing_config_key 'shared config' must be a valid label value",
                 id="key-not-a-label-value"),
    pytest.param({"config_key": ""}, "timeslicing_config_key '' must be a valid label value", id="key-empty"),
    pytest.param({"pool_label_key": "gpu mode"}, "the pool label gpu mode=shared is not a valid label.",
                 id="pool-label-key"),
    pytest.param({"pool_label_value": "-shared"}, "the pool label gpu-mode=-shared is not a valid label.",
                 id="pool-label-value"),
    pytest.param({"pool_taint_key": "nvidia.com/"}, "the pool taint nvidia.com/=shared:NoSchedule is not a valid taint",
                 id="pool-taint-key"),
    pytest.param({"pool_taint_value": "a b"}, "the pool taint nvidia.com/gpu=a b:NoSchedule is not a valid taint",
                 id="pool-taint-value"),
    pytest.param({"config_override": MPS}, "timeslicing_config_override gives sharing strategy `mps`, not "
                                           "time-slicing of nvidia.com/gpu", id="override-mps"),
    pytest.param({"config_override": "version: v1\n"}, "gives sharing strategy `none`", id="override-no-sharing"),
    pytest.param({"config_override": MPS.replace("mps", "timeSlicing").replace("replicas: 2", "replicas: 20"), "replicas": 2},
                 "timeslicing_config_override asks for 20 replicas per GPU, above the bound of 16", id="override-above-max"),
    pytest.param({"config_override": "version: v1\nsharing: [\n"},
                 "The device plugin would refuse timeslicing_config_override for key `shared`.",
                 id="override-not-yaml"),
    pytest.param({"config_override": "version: v1\nsharing:\n  timeSlicing:\n    renamebydefault: true\n"
                                     "    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"},
                 "write 'renameByDefault') (the device plugin would silently ignore it)", id="override-wrong-case"),
])
def test_each_input_problem(inputs: dict[str, Any], problem: str) -> None:
    problems = settings(**inputs).problems()
    assert any(problem in p for p in problems), problems


def test_one_replica_is_told_in_the_operators_terms() -> None:
    [problem] = settings(replicas=1).problems()
    assert "at least 2 shares per gpu (1 means no sharing)" in problem.lower()


def test_confirmed_cluster_scope_and_an_untainted_pool_are_fine() -> None:
    assert settings(scope="cluster", confirm_cluster_scope=True).problems() == []
    assert settings(pool_taint=False, pool_taint_key="not a key").problems() == []
    assert settings(replicas=16).problems() == []
    assert settings(replicas=32, max_replicas=32).problems() == []


def test_every_problem_is_reported_at_once() -> None:
    problems = settings(replicas=17, config_key="default", configmap_name="Bad_Name").problems()
    assert len(problems) == 3
