"""The dra_pilot role's filters (registered by plugins/filter/dra.py)."""

from __future__ import annotations

from typing import Any

from gpushare.ansible_values import plain
from gpushare.clock import utc_now
from gpushare.dra import admission, plan, readiness, rollback, verify
from gpushare.dra.settings import PilotSettings, Settings
from gpushare.runbook.inputs import NOTHING


def dra_readiness(probe: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """The readiness report (gpushare.dra.readiness.report) from the gpushare_dra_probe result."""
    return readiness.report(plain(probe).get("facts") or {}, Settings.of(plain(inputs)))


def dra_readiness_input_problems(inputs: dict[str, Any]) -> list[str]:
    """What is wrong with the inputs alone, before the cluster is read."""
    return [f"{problem} {NOTHING}" for problem in Settings.of(plain(inputs)).problems()]


def dra_pilot_plan(probe: dict[str, Any], read: dict[str, Any], inputs: dict[str, Any],
                   class_read: dict[str, Any] | None = None) -> dict[str, Any]:
    """The enable's plan (gpushare.dra.plan) from the readiness probe, the preflight's gpushare_read (with the
    access answers on the DeviceClass) and that of the DeviceClass (skipped where the identity may not get it)."""
    read = plain(read)
    resources = {**(read.get("resources") or {}),
                 "device_class": ((plain(class_read) or {}).get("resources") or {}).get("device_class")}
    return plan.plan(plain(probe).get("facts") or {}, resources, PilotSettings.of(plain(inputs)),
                     read.get("caller") or {}, utc_now(), read.get("access") or {}).as_dict()


def dra_pilot_verify_plan(node: dict[str, Any] | None, inputs: dict[str, Any]) -> dict[str, Any]:
    """The verify's objects and what it waits for (gpushare.dra.verify), for the pilot node as read."""
    node = plain(node) or {}
    count = str(((node.get("metadata") or {}).get("labels") or {}).get("nvidia.com/gpu.count", "0"))
    return verify.plan((node.get("metadata") or {}).get("name", ""), int(count) if count.isdigit() else 0,
                       PilotSettings.of(plain(inputs))).as_dict()


def dra_pilot_claim_uuid(read: dict[str, Any], expected: dict[str, Any]) -> str:
    """The card the verify's claim got, from one gpushare_read of {claim, slices}, for the release gates."""
    resources = plain(read).get("resources") or {}
    return verify.claim_uuid(resources.get("claim"), resources.get("slices") or [], plain(expected))


def dra_pilot_rollback_plan(read: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """The rollback's plan (gpushare.dra.rollback) from one gpushare_read."""
    read = plain(read)
    return rollback.plan(read.get("resources") or {}, PilotSettings.of(plain(inputs)), read.get("caller") or {},
                         utc_now()).as_dict()


def dra_pilot_dry_run_changes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The enable's changes its preflight dry-runs (gpushare.dra.admission)."""
    return admission.dry_run_changes(plain(plan))


def dra_pilot_denial(result: dict[str, Any]) -> str:
    """The refusal for a write of the enable that its preflight's dry run was denied ("" when none was)."""
    return admission.denial(plain(result))


def dra_pilot_input_problems(inputs: dict[str, Any]) -> list[str]:
    return [f"{problem} {NOTHING}" for problem in PilotSettings.of(plain(inputs)).problems()]


FILTERS = {"dra_readiness": dra_readiness, "dra_readiness_input_problems": dra_readiness_input_problems,
           "dra_pilot_plan": dra_pilot_plan, "dra_pilot_verify_plan": dra_pilot_verify_plan,
           "dra_pilot_claim_uuid": dra_pilot_claim_uuid, "dra_pilot_dry_run_changes": dra_pilot_dry_run_changes,
           "dra_pilot_denial": dra_pilot_denial,
           "dra_pilot_input_problems": dra_pilot_input_problems, "dra_pilot_rollback_plan": dra_pilot_rollback_plan}
