"""The write model as a run reads it: the parameter ConfigMap gpushare-system/gpushare-write-model
(deploy/rbac/55-write-model.yaml) that the admission policies hold the runbook identity to. Only an
administrator writes it, but it is read like a run record: every key of its type and bounded in size,
every name a valid one, else Unreadable naming what is wrong."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpushare.bounded import MAX_BYTES, Unreadable
from gpushare.model.taints import Taint
from gpushare.rbac import SERVICE_ACCOUNT_NAMESPACE, WRITE_MODEL, Names

WHERE = f"{SERVICE_ACCOUNT_NAMESPACE}/{WRITE_MODEL}"
_LONGEST_NAME = 253  # a DNS-1123 subdomain; every value but the team namespaces is one name


def parsed(configmap: dict[str, Any]) -> Names:
    """The names the write model ConfigMap holds (its data as `Names.write_model` writes it), or
    Unreadable: a key missing or not text, a value longer than a name, a name not valid."""
    data = configmap.get("data")
    if not isinstance(data, dict):
        raise Unreadable(f"its data is a {type(data).__name__}, not a mapping")
    values = {}
    for key in Names().write_model():
        value = data.get(key)
        if not isinstance(value, str):
            raise Unreadable(f"data key {key} is missing" if value is None else
                             f"data key {key} is a {type(value).__name__}, not text")
        if len(value) > (MAX_BYTES if key == "team-namespaces" else _LONGEST_NAME):
            raise Unreadable(f"data key {key} is {len(value)} characters long, longer than a name")
        values[key] = value
    teams = tuple(n for n in values["team-namespaces"].split(",") if n)
    if any(len(n) > _LONGEST_NAME for n in teams):
        raise Unreadable("data key team-namespaces holds a name longer than a namespace name")
    names = Names(values["operator-namespace"], values["timeslicing-configmap"], values["pool-label-key"],
                  values["original-device-plugin-config"], teams, values["pool-taint-key"], values["pool-taint-value"])
    problems = names.problems()
    if problems:
        raise Unreadable("; ".join(problems))
    return names


def run_names(namespace: str, configmap: str, pool_label_key: str, taint: Taint | None) -> Names:
    """The names deploy/rbac must be rendered for, for a run with these inputs (without a pool taint:
    the written-for one)."""
    taint_names = {"pool_taint_key": taint.key, "pool_taint_value": taint.value} if taint else {}
    return Names(namespace, configmap, pool_label_key, **taint_names)


def render_fix(names: Names) -> str:
    """What a cluster administrator runs to have the write model (and the RBAC) hold `names`."""
    return f"`gpushare rbac render {names.options(with_namespace=True)} | kubectl apply --server-side -f -`"


def unreadable_refusal(problem: str, names: Names) -> str:
    """The refusal (without "Nothing was changed.") when the write model is there but cannot be read;
    `names`: the run's own names, for the fix."""
    return (f"The write model {WHERE} cannot be read ({problem}), so no run can tell what it may write. As a "
            f"cluster administrator render it again: {render_fix(names)}, adding --original-device-plugin-config "
            "NAME when the ClusterPolicy's spec.devicePlugin.config.name was NAME before any gpushare run and "
            "--team-namespace NS for each team namespace of the queue backfill; then run this again.")


def configmap_mismatch(model: Names, configmap: str) -> str:
    """The refusal (without "Nothing was changed.") when the write model was rendered for another
    time-slicing ConfigMap than the run's timeslicing_configmap_name `configmap`; "" when the same."""
    if model.timeslicing_configmap == configmap:
        return ""
    rerun = f"If the enable ran with -e timeslicing_configmap_name={model.timeslicing_configmap}, run this with the same"
    render = (f"; else, as a cluster administrator run {render_fix(replace(model, timeslicing_configmap=configmap))}, "
              "then run this again." if configmap else ".")
    return (f"The write model {WHERE} allows time-slicing ConfigMap {model.timeslicing_configmap}, not "
            f"{configmap or '(none given)'} (timeslicing_configmap_name): the RBAC was rendered for other names. "
            f"{rerun}{render}")


def pool_taint_mismatch(model: Names, taint: Taint | None, inputs: str) -> str:
    """The refusal (without "Nothing was changed.") when the write model allows another pool taint than
    the run's `taint` (set by the variables `inputs`_key and `inputs`_value); "" when the same or none."""
    if taint is None or (taint.key, taint.value) == (model.pool_taint_key, model.pool_taint_value):
        return ""
    allowed = f"{model.pool_taint_key}={model.pool_taint_value}:NoSchedule"
    render = render_fix(replace(model, pool_taint_key=taint.key, pool_taint_value=taint.value))
    return (f"The write model {WHERE} allows the pool taint {allowed}, not {taint} ({inputs}_key, {inputs}_value; "
            "the RBAC parameters pool-taint-key and pool-taint-value): the admission policy gpushare-runbook-nodes "
            f"would deny this run's taint. Run this with -e {inputs}_key={model.pool_taint_key} -e {inputs}_value="
            f"{model.pool_taint_value}, or, as a cluster administrator, run {render}, then run this again.")
