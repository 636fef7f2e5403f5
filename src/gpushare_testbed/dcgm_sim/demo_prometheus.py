"""`gpushare sim prometheus`: a Prometheus for the embedded cluster that scrapes its simulated DCGM
exporter, started over a generated history (backfilled with promtool) so that a baseline of the
last week has something to read at once. It lives in the cluster's state directory and stops with
`gpushare sim down`."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

from kubernetes import client

from gpushare_testbed.controlplane import StateDir, free_port
from gpushare_testbed.dcgm_sim.backfill import backfill
from gpushare_testbed.dcgm_sim.exporter import OPERAND, deployed_exporter
from gpushare_testbed.dcgm_sim.exposition import Exporter
from gpushare_testbed.dcgm_sim.hardware import fleet_gpus, node_hardware
from gpushare.kube import api_client
from gpushare_testbed.processes import Component, ComponentError, alive, start, wait_ready

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
NAME = "prometheus"


def info_file(state: StateDir) -> Path:
    return state.root / "prometheus.json"


def ensure_prometheus(state: StateDir, history_s: int, step_s: int, scrape_interval: str) -> tuple[str, bool]:
    """The URL of the running demo Prometheus, started first if needed; True when it was started now."""
    state.check_ours()  # below, its prometheus/ is replaced
    if alive(state.pid_file(NAME)) and info_file(state).exists():
        return json.loads(info_file(state).read_text())["url"], False
    exporter_file = state.root / "dcgm-exporter.json"
    if not exporter_file.exists():
        raise ComponentError(f"no simulated DCGM exporter in {state.root}: start the cluster with `gpushare sim up`")
    if not Path(PROMETHEUS).is_file():
        raise ComponentError(f"{PROMETHEUS} not found: install it with scripts/install-prometheus.sh (make setup)")
    exporter = json.loads(exporter_file.read_text())
    connection = api_client(state.kubeconfig)
    nodes = node_hardware(client.CoreV1Api(connection).list_node().items)
    # the history as the exporter deployed now writes it, so that it joins the live series
    deployed = deployed_exporter(client.AppsV1Api(connection).list_daemon_set_for_all_namespaces(
        label_selector=f"app={OPERAND}").items)
    root = state.root / NAME
    shutil.rmtree(root, ignore_errors=True)
    now = int(time.time())
    samples = backfill(fleet_gpus(nodes), now - history_s - 3600, now, step_s, exporter["epoch"], root / "data",
                       exporter=deployed or Exporter())
    target = exporter["url"].removeprefix("http://").removesuffix("/metrics")
    (root / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {scrape_interval}\n"
        f"scrape_configs:\n  - job_name: dcgm-exporter\n    static_configs:\n      - targets: ['{target}']\n")
    url = f"http://127.0.0.1:{free_port()}"
    component = Component(NAME, (
        PROMETHEUS, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
        "--storage.tsdb.retention.time=30d", f"--web.listen-address={url.removeprefix('http://')}",
        "--log.level=warn",
    ), state.log(NAME), state.pid_file(NAME))
    start(component)
    wait_ready(component, lambda: _ready(url), timeout_s=120)
    info_file(state).write_text(json.dumps({"url": url, "samples_backfilled": samples}))
    return url, True


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:  # noqa: S310 - loopback URL we built
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
