"""How a MIG run ends (gpushare.mig.report): the before/after table per node, and the change record
of the run for the change ticket."""

from __future__ import annotations

from tests.unit.test_mig_plan import WHO, enable, gpu_node

from gpushare.mig.report import change_record, report


def _after() -> list[dict]:
    return [gpu_node(config="all-1g.5gb")]


def test_the_report_shows_each_node_before_and_after() -> None:
    lines = report(_after(), enable(), "enable-mig", False, "reports/enable-mig-x.md")
    assert lines[0] == "Done (enable-mig): gpu-node-mig runs MIG config all-1g.5gb, single strategy."
    table = "\n".join(lines)
    assert "nvidia.com/mig.config        all-disabled           all-1g.5gb" in table
    assert "allocatable nvidia.com/gpu   4                      28" in table
    assert "Change record: reports/enable-mig-x.md" in table
    assert lines[-1] == "Roll back with: ansible-playbook playbooks/rollback-mig.yml -l gpu-node-mig"


def test_schedulable_is_the_last_row() -> None:
    rows = [line.split()[0] for line in report(_after(), enable(), "enable-mig", False, "x")[1:] if line.strip()]
    assert rows[rows.index("schedulable") - 1] == "allocatable"


def test_in_check_mode_the_report_says_nothing_changed() -> None:
    lines = report([gpu_node()], enable(), "enable-mig", True, "x")
    assert lines[0] == "CHECK MODE: nothing was changed; the nodes as they are now:"
    assert not any("Change record" in line for line in lines)


def test_a_run_with_nothing_to_do_reports_its_plan_line() -> None:
    plan = {"writes": False, "lines": ["Nothing to do: gpu-node-mig runs MIG config all-1g.5gb. Nothing was changed."]}
    assert report([], plan, "enable-mig", False, "x") == plan["lines"]


def test_the_change_record_has_the_command_the_outcome_the_nodes_and_the_plan() -> None:
    plan = enable()
    text = change_record(_after(), plan, "enable-mig", {**WHO, "operator": "alice as admin"}, "2026-12-01T09:00:00Z",
                         "2026-12-01T09:00:20Z", "")
    assert text.startswith("# Change record: enable-mig on gpu-node-mig")
    assert f"| Runbook | `{WHO['command']}` |" in text and "| Operator | alice as admin |" in text
    assert "| Outcome | **done**: gpu-node-mig runs all-1g.5gb |" in text
    assert "| nvidia.com/mig.config | all-disabled | all-1g.5gb |" in text
    assert plan["lines"][0] in text


def test_a_failed_run_is_recorded_as_failed_with_what_it_said() -> None:
    text = change_record([gpu_node(unschedulable=True)], enable(), "enable-mig", WHO, "s", "f", "stopped in | drain")
    assert "| Outcome | **failed**: stopped in \\| drain |" in text
    assert "| schedulable | yes | no (cordoned) |" in text
