"""Runbook timings on the embedded cluster: the enable playbook side by side with the seed's own
kubectl sequence, the idempotent re-run (time and writes), and a rollback with 4 shared pods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kubernetes import client

from gpushare.kube import api_client, wait_for

REPO = Path(__file__).resolve().parents[1]
SEED_CONFIGMAP = (REPO / "examples" / "seed" / "time-slicing-config.yaml").read_text()
SHARE_CHECK = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-share-check"},
    "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "gpu-share-check"}},
             "template": {"metadata": {"labels": {"app": "gpu-share-check"}}, "spec": {
                 "nodeSelector": {"gpu-mode": "shared"},
                 "tolerations": [{"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "check", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                                 "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}]}}},
}


def _sim(state: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpushare", "sim", *args, "--state-dir", str(state)],
                   check=True, capture_output=True)


def _playbook(state: Path, playbook: str, *args: str) -> float:
    env = {**os.environ, "GPUSHARE_STATE_DIR": str(state), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    began = time.perf_counter()
    result = subprocess.run(["ansible-playbook", f"playbooks/{playbook}", *args], cwd=REPO, env=env,
                            capture_output=True, text=True)
    elapsed = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"{playbook} failed:\n{result.stdout[-3000:]}")
    return elapsed


def _writes(state: Path, since: int) -> int:
    with (state / "audit.log").open() as log:
        log.seek(since)
        events = [json.loads(line) for line in log if line.strip()]
    return sum(1 for e in events if e.get("stage") == "ResponseComplete"
               and e.get("user", {}).get("username") == "gpushare-admin"
               and e.get("verb") in ("create", "update", "patch", "delete", "deletecollection"))


def _seed_sequence(state: Path) -> float:
    """The seed's commands as written, until gpu-node shows its shared allocatable."""
    info = json.loads((state / "cluster.json").read_text())
    kubectl = [str(Path(info["bin_dir"]) / "kubectl"), f"--kubeconfig={state / 'kubeconfig'}"]
    core = client.CoreV1Api(api_client(state / "kubeconfig"))
    began = time.perf_counter()
    subprocess.run([*kubectl, "apply", "-f", "-"], input=SEED_CONFIGMAP, text=True, check=True, capture_output=True)
    for argv in (
        ["patch", "clusterpolicies.nvidia.com/cluster-policy", "-n", "gpu-operator", "--type", "merge", "-p",
         '{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"shared"}}}}'],
        ["rollout", "restart", "-n", "gpu-operator", "daemonset/nvidia-device-plugin-daemonset"],
        ["rollout", "status", "-n", "gpu-operator", "daemonset/nvidia-device-plugin-daemonset", "--timeout=300s"],
        ["label", "node", "gpu-node", "gpu-mode=shared"],
    ):
        subprocess.run([*kubectl, *argv], check=True, capture_output=True)
    wait_for(lambda: (core.read_node("gpu-node").status.allocatable or {}).get("nvidia.com/gpu.shared") == "4",
             60, "gpu-node to advertise 4 shared")
    return time.perf_counter() - began


def bench_runbooks(state: Path) -> dict[str, dict[str, float]]:
    """Seed sequence and playbook on fresh clusters of the default fleet, one after the other."""
    _sim(state, "down")
    _sim(state, "up")
    seed_s = _seed_sequence(state)
    _sim(state, "down")
    _sim(state, "up")
    mark = (state / "audit.log").stat().st_size
    enable_s = _playbook(state, "enable-timeslicing.yml", "-l", "gpu-node", "-e", "timeslicing_replicas=4")
    enable_writes = _writes(state, mark)
    mark = (state / "audit.log").stat().st_size
    rerun_s = _playbook(state, "enable-timeslicing.yml", "-l", "gpu-node", "-e", "timeslicing_replicas=4")
    rerun_writes = _writes(state, mark)
    core = client.CoreV1Api(api_client(state / "kubeconfig"))
    apps = client.AppsV1Api(api_client(state / "kubeconfig"))
    apps.create_namespaced_deployment("default", SHARE_CHECK)
    wait_for(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(
        "default", label_selector="app=gpu-share-check").items) == 4, 60, "4 shared pods running")
    rollback_s = _playbook(state, "rollback-timeslicing.yml", "-l", "gpu-node")
    return {
        "enable": {"seed_kubectl_s": seed_s, "playbook_s": enable_s, "ratio": enable_s / seed_s,
                   "playbook_writes": enable_writes, "rerun_s": rerun_s, "rerun_writes": rerun_writes},
        "rollback": {"rollback_4_pods_s": rollback_s},
    }
