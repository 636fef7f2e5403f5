"""The preflight's question to the API server's authorizer: may the runbook identity write the
ConfigMap it is about to write? deploy/rbac grants patch (and delete) of the time-slicing ConfigMap
by name, so a run with another timeslicing_configmap_name than the RBAC was rendered for would fail
at its first write; the preflight refuses it before any write, naming the fix."""

from __future__ import annotations

from typing import Any

from gpushare.rbac import Names


def alias(verb: str) -> str:
    """The gpushare_read `access` alias of the question for `verb` on the ConfigMap (the roles' wiring)."""
    return f"configmap_{verb}"


def configmap_refusal(access: dict[str, Any] | None, identity: str, verbs: list[str], names: Names) -> str:
    """The refusal (without "Nothing was changed.") when the authorizer denied any of `verbs` on the
    ConfigMap `names.timeslicing_configmap` in `names.operator_namespace`; "" when it allowed them
    all, or was not asked (a question missing from `access`)."""
    answers = access or {}
    denied = [verb for verb in verbs if alias(verb) in answers and not (answers[alias(verb)] or {}).get("allowed")]
    if not denied:
        return ""
    options = names.options(with_namespace=True)
    verbs_text = ", ".join(denied[:-1]) + (" or " if len(denied) > 1 else "") + denied[-1]
    return (f"The runbook identity ({identity or 'the credentials in use'}) may not {verbs_text} ConfigMap "
            f"{names.operator_namespace}/{names.timeslicing_configmap}: the RBAC was rendered for other names. As a "
            f"cluster administrator run `gpushare rbac render {options} | kubectl apply --server-side -f -`, then run "
            "this again.")


def identity(caller: dict[str, Any] | None) -> str:
    """Who the API server says the runbook runs as (gpushare_read with whoami), else the local user."""
    caller = caller or {}
    return str(caller.get("identity") or caller.get("user") or "")
