"""The time-slicing rollback held to the write model (gpushare.rbac.write_model), whoever runs it: with
the administrator's parameter ConfigMap it restores spec.devicePlugin.config.name only to none, the
time-slicing ConfigMap or the config the cluster had before gpushare; it refuses a write model it
cannot read or one rendered for another ConfigMap; without one it keeps the wider rule, and says so.
The enable and the rollback both refuse a pool taint the write model does not allow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, strategies as st

from gpushare.bounded import MAX_BYTES, Unreadable
from gpushare.rbac import SERVICE_ACCOUNT_NAMESPACE, WRITE_MODEL, Names
from gpushare.rbac.write_model import parsed
from gpushare.runbook.state import ClusterState
from tests.unit.cluster_objects import (CONFIGMAP, applied, clusterpolicy, configmap, enabled_read, managed_configmap,
                                        read)
from tests.unit.test_records_untrusted import config_record, enable_record, forged_refusal
from tests.unit.test_timeslicing_plan import enable, refused as enable_refused
from tests.unit.test_timeslicing_rollback_plan import ENABLE_RECORD, refused, roll_back

ROOT = Path(__file__).resolve().parents[2]
ADMIN_CONFIG = "operator-config"  # the device plugin's config before the first enable, an administrator's


def write_model(**data: str) -> dict[str, Any]:
    """The write model as `gpushare rbac render` writes it (the runbooks' default names), with `data` over it."""
    body = configmap(WRITE_MODEL, {**Names().write_model(), **data}, labels={"app.kubernetes.io/managed-by": "gpushare-admin"})
    body["metadata"]["namespace"] = SERVICE_ACCOUNT_NAMESPACE
    return body


def restoring_admin_config(model: dict[str, Any] | None) -> dict[str, Any]:
    """A cluster whose enable record says the config was ADMIN_CONFIG before the enable."""
    cluster = enabled_read(configmaps=[managed_configmap(), configmap(ADMIN_CONFIG, {"all-off": "version: v1\n"}),
                                       config_record({"name": ADMIN_CONFIG, "default": "all-off"})])
    cluster["clusterpolicy"]["spec"]["devicePlugin"]["config"] = {"name": CONFIGMAP, "default": "default"}
    if model is not None:
        cluster["write_model"] = model
    return cluster


# ---- what the write model allows the rollback to restore ---------------------------------------------------
def test_a_config_name_the_write_model_does_not_hold_is_refused_and_its_original_is_restored() -> None:
    """An existing ConfigMap of the operator namespace is no longer enough: the write model names the one
    (which must still exist)."""
    message = forged_refusal(roll_back(restoring_admin_config(write_model()), ["gpu-node"]),
                             "field devicePlugin/config", "which no rollback writes")
    assert (f"the write model {SERVICE_ACCOUNT_NAMESPACE}/{WRITE_MODEL} allows only none, {CONFIGMAP} or its "
            "original-device-plugin-config (none)") in message
    assert f"`gpushare rbac render --operator-namespace gpu-operator --original-device-plugin-config {ADMIN_CONFIG} |" \
           in message

    cluster = restoring_admin_config(write_model(**{"original-device-plugin-config": ADMIN_CONFIG}))
    result = roll_back(cluster, ["gpu-node"])
    assert result.refusals == [] and result.notes == []
    assert applied(cluster["clusterpolicy"], result.changes["clusterpolicy"])["spec"]["devicePlugin"]["config"] == {
        "name": ADMIN_CONFIG, "default": "all-off"}
    cluster["configmaps"] = [c for c in cluster["configmaps"] if c["metadata"]["name"] != ADMIN_CONFIG]
    forged_refusal(roll_back(cluster, ["gpu-node"]), f"no ConfigMap gpu-operator/{ADMIN_CONFIG} exists")


def test_a_named_backup_is_held_to_the_write_model_too() -> None:
    backup = clusterpolicy(ADMIN_CONFIG, "all-off")
    cluster = enabled_read(configmaps=[managed_configmap(), configmap(ADMIN_CONFIG, {"all-off": "v"}),
                                       enable_record(created=True, backup=backup)])
    cluster["write_model"] = write_model()
    result = roll_back(cluster, ["gpu-node"], backup=ENABLE_RECORD)
    forged_refusal(result, f"The backup (record gpushare-system/{ENABLE_RECORD})", "the write model", ADMIN_CONFIG)


def test_without_a_write_model_the_wider_rule_stays_and_the_plan_says_so() -> None:
    cluster = restoring_admin_config(None)
    result = roll_back(cluster, ["gpu-node"])
    assert result.refusals == []
    (note,) = result.notes
    assert note.startswith(f"There is no write model {SERVICE_ACCOUNT_NAMESPACE}/{WRITE_MODEL} (deploy/rbac is not "
                           f"applied), so the device-plugin config goes back to {ADMIN_CONFIG}")
    assert "--original-device-plugin-config NAME" in note
    assert f"  note: {note}" in result.lines
    assert roll_back(enabled_read(), ["gpu-node"]).notes == []  # back to none: nothing for a write model to decide


# ---- a write model the rollback cannot go by --------------------------------------------------------------
def test_a_write_model_for_another_time_slicing_configmap_is_refused_naming_the_render() -> None:
    cluster = enabled_read()
    cluster["write_model"] = write_model(**{"timeslicing-configmap": "other-config",
                                            "original-device-plugin-config": ADMIN_CONFIG})
    message = refused(roll_back(cluster, ["gpu-node"]), "the RBAC was rendered for other names")
    assert message.startswith(f"The write model {SERVICE_ACCOUNT_NAMESPACE}/{WRITE_MODEL} allows time-slicing "
                              f"ConfigMap other-config, not {CONFIGMAP} (timeslicing_configmap_name)")
    assert "-e timeslicing_configmap_name=other-config" in message
    assert (f"`gpushare rbac render --operator-namespace gpu-operator --original-device-plugin-config {ADMIN_CONFIG} | "
            "kubectl apply --server-side -f -`") in message


# ---- the pool taint the write model allows ------------------------------------------------------------------
def test_an_enable_with_a_pool_taint_the_write_model_does_not_allow_is_refused_before_any_write() -> None:
    cluster = read()
    cluster["write_model"] = write_model()
    message = enable_refused(enable(cluster, ["gpu-node"], pool_taint_value="dedicated"), "pool-taint-value")
    assert message == (
        f"The write model {SERVICE_ACCOUNT_NAMESPACE}/{WRITE_MODEL} allows the pool taint nvidia.com/gpu=shared:NoSchedule, "
        "not nvidia.com/gpu=dedicated:NoSchedule (timeslicing_pool_taint_key, timeslicing_pool_taint_value; the RBAC "
        "parameters pool-taint-key and pool-taint-value): the admission policy gpushare-runbook-nodes would deny this "
        "run's taint. Run this with -e timeslicing_pool_taint_key=nvidia.com/gpu -e timeslicing_pool_taint_value=shared, "
        "or, as a cluster administrator, run `gpushare rbac render --operator-namespace gpu-operator --pool-taint-value "
        "dedicated | kubectl apply --server-side -f -`, then run this again. Nothing was changed.")


@pytest.mark.parametrize("inputs", [pytest.param({}, id="the-model's"), pytest.param({"pool_taint": False}, id="no-taint")])
def test_an_enable_with_the_write_models_pool_taint_or_none_is_not_refused_for_it(inputs: dict[str, Any]) -> None:
    cluster = read()
    cluster["write_model"] = write_model(**{"pool-taint-value": "shared"})
    assert not [r for r in enable(cluster, ["gpu-node"], **inputs).refusals if "pool-taint" in r]


def test_an_enable_with_the_rendered_pool_taint_key_is_not_refused_for_it() -> None:
    cluster = read()
    cluster["write_model"] = write_model(**{"pool-taint-key": "gpu-mode"})
    result = enable(cluster, ["gpu-node"], pool_taint_key="gpu-mode")
    assert not [r for r in result.refusals if "pool-taint" in r]
    message = enable_refused(enable(cluster, ["gpu-node"]), "pool-taint-key")
    assert "allows the pool taint gpu-mode=shared:NoSchedule, not nvidia.com/gpu=shared:NoSchedule" in message


def test_a_rollback_of_a_pool_taint_the_write_model_does_not_allow_is_refused() -> None:
    cluster = enabled_read()
    cluster["write_model"] = write_model(**{"pool-taint-value": "dedicated"})
    message = refused(roll_back(cluster, ["gpu-node"]), "pool-taint-value")
    assert "allows the pool taint nvidia.com/gpu=dedicated:NoSchedule, not nvidia.com/gpu=shared:NoSchedule" in message
    assert "-e timeslicing_rollback_pool_taint_key=nvidia.com/gpu -e timeslicing_rollback_pool_taint_value=dedicated" \
        in message


@pytest.mark.parametrize(("data", "why"), [
    pytest.param(None, "its data is a NoneType, not a mapping", id="no-data"),
    pytest.param({**Names().write_model(), "timeslicing-configmap": None}, "data key timeslicing-configmap is missing",
                 id="missing"),
    pytest.param({**Names().write_model(), "pool-label-key": 7}, "data key pool-label-key is a int, not text",
                 id="a-number"),
    pytest.param({**Names().write_model(), "original-device-plugin-config": "x" * 300},
                 "data key original-device-plugin-config is 300 characters long", id="long"),
    pytest.param({**Names().write_model(), "original-device-plugin-config": "Evil Config"},
                 "original device-plugin config 'Evil Config' is not a valid ConfigMap name", id="bad-name"),
    pytest.param({**Names().write_model(), "team-namespaces": "team-a,kube-system"},
                 "team namespace 'kube-system' is a system namespace", id="system-namespace"),
    pytest.param({**Names().write_model(), "team-namespaces": "a" * (MAX_BYTES + 1)},
                 f"data key team-namespaces is {MAX_BYTES + 1} characters long", id="huge"),
])
def test_an_unreadable_write_model_is_refused_naming_why(data: Any, why: str) -> None:
    model = write_model()
    model["data"] = {k: v for k, v in data.items() if v is not None} if data else data
    cluster = enabled_read()
    cluster["write_model"] = model
    state = ClusterState.of(cluster)
    assert state.write_model is None and why in state.write_model_problem
    message = refused(roll_back(cluster, ["gpu-node"]), "cannot be read")
    assert message.startswith(f"The write model {SERVICE_ACCOUNT_NAMESPACE}/{WRITE_MODEL} cannot be read ({why}")
    assert "`gpushare rbac render --operator-namespace gpu-operator | kubectl apply --server-side -f -`" in message


def test_the_write_model_reads_back_what_the_render_writes() -> None:
    names = Names("gpu-ops", "other-config", "example.com/pool", ADMIN_CONFIG, ("team-a", "team-b"))
    assert parsed({"data": names.write_model()}) == names
    assert ClusterState.of({**enabled_read(), "write_model": write_model()}).write_model == Names()
    assert ClusterState.of(enabled_read()).write_model is None


@given(st.dictionaries(st.sampled_from(list(Names().write_model())) | st.text(max_size=5),
                       st.text(max_size=40) | st.integers() | st.none() | st.lists(st.text(max_size=3), max_size=2)))
def test_a_fuzzed_write_model_is_read_or_named_and_never_crashes(data: dict[str, Any]) -> None:
    try:
        parsed({"data": data})
    except Unreadable as err:
        assert str(err)


def test_the_rollback_reads_the_write_model_where_the_admission_policies_do() -> None:
    (read,) = [t for t in yaml.safe_load((ROOT / "roles/timeslicing_rollback/tasks/preflight.yml").read_text())
               if "gpushare.gpu_sharing.gpushare_read" in t]
    assert read["gpushare.gpu_sharing.gpushare_read"]["objects"]["write_model"] == {
        "kind": "ConfigMap", "namespace": SERVICE_ACCOUNT_NAMESPACE, "name": WRITE_MODEL}
    policies = (ROOT / "deploy/rbac/60-admission-policies.yaml").read_text()
    assert f"paramRef: {{name: {WRITE_MODEL}, namespace: {SERVICE_ACCOUNT_NAMESPACE}," in policies
