"""Driving the playbooks from tests through ansible-runner, as an operator would run them."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ansible_runner

from tests.support.cluster import REPO, Cluster

RUNS_FILE = "runbook-runs.jsonl"  # in the embedded cluster's state dir


@dataclass
class PlaybookRun:
    status: str
    rc: int
    stats: dict[str, Any]
    stdout: str
    events: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return self.status == "successful" and self.rc == 0

    @property
    def changed(self) -> dict[str, int]:
        return dict(self.stats.get("changed") or {})

    def changed_tasks(self) -> list[str]:
        return [
            f"{e['event_data'].get('host')}: {e['event_data'].get('task')}"
            for e in self.events
            if e.get("event") == "runner_on_ok" and e["event_data"].get("res", {}).get("changed")
        ]

    def failure_messages(self) -> list[str]:
        messages = []
        for event in self.events:
            if event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not event["event_data"].get("ignore_errors"):
                res = event["event_data"].get("res", {})
                messages.append(str(res.get("msg") or res.get("message") or res))
        return messages

    def describe(self) -> str:
        return f"status={self.status} rc={self.rc} failures={self.failure_messages()}\n{self.stdout[-4000:]}"


@functools.cache
def _hosts_by_node(inventory: Path, env: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Kubernetes node name -> inventory host, where they differ (host var `gpushare_node_name`)."""
    listed = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(inventory), "--list"],
                            env={**os.environ, **dict(env), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}, capture_output=True, text=True,
                            check=True, timeout=120)
    hostvars = json.loads(listed.stdout).get("_meta", {}).get("hostvars", {})
    return {v["gpushare_node_name"]: host for host, v in hostvars.items()
            if v.get("gpushare_node_name") not in (None, host)}


def inventory_limit(cluster: Cluster, limit: str | None) -> str | None:
    """A limit written with node names (as the features do) in the inventory's host names; anything
    else (patterns, names the inventory lacks) as given."""
    if not limit:
        return limit
    hosts = _hosts_by_node(cluster.inventory, tuple(sorted(cluster.env().items())))
    return ",".join(hosts.get(part, part) for part in limit.split(","))


def as_typed(cluster: Cluster, text: str, everywhere: bool = False) -> str:
    """`... -l <node>` as an operator of this inventory types it (its host names); `everywhere`:
    every node name in `text` stands for its host (a line that names what to type next)."""
    hosts = _hosts_by_node(cluster.inventory, tuple(sorted(cluster.env().items())))
    for node, host in hosts.items():
        before = r"(?<![\w.-])" if everywhere else r"(?<=-l )"
        text = re.sub(before + re.escape(node) + r"(?![\w-])", host, text)
    return text


def run_playbook(
    cluster: Cluster,
    playbook: str,
    workdir: Path,
    *,
    limit: str | None = None,
    extravars: dict[str, Any] | None = None,
    check: bool = False,
    diff: bool = False,
    arguments: str = "",
) -> PlaybookRun:
    """`arguments`: more of ansible-playbook's command line, as typed (`extravars` go in a file)."""
    workdir.mkdir(parents=True, exist_ok=True)
    cmdline = " ".join([flag for flag, on in (("--check", check), ("--diff", diff)) if on] + ([arguments] if arguments else []))
    envvars = {
        **cluster.env(),
        "KUBECONFIG": str(cluster.runbook_kubeconfig),
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_NOCOLOR": "1",
        # What an operator sees (ansible-runner wraps this callback to record its events).
        "ANSIBLE_STDOUT_CALLBACK": "gpushare.gpu_sharing.gpushare",
    }
    mark = cluster.audit_mark()
    runner = ansible_runner.run(
        private_data_dir=str(workdir),
        playbook=str(REPO / "playbooks" / playbook),
        inventory=str(cluster.inventory),
        limit=inventory_limit(cluster, limit),
        # the run's files in its own folder, never the user's ~/.local/share/gpushare
        extravars={"gpushare_kubeconfig": str(cluster.runbook_kubeconfig), "gpushare_output_dir": str(workdir / "output"),
                   **(extravars or {})},
        cmdline=cmdline or None,
        envvars=envvars,
        quiet=True,
        timeout=600,
    )
    stdout = runner.stdout.read() if runner.stdout else ""
    if cluster.embedded:  # which runbook sent which audit events (gpushare.rbac.audit.read_runs)
        with (cluster.state_dir / RUNS_FILE).open("a") as runs:
            runs.write(json.dumps({"playbook": playbook, "start": mark, "end": cluster.audit_mark()}) + "\n")
    return PlaybookRun(runner.status, runner.rc, runner.stats or {}, stdout, list(runner.events))
