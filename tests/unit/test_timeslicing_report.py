"""The enable runbook's end-of-run report (gpushare.timeslicing.report), the node table both
time-slicing reports show (gpushare.timeslicing_common.report) and the pure parts of the checks the runbooks
wait for (gpushare.runbook.checks): what an operator reads at the end of a run."""

from __future__ import annotations

from gpushare.model.node import Node, Pool
from gpushare.plugins.filters import gpushare_problem_nodes
from gpushare.runbook.checks import bystander_problems
from gpushare.runbook.state import ClusterState
from gpushare.timeslicing import report
from gpushare.timeslicing.plan import plan as enable_plan
from gpushare.timeslicing_common.report import node_rows
from tests.unit.cluster_objects import NOW, POOL_TAINT, daemonset, enabled_read, node, read, settings, shared_node

POOL = {"label_key": "gpu-mode", "label_value": "shared", "taint": {"key": "nvidia.com/gpu", "value": "shared"}}


def test_node_rows() -> None:
    rows = node_rows([shared_node("gpu-node", 1, unschedulable=True), node("gpu-node-2", 8)],
                     ["gpu-node-2", "gpu-node", "gone"], Pool.of(POOL))
    assert rows == [
        ["gone", "?", "?", "?", "?", "?", "?", "?"],
        ["gpu-node", 1, 2, 2, 0, "shared", "nvidia.com/gpu=shared:NoSchedule", "no (cordoned)"],
        ["gpu-node-2", 8, 1, 0, 8, "-", "-", "yes"],
    ]


def first_trial() -> dict:
    return enable_plan(ClusterState.of(read()), settings(), ["gpu-node"], {}, NOW).as_dict()


def test_the_enable_report() -> None:
    plan = first_trial()
    rolling = [daemonset("nvidia-device-plugin-daemonset", updated=1, desired=3)]
    lines = report.enable_report([shared_node("gpu-node", 1)], rolling, plan, check_mode=False, hosts=["gpu-node"])
    assert lines[0] == "Done: time-slicing with 2 replicas per GPU on gpu-node."
    assert any(line.startswith("gpu-node ") and "nvidia.com/gpu=shared:NoSchedule" in line for line in lines)
    assert ("The operator's roll of nvidia-device-plugin-daemonset: 1 of 3 GPU nodes done (it goes on by itself, one "
            "node at a time).") in lines
    assert f"Run record and ClusterPolicy backup: ConfigMap {plan['record']}." in lines
    assert lines[-1].startswith("Next: ansible-playbook playbooks/verify-sharing.yml -l gpu-node")


def test_the_enable_report_in_check_mode_claims_nothing() -> None:
    lines = report.enable_report([node("gpu-node", 1)], [], first_trial(), check_mode=True, hosts=["gpu-node"])
    assert lines[0] == "CHECK MODE: nothing was changed; the nodes as they are now:"
    assert not any(line.startswith(("Run record", "Next:", "Done")) for line in lines)


def test_the_enable_report_with_nothing_to_change_shows_the_nodes_only() -> None:
    """The plan already said there is nothing to change: the report does not say it again."""
    plan = enable_plan(ClusterState.of(enabled_read()), settings(), ["gpu-node"], {}, NOW).as_dict()
    assert plan["lines"][0].startswith("Nothing to change: time-slicing is already enabled as asked")
    lines = report.enable_report(enabled_read()["nodes"], [], plan, check_mode=False, hosts=["gpu-node"])
    assert not any(line.startswith(("Nothing to change", "Run record", "Done")) for line in lines)
    assert lines[0].startswith("node ") and "gpu-node" in lines[2]


def test_bystanders_are_compared_on_what_sharing_changes() -> None:
    pool = Pool.of(POOL)
    before = {"gpu-node-2": Node(node("gpu-node-2", 8)).fingerprint(pool),
              "gpu-node-mig": Node(node("gpu-node-mig", 4)).fingerprint(pool),
              "gpu-node-3": Node(node("gpu-node-3", 2)).fingerprint(pool)}
    rolling = node("gpu-node-mig", 4)
    rolling["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    now = {"gpu-node-2": Node(node("gpu-node-2", 8, taints=[POOL_TAINT])), "gpu-node-mig": Node(rolling),
           "gpu-node-3": None, "gpu-node": Node(node("gpu-node", 1, taints=[POOL_TAINT]))}
    assert bystander_problems(now, before, pool, compare_allocatable=False) == [
        "gpu-node-2 (not targeted): taints [] -> ['nvidia.com/gpu=shared:NoSchedule']",
        "gpu-node-3 (not targeted): not a GPU node any more"]
    assert "gpu-node-mig (not targeted): allocatable nvidia.com/gpu 4 -> 0" in bystander_problems(
        now, before, pool, compare_allocatable=True)
    # what a watch did not show changed is as it was; a node that is no bystander (the target) is not compared
    assert bystander_problems({"gpu-node": now["gpu-node"]}, before, pool, compare_allocatable=True) == []


def test_the_nodes_a_checks_problems_name() -> None:
    problems = ["gpu-node: allocatable nvidia.com/gpu.shared is 0, expected 2", "gpu-node-2 (not targeted): cordoned",
                "gpu-node-20: no pod"]
    assert gpushare_problem_nodes(problems, ["gpu-node", "gpu-node-2", "gpu-node-mig"]) == ["gpu-node"]
