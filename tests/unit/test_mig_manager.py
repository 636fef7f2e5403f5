"""The MIG manager's runs on one node (mig-parted v0.15.0 pkg/mig/reconfigure, cmd/nvidia-mig-manager):
the states it writes, the GPU clients it pauses and restores, the reboot (WITH_REBOOT or not), the
clients that never go and the never-finishing paths; contract section "MIG"."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from gpushare.gpu_catalog import PRODUCTS, product
from gpushare_testbed.simulator import mig_manager as mm
from gpushare_testbed.simulator.mig import default_config

CONFIG = default_config(PRODUCTS.values())
CLIENTS = {k: "true" for k in mm.CLIENT_LABELS}


def facts(config: str, **changes: Any) -> mm.NodeFacts:
    base = mm.NodeFacts(labels={mm.MIG_CONFIG: config, mm.MIG_STATE: "success", **CLIENTS}, annotations={},
                        product=product("NVIDIA-A100-SXM4-40GB"), gpus=4, config_text=CONFIG, pod_uid="mm-1",
                        clients_running=False)
    return replace(base, **changes)


def run_until_idle(node: mm.NodeFacts, now: float = 0.0, run: mm.MigRun | None = None) -> tuple[list[str], mm.NodeFacts, mm.MigRun]:
    """Apply the MIG manager's writes to the node until it has nothing more to do; the states seen."""
    seen = []
    for _ in range(10):
        run, decision = mm.step(run, node, now, reboot_s=5)
        if decision is None:
            break
        labels = {k: v for k, v in {**node.labels, **decision.labels}.items() if v is not None}
        annotations = {k: v for k, v in {**node.annotations, **decision.annotations}.items() if v is not None}
        if decision.labels.get(mm.MIG_STATE):
            seen.append(decision.labels[mm.MIG_STATE])
        node = replace(node, labels=labels, annotations=annotations)
        now += decision.wake_after or 0
    return seen, node, run


def test_a_change_goes_pending_pauses_the_clients_and_succeeds() -> None:
    node = facts("all-1g.5gb")
    run, decision = mm.step(None, node, 0, 5)
    assert decision.labels == {mm.MIG_STATE: "pending", **{k: mm.PAUSED for k in mm.CLIENT_LABELS}}
    seen, after, _ = run_until_idle(node)
    assert seen == ["pending", "success"]
    assert json.loads(after.annotations[mm.LAYOUT_ANNOTATION]) == [["1g.5gb"] * 7] * 4
    assert all(after.labels[k] == "true" for k in mm.CLIENT_LABELS)


def test_it_waits_for_the_gpu_clients_pods_to_go() -> None:
    run, _ = mm.step(None, facts("all-1g.5gb"), 0, 5)
    _, waiting = mm.step(run, facts("all-1g.5gb", clients_running=True), 1, 5)
    assert waiting is not None and waiting.labels == {} and waiting.wake_after == mm.CLIENT_TIMEOUT_S - 1
    _, decision = mm.step(run, facts("all-1g.5gb"), 2, 5)
    assert decision.labels[mm.MIG_STATE] == "success" and decision.delete_validator


def test_clients_that_never_go_leave_the_node_pending_with_them_paused_and_no_retry() -> None:
    """reconfigure.go waitForPodsToBeDeleted: 5 minutes, then Run returns without setState; main.go
    runs again only when the label changes (SyncableMigConfig.Get) or the pod restarts."""
    stuck = facts("all-1g.5gb", clients_running=True)
    run, paused = mm.step(None, stuck, 0, 5)
    stuck = replace(stuck, labels={**stuck.labels, **paused.labels})
    assert mm.step(run, stuck, mm.CLIENT_TIMEOUT_S, 5)[1] is None and run.phase == "gave-up"
    gone = replace(stuck, clients_running=False)
    assert mm.step(run, gone, mm.CLIENT_TIMEOUT_S + 60, 5)[1] is None, "the pods went later: nothing happens"
    assert gone.labels[mm.MIG_STATE] == "pending" and gone.labels[mm.CLIENT_LABELS[0]] == mm.PAUSED
    seen, after, _ = run_until_idle(replace(gone, pod_uid="mm-2"), mm.CLIENT_TIMEOUT_S + 61)
    assert seen == ["pending", "success"], "a restarted MIG manager applies the label again"
    assert after.labels[mm.CLIENT_LABELS[0]] == "true"
    _, back = mm.step(run, replace(gone, labels={**gone.labels, mm.MIG_CONFIG: "all-disabled"}), 400, 5)
    assert back is not None, "so does a change of the label"


def test_unknown_config_fails_without_pending() -> None:
    seen, after, _ = run_until_idle(facts("no-such-config"))
    assert seen == ["failed"]


def test_config_that_does_not_apply_fails_after_pending_and_keeps_the_hardware() -> None:
    seen, after, _ = run_until_idle(facts("all-7g.80gb"))
    assert seen == ["pending", "failed"]
    assert mm.LAYOUT_ANNOTATION not in after.annotations


def test_already_applied_is_success_at_once() -> None:
    assert run_until_idle(facts("all-disabled"))[0] == ["success"]


def test_a_false_deploy_label_stays_false() -> None:
    node = facts("all-1g.5gb", labels={**facts("x").labels, mm.MIG_CONFIG: "all-1g.5gb", "nvidia.com/gpu.deploy.dcgm": "false"})
    _, decision = mm.step(None, node, 0, 5)
    assert decision.labels["nvidia.com/gpu.deploy.dcgm"] == "false"
    _, after, _ = run_until_idle(node)
    assert after.labels["nvidia.com/gpu.deploy.dcgm"] == "false"
    assert after.labels["nvidia.com/gpu.deploy.device-plugin"] == "true"


def test_a_mode_change_that_needs_a_reboot_fails_without_with_reboot() -> None:
    """The GPU Operator never sets WITH_REBOOT: applyMigModeChange's failure is ignored and
    applyMigConfig then fails; the clients come back, the hardware is as before."""
    seen, after, _ = run_until_idle(facts("all-1g.5gb", annotations={mm.REBOOT_ANNOTATION: "true"}))
    assert seen == ["pending", "failed"]
    assert mm.LAYOUT_ANNOTATION not in after.annotations and after.labels[mm.CLIENT_LABELS[0]] == "true"


def test_with_reboot_set_it_passes_through_rebooting() -> None:
    seen, after, _ = run_until_idle(facts("all-1g.5gb", annotations={mm.REBOOT_ANNOTATION: "true"}, with_reboot=True))
    assert seen == ["pending", "rebooting", "pending", "success"]


def test_a_mode_change_still_not_in_effect_after_rebooting_fails() -> None:
    node = facts("all-1g.5gb", labels={**facts("x").labels, mm.MIG_CONFIG: "all-1g.5gb", mm.MIG_STATE: "rebooting"})
    assert run_until_idle(node)[0] == ["failed"]


def test_stall_stays_pending_until_the_annotation_goes() -> None:
    node = facts("all-1g.5gb", annotations={mm.STALL_ANNOTATION: "true"})
    seen, stuck, run = run_until_idle(node)
    assert seen == ["pending"]
    assert mm.step(run, stuck, 3600, 5)[1] is None
    seen, _, _ = run_until_idle(replace(stuck, annotations={}), 3601, run)
    assert seen == ["success"]


def test_a_new_mig_manager_pod_runs_the_label_again() -> None:
    _, after, run = run_until_idle(facts("all-1g.5gb"))
    assert mm.step(run, after, 10, 5)[1] is None
    _, decision = mm.step(run, replace(after, pod_uid="mm-2"), 11, 5)
    assert decision.labels[mm.MIG_STATE] == "success"  # already applied: no pending
