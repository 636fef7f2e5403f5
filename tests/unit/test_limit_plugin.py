"""The vars plugin that names the inventory's GPU nodes when `-l` matches no host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpushare.plugins.limit import refusal, unmatched_names
from tests.support.cluster import REPO

NAMES = {"all", "gpu_nodes", "gpu-a", "gpu-b", "cpu-1"}


@pytest.mark.parametrize(("limit", "missing"), [
    ("gpu-c", ["gpu-c"]),
    ("gpu-c,gpu-d", ["gpu-c", "gpu-d"]),
    ("gpu-c:!gpu-d", ["gpu-c", "gpu-d"]),
    ("gpu-a", []),
    ("gpu_nodes", []),
    ("gpu-a,gpu-c", []),  # Ansible warns about gpu-c and runs gpu-a
    ("gpu-*", []),
    ("~gpu-[cd]", []),
    ("gpu_nodes[0:9]", []),
    ("@retry.txt", []),
])
def test_only_plain_names_that_all_miss_are_reported(limit: str, missing: list[str]) -> None:
    assert unmatched_names(limit, NAMES) == missing


def test_the_refusal_lists_the_gpu_nodes_and_says_nothing_changed() -> None:
    assert refusal(["gpu-c"], ["gpu-a", "gpu-b"]) == (
        "-l gpu-c: no host or group of the inventory has that name. The inventory's GPU nodes (gpu_nodes): "
        "gpu-a, gpu-b. Nothing was changed.")


def test_a_large_pool_is_listed_in_part_with_its_size() -> None:
    text = refusal(["x"], [f"n{i:03}" for i in range(500)])
    assert "n019, ... (500 in all)." in text and "n020" not in text


def test_an_inventory_without_the_group_says_where_nodes_go() -> None:
    assert "has no group gpu_nodes: add the GPU nodes there" in refusal(["x"], [])


def run_playbook(tmp_path: Path, limit: str) -> subprocess.CompletedProcess:
    """A one-task local playbook over a two-node inventory with the repository's ansible.cfg."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"ansible_connection": "local"}, "children": {
        "gpu_nodes": {"hosts": {"gpu-b": None, "gpu-a": None}}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Nothing", "ansible.builtin.debug": {"msg": "ran"}}]}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           str(tmp_path / "play.yml"), "-l", limit], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_ansible_playbook_with_an_unmatched_limit_names_the_gpu_nodes_first(tmp_path: Path) -> None:
    run = run_playbook(tmp_path, "gpu-c")
    assert run.returncode != 0
    lines = run.stderr.splitlines()
    assert lines[0] == ("-l gpu-c: no host or group of the inventory has that name. The inventory's GPU nodes "
                        "(gpu_nodes): gpu-a, gpu-b. Nothing was changed."), run.stderr
    assert "Could not match supplied host pattern" in run.stderr


def test_a_matching_limit_runs_and_prints_no_refusal(tmp_path: Path) -> None:
    run = run_playbook(tmp_path, "gpu-a")
    assert run.returncode == 0, run.stderr
    assert "no host or group" not in run.stderr + run.stdout
