"""`gpushare sim dcgm-exporter`: /metrics on loopback, shaped like dcgm-exporter's, for every GPU
(or MIG instance) the simulated nodes hold, with the values of their workload profiles now, written
as the exporter the simulated operator deploys writes them (its DaemonSet's image version and
KUBERNETES_VIRTUAL_GPUS: exposition.exporter_of) unless the command line fixes the node label."""

from __future__ import annotations

import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kubernetes import client

from dataclasses import replace
from typing import Any

from gpushare_testbed.dcgm_sim.exposition import Exporter, SimGpu, exporter_of, exposition
from gpushare_testbed.dcgm_sim.hardware import fleet_gpus, node_hardware
from gpushare.kube import api_client

NODES_TTL_S = 5.0  # how long a node listing is reused (MIG changes show within it)
OPERAND = "nvidia-dcgm-exporter"  # the operator's DaemonSet, its label `app` and its container


def deployed_exporter(daemonsets: list[Any]) -> Exporter | None:
    """The exporter the operator's dcgm-exporter DaemonSet runs (client models), None without one."""
    for daemonset in daemonsets:
        for container in daemonset.spec.template.spec.containers or []:
            if container.name == OPERAND:
                env = {entry.name: entry.value or "" for entry in container.env or []}
                return exporter_of(container.image or "", env)
    return None


class FleetView:
    """The fleet's GPUs and the deployed exporter, re-read from the API server at most every NODES_TTL_S."""

    def __init__(self, core: client.CoreV1Api, apps: client.AppsV1Api) -> None:
        self.core, self.apps = core, apps
        self._lock = threading.Lock()
        self._read_at = 0.0
        self._gpus: list[SimGpu] = []
        self._exporter: Exporter | None = None

    def read(self) -> tuple[list[SimGpu], Exporter | None]:
        with self._lock:
            if time.monotonic() - self._read_at > NODES_TTL_S:
                self._gpus = fleet_gpus(node_hardware(self.core.list_node().items))
                self._exporter = deployed_exporter(
                    self.apps.list_daemon_set_for_all_namespaces(label_selector=f"app={OPERAND}").items)
                self._read_at = time.monotonic()
            return self._gpus, self._exporter


def serve(kubeconfig: Path | None, context: str | None, port: int, ready_file: Path | None,
          host_label: str | None = None, fields: frozenset[str] | None = None) -> int:
    """Serve /metrics; `host_label` fixes the node label (None: the deployed exporter's), `fields`
    the collected fields (None: every family the simulator models)."""
    connection = api_client(kubeconfig, context)
    fleet = FleetView(client.CoreV1Api(connection), client.AppsV1Api(connection))
    epoch = int(time.time())

    def metrics() -> str:
        gpus, deployed = fleet.read()
        exporter = replace(deployed or Exporter(), fields=fields)
        if host_label is not None:
            exporter = replace(exporter, host_label=host_label)
        return exposition(gpus, int(time.time()), epoch, exporter)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, kind = metrics(), "text/plain; version=0.0.4"
            elif path == "/health":
                body, kind = "ok\n", "text/plain"
            else:
                self.send_error(404, "only /metrics and /health")
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet: one scrape every 15 s
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    fleet.read()  # fail now, not at the first scrape, when the API server cannot be read
    if ready_file:
        ready_file.write_text(json.dumps({"url": f"http://127.0.0.1:{port}/metrics", "epoch": epoch}))
    server.serve_forever()
    return 0
