"""The enable's own writes, dry-run in its preflight: the API server judges each as it would the real
one (RBAC and the admission policies of deploy/rbac, which name the pilot's label and DeviceClass), and
stores nothing. A write the runbook identity would be denied is refused before any write, naming the
object, the denial and the file of deploy/rbac that decides it, instead of failing the run midway."""

from __future__ import annotations

from typing import Any

from gpushare.runbook.inputs import NOTHING

# The plan's steps whose object exists before the run (or that create one): "finish" marks the record
# the run creates complete, which a dry run cannot see.
DRY_RUN_STEPS = ("record", "cordon", "device_plugin", "kubelet_plugin", "device_class", "uncordon")
# Which file of deploy/rbac decides a denial, by what the API server names in it.
DECIDERS = (
    ("'gpushare-runbook-deviceclasses'", "deploy/rbac/51-dra-readiness.yaml (the admission policy "
                                         "gpushare-runbook-deviceclasses: the pilot's DeviceClass by name)"),
    ("'gpushare-runbook-nodes'", "deploy/rbac/60-admission-policies.yaml (the admission policy gpushare-runbook-nodes: "
                                 "the node labels the runbooks own, the DRA kubelet plugin's among them)"),
    ("'gpushare-runbook-", "deploy/rbac/60-admission-policies.yaml"),
    ("is forbidden", "deploy/rbac/52-dra-pilot.yaml (the ClusterRole gpushare-dra-pilot: the DeviceClass by name)"),
)


def class_access_problems(access: dict[str, Any], class_name: str) -> list[str]:
    """Why the runbook identity cannot keep the DeviceClass `class_name` (RBAC names the pilot's by name), from the
    authorizer's answers class_get and class_update; none when it may or was not asked."""
    denied = [verb for verb in ("get", "update") if not (access.get(f"class_{verb}") or {"allowed": True}).get("allowed")]
    if not denied:
        return []
    return [f"The runbook identity may not {' or '.join(denied)} DeviceClass {class_name}: deploy/rbac/52-dra-pilot.yaml "
            f"(the ClusterRole gpushare-dra-pilot) names its DeviceClass by name. Add {class_name} to its resourceNames, "
            "and to the admission policy gpushare-runbook-deviceclasses of deploy/rbac/51-dra-readiness.yaml, and apply "
            "them as an administrator; or keep the default dra_pilot_class_name."]


def dry_run_changes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's changes a server-side dry run can judge on the cluster as it is, in order."""
    changes = plan.get("changes") or {}
    return [change for step in DRY_RUN_STEPS for change in changes.get(step) or []]


def denial(result: dict[str, Any]) -> str:
    """The refusal for a dry run the API server denied (gpushare_apply's result in check mode, registered with
    failed_when false, which clears its `failed`: the change that failed says it); "" when every write passed."""
    if not result.get("failed_change"):
        return ""
    reason = str(result.get("reason") or result.get("msg") or "")
    decider = next((where for said, where in DECIDERS if said in reason), "")
    fix = (f"Edit {decider} for these names and apply it as an administrator (deploy/rbac/README.md), or keep the "
           "default dra_pilot_plugin_label and dra_pilot_class_name" if decider else
           "Look at the API server's answer above")
    return (f"The runbook identity would be denied a write of this run: {result.get('failed_change', '?')}: {reason} "
            f"(a server-side dry run, which stored nothing). {fix}. {NOTHING}")
