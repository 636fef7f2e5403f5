"""The README's commands, run as written on the embedded cluster, as a new user would type them.

The rule, visible in README.md: every ```sh block is preceded by `<!-- readme-test: run -->` or
`<!-- readme-test: skip: <why> -->` (a block needing a real cluster, a real Prometheus or a
placeholder is a skip, with its reason). In a `run` block, a line starting with `source ` or
`export ` is shell set-up, kept for every later command; every other line (`\\` continuations
joined) is a command. Each command runs in `bash -c`, in the repository root, after the set-up so
far, with an environment of only the system PATH, HOME and GPUSHARE_STATE_DIR (the test's cluster).
The blocks run in the README's order, from where `make demo` leaves the cluster (time-slicing on
gpu-node). Each command must exit 0 and act: a preview sends no write, an enable or rollback changes
the nodes it names, a verify writes its change record, the rollout completes, the queues exist.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from gpushare_testbed.controlplane import StateDir
from gpushare.kueue.kinds import GROUP, VERSION
from gpushare_testbed.processes import alive, stop
from tests.support.ansible import run_playbook
from tests.support.cluster import REPO, Cluster

README = REPO / "README.md"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MARK = re.compile(r"^<!-- readme-test: (run|skip: .+) -->$")
QUEUES = yaml.safe_load((REPO / "inventories/sim/group_vars/all/queue_backfill.yml").read_text())
ROLLOUT_RECORD = "gpushare-rollout-timeslicing"


def sh_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(mark, lines) of every ```sh block, in order; mark is '' when the line before is no mark."""
    lines, blocks = text.splitlines(), []
    for i, line in enumerate(lines):
        if line.strip() == "```sh":
            end = lines.index("```", i + 1)
            mark = MARK.match(lines[i - 1].strip()) if i else None
            blocks.append((mark.group(1) if mark else "", lines[i + 1:end]))
    return blocks


def commands(block: list[str]) -> list[str]:
    """The block's lines with `\\` continuations joined."""
    joined, current = [], ""
    for line in block:
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip():
            joined.append(current.strip())
        current = ""
    return joined


def runnable() -> list[tuple[list[str], str]]:
    """(the set-up so far, command) for every command of the `run` blocks, in order."""
    setup, out = [], []
    for mark, block in sh_blocks(README.read_text()):
        if mark != "run":
            continue
        for command in commands(block):
            if command.startswith(("source ", "export ")):
                setup.append(command)
            elif not command.startswith("#"):
                out.append((list(setup), command))
    return out


def test_every_sh_block_says_whether_it_runs() -> None:
    unmarked = [block[:1] for mark, block in sh_blocks(README.read_text()) if not mark]
    assert not unmarked, f"```sh blocks without a readme-test mark (run, or skip: why): {unmarked}"


def test_make_demo_prints_the_readme_next_commands() -> None:
    """`make demo` ends with the README's "Run the runbooks by hand" block, line for line."""
    makefile = (REPO / "Makefile").read_text()
    demo = makefile[makefile.index("\ndemo:"):]
    echoed = [shlex.split(line.strip())[1:] for line in demo[:demo.index("\n\n")].splitlines()
              if line.strip().startswith("@echo ")]
    after = next(i for i, words in enumerate(echoed) if words and "Next, in this shell" in words[0]) + 1
    printed = [words[0].strip().replace("$$", "$") for words in echoed[after:]]
    section = README.read_text().split("## Run the runbooks by hand", 1)[1]
    first_block = next(block for mark, block in sh_blocks(section) if mark == "run")
    assert printed == [line.strip() for line in first_block]
    assert printed[0].startswith("source .venv/bin/activate")


# Inputs the runbook roles pass to gpu_operator's entry points, never an operator.
ROLE_TO_ROLE = {"gpu_operator_lock_plan", "gpu_operator_uncordon_changes"}


def spec_options() -> dict[str, object]:
    """Every documented input of every role (argument specs), with its default."""
    found: dict[str, object] = {}
    for spec in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            for name, option in (entry.get("options") or {}).items():
                if not name.startswith("_") and name not in ROLE_TO_ROLE:
                    found[name] = option.get("default")
    return found


def test_the_variable_tables_name_the_roles_inputs() -> None:
    """Every role input is in a README table (MIG's in docs/mig.md), and every variable a table
    names is an input (or a playbook's own), with the spec's default where the table gives a value."""
    text = README.read_text() + (REPO / "docs/mig.md").read_text()
    specs, playbook_vars = spec_options(), {"timeslicing_confirm_all_nodes"}
    rows = [line.split("|")[1:3] for line in text.splitlines() if line.startswith("| `")]
    named: dict[str, str] = {}
    for names, defaults in rows:
        variables = re.findall(r"`([a-z_]+)`", names)
        values = [v.strip() for v in defaults.split(" / ")]
        for i, name in enumerate(variables):
            named[name] = values[i] if len(values) == len(variables) else ""
    prefixes = tuple(f"{role.name}_" for role in (REPO / "roles").iterdir())
    unknown = sorted(n for n in named if n.startswith(prefixes) and n not in specs and n not in playbook_vars)
    assert not unknown, f"README tables name variables no role has: {unknown}"
    missing = sorted(set(specs) - set(named))
    assert not missing, f"role inputs missing from the README's tables: {missing}"
    wrong = []
    for name, shown in named.items():
        default = specs.get(name)
        value = shown.strip("`")
        if isinstance(default, (bool, int)) and not isinstance(default, str):
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError:
                parsed = value
            if isinstance(parsed, (bool, int)) and parsed != default:
                wrong.append(f"{name}: README {shown}, spec {default}")
    assert not wrong, wrong


# ---- on the embedded cluster ----------------------------------------------------------------------
def shell(cluster: Cluster, setup: list[str], command: str) -> subprocess.CompletedProcess:
    env = {"PATH": SYSTEM_PATH, "HOME": str(Path.home()), "GPUSHARE_STATE_DIR": str(cluster.state_dir)}
    script = "\n".join(["set -e", *setup, command])
    return subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
                          check=False)


def options(command: str) -> tuple[str | None, dict[str, str]]:
    """The -l limit and the key=value -e options of an ansible-playbook command line."""
    words, limit, extra = shlex.split(command, comments=True), None, {}
    for flag, value in zip(words, words[1:]):
        if flag == "-l":
            limit = value
        elif flag == "-e" and "=" in value and not value.startswith(("{", "@")):
            key, _, val = value.partition("=")
            extra[key] = val
    return limit, extra


def allocatable(cluster: Cluster, node: str) -> dict[str, int]:
    return {k: int(v) for k, v in (cluster.node(node).status.allocatable or {}).items() if k.startswith("nvidia.com/")}


def gpu_count(cluster: Cluster, node: str) -> int:
    return int((cluster.node(node).metadata.labels or {})["nvidia.com/gpu.count"])


def targets(cluster: Cluster, limit: str | None) -> list[str]:
    return cluster.gpu_nodes() if limit in (None, "gpu_nodes") else limit.split(",")


def assert_acted(cluster: Cluster, command: str, output: str, mark: int) -> None:
    """What the command must have done, judged from the cluster (and the audit log)."""
    limit, extra = options(command)
    if "--check" in command:
        writes = [f"{w['verb']} {w['requestURI']}" for w in cluster.audit_writes(mark)]
        assert not writes, f"the preview `{command}` wrote: {writes}"
    elif "playbooks/enable-timeslicing.yml" in command:
        replicas = int(extra.get("timeslicing_replicas", 2))
        for node in targets(cluster, limit):
            now = allocatable(cluster, node)
            assert now.get("nvidia.com/gpu.shared") == gpu_count(cluster, node) * replicas, (node, now)
            assert now.get("nvidia.com/gpu") == 0, (node, now)
    elif "playbooks/rollback-timeslicing.yml" in command:
        for node in targets(cluster, limit):
            now = allocatable(cluster, node)
            whole = not now.get("nvidia.com/gpu.shared") and now.get("nvidia.com/gpu") == gpu_count(cluster, node)
            assert whole, (node, now)
    elif "playbooks/enable-mig.yml" in command or "playbooks/rollback-mig.yml" in command:
        wanted = extra["mig_config"] if "enable-mig" in command else "all-disabled"
        for node in targets(cluster, limit):
            labels = cluster.node(node).metadata.labels or {}
            state = labels.get("nvidia.com/mig.config"), labels.get("nvidia.com/mig.config.state")
            assert state == (wanted, "success"), (node, state)
    elif "playbooks/verify-sharing.yml" in command:
        record = re.search(r"^Change record: (\S+\.md)$", output, re.M)
        assert record and Path(record.group(1)).is_file(), f"no change record named in:\n{output[-2000:]}"
    elif "playbooks/rollout-timeslicing.yml" in command:
        cm = cluster.core.read_namespaced_config_map(ROLLOUT_RECORD, cluster.records_namespace)
        assert json.loads(cm.data["rollout.json"])["outcome"] == "complete"
    elif "playbooks/queue-backfill.yml" in command:
        queues = {q["metadata"]["name"] for q in cluster.custom.list_cluster_custom_object(
            GROUP, VERSION, "clusterqueues")["items"]}
        assert {t["name"] for t in QUEUES["queue_backfill_teams"]} <= queues


def remove_queues(cluster: Cluster, namespaces_before: set[str]) -> None:
    """The sample description's Kueue objects, and the team namespaces the run created."""
    for team in QUEUES["queue_backfill_teams"]:
        if team["namespace"] not in namespaces_before:
            try:
                cluster.core.delete_namespace(team["namespace"])
            except ApiException as err:
                if err.status != 404:
                    raise
    names = {"clusterqueues": [t["name"] for t in QUEUES["queue_backfill_teams"]],
             "cohorts": [QUEUES["queue_backfill_cohort"]],
             "resourceflavors": [f["name"] for f in QUEUES["queue_backfill_flavors"]],
             "workloadpriorityclasses": [p["name"] for p in QUEUES["queue_backfill_priority_classes"]]}
    for plural, items in names.items():
        for name in items:
            try:
                cluster.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
            except ApiException as err:
                if err.status != 404:
                    raise


@pytest.fixture
def embedded(clean_cluster: Cluster) -> Iterator[Cluster]:
    if not clean_cluster.embedded:
        pytest.skip("the README's commands run on the embedded cluster (its default inventory); "
                    "this run targets another cluster")
    yield clean_cluster


def test_readme_commands_run_as_written(embedded: Cluster, tmp_path: Path) -> None:
    cluster, steps = embedded, runnable()
    assert steps and steps[0][0][0].startswith("source .venv/bin/activate"), "the first set-up must activate the venv"
    prometheus = StateDir(cluster.state_dir).pid_file("prometheus")
    prometheus_before = alive(prometheus)
    namespaces_before = {ns.metadata.name for ns in cluster.core.list_namespace().items}
    # Where `make demo` leaves the cluster: time-slicing on gpu-node.
    demo = run_playbook(cluster, "enable-timeslicing.yml", tmp_path / "demo", limit="gpu-node")
    assert demo.ok, demo.describe()
    try:
        for setup, command in steps:
            mark = cluster.audit_mark()
            result = shell(cluster, setup, command)
            output = result.stdout + result.stderr
            assert result.returncode == 0, f"`{command}` exited {result.returncode}:\n{output[-4000:]}"
            assert_acted(cluster, command, output, mark)
    finally:
        remove_queues(cluster, namespaces_before)
        labels = cluster.node("gpu-node-mig").metadata.labels or {}
        if labels.get("nvidia.com/mig.config", "all-disabled") != "all-disabled":
            run_playbook(cluster, "rollback-mig.yml", tmp_path / "undo-mig", limit="gpu-node-mig")
        undo = run_playbook(cluster, "rollback-timeslicing.yml", tmp_path / "undo")
        if not prometheus_before:
            stop(prometheus)
            (cluster.state_dir / "prometheus.json").unlink(missing_ok=True)
    assert undo.ok, undo.describe()


def test_a_broken_inventory_fails_and_is_named(embedded: Cluster, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("all:\n  hosts: [unclosed\n")
    result = shell(embedded, ["source .venv/bin/activate"],
                   f"ansible-playbook -i {broken} playbooks/rollback-timeslicing.yml -l gpu-node")
    assert result.returncode != 0
    assert str(broken) in result.stdout + result.stderr


def test_an_unmatched_limit_fails_and_is_named(embedded: Cluster) -> None:
    result = shell(embedded, ["source .venv/bin/activate"],
                   "ansible-playbook playbooks/rollback-timeslicing.yml -l gpu-nod")
    assert result.returncode != 0
    assert "gpu-nod" in result.stdout + result.stderr


def test_an_inventory_without_gpu_nodes_fails_and_says_so(embedded: Cluster, tmp_path: Path) -> None:
    empty = tmp_path / "empty.yml"
    empty.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {}}}}}))
    result = shell(embedded, ["source .venv/bin/activate"],
                   f"ansible-playbook -i {empty} playbooks/rollback-timeslicing.yml")
    assert result.returncode != 0
    assert "No host to act on: the inventory has no host in gpu_nodes." in result.stdout


def test_the_venv_ansible_playbook_acts_without_activation(embedded: Cluster) -> None:
    """`.venv/bin/ansible-playbook ...` with only the system PATH (whose python3 has no kubernetes
    package) reads the embedded inventory and acts, like the activated one."""
    command = ".venv/bin/ansible-playbook playbooks/enable-timeslicing.yml -l gpu-node"
    result = shell(embedded, [], command)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_acted(embedded, command, result.stdout, embedded.audit_mark())
