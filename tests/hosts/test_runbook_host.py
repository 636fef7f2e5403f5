"""Host checks with testinfra: the machine that runs the runbooks keeps backups and credentials
private and the embedded cluster on loopback, `gpushare sim down` leaves no process behind; and,
for a real cluster, the GPU nodes the inventory marks `gpushare_ssh_check: true` (reached over SSH at
their ansible_host) have the driver, the GPUs the node advertises and the device-plugin socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import testinfra
import yaml

from gpushare_testbed.processes import recorded_pid
from tests.support.ansible import run_playbook
from tests.support.cluster import REPO, Cluster

pytestmark = pytest.mark.cluster
ENABLE, ROLLBACK = "enable-timeslicing.yml", "rollback-timeslicing.yml"
DEVICE_PLUGIN_SOCKET = "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"


@pytest.fixture(scope="module")
def host() -> Any:
    return testinfra.get_host("local://")


def _private(host: Any, path: Path) -> None:
    """A file only its owner reads, in a directory only its owner enters."""
    assert host.file(str(path)).mode == 0o600, f"{path} is {host.file(str(path)).mode:o}, not 600"
    assert host.file(str(path.parent)).mode == 0o700, f"{path.parent} is {host.file(str(path.parent)).mode:o}, not 700"
    assert host.file(str(path)).uid == os.getuid()


def test_an_enables_backups_are_private(host: Any, clean_cluster: Cluster, tmp_path: Path) -> None:
    backups = tmp_path / "operator-home" / "backups"
    inputs = {"timeslicing_backup_dir": str(backups), "mig_report_dir": str(tmp_path / "reports")}
    enabled = run_playbook(clean_cluster, ENABLE, tmp_path / "enable", limit="gpu-node", extravars=inputs)
    try:
        assert enabled.ok, enabled.describe()
        written = sorted(backups.iterdir())
        assert written, f"the enable wrote no backup in {backups}"
        for backup in written:
            _private(host, backup)
    finally:
        rolled_back = run_playbook(clean_cluster, ROLLBACK, tmp_path / "rollback", limit="gpu-node", extravars=inputs)
        assert rolled_back.ok, rolled_back.describe()


def test_the_embedded_clusters_kubeconfigs_and_keys_are_private(host: Any, cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("the kubeconfigs of a cluster given with --kubeconfig are not this project's to check")
    state = cluster.state_dir
    files = [state / "kubeconfig", *sorted((state / "kubeconfigs").glob("*.yaml")), *sorted((state / "pki").glob("*.key"))]
    assert cluster.runbook_kubeconfig in files
    for path in files:
        _private(host, path)


def _component_pids(state: Path) -> dict[int, str]:
    """The processes the embedded cluster in `state` started, by pid (those still running)."""
    pids = {}
    for pid_file in sorted((state / "pids").glob("*.pid")):
        pid = recorded_pid(pid_file)
        if pid is not None:
            pids[pid] = pid_file.stem
    return pids


def _listening(host: Any, pids: dict[int, str]) -> list[tuple[str, str]]:
    """(component, local address) of every TCP/UDP socket those processes listen on."""
    out = host.check_output("ss -Hlntup")
    found = []
    for line in out.splitlines():
        fields = line.split()
        for pid, name in pids.items():
            if f"pid={pid}," in line:
                found.append((name, fields[4]))
    return found


def test_the_embedded_clusters_components_listen_on_loopback_only(host: Any, cluster: Cluster) -> None:
    if not cluster.embedded:
        pytest.skip("a cluster given with --kubeconfig runs elsewhere: its sockets are not on this machine")
    pids = _component_pids(cluster.state_dir)
    info = json.loads((cluster.state_dir / "cluster.json").read_text())
    assert set(pids.values()) >= set(info["components"]), f"not running: {set(info['components']) - set(pids.values())}"
    listening = _listening(host, pids)
    assert {name for name, _ in listening} >= {"etcd", "kube-apiserver", "kube-scheduler", "kwok"}, listening
    exposed = [(name, address) for name, address in listening if not address.startswith(("127.0.0.1:", "[::1]:"))]
    assert not exposed, f"listening beyond loopback: {exposed}"
    apiserver = info["ports"]["kube-apiserver"]
    assert host.socket(f"tcp://127.0.0.1:{apiserver}").is_listening
    assert not host.socket(f"tcp://0.0.0.0:{apiserver}").is_listening


@pytest.fixture
def throwaway_state(tmp_path: Path) -> Iterator[Path]:
    """A state dir for a cluster of its own; stopped whatever the test did."""
    state = tmp_path / "state"
    yield state
    subprocess.run([sys.executable, "-m", "gpushare", "sim", "down", "--state-dir", str(state)], check=False,
                   capture_output=True, timeout=120)


def test_sim_down_leaves_no_process_behind(host: Any, throwaway_state: Path, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"nodes": [{"name": "gpu-node", "gpus": 1, "product": "NVIDIA-H100-80GB-HBM3"}]}))
    gpushare = [sys.executable, "-m", "gpushare", "sim"]
    subprocess.run([*gpushare, "up", "--state-dir", str(throwaway_state), "--fleet", str(fleet), "--without", "kueue"],
                   check=True, capture_output=True, timeout=600, cwd=REPO)
    pids = _component_pids(throwaway_state)
    assert len(pids) == 7, pids  # every component but kueue
    subprocess.run([*gpushare, "down", "--state-dir", str(throwaway_state)], check=True, capture_output=True,
                   timeout=120)
    left = [f"{name} (pid {pid})" for pid, name in pids.items() if _running(host, pid)]
    assert not left, f"still running after `gpushare sim down`: {left}"
    mentioning = [line for line in host.check_output("ps -eo pid=,args=").splitlines() if str(throwaway_state) in line]
    assert not mentioning, mentioning


def _running(host: Any, pid: int) -> bool:
    """Still there and not a zombie (an exited child that init has not reaped yet)."""
    state = host.run(f"ps -o stat= -p {pid}").stdout.strip()
    return bool(state) and not state.startswith("Z")


# ---- real GPU nodes over SSH ------------------------------------------------------------------------
def _ssh_hosts(cluster: Cluster) -> list[tuple[str, dict[str, Any]]]:
    """The inventory's hosts with gpushare_ssh_check: true, with their variables."""
    listed = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(cluster.inventory),
                             "--list"], capture_output=True, text=True, check=True, timeout=120,
                            env={**os.environ, **cluster.env()})
    hostvars = json.loads(listed.stdout).get("_meta", {}).get("hostvars", {})
    return [(name, variables) for name, variables in sorted(hostvars.items())
            if str(variables.get("gpushare_ssh_check", False)).lower() == "true"]


def test_gpu_nodes_have_the_driver_the_gpus_they_advertise_and_the_device_plugin_socket(cluster: Cluster) -> None:
    hosts = _ssh_hosts(cluster)
    if not hosts:
        pytest.skip(f"no host of {cluster.inventory} sets gpushare_ssh_check: true (the embedded cluster's nodes are "
                    "KWOK fakes with no machine to log in to)")
    problems = []
    for name, variables in hosts:
        user = f"{variables['ansible_user']}@" if variables.get("ansible_user") else ""
        port = f":{variables['ansible_port']}" if variables.get("ansible_port") else ""
        node = cluster.node(variables.get("gpushare_node_name", name))
        remote = testinfra.get_host(f"ssh://{user}{variables.get('ansible_host', name)}{port}",
                                    ssh_identity_file=variables.get("ansible_ssh_private_key_file"))
        advertised = int((node.metadata.labels or {}).get("nvidia.com/gpu.count", "0"))
        if not remote.file("/proc/driver/nvidia/version").exists:
            problems.append(f"{name}: no NVIDIA driver loaded (/proc/driver/nvidia/version is missing)")
        listed = remote.run("nvidia-smi -L")
        gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
        if listed.rc != 0 or len(gpus) != advertised:
            problems.append(f"{name}: nvidia-smi -L lists {len(gpus)} GPU(s) (exit {listed.rc}), the node advertises "
                            f"nvidia.com/gpu.count={advertised}")
        if not remote.file(DEVICE_PLUGIN_SOCKET).is_socket:
            problems.append(f"{name}: no device-plugin socket at {DEVICE_PLUGIN_SOCKET}")
    assert not problems, "\n".join(problems)
