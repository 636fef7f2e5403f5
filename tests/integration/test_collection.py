"""The collection as Ansible users consume it: `ansible-galaxy collection build`, installed into an
empty directory with the gpushare package pip-installed from it, then run from a directory that has
no ansible.cfg of this project, against the cluster under test (the CLI and ansible-runner, whose
artifact directory gets the run's files); ansible-doc shows every plugin; `ansible-builder create`
makes a valid build context of execution-environment.yml."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import ansible_runner
import pytest
import yaml

from tests.support.cluster import REPO, Cluster

BIN = Path(sys.executable).parent
COLLECTION = ("gpushare", "gpu_sharing")
ACTIONS = ("gpushare_read", "gpushare_apply", "gpushare_wait", "gpushare_restart", "gpushare_drain", "gpushare_backup",
           "gpushare_dra_probe")
CALLBACK = "gpushare.gpu_sharing.gpushare"


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None,
        timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


@dataclass
class Installed:
    tarball: Path
    collections: Path  # holds ansible_collections/gpushare/gpu_sharing
    pylib: Path  # the gpushare package, pip-installed from the installed collection
    home: Path  # the runs' $HOME, so the default output directory is the test's

    @property
    def root(self) -> Path:
        return self.collections.joinpath("ansible_collections", *COLLECTION)

    def env(self, **extra: str) -> dict[str, str]:
        """A user's environment: only this installed copy of the collection (not the checkout the venv
        links), the package installed from it, no ANSIBLE_* setting and no ansible.cfg of this project."""
        plain = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GPUSHARE_"))}
        return {**plain, "HOME": str(self.home), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                "PYTHONPATH": str(self.pylib), "ANSIBLE_COLLECTIONS_PATH": str(self.collections),
                "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false", "ANSIBLE_NOCOLOR": "1", **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("collection")
    built = run(BIN / "ansible-galaxy", "collection", "build", REPO, "--output-path", base / "dist", cwd=base)
    assert built.returncode == 0, built.stdout + built.stderr
    tarball, = (base / "dist").glob("gpushare-gpu_sharing-*.tar.gz")
    target = base / "empty"
    installed = Installed(tarball, target / "collections", target / "pylib", target / "home")
    installed.home.mkdir(parents=True)
    done = run(BIN / "ansible-galaxy", "collection", "install", tarball, "-p", installed.collections, "--no-deps",
               cwd=target, env=installed.env())
    assert done.returncode == 0 and installed.root.is_dir(), done.stdout + done.stderr
    # What README says a user does next (offline here: the venv has the build backend).
    pip = run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
              installed.pylib, installed.root, cwd=target)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return installed


def test_the_tarball_ships_the_content_and_the_package_not_the_checkouts_tooling(installed: Installed) -> None:
    with tarfile.open(installed.tarball) as tar:
        files = {member.name for member in tar.getmembers() if not member.isdir()}
    for shipped in ("MANIFEST.json", "meta/runtime.yml", "meta/execution-environment.yml", "bindep.txt",
                    "playbooks/enable_timeslicing.yml", "roles/timeslicing/tasks/main.yml",
                    "plugins/callback/gpushare.py", "plugins/vars/gpushare_limit.py", "pyproject.toml",
                    "src/gpushare/plugins/actions.py"):
        assert shipped in files, f"{shipped} is not in the installed collection"
    assert not [f for f in files if f.startswith(("src/gpushare_testbed/", "testbed/"))], "the test bed is shipped"
    assert not [f for f in files if f.split("/")[0] in (".venv", "tests", "features", "scripts", "build", "reports",
                                                         "backups", "fleets") and not f.startswith("tests/sanity/")]
    assert not [f for f in files if f.startswith("inventories/sim") or f == "ansible.cfg" or "__pycache__" in f]
    imported = run(sys.executable, "-c", "import gpushare.plugins.actions as m; print(m.__file__)", cwd=installed.home,
                   env=installed.env())
    assert imported.returncode == 0, imported.stderr
    assert Path(imported.stdout.strip()).is_relative_to(installed.pylib), "the plugins would import the checkout's copy"
    assert (installed.pylib / "gpushare").is_dir() and not list(installed.pylib.glob("gpushare_testbed*")), "pip installed the test bed"


def test_ansible_doc_shows_every_plugin_of_the_installed_collection(installed: Installed) -> None:
    filters = sorted(p.stem for p in (installed.root / "plugins" / "filter").glob("*.yml"))
    assert len(filters) > 40
    for kind, names in (("module", ACTIONS), ("filter", filters), ("callback", ["gpushare"]),
                        ("vars", ["gpushare_limit"])):
        shown = run(BIN / "ansible-doc", "-t", kind, "--json", *(f"gpushare.gpu_sharing.{n}" for n in names),
                    cwd=installed.home, env=installed.env())
        assert shown.returncode == 0, shown.stderr
        docs = json.loads(shown.stdout)
        for name in names:
            doc = docs[f"gpushare.gpu_sharing.{name}"]["doc"]
            assert doc["short_description"] and doc.get("description"), f"{kind} {name}: {doc}"
            if kind == "module":
                assert doc["options"], f"{name} documents no options"


@pytest.fixture
def gpu_inventory(clean_cluster: Cluster, tmp_path: Path) -> Path:
    """An operator's own inventory of the cluster's GPU nodes, outside this repository."""
    inventory = tmp_path / "inventory" / "hosts.yml"
    inventory.parent.mkdir()
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"gpushare_kubeconfig": str(clean_cluster.runbook_kubeconfig), "ansible_connection": "local",
                 "ansible_python_interpreter": sys.executable, "gpu_operator_namespace": clean_cluster.operator_namespace},
        "children": {"gpu_nodes": {"hosts": {node: {} for node in clean_cluster.gpu_nodes()}}}}}))
    return inventory


def shared_replicas(cluster: Cluster, node: str) -> str:
    return (cluster.node(node).status.allocatable or {}).get("nvidia.com/gpu.shared", "0")


@pytest.mark.cluster
def test_the_installed_collection_enables_and_rolls_back_from_an_empty_directory(
        installed: Installed, clean_cluster: Cluster, gpu_inventory: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = installed.env(ANSIBLE_STDOUT_CALLBACK=CALLBACK)

    def playbook(name: str, *args: str, environment: dict[str, str] = env) -> subprocess.CompletedProcess:
        return run(BIN / "ansible-playbook", f"gpushare.gpu_sharing.{name}", "-i", gpu_inventory, *args, cwd=cwd,
                   env=environment, timeout=600)

    enabled = playbook("enable_timeslicing", "-l", "gpu-node")
    assert enabled.returncode == 0, enabled.stdout + enabled.stderr
    lines = enabled.stdout.splitlines()
    assert "changed: timeslicing : Select the shared config and join the shared pool" in lines, enabled.stdout
    assert re.fullmatch(r"Result: ok, \d+ change\(s\)\.", lines[-1]), enabled.stdout
    assert shared_replicas(clean_cluster, "gpu-node") == "2"
    # the default output directory: the user's, never the directory the run started in
    backup, = (installed.home / ".local" / "share" / "gpushare" / "backups").glob("clusterpolicy-*.yaml")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert not list(cwd.iterdir())

    again = playbook("enable_timeslicing", "-l", "gpu-node")
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "Result: ok, nothing changed.", again.stdout

    # A refusal reads the same without the project's callback: its message says what to do and that
    # nothing was changed (Ansible's default output wraps it in its "fatal:" line).
    for environment in (env, installed.env()):
        refused = playbook("enable_timeslicing", "-l", "gpu-node", "-e", "timeslicing_replicas=1",
                           environment=environment)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "timeslicing_replicas" in refused.stdout and "Nothing was changed." in refused.stdout, refused.stdout
    # A limit that matches no host is refused; with the vars plugin enabled it names the GPU nodes.
    unmatched = playbook("enable_timeslicing", "-l", "gpu-nod", environment={
        **env, "ANSIBLE_VARS_ENABLED": "host_group_vars,gpushare.gpu_sharing.gpushare_limit"})
    assert unmatched.returncode != 0
    assert "-l gpu-nod: no host or group of the inventory has that name" in unmatched.stderr, unmatched.stderr
    assert "gpu-node" in unmatched.stderr.split("GPU nodes (gpu_nodes):", 1)[1]

    rolled_back = playbook("rollback_timeslicing", "-l", "gpu-node")
    assert rolled_back.returncode == 0, rolled_back.stdout + rolled_back.stderr
    assert shared_replicas(clean_cluster, "gpu-node") == "0"


@pytest.mark.cluster
def test_ansible_runner_keeps_a_runs_files_in_its_artifact_directory(
        installed: Installed, clean_cluster: Cluster, gpu_inventory: Path, tmp_path: Path) -> None:
    """As AWX runs a job: ansible-runner with a private data directory, the project's callback by
    name in the run's environment; the backup lands with the run's artifacts."""
    playbook = str(installed.root / "playbooks" / "enable_timeslicing.yml")
    home = tmp_path / "home"
    home.mkdir()
    env = installed.env(ANSIBLE_STDOUT_CALLBACK=CALLBACK, HOME=str(home))
    (tmp_path / "runner").mkdir()
    runs = []
    for name, ident in ((playbook, "enable"), (playbook.replace("enable_", "rollback_"), "rollback")):
        runs.append(ansible_runner.run(private_data_dir=str(tmp_path / "runner"), ident=ident, playbook=name,
                                       inventory=str(gpu_inventory), limit="gpu-node", envvars=env, quiet=True,
                                       timeout=600))
    enable, rollback = runs
    assert (enable.status, enable.rc) == ("successful", 0), enable.stdout.read()
    artifacts = tmp_path / "runner" / "artifacts" / "enable"
    backup, = (artifacts / "backups").glob("clusterpolicy-*.yaml")
    assert yaml.safe_load(backup.read_text())["kind"] == "ClusterPolicy"
    stdout = (artifacts / "stdout").read_text()
    assert "changed: timeslicing : Back up the ClusterPolicy (mode 0600) to " + str(artifacts / "backups") in stdout
    assert stdout.rstrip().endswith("change(s)."), stdout
    assert enable.stats["changed"] and not enable.stats["failures"]
    assert (rollback.status, rollback.rc) == ("successful", 0), rollback.stdout.read()
    assert not list((tmp_path / "runner" / "artifacts" / "rollback").glob("backups/*"))
    assert not (home / ".local").exists(), "a runner run wrote outside its artifact directory"


def test_ansible_builder_creates_the_execution_environments_build_context(installed: Installed, tmp_path: Path) -> None:
    definition = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    wanted, = [c["name"] for c in definition["dependencies"]["galaxy"]["collections"] if c.get("type") == "file"]
    assert Path(wanted).name == installed.tarball.name, "execution-environment.yml names another version than galaxy.yml"
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / installed.tarball.name).symlink_to(installed.tarball)
    (tmp_path / "execution-environment.yml").write_text((REPO / "execution-environment.yml").read_text())
    created = run(BIN / "ansible-builder", "create", "-f", "execution-environment.yml", "-c", "context", cwd=tmp_path)
    assert created.returncode == 0, created.stdout + created.stderr
    context = tmp_path / "context"
    containerfile = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()).read_text()
    assert "FROM quay.io/centos/centos:stream9" in containerfile.replace('"', "").replace("$EE_BASE_IMAGE",
                                                                                         "quay.io/centos/centos:stream9")
    assert "ansible-core==2.19.14" in containerfile and "ansible-runner==2.4.3" in containerfile
    assert f"ENV ANSIBLE_STDOUT_CALLBACK={CALLBACK}" in containerfile
    assert (context / "_build" / wanted).read_bytes() == installed.tarball.read_bytes()
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert {"name": wanted, "type": "file"} in requirements["collections"]
    # What the builder stage's introspection finds in the installed collection: the package from the
    # collection itself, and the system packages.
    introspected = run(sys.executable, context / "_build" / "scripts" / "introspect.py", "introspect", "--write-pip",
                       tmp_path / "pip.txt", "--write-bindep", tmp_path / "bindep.txt", installed.collections,
                       cwd=tmp_path)
    assert introspected.returncode == 0, introspected.stdout + introspected.stderr
    pip = (tmp_path / "pip.txt").read_text()
    assert "gpushare[plots] @ file:///usr/share/ansible/collections/ansible_collections/gpushare/gpu_sharing" in pip
    assert "ca-certificates" in (tmp_path / "bindep.txt").read_text()
