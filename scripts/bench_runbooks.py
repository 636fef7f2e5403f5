"""Runbook timings on the embedded cluster, side by side in one run: Ansible's floor (one
kubernetes.core task) and its charge for as many no-op tasks as the enable runs, the seed's own
kubectl sequence, the enable (first run, idempotent re-run, replicas change), the rollback with 4
shared pods; and the same one-node runs on the 500-node fleet, with the operand pods restarted
outside the target.

Each run's wall time includes the waits for the simulated operator and kubelets; the runbook's own
CPU time (ansible-playbook and its workers) is its part alone. An idle 500-node control plane keeps
this machine's 2 CPUs busy (every node's Lease renewed each 10 s), so the fleets are also measured
side by side: both up, each step run on one and then the other, so that only the fleet differs."""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpushare_testbed.controlplane import StateDir
from gpushare.k8s.session import Session
from gpushare.model.operands import OperandPod
from gpushare.polling import wait_for
from gpushare_testbed.processes import recorded_pid
from gpushare.rbac import RUNBOOK_USER
from gpushare.rbac.audit import read_events

REPO = Path(__file__).resolve().parents[1]
CYCLES = 3  # enable, re-run, replicas change, rollback: each figure is the median of this many
SIDE_BY_SIDE_CYCLES = 5  # the same, on both prepared fleets at once (their ratios are the 500-node goal)
SEED_CONFIGMAP = (REPO / "examples" / "seed" / "time-slicing-config.yaml").read_text()
SHARE_CHECK = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-share-check", "namespace": "default"},
    "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "gpu-share-check"}},
             "template": {"metadata": {"labels": {"app": "gpu-share-check"}}, "spec": {
                 "nodeSelector": {"gpu-mode": "shared"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 # the rollback's own time, not the workload's shutdown (a drain waits for the grace period)
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "check", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04",
                                 "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}]}}},
}


def sim(state: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpushare", "sim", *args, "--state-dir", str(state)],
                   check=True, capture_output=True)


def _ansible_playbook(state: Path, path: str, *args: str, **env_extra: str) -> tuple[float, str]:
    """(wall seconds, stdout) of one ansible-playbook run on the cluster in `state`."""
    env = {**os.environ, "GPUSHARE_STATE_DIR": str(state), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env_extra}
    began = time.perf_counter()
    result = subprocess.run(["ansible-playbook", path, *args], cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"{path} {' '.join(args)} failed:\n{result.stdout[-3000:]}")
    return elapsed, result.stdout


def playbook(state: Path, path: str, *args: str) -> float:
    return _ansible_playbook(state, path, *args)[0]


def writes(state: Path, since: int) -> int:
    return sum(1 for e in read_events(state / "audit.log", since) if e.get("stage") == "ResponseComplete"
               and e.get("user", {}).get("username") == RUNBOOK_USER
               and e.get("verb") in ("create", "update", "patch", "delete", "deletecollection")
               and (e.get("objectRef") or {}).get("resource") not in ("selfsubjectreviews", "selfsubjectaccessreviews"))


def operand_pods(session: Session) -> dict[str, tuple[str, str]]:
    """uid -> (node, DaemonSet) of every operand pod."""
    pods = (OperandPod(p) for p in session.list("Pod", "gpu-operator"))
    return {p.uid: (p.node, p.daemonset) for p in pods if p.daemonset and not p.terminating}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(state: Path, session: Session, target: str, *args: str) -> dict[str, Any]:
    """One runbook run: seconds (wall and the runbook's CPU), mutating requests, operand pods
    restarted on other nodes (in all and per DaemonSet)."""
    mark = (state / "audit.log").stat().st_size
    before = operand_pods(session)
    cpu = _children_cpu_s()
    seconds = playbook(state, *args)
    cpu = _children_cpu_s() - cpu
    after = operand_pods(session)
    gone = [daemonset for uid, (node, daemonset) in before.items() if node != target and uid not in after]
    by_operand = {daemonset: gone.count(daemonset) for daemonset in sorted(set(gone))}
    return {"s": seconds, "cpu_s": cpu, "writes": writes(state, mark), "restarted_elsewhere": len(gone),
            "restarted_by_operand": by_operand}


def seed_sequence(state: Path) -> float:
    """The seed's commands as written, until gpu-node shows its shared allocatable."""
    info = json.loads((state / "cluster.json").read_text())
    kubectl = [str(Path(info["bin_dir"]) / "kubectl"), f"--kubeconfig={state / 'kubeconfig'}"]
    session = Session(state / "kubeconfig")
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
    wait_for(lambda: ((session.get("Node", "gpu-node") or {}).get("status", {}).get("allocatable") or {}).get(
        "nvidia.com/gpu.shared") == "4", 120, "gpu-node to advertise 4 shared")
    return time.perf_counter() - began


ENABLE = ("playbooks/enable-timeslicing.yml", "-l", "gpu-node")
ROLLBACK = ("playbooks/rollback-timeslicing.yml", "-l", "gpu-node")
MPS_ENABLE = ("playbooks/enable-mps.yml", "-l", "gpu-node", "-e", "mps_replicas=4")
MPS_STEPS = ("mps_enable", "mps_rerun", "mps_rollback")


def _share_check(session: Session, running: bool) -> None:
    """The 4-pod share check on gpu-node, running (or deleted and gone)."""
    def pods() -> list[dict[str, Any]]:
        return session.list("Pod", "default", label_selector="app=gpu-share-check")

    if running:
        session.create(SHARE_CHECK)
        wait_for(lambda: sum(p["status"].get("phase") == "Running" for p in pods()) == 4, 60, "4 shared pods running")
    else:
        session.delete("Deployment", "gpu-share-check", "default")
        wait_for(lambda: not pods(), 60, "the share check's pods gone")


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median wall and CPU seconds of `runs`, every run's wall seconds and write count, and the
    most operand pods one of them restarted elsewhere."""
    worst = max(runs, key=lambda run: run["restarted_elsewhere"])
    return {"s": statistics.median(run["s"] for run in runs), "all_s": [run["s"] for run in runs],
            "cpu_s": statistics.median(run["cpu_s"] for run in runs), "writes": [run["writes"] for run in runs],
            "restarted_elsewhere": worst["restarted_elsewhere"], "restarted_by_operand": worst["restarted_by_operand"]}


STEPS = ("enable", "rerun", "replicas", "rollback")
FLOOR = "scripts/bench/floor.yml"


def floor_args(state: Path) -> tuple[str, ...]:
    """Ansible's floor on this cluster: one kubernetes.core.k8s_info task reading gpu-node."""
    env = {"gpushare_kubeconfig": str(state / "kubeconfig"), "ansible_python_interpreter": sys.executable}
    return FLOOR, "-e", json.dumps(env)


def one_node_runs(states: dict[str, Path], prepare: bool, cycles: int = CYCLES) -> dict[str, dict[str, Any]]:
    """`cycles` times: Ansible's floor, enable gpu-node, re-run, replicas 2 -> 4, rollback of gpu-node
    (4 shared pods), on each fresh cluster of `states` (name -> state dir): the floor beside the runs
    it is the measure of. With several clusters each step runs on one after the other, so that they
    share whatever else loads the machine."""
    sessions = {name: Session(state / "kubeconfig") for name, state in states.items()}
    runs: dict[str, dict[str, Any]] = {name: {} for name in states}
    if prepare:
        for name, state in states.items():
            runs[name]["prepare"] = _median([measured(state, sessions[name], "", "playbooks/prepare-timeslicing.yml")])
    samples = {name: {step: [] for step in ("floor", *STEPS)} for name in states}
    for _ in range(cycles):
        for step in ("floor", *STEPS):
            for name, state in states.items():
                session = sessions[name]
                if step == "rollback":
                    _share_check(session, running=True)
                args = {"floor": floor_args(state), "enable": ENABLE, "rerun": ENABLE,
                        "replicas": (*ENABLE, "-e", "timeslicing_replicas=4"), "rollback": ROLLBACK}[step]
                samples[name][step].append(measured(state, session, "gpu-node", *args))
                if step == "rollback":
                    _share_check(session, running=False)
    for name in states:
        runs[name].update({step: _median(taken) for step, taken in samples[name].items()})
    return runs


def mps_runs(state: Path, cycles: int = CYCLES) -> dict[str, dict[str, Any]]:
    """`cycles` times on a prepared GPU Operator v25.10 cluster with gpu-node whole (from v26.3 per-node MPS
    is refused): the MPS enable of gpu-node (4 shares,
    the MPS control daemon started), its re-run, the rollback with 4 shared pods (the daemon gone)."""
    session = Session(state / "kubeconfig")
    samples: dict[str, list[dict[str, Any]]] = {step: [] for step in MPS_STEPS}
    for _ in range(cycles):
        samples["mps_enable"].append(measured(state, session, "gpu-node", *MPS_ENABLE))
        samples["mps_rerun"].append(measured(state, session, "gpu-node", *MPS_ENABLE))
        _share_check(session, running=True)
        samples["mps_rollback"].append(measured(state, session, "gpu-node", *ROLLBACK))
        _share_check(session, running=False)
    return {step: _median(taken) for step, taken in samples.items()}


def idle_cpu(state: Path, seconds: float = 20.0) -> float:
    """The CPUs the embedded cluster's processes use while nothing runs against it."""
    pids = [pid for f in StateDir(state).pid_files() if (pid := recorded_pid(f))]

    def used() -> float:
        ticks = 0
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    before = used()
    time.sleep(seconds)
    return (used() - before) / seconds


def enable_tasks(state: Path) -> int:
    """The tasks one enable of gpu-node runs on this cluster, skipped ones and includes counted (the
    JSON callback's task list of one run, which the caller rolls back)."""
    _, out = _ansible_playbook(state, *ENABLE, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    return sum(len(play["tasks"]) for play in json.loads(out)["plays"])


def steps_floor_s(state: Path, tasks: int) -> float:
    """Ansible's charge for `tasks` steps that do nothing: a playbook of that many ansible.builtin.debug
    tasks on localhost, each run in its own forked worker as every runbook task is (median of 3)."""
    path = state / "steps-floor.yml"
    path.write_text(json.dumps([{"name": f"{tasks} no-op tasks", "hosts": "localhost", "gather_facts": False,
                                 "tasks": [{"name": f"Step {i}", "ansible.builtin.debug": {"msg": i}}
                                           for i in range(tasks)]}]))
    return statistics.median(playbook(state, str(path)) for _ in range(3))


def preview_lines(state: Path) -> int:
    """Lines the operator reads from `enable-timeslicing.yml -l gpu-node --check --diff` on a fresh cluster."""
    env = {**os.environ, "GPUSHARE_STATE_DIR": str(state), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["ansible-playbook", *ENABLE, "--check", "--diff"], cwd=REPO, env=env, capture_output=True,
                            text=True, check=True)
    return len((result.stdout + result.stderr).splitlines())


def bench_runbooks(state: Path) -> dict[str, Any]:
    """The seed's sequence, then each fleet alone (the default one unprepared and prepared, the
    500-node one prepared), then both prepared fleets side by side."""
    beside = state.with_name(f"{state.name}-beside")
    sim(state, "down")
    sim(state, "up")
    seed = seed_sequence(state)
    sim(state, "down")
    sim(state, "up")
    lines = preview_lines(state)
    default = one_node_runs({"default": state}, prepare=False)["default"]
    sim(state, "down")
    sim(state, "up")
    small = one_node_runs({"default": state}, prepare=True)["default"]
    tasks = enable_tasks(state)
    playbook(state, *ROLLBACK)
    steps_floor = steps_floor_s(state, tasks)
    sim(state, "down")
    sim(state, "up", "--operator-version", "v25.10")  # per-node MPS needs a plugin whose daemon starts on the node's key
    playbook(state, "playbooks/prepare-timeslicing.yml")
    small.update(mps_runs(state))
    sim(state, "down")
    sim(state, "up", "--fleet", str(REPO / "fleets" / "scale-500.yaml"))
    fleet = one_node_runs({"500": state}, prepare=True)["500"]
    idle = idle_cpu(state)
    sim(beside, "down")
    sim(beside, "up")
    try:
        playbook(beside, "playbooks/prepare-timeslicing.yml")  # the 500-node fleet is prepared already
        side = one_node_runs({"default": beside, "500": state}, prepare=False, cycles=SIDE_BY_SIDE_CYCLES)
    finally:
        sim(beside, "down")
        shutil.rmtree(beside, ignore_errors=True)
    return {"runbooks": {"enable_tasks": tasks, "steps_floor_s": steps_floor, "preview_lines": lines, "seed_s": seed,
                         "default": default, "prepared_default": small,
                         "prepared_500": fleet, "beside_default": side["default"], "beside_500": side["500"],
                         "idle_cpu_500": idle}}


def _elsewhere(run: dict[str, Any]) -> str:
    if not run["restarted_elsewhere"]:
        return "0"
    return f"{run['restarted_elsewhere']} ({', '.join(f'{n} {d}' for d, n in run['restarted_by_operand'].items())})"


def _ratios(big: dict[str, Any], small: dict[str, Any], key: str) -> str:
    return "; ".join(f"{step} {big[step][key] / small[step][key]:.2f}×" for step in STEPS)


def render(results: dict[str, Any]) -> str:
    """The BENCHMARKS.md section: one row per run, the ratios below."""
    r = results["runbooks"]
    rows = ["| cluster | run | wall time (min–max) | runbook CPU | writes | operand pods restarted elsewhere |",
            "|---|---|---|---|---|---|"]
    labels = (("floor", "Ansible's floor: one `kubernetes.core.k8s_info` task reading gpu-node"),
              ("prepare", "`prepare-timeslicing.yml` (once per cluster)"),
              ("enable", "`enable-timeslicing.yml -l gpu-node`"),
              ("rerun", "its re-run (nothing to change)"),
              ("replicas", "`-e timeslicing_replicas=4`"),
              ("rollback", "`rollback-timeslicing.yml -l gpu-node`, 4 shared pods"),
              ("mps_enable", "`enable-mps.yml -l gpu-node -e mps_replicas=4`"),
              ("mps_rerun", "its re-run (MPS, nothing to change)"),
              ("mps_rollback", "`rollback-timeslicing.yml -l gpu-node` of the MPS node, 4 shared pods"))
    columns = (("default", "default fleet"), ("prepared_default", "default fleet, prepared"),
               ("prepared_500", "500 GPU nodes, prepared"),
               ("beside_default", "default fleet, prepared, beside the 500-node one"),
               ("beside_500", "500 GPU nodes, prepared, beside the default one"))
    for column, cluster in columns:
        for name, label in labels:
            run = r[column].get(name)
            if run is not None:
                spread = f" ({min(run['all_s']):.1f}–{max(run['all_s']):.1f})" if len(run["all_s"]) > 1 else ""
                written = "/".join(str(w) for w in sorted(set(run["writes"])))
                rows.append(f"| {cluster} | {label} | {run['s']:.1f} s{spread} | {run['cpu_s']:.1f} s | {written} | "
                            f"{_elsewhere(run)} |")
    default, floor = r["default"], r["prepared_default"]["floor"]["s"]
    rows += [
        "",
        f"- Medians of {CYCLES} cycles (floor, enable, re-run, replicas, rollback) on each fleet alone, of "
        f"{SIDE_BY_SIDE_CYCLES} side by side; writes: every cycle's count of the runbook identity's mutating requests.",
        "- Ansible's floor runs in every cycle, before the runbooks on the same cluster, so that each ratio to it "
        f"compares runs made side by side; the seed's kubectl sequence on gpu-node: {r['seed_s']:.1f} s "
        "(it re-configures every GPU node).",
        *(f"- {cluster[:1].upper()}{cluster[1:]} / its floor: " + ", ".join(
            f"{step} {r[column][step]['s'] / r[column]['floor']['s']:.2f}×" for step in STEPS)
          for column, cluster in columns),
        f"- Ansible's charge for the prepared enable's {r['enable_tasks']} tasks (skipped ones and includes counted) "
        f"as no-op ansible.builtin.debug tasks, median of 3: {r['steps_floor_s']:.1f} s, "
        f"{r['steps_floor_s'] / floor:.2f}× the prepared default fleet's floor; its enable is "
        f"{r['prepared_default']['enable']['s'] / r['steps_floor_s']:.2f}× that.",
        "- A prepared cycle's first enable writes no ConfigMap (the prepare did); each later one follows the rollback of "
        "the 4-replica change, so it rewrites the ConfigMap and restarts gpu-node's device plugin and GFD. The first "
        "enable alone / its floor: " + ", ".join(
            f"{cluster} {r[column]['enable']['all_s'][0] / r[column]['floor']['s']:.2f}×"
            for column, cluster in columns if column.startswith("prepared_")) + ".",
        f"- Enable / the seed's sequence: {default['enable']['s'] / r['seed_s']:.1f}×.",
        f"- `enable-timeslicing.yml -l gpu-node --check --diff` on a fresh default fleet prints {r['preview_lines']} lines.",
        f"- 500-node fleet / default fleet, both prepared, side by side (both clusters up, each step run on one "
        f"then the other, so that both share the machine's load), wall time: "
        f"{_ratios(r['beside_500'], r['beside_default'], 's')}; the runbook's CPU time: "
        f"{_ratios(r['beside_500'], r['beside_default'], 'cpu_s')}.",
        f"- The same, each fleet alone on the machine, wall time: {_ratios(r['prepared_500'], r['prepared_default'], 's')}; "
        f"the runbook's CPU time: {_ratios(r['prepared_500'], r['prepared_default'], 'cpu_s')}. Alone, the 500-node "
        f"run also pays for the idle 500-node control plane on this machine's CPUs ({r['idle_cpu_500']:.2f} CPU "
        "measured over 20 s: the API server renewing 500 node Leases every 20 s, etcd, KWOK, the simulator), "
        "which slows the runbook's own CPU time too; side by side both runs pay for it.",
    ]
    return "\n".join(rows)
