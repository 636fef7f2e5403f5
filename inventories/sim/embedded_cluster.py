#!/usr/bin/env python3
"""Ansible inventory of the embedded cluster: every GPU node a host in `gpu_nodes`.

The cluster is found through $GPUSHARE_STATE_DIR (default: .gpushare in the repository);
`make sim-up` (gpushare sim up) starts it. Only the standard library is used, so any Python 3
runs this script: the one on the PATH, or the one that runs Ansible. Hosts are managed through
the API server, so the connection is local."""

import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def main() -> int:
    if "--host" in sys.argv:
        print("{}")
        return 0
    state_dir = Path(os.environ.get("GPUSHARE_STATE_DIR", REPO / ".gpushare")).resolve()
    info_file, pki = state_dir / "cluster.json", state_dir / "pki"
    if not info_file.exists():
        return fail(f"no embedded cluster in {state_dir}; start it with `make sim-up` (gpushare sim up)")
    info = json.loads(info_file.read_text())
    server = info["server"]
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    # The runbooks run as deploy/rbac's identity (README.md), not as an administrator: the
    # inventory reads the nodes with it too (the admin kubeconfig stays for kubectl).
    identity = "runbook" if (pki / "runbook.crt").exists() else "admin"
    context.load_cert_chain(str(pki / f"{identity}.crt"), str(pki / f"{identity}.key"))
    # The names only, as a server-side Table without the objects (what `kubectl get` asks for): on a
    # 500-node fleet the full list is megabytes, this a few hundred bytes a node.
    url = f"{server}/api/v1/nodes?labelSelector=nvidia.com%2Fgpu.present%3Dtrue&includeObject=None"
    request = urllib.request.Request(url, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310 - our own server
            table = json.load(response)
    except (urllib.error.URLError, OSError) as err:
        return fail(f"the embedded cluster's API server at {server} does not answer ({err}); "
                    "is it running? `gpushare sim status`")
    name = [c["name"] for c in table["columnDefinitions"]].index("Name")
    kubeconfig = state_dir / "kubeconfigs" / "runbook.yaml" if identity == "runbook" else state_dir / "kubeconfig"
    variables = {"gpushare_kubeconfig": str(kubeconfig), "ansible_connection": "local",
                 # the scheduler's and controller-manager's /metrics (their feature gates, dra-readiness.yml)
                 "dra_pilot_metrics_urls": {name: f"https://127.0.0.1:{info['ports'][name]}/metrics"
                                            for name in ("kube-scheduler", "kube-controller-manager")}}
    prometheus = state_dir / "prometheus.json"  # written by `gpushare sim prometheus`
    if prometheus.exists():
        variables["baseline_prometheus_url"] = json.loads(prometheus.read_text())["url"]
    inventory = {
        "all": {"vars": variables},
        "gpu_nodes": {"hosts": sorted(row["cells"][name] for row in table["rows"])},
        "_meta": {"hostvars": {}},
    }
    print(json.dumps(inventory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
