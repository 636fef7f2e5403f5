"""Recorded command lines: `-e` values other than the runbooks' documented inputs are redacted."""

from __future__ import annotations

import pytest

from gpushare.redact import REDACTED, command_line, documented_inputs, extra_vars, runbook_inputs
from gpushare_testbed.binaries import REPO_ROOT

KNOWN = frozenset({"timeslicing_replicas", "gpushare_kubeconfig"})
R = REDACTED
SECRET_PAIR = f"'x_token={R}'"


@pytest.mark.parametrize(("argv", "recorded"), [
    (["ansible-playbook", "p.yml", "-e", "timeslicing_replicas=4 x_token=s3cret"],
     ["ansible-playbook", "p.yml", "-e", f"timeslicing_replicas=4 {SECRET_PAIR}"]),
    (["ansible-playbook", "-ex_token=s3cret", "p.yml"], ["ansible-playbook", f"-e{SECRET_PAIR}", "p.yml"]),
    (["ansible-playbook", "--extra-vars=x_token=s3cret", "p.yml"], ["ansible-playbook", f"--extra-vars={SECRET_PAIR}", "p.yml"]),
    (["ansible-playbook", "--extra-vars", '{"x_token": "s3cret", "timeslicing_replicas": 4}', "p.yml"],
     ["ansible-playbook", "--extra-vars", f'{{"x_token": "{R}", "timeslicing_replicas": 4}}', "p.yml"]),
    (["ansible-playbook", "-e", "@vars.yml", "p.yml"], ["ansible-playbook", "-e", "@vars.yml", "p.yml"]),
    (["ansible-playbook", "-e", "not a pair", "p.yml"], ["ansible-playbook", "-e", R, "p.yml"]),
    (["ansible-playbook", "-e", "x='unbalanced", "p.yml"], ["ansible-playbook", "-e", R, "p.yml"]),
    (["ansible-playbook", "-e", "[1, 2]", "p.yml"], ["ansible-playbook", "-e", R, "p.yml"]),
    (["ansible-playbook", "-l", "gpu-node", "--check", "p.yml"], ["ansible-playbook", "-l", "gpu-node", "--check", "p.yml"]),
])
def test_undocumented_values_are_redacted(argv: list[str], recorded: list[str]) -> None:
    assert command_line(argv, KNOWN) == recorded
    assert not any("s3cret" in a for a in command_line(argv, KNOWN))


@pytest.mark.parametrize(("argv", "recorded"), [
    # Any unambiguous abbreviation of --extra-vars, with its value joined by = or as the next word.
    (["ansible-playbook", "--extra=x_token=s3cret", "p.yml"], ["ansible-playbook", f"--extra={SECRET_PAIR}", "p.yml"]),
    (["ansible-playbook", "--ex=x_token=s3cret", "p.yml"], ["ansible-playbook", f"--ex={SECRET_PAIR}", "p.yml"]),
    (["ansible-playbook", "--extra", "x_token=s3cret", "p.yml"], ["ansible-playbook", "--extra", SECRET_PAIR, "p.yml"]),
    # -e last among combined short flags, its value the next word or joined to it.
    (["ansible-playbook", "-ve", "x_token=s3cret", "p.yml"], ["ansible-playbook", "-ve", SECRET_PAIR, "p.yml"]),
    (["ansible-playbook", "-vvve", "x_token=s3cret", "p.yml"], ["ansible-playbook", "-vvve", SECRET_PAIR, "p.yml"]),
    (["ansible-playbook", "-Ce", "x_token=s3cret", "p.yml"], ["ansible-playbook", "-Ce", SECRET_PAIR, "p.yml"]),
    (["ansible-playbook", "-vvex_token=s3cret", "p.yml"], ["ansible-playbook", f"-vve{SECRET_PAIR}", "p.yml"]),
    (["ansible-playbook", "-e=x_token=s3cret", "p.yml"], ["ansible-playbook", f"-e={SECRET_PAIR}", "p.yml"]),
    # A file of variables is named, not read: its path stays in every form.
    (["ansible-playbook", "--extra=@vars.yml", "-ve", "@more.yml", "--ex", "x_token=s3cret", "p.yml"],
     ["ansible-playbook", "--extra=@vars.yml", "-ve", "@more.yml", "--ex", SECRET_PAIR, "p.yml"]),
])
def test_every_form_ansible_accepts_is_redacted(argv: list[str], recorded: list[str]) -> None:
    assert command_line(argv, KNOWN) == recorded


def test_values_of_other_options_are_kept_as_typed() -> None:
    argv = ["ansible-playbook", "--limit=-ehost", "--start-at-task=-e x", "--", "-ex=1.yml"]
    assert command_line(argv, KNOWN) == argv


@pytest.mark.parametrize(("argv", "recorded"), [
    (["ansible-playbook", "--bogus", "--extra=x_token=s3cret", "-e", "timeslicing_replicas=4", "p.yml"],
     ["ansible-playbook", R, f"'--extra={R}'", "-e", "timeslicing_replicas=4", R]),
    (["ansible-playbook", "-vex_token=s3cret"], ["ansible-playbook", f"'-vex_token={R}'"]),
])
def test_a_command_line_ansible_refuses_keeps_only_option_names_and_documented_inputs(argv: list[str], recorded: list[str]) -> None:
    assert command_line(argv, KNOWN) == recorded


def test_a_documented_value_with_spaces_stays_quoted() -> None:
    assert extra_vars("gpushare_kubeconfig='/a b/k'", KNOWN) == "'gpushare_kubeconfig=/a b/k'"


def test_the_documented_inputs_are_the_roles_argument_specs() -> None:
    names = documented_inputs([REPO_ROOT / "roles"])
    assert {"timeslicing_replicas", "share_check_namespace", "gpushare_kubeconfig", "gpushare_node_name"} <= names
    assert "x_token" not in names and "ansible_password" not in names
    assert runbook_inputs() >= names
