"""The preflights ask the authorizer whether the runbook identity may write the time-slicing
ConfigMap (gpushare.rbac.access): a run with a name the RBAC was not rendered for is refused before
any write, naming the `gpushare rbac render` that fixes it; the MPS enable (the same plan) too."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.rbac import Names
from gpushare.rbac.access import alias, configmap_refusal, identity
from gpushare.timeslicing import plan as enable
from gpushare.timeslicing_rollback import plan as rollback
from gpushare.runbook.state import ClusterState
from tests.unit.cluster_objects import CONFIGMAP, NOW, configmap, enabled_read, read, settings
from tests.unit.test_timeslicing_rollback_plan import rollback_settings

CALLER = {"command": "ansible-playbook playbooks/enable-timeslicing.yml", "user": "alice",
          "identity": "gpushare-runbook", "operator": "alice as gpushare-runbook"}
DENIED = {"allowed": False, "reason": ""}
ALLOWED = {"allowed": True, "reason": 'RBAC: allowed by RoleBinding "gpushare-enable-timeslicing/gpu-operator"'}


def answers(**verbs: bool) -> dict[str, Any]:
    return {alias(verb): ALLOWED if allowed else DENIED for verb, allowed in verbs.items()}


def test_the_refusal_names_the_identity_the_configmap_and_the_render_that_fixes_it() -> None:
    message = configmap_refusal(answers(patch=False, create=True), "gpushare-runbook", ["patch", "create"],
                                Names("gpu-operator", "other-config"))
    assert message == (
        "The runbook identity (gpushare-runbook) may not patch ConfigMap gpu-operator/other-config: the RBAC was "
        "rendered for other names. As a cluster administrator run `gpushare rbac render --operator-namespace "
        "gpu-operator --timeslicing-configmap other-config | kubectl apply --server-side -f -`, then run this again.")


def test_every_denied_verb_is_named_and_a_non_default_pool_label_key_is_in_the_fix() -> None:
    message = configmap_refusal(answers(patch=False, delete=False), "system:serviceaccount:gpushare-system:gpushare-runbook",
                                ["patch", "delete"], Names("nvidia-gpu-operator", "time-slicing-config", "example.com/pool"))
    assert "(system:serviceaccount:gpushare-system:gpushare-runbook) may not patch or delete ConfigMap " \
           "nvidia-gpu-operator/time-slicing-config:" in message
    assert "`gpushare rbac render --operator-namespace nvidia-gpu-operator --pool-label-key example.com/pool |" in message


@pytest.mark.parametrize("access", [None, {}, answers(patch=True, create=True), answers(create=False)])
def test_no_refusal_when_allowed_not_asked_or_not_needed(access: dict[str, Any] | None) -> None:
    assert configmap_refusal(access, "gpushare-runbook", ["patch"], Names()) == ""


def test_the_identity_is_the_api_servers_answer_else_the_local_user() -> None:
    assert identity(CALLER) == "gpushare-runbook"
    assert identity({"user": "alice"}) == "alice"
    assert identity(None) == ""


# ---- the enable (time-slicing and MPS: the same plan) -------------------------------------------------
def _enable(cluster: dict[str, Any], access: dict[str, Any] | None, **inputs: Any) -> enable.EnablePlan:
    return enable.plan(ClusterState.of(cluster), settings(**inputs), ["gpu-node"], CALLER, NOW, access)


@pytest.mark.parametrize("strategy", [{}, {"sharing_strategy": "mps", "config_key": "mps"}])
def test_an_enable_the_identity_may_not_write_is_refused_before_any_write(strategy: dict[str, Any]) -> None:
    result = _enable(read(), answers(patch=False, create=True), configmap_name="other-config", **strategy)
    assert result.refusals == [
        "The runbook identity (gpushare-runbook) may not patch ConfigMap gpu-operator/other-config: the RBAC was "
        "rendered for other names. As a cluster administrator run `gpushare rbac render --operator-namespace "
        "gpu-operator --timeslicing-configmap other-config | kubectl apply --server-side -f -`, then run this again. "
        "Nothing was changed."]
    assert result.changes == {} and not result.writes


def test_create_counts_only_when_the_configmap_does_not_exist() -> None:
    missing = _enable(read(), answers(patch=True, create=False))
    assert len(missing.refusals) == 1 and "may not create ConfigMap gpu-operator/time-slicing-config" in missing.refusals[0]
    existing = _enable(read(configmaps=[configmap(CONFIGMAP, {})]), answers(patch=True, create=False))
    assert existing.refusals == [] and existing.writes


def test_an_enable_the_identity_may_write_plans_as_before() -> None:
    asked = _enable(read(), answers(patch=True, create=True))
    unasked = _enable(read(), None)
    assert asked.refusals == [] and asked.changes.keys() == unasked.changes.keys() and asked.writes


# ---- the rollback -------------------------------------------------------------------------------------
def _roll_back(cluster: dict[str, Any], access: dict[str, Any] | None, **inputs: Any) -> rollback.RollbackPlan:
    return rollback.plan(ClusterState.of(cluster), [], rollback_settings(**inputs), ["gpu-node"], CALLER, NOW, access)


def test_a_rollback_the_identity_may_not_write_is_refused_before_any_write() -> None:
    result = _roll_back(enabled_read(), answers(patch=True, delete=False))
    assert result.refusals == [
        "The runbook identity (gpushare-runbook) may not delete ConfigMap gpu-operator/time-slicing-config: the RBAC "
        "was rendered for other names. As a cluster administrator run `gpushare rbac render --operator-namespace "
        "gpu-operator | kubectl apply --server-side -f -`, then run this again. Nothing was changed."]
    assert result.changes == {}
    allowed = _roll_back(enabled_read(), answers(patch=True, delete=True))
    unasked = _roll_back(enabled_read(), None)
    assert allowed.refusals == [] and allowed.changes.keys() == unasked.changes.keys() and allowed.changes["configmap"]


def test_a_rollback_with_no_configmap_of_that_name_asks_nothing_of_it() -> None:
    """Nothing to patch or delete: the answers do not count (a re-run after a complete rollback)."""
    result = _roll_back(enabled_read(), answers(patch=False, delete=False), configmap_name="never-created")
    assert not any("may not" in r for r in result.refusals)
