"""`gpushare sim dcgm-exporter`: /metrics on loopback, shaped like dcgm-exporter's, for every GPU
(or MIG instance) the simulated nodes hold, with the values of their workload profiles now."""

from __future__ import annotations

import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kubernetes import client

from gpushare_testbed.dcgm_sim.exposition import Exporter, SimGpu, exposition
from gpushare_testbed.dcgm_sim.hardware import fleet_gpus, node_hardware
from gpushare.kube import api_client

NODES_TTL_S = 5.0  # how long a node listing is reused (MIG changes show within it)


class FleetView:
    """The fleet's GPUs, re-read from the API server at most every NODES_TTL_S."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._read_at = 0.0
        self._gpus: list[SimGpu] = []

    def gpus(self) -> list[SimGpu]:
        with self._lock:
            if time.monotonic() - self._read_at > NODES_TTL_S:
                self._gpus = fleet_gpus(node_hardware(self.core.list_node().items))
                self._read_at = time.monotonic()
            return self._gpus


def serve(kubeconfig: Path | None, context: str | None, port: int, ready_file: Path | None,
          exporter: Exporter = Exporter()) -> int:
    fleet = FleetView(client.CoreV1Api(api_client(kubeconfig, context)))
    epoch = int(time.time())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, kind = exposition(fleet.gpus(), int(time.time()), epoch, exporter), "text/plain; version=0.0.4"
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
    fleet.gpus()  # fail now, not at the first scrape, when the API server cannot be read
    if ready_file:
        ready_file.write_text(json.dumps({"url": f"http://127.0.0.1:{port}/metrics", "epoch": epoch}))
    server.serve_forever()
    return 0
