"""deploy/rbac rendered for the names in use (`gpushare rbac render`, `gpushare sim up`): every
occurrence of a default name replaced, nothing else; a name Kubernetes would refuse is refused."""

from __future__ import annotations

import pytest
import yaml

from gpushare import cli, rbac
from gpushare.rbac import Names, RbacError, manifests, render
from gpushare.rbac.audit import grants

OTHER = Names("gpu-ops", "other-config", "example.com/gpu-pool")


def _text(objects: list) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False)


def test_the_defaults_render_deploy_rbac_as_written() -> None:
    written = [doc for path in sorted(rbac.MANIFESTS.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert manifests() == written
    assert list(yaml.safe_load_all(render(Names()))) == written


def _leaves(value: object, path: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, f"{path}/{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{path}/{i}").items()}
    return {path: value}


def test_rendering_replaces_every_occurrence_of_the_default_names_and_only_those() -> None:
    default, other = _leaves(manifests()), _leaves(manifests(names=OTHER))
    assert default.keys() == other.keys()
    changed = {path for path in default if default[path] != other[path]}
    defaults = ("gpu-operator", "time-slicing-config", "gpu-mode")
    assert changed == {path for path, value in default.items() if any(n in str(value) for n in defaults)}
    for path in changed:  # the default names, each replaced by the one in use and nothing else
        assert not any(n in str(other[path]) for n in defaults), (path, other[path])
        back = (str(other[path]).replace("gpu-ops", "gpu-operator").replace("other-config", "time-slicing-config")
                .replace("example.com/gpu-pool", "gpu-mode"))
        assert back == default[path], path
    assert len(changed) >= 10  # Role and RoleBinding namespaces, resourceNames, the write model


def test_the_grants_and_the_write_model_name_the_rendered_names() -> None:
    objects = manifests(names=Names("gpu-ops", "other-config", "example.com/gpu-pool", "admin-config",
                                    pool_taint_key="example.com/gpu-pool", pool_taint_value="dedicated"))
    named = {(g.verb, g.namespace, g.name) for g in grants(objects, rbac.RUNBOOK_USER)
             if g.resource == "configmaps" and g.namespace == "gpu-ops" and g.name}
    assert named == {("patch", "gpu-ops", "other-config"), ("delete", "gpu-ops", "other-config")}
    (model,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == rbac.WRITE_MODEL]
    assert model["data"] == {"operator-namespace": "gpu-ops", "timeslicing-configmap": "other-config",
                             "original-device-plugin-config": "admin-config", "pool-label-key": "example.com/gpu-pool",
                             "team-namespaces": "", "pool-taint-key": "example.com/gpu-pool", "pool-taint-value": "dedicated"}
    bindings = [o["spec"] for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding" and "paramRef" in o["spec"]]
    assert len(bindings) >= 4
    assert all(b["paramRef"] == {"name": rbac.WRITE_MODEL, "namespace": model["metadata"]["namespace"],
                                 "parameterNotFoundAction": "Deny"} for b in bindings)


def test_a_name_that_contains_a_default_name_is_not_rewritten() -> None:
    """Only whole names are replaced: a ConfigMap name that extends the default is left as it is."""
    text = _text(manifests(names=Names(timeslicing_configmap="time-slicing-config-b", pool_label_key="gpu-mode.x")))
    assert text.count("time-slicing-config-b") == _text(manifests()).count("time-slicing-config")
    assert "gpu-mode.x" in text


@pytest.mark.parametrize(("names", "problem"), [
    (Names(operator_namespace="GPU_Operator"), "operator namespace 'GPU_Operator' is not a valid namespace name"),
    (Names(operator_namespace="a" * 64), "is not a valid namespace name"),
    (Names(timeslicing_configmap="Other_Config"), "time-slicing ConfigMap 'Other_Config' is not a valid ConfigMap name"),
    (Names(timeslicing_configmap="a..b"), "is not a valid ConfigMap name"),
    (Names(timeslicing_configmap="x', 'y"), "is not a valid ConfigMap name"),
    (Names(pool_label_key="-gpu-mode"), "pool label key '-gpu-mode' is not a valid label key"),
    (Names(pool_taint_key="nvidia.com/"), "pool taint key 'nvidia.com/' is not a valid taint key"),
    (Names(pool_taint_value="a b"), "pool taint value 'a b' is not a valid taint value"),
    (Names(pool_label_key="Example.com/pool"), "is not a valid label key"),
    (Names(pool_label_key="example.com/"), "is not a valid label key"),
    (Names(pool_label_key="a/b/c"), "is not a valid label key"),
    (Names(pool_label_key="gpu-mode\n"), "is not a valid label key"),
    (Names(timeslicing_configmap="other-config\n"), "is not a valid ConfigMap name"),
    (Names(original_device_plugin_config="Admin_Config"), "original device-plugin config 'Admin_Config' is not a valid"),
])
def test_a_name_kubernetes_would_refuse_is_refused(names: Names, problem: str) -> None:
    with pytest.raises(RbacError, match="cannot render deploy/rbac: ") as refused:
        manifests(names=names)
    assert problem in str(refused.value)


@pytest.mark.parametrize("key", ["gpu-mode", "example.com/gpu-pool", "Pool_1", "a.b-c/X.y_z"])
def test_valid_label_keys_are_accepted(key: str) -> None:
    assert Names(pool_label_key=key).problems() == []


def test_the_cli_prints_the_rendered_stream(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rbac", "render", "--timeslicing-configmap", "other-config",
                     "--original-device-plugin-config", "admin-config"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed == manifests(names=Names(timeslicing_configmap="other-config", original_device_plugin_config="admin-config"))


def test_the_cli_refuses_a_bad_name_and_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rbac", "render", "--pool-label-key", "bad key"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert "pool label key 'bad key' is not a valid label key" in out.err and "Nothing was printed." in out.err


def test_options_name_what_differs_from_the_defaults() -> None:
    assert Names().options() == ""
    assert Names(timeslicing_configmap="other-config").options() == "--timeslicing-configmap other-config"
    assert OTHER.options() == ("--operator-namespace gpu-ops --timeslicing-configmap other-config "
                               "--pool-label-key example.com/gpu-pool")


def test_the_cli_renders_the_pool_taint_into_the_write_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rbac", "render", "--pool-taint-key", "example.com/gpu-pool", "--pool-taint-value", "dedicated"]) == 0
    model = _write_model(list(yaml.safe_load_all(capsys.readouterr().out)))
    assert (model["pool-taint-key"], model["pool-taint-value"]) == ("example.com/gpu-pool", "dedicated")
    assert Names(pool_taint_key="example.com/gpu-pool", pool_taint_value="dedicated").options() == (
        "--pool-taint-key example.com/gpu-pool --pool-taint-value dedicated")


def _write_model(objects: list) -> dict[str, str]:
    return next(o["data"] for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == rbac.WRITE_MODEL)


def test_the_team_namespaces_are_rendered_into_the_write_model_in_the_order_given() -> None:
    """Written for none (an administrator lists them); the Kueue and Namespace policies read them from
    the write model, with the operator namespace among the system namespaces."""
    teams = Names("gpu-ops", team_namespaces=("team-training", "team-inference"))
    assert _write_model(manifests())["team-namespaces"] == ""
    assert _write_model(manifests(names=teams))["team-namespaces"] == "team-training,team-inference"
    for policy in ("gpushare-runbook-kueue", "gpushare-runbook-namespaces"):
        spec = next(o["spec"] for o in manifests() if o["kind"] == "ValidatingAdmissionPolicy"
                    and o["metadata"]["name"] == policy)
        variables = {v["name"]: v["expression"] for v in spec["variables"]}
        assert "params.data['team-namespaces']" in variables["teamNamespaces"]
        assert "params.data['operator-namespace']" in variables["systemNamespaces"]
    assert teams.options() == "--operator-namespace gpu-ops --team-namespace team-training --team-namespace team-inference"


def test_the_cli_renders_each_team_namespace_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rbac", "render", "--team-namespace", "team-a", "--team-namespace", "team-b",
                     "--team-namespace", "team-a"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed == manifests(names=Names(team_namespaces=("team-a", "team-b")))
    assert _write_model(printed)["team-namespaces"] == "team-a,team-b"


@pytest.mark.parametrize(("names", "problem"), [
    (Names(team_namespaces=("kube-system",)), "team namespace 'kube-system' is a system namespace"),
    (Names(team_namespaces=("team-a", "default")), "team namespace 'default' is a system namespace"),
    (Names(team_namespaces=("gpushare-system",)), "team namespace 'gpushare-system' is a system namespace"),
    (Names(team_namespaces=("kueue-system",)), "team namespace 'kueue-system' is a system namespace"),
    (Names("gpu-ops", team_namespaces=("gpu-ops",)), "team namespace 'gpu-ops' is a system namespace"),
    (Names(team_namespaces=("team-a', 'kube-system",)), "is not a valid namespace name"),
    (Names(team_namespaces=("Team_A",)), "team namespace 'Team_A' is not a valid namespace name"),
])
def test_a_system_or_invalid_team_namespace_is_refused(names: Names, problem: str) -> None:
    with pytest.raises(RbacError, match="cannot render deploy/rbac: ") as refused:
        manifests(names=names)
    assert problem in str(refused.value)


def test_the_cli_refuses_a_system_team_namespace_and_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rbac", "render", "--team-namespace", "kube-system"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "team namespace 'kube-system' is a system namespace" in out.err
