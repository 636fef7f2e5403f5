"""What the quiet stdout callback prints of a failure and of a debug message
(gpushare.plugins.output): the message once, first line first, and "Nothing was changed." only
when it is true and not said already."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushare.plugins.output import failure_text, message_lines


@pytest.mark.parametrize(("msg", "lines"), [
    (["Plan: ...", "- gpu-node: label"], ["Plan: ...", "- gpu-node: label"]),
    (("a", 1), ["a", "1"]),
    ("one\ntwo", ["one", "two"]),
    ("", [""]),
    (None, ["None"]),
])
def test_message_lines(msg: Any, lines: list[str]) -> None:
    assert message_lines(msg) == lines


def test_a_refusal_that_says_nothing_was_changed_says_it_once() -> None:
    result = {"failed": True,
              "msg": "ConfigMap x has a key. Nothing was changed.\nAnother problem. Nothing was changed."}
    assert failure_text(result, changed_before=False) == ["ConfigMap x has a key. Nothing was changed.",
                                                          "Another problem. Nothing was changed."]


def test_a_failure_before_any_write_ends_with_nothing_was_changed() -> None:
    assert failure_text({"msg": "After 120 s: gpu-node: no pod"}, changed_before=False) == [
        "After 120 s: gpu-node: no pod", "Nothing was changed."]


def test_a_failure_after_a_write_does_not_claim_nothing_was_changed() -> None:
    assert failure_text({"msg": "After 120 s: gpu-node: no pod"}, changed_before=True) == [
        "After 120 s: gpu-node: no pod"]


def test_argument_spec_errors_become_one_bad_input_line() -> None:
    result = {"msg": "Validation of arguments failed:\nargument 'timeslicing_replicas' is of type str ...",
              "argument_errors": ["argument 'timeslicing_replicas' is of type <class 'str'> and we were unable to "
                                  "convert to int", "  value of timeslicing_scope must be one of: node, cluster  "]}
    assert failure_text(result, changed_before=False) == [
        "Bad input: argument 'timeslicing_replicas' is of type <class 'str'> and we were unable to convert to int; "
        "value of timeslicing_scope must be one of: node, cluster", "Nothing was changed."]


def test_argument_spec_errors_without_their_list_use_the_message() -> None:
    result = {"msg": "Validation of arguments failed:\n  first problem\n\n  second problem"}
    assert failure_text(result, changed_before=True) == ["Bad input: first problem; second problem"]


def test_a_failure_without_a_message() -> None:
    assert failure_text({"message": "module failure"}, changed_before=True) == ["module failure"]
    assert failure_text({}, changed_before=True) == ["failed without a message"]


def run_with_the_callback(tmp_path: Path, *args: str, hosts: str = "localhost",
                          inventory: str = "localhost,") -> subprocess.CompletedProcess:
    """A local playbook (one debug, one change, one skip) run with the collection's stdout callback, by its
    full name (the collection is found in the venv, `make setup`)."""
    (tmp_path / "ansible.cfg").write_text(f"[defaults]\nstdout_callback = gpushare.gpu_sharing.gpushare\n"
                                          f"interpreter_python = {sys.executable}\n")
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": hosts, "gather_facts": False, "tasks": [
        {"name": "Show the plan", "ansible.builtin.debug": {"msg": ["Plan: line one", "line two"]}},
        {"name": "Write something", "ansible.builtin.command": "true", "changed_when": True},
        {"name": "Skip something", "ansible.builtin.debug": {"msg": "never"}, "when": False}]}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")}
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory, "-c", "local",
                           "play.yml", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_by_default_a_run_prints_the_plan_the_writes_and_a_result(tmp_path: Path) -> None:
    run = run_with_the_callback(tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["Plan: line one", "line two", "changed: Write something",
                                       "Result: ok, 1 change(s)."]


def test_with_v_a_run_prints_ansibles_usual_output(tmp_path: Path) -> None:
    run = run_with_the_callback(tmp_path, "-v")
    assert run.returncode == 0, run.stderr
    assert "Callback dispatch" not in run.stdout + run.stderr
    assert "TASK [Write something]" in run.stdout and "changed: [localhost]" in run.stdout
    assert "skipping: [localhost]" in run.stdout
    assert "PLAY RECAP" in run.stdout


def test_a_run_whose_plays_match_no_host_fails(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {}}}}}))
    run = run_with_the_callback(tmp_path, hosts="gpu_nodes", inventory=str(tmp_path / "hosts.yml"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "No host to act on: the inventory has no host in gpu_nodes. Check the inventory (ansible-inventory --graph) "
        "and -l. Nothing was changed.", "Result: FAILED (no host matched)."]


def test_a_run_where_one_play_matches_no_host_is_judged_by_the_others(tmp_path: Path) -> None:
    run_with_the_callback(tmp_path)  # writes the ansible.cfg
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {}},
                                                                "children": {"gpu_nodes": {"hosts": {}}}}}))
    (tmp_path / "two.yml").write_text(yaml.safe_dump([
        {"hosts": "gpu_nodes", "gather_facts": False, "tasks": [{"ansible.builtin.debug": {"msg": "never"}}]},
        {"hosts": "localhost", "gather_facts": False, "tasks": [{"ansible.builtin.debug": {"msg": "ran"}}]}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")}
    both = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           "-c", "local", "two.yml"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert both.returncode == 0, both.stdout + both.stderr
    assert both.stdout.splitlines() == ["ran", "Result: ok, nothing changed."]


def test_a_diff_prints_its_short_form_and_with_v_the_whole_objects(tmp_path: Path) -> None:
    """An entry with a `summary` (the project's actions) prints it instead of the whole objects; one
    without (any other module) prints Ansible's diff; -v prints every entry whole."""
    run_with_the_callback(tmp_path)  # writes the ansible.cfg
    (tmp_path / "action_plugins").mkdir()
    (tmp_path / "action_plugins" / "fake_write.py").write_text(
        "from ansible.plugins.action import ActionBase\n\n\n"
        "class ActionModule(ActionBase):\n"
        "    def run(self, tmp=None, task_vars=None):\n"
        "        return {'changed': True, 'diff': [\n"
        "            {'before_header': 'ConfigMap ns/record', 'after_header': 'ConfigMap ns/record', 'before': '',\n"
        "             'after': 'backup line\\n' * 200, 'summary': ['+ ConfigMap ns/record (run record, 2 KiB)']},\n"
        "            {'before_header': 'file', 'after_header': 'file', 'before': 'old\\n', 'after': 'new\\n'}]}\n")
    (tmp_path / "diff.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Write the record", "fake_write": {}}]}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}

    def run(*args: str) -> str:
        done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                               "diff.yml", "--check", "--diff", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    quiet = run().splitlines()
    assert quiet[0] == "+ ConfigMap ns/record (run record, 2 KiB)"
    assert "-old" in quiet and "+new" in quiet
    assert "+backup line" not in quiet
    verbose = run("-v")
    assert verbose.count("+backup line\n") == 200
    assert "(run record, 2 KiB)" not in verbose
