"""The driver upgrade controller's pass (k8s-operator-libs pkg/upgrade ApplyState as the GPU Operator
configures it): which node moves to which state, at most maxParallelUpgrades at a time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operand_specs
from gpushare_testbed.simulator import upgrade as u

POLICY: dict[str, Any] = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}


def node(name: str, state: str = "", **facts: Any) -> u.NodeUpgrade:
    base = u.NodeUpgrade(name=name, state=state, unschedulable=False, ready=True, driver_in_sync=True, driver_ready=True,
                         driver_terminating=False, gpu_pods=0, undeletable=0, eviction_timed_out=False, drain_pods=0,
                         drain_errors=(), drain_timed_out=False, validator_ready=True, initial_unschedulable=False,
                         skip=False, requested=False)
    return replace(base, **facts)


def states(steps: list[u.Step]) -> dict[str, str | None]:
    return {s.node: s.state for s in steps if s.state is not None}


def actions(steps: list[u.Step]) -> list[tuple[str, str]]:
    return [(s.node, s.action) for s in steps if s.action]


def test_nodes_in_sync_are_done_and_out_of_sync_ones_need_an_upgrade() -> None:
    steps = u.plan([node("a"), node("b", driver_in_sync=False), node("c", u.DONE, driver_in_sync=False)], POLICY)
    assert states(steps) == {"a": u.DONE, "b": u.REQUIRED, "c": u.REQUIRED}


def test_one_upgrade_at_a_time() -> None:
    nodes = [node(n, u.REQUIRED, driver_in_sync=False) for n in "abcd"]
    assert states(u.plan(nodes, POLICY)) == {"a": u.CORDON}
    nodes[0] = node("a", u.POD_RESTART, driver_in_sync=False, unschedulable=True)
    assert u.plan(nodes, POLICY) == [u.Step("a", action="restart-driver")], "no slot while a is upgrading"
    assert states(u.plan(nodes, {**POLICY, "maxParallelUpgrades": 0, "maxUnavailable": "100%"})) == {
        "b": u.CORDON, "c": u.CORDON, "d": u.CORDON}


@pytest.mark.parametrize(
    ("current", "expected_state", "expected_actions"),
    [
        pytest.param(node("a", u.CORDON), u.WAIT_JOBS, [("a", "cordon")], id="cordon"),
        pytest.param(node("a", u.WAIT_JOBS), u.POD_DELETION, [], id="no-jobs-to-wait-for"),
        pytest.param(node("a", u.POD_DELETION, gpu_pods=2), None, [("a", "evict")], id="evict-gpu-pods"),
        pytest.param(node("a", u.POD_DELETION), u.POD_RESTART, [], id="gpu-pods-gone"),
        pytest.param(node("a", u.POD_DELETION, gpu_pods=1, eviction_timed_out=True), u.FAILED, [], id="pdb-blocks-too-long"),
        # pod_manager.go: a GPU pod kubectl's drain filters refuse or skip fails the node at once
        pytest.param(node("a", u.POD_DELETION, gpu_pods=2, undeletable=1), u.FAILED, [], id="a-gpu-pod-it-cannot-delete"),
        pytest.param(node("a", u.DRAIN), u.POD_RESTART, [], id="drain-disabled"),
        pytest.param(node("a", u.POD_RESTART, driver_in_sync=False), None, [("a", "restart-driver")], id="restart-driver"),
        pytest.param(node("a", u.POD_RESTART, driver_in_sync=False, driver_terminating=True), None, [], id="driver-terminating"),
        pytest.param(node("a", u.POD_RESTART, driver_ready=False), None, [], id="new-driver-starting"),
        pytest.param(node("a", u.POD_RESTART), u.VALIDATION, [], id="new-driver-ready"),
        pytest.param(node("a", u.VALIDATION), u.UNCORDON, [], id="validated"),
        pytest.param(node("a", u.VALIDATION, initial_unschedulable=True), u.DONE, [("a", "clear-initial")], id="stays-cordoned"),
        pytest.param(node("a", u.UNCORDON), u.DONE, [("a", "uncordon")], id="uncordon"),
    ],
)
def test_state_machine(current: u.NodeUpgrade, expected_state: str | None, expected_actions: list) -> None:
    steps = u.plan([current], POLICY)
    assert states(steps).get("a") == expected_state
    assert actions(steps) == expected_actions


DRAIN_ON = {**POLICY, "drain": {"enable": True, "timeoutSeconds": 300}}


@pytest.mark.parametrize(
    ("current", "expected_state", "expected_actions", "event"),
    [
        pytest.param(node("a", u.POD_DELETION, gpu_pods=1, undeletable=1), u.DRAIN, [],
                     "Pod deletion failed but drain is enabled in spec. Will attempt a node drain", id="deletion-fails"),
        pytest.param(node("a", u.DRAIN, drain_pods=3), None, [("a", "drain")], None, id="drain"),
        pytest.param(node("a", u.DRAIN), u.POD_RESTART, [], None, id="drained"),
        pytest.param(node("a", u.DRAIN, drain_pods=1, drain_errors=("cannot delete Pods with local storage (use "
                                                                    "--delete-emptydir-data to override): t/x",)),
                     u.FAILED, [], "Failed to drain the node, cannot delete Pods with local storage (use "
                                   "--delete-emptydir-data to override): t/x", id="drain-refused"),
        pytest.param(node("a", u.DRAIN, drain_pods=1, drain_timed_out=True), u.FAILED, [],
                     "Failed to drain the node, global timeout reached", id="drain-timeout"),
    ],
)
def test_with_drain_enabled(current: u.NodeUpgrade, expected_state: str | None, expected_actions: list,
                            event: str | None) -> None:
    """pod_manager.go updateNodeToDrainOrFailed, drain_manager.go ScheduleNodesDrain."""
    steps = u.plan([current], DRAIN_ON)
    assert states(steps).get("a") == expected_state
    assert actions(steps) == expected_actions
    assert [s.event for s in steps if s.event] == ([event] if event else [])


def test_a_failed_node_holds_the_only_slot_so_the_fleet_stops() -> None:
    """common_manager.go GetUpgradesInProgress counts upgrade-failed; with maxParallelUpgrades 1 no
    other node starts until it is dealt with (it also stays cordoned, which maxUnavailable counts)."""
    nodes = [node("a", u.FAILED, driver_in_sync=False, unschedulable=True)] + [
        node(n, u.REQUIRED, driver_in_sync=False) for n in "bcd"]
    assert u.plan(nodes, POLICY) == []
    nodes[0] = node("a", u.REQUIRED, driver_in_sync=False, unschedulable=True)  # kubectl label ... upgrade-required
    assert states(u.plan(nodes, POLICY)) == {"a": u.CORDON}, "a cordoned node starts again without a free slot"


def test_a_node_cordoned_before_the_upgrade_is_marked() -> None:
    steps = u.plan([node("a", u.DONE, driver_in_sync=False, unschedulable=True)], POLICY)
    assert actions(steps) == [("a", "mark-initial")] and states(steps) == {"a": u.REQUIRED}


def test_auto_upgrade_off_removes_the_state_labels_and_does_nothing_else() -> None:
    steps = u.plan([node("a", u.REQUIRED, driver_in_sync=False), node("b")], {**POLICY, "autoUpgrade": False})
    assert steps == [u.Step("a", "")]


def test_skip_label() -> None:
    assert u.plan([node("a", u.REQUIRED, driver_in_sync=False, skip=True)], POLICY) == []


@pytest.mark.parametrize(("value", "total", "expected"), [("25%", 3, 1), ("25%", 500, 125), (2, 10, 2), (None, 7, 7)])
def test_max_unavailable(value: Any, total: int, expected: int) -> None:
    assert u.max_unavailable({} if value is None else {"maxUnavailable": value}, total) == expected


def test_the_restart_only_path_cordons_and_restarts_the_driver_with_no_eviction() -> None:
    """GPU Operator v26.7 (k8s-operator-libs upgrade_inplace.go nextStateForUpgradeRequiredNode): a node
    whose driver config digest is unchanged is cordoned and goes straight to pod-restart-required,
    skipping wait-for-jobs, pod deletion and drain; an upgrade asked for takes the full flow."""
    steps = u.plan([node("a", u.REQUIRED, driver_in_sync=False, restart_only=True, gpu_pods=2, undeletable=1)], POLICY)
    assert steps == [u.Step("a", action="cordon"), u.Step("a", u.POD_RESTART)]
    requested = node("a", u.REQUIRED, driver_in_sync=False, restart_only=True, requested=True)
    assert states(u.plan([requested], POLICY)) == {"a": u.CORDON}
    assert states(u.plan([node("a", u.REQUIRED, driver_in_sync=False)], POLICY)) == {"a": u.CORDON}
    # the slot is taken as in the full flow: one node at a time
    both = [node(n, u.REQUIRED, driver_in_sync=False, restart_only=True) for n in "ab"]
    assert states(u.plan(both, POLICY)) == {"a": u.POD_RESTART}


def test_the_restart_only_predicate_compares_the_driver_config_digests() -> None:
    """internal/predicates/restart_only.go DriverPodRestartOnly, DriverConfigDigestFromPodSpec."""
    def spec(digest: str) -> dict[str, Any]:
        env = [{"name": u.DIGEST_ENV, "value": digest}] if digest else []
        return {"initContainers": [{"name": "k8s-driver-manager", "env": env}], "containers": [{"name": "nvidia-driver-ctr"}]}

    assert u.restart_only(spec("abc"), spec("abc"))
    assert not u.restart_only(spec("abc"), spec("def"))
    assert not u.restart_only(spec(""), spec("abc")) and not u.restart_only(spec(""), spec("")), "missing: the full flow"


def test_the_driver_digest_ignores_what_daemonsets_adds_and_follows_what_installs_the_driver() -> None:
    """The operator sets DRIVER_CONFIG_DIGEST from v26.3.0 (controllers/object_controls.go); tolerations,
    priority class and labels are applied to the template outside the pod spec it hashes."""
    spec = cp.default_instance("v26.7")["spec"]
    digest = u.config_digest(operand_specs.driver(spec)[1])
    assert digest
    spec["daemonsets"]["tolerations"] = [{"key": "gpushare.io/pool", "operator": "Exists", "effect": "NoSchedule"}]
    spec["daemonsets"]["priorityClassName"] = "other"
    assert u.config_digest(operand_specs.driver(spec)[1]) == digest
    spec["driver"]["version"] = "580.126.20"
    assert u.config_digest(operand_specs.driver(spec)[1]) != digest
    assert u.config_digest(operand_specs.driver(cp.default_instance("v25.10")["spec"])[1]) == "", "none before v26.3"
