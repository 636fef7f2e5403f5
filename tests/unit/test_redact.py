"""Recorded command lines: `-e` values other than the runbooks' documented inputs are redacted."""

from __future__ import annotations

import pytest

from gpushare.redact import REDACTED, command_line, documented_inputs, extra_vars, runbook_inputs
from gpushare.binaries import REPO_ROOT

KNOWN = frozenset({"timeslicing_replicas", "gpushare_kubeconfig"})


@pytest.mark.parametrize(("argv", "recorded"), [
    (["ansible-playbook", "p.yml", "-e", "timeslicing_replicas=4 x_token=s3cret"],
     ["ansible-playbook", "p.yml", "-e", f"timeslicing_replicas=4 'x_token={REDACTED}'"]),
    (["ansible-playbook", "-ex_token=s3cret", "p.yml"], ["ansible-playbook", f"-e'x_token={REDACTED}'", "p.yml"]),
    (["ansible-playbook", "--extra-vars=x_token=s3cret"], ["ansible-playbook", f"--extra-vars='x_token={REDACTED}'"]),
    (["ansible-playbook", "--extra-vars", '{"x_token": "s3cret", "timeslicing_replicas": 4}'],
     ["ansible-playbook", "--extra-vars", f'{{"x_token": "{REDACTED}", "timeslicing_replicas": 4}}']),
    (["ansible-playbook", "-e", "@vars.yml"], ["ansible-playbook", "-e", "@vars.yml"]),
    (["ansible-playbook", "-e", "not a pair"], ["ansible-playbook", "-e", REDACTED]),
    (["ansible-playbook", "-e", "x='unbalanced"], ["ansible-playbook", "-e", REDACTED]),
    (["ansible-playbook", "-e", "[1, 2]"], ["ansible-playbook", "-e", REDACTED]),
    (["ansible-playbook", "-l", "gpu-node", "--check"], ["ansible-playbook", "-l", "gpu-node", "--check"]),
])
def test_undocumented_values_are_redacted(argv: list[str], recorded: list[str]) -> None:
    assert command_line(argv, KNOWN) == recorded
    assert not any("s3cret" in a for a in command_line(argv, KNOWN))


def test_a_documented_value_with_spaces_stays_quoted() -> None:
    assert extra_vars("gpushare_kubeconfig='/a b/k'", KNOWN) == "'gpushare_kubeconfig=/a b/k'"


def test_the_documented_inputs_are_the_roles_argument_specs() -> None:
    names = documented_inputs([REPO_ROOT / "roles"])
    assert {"timeslicing_replicas", "share_check_namespace", "gpushare_kubeconfig", "gpushare_node_name"} <= names
    assert "x_token" not in names and "ansible_password" not in names
    assert runbook_inputs() >= names
