#!/usr/bin/env python3
"""Ansible inventory of the embedded cluster: every GPU node a host in `gpu_nodes`.

The cluster is found through $GPUSHARE_STATE_DIR (default: .gpushare in the repository);
`gpushare sim up` starts it. Hosts are managed through the API server, so connection is local.
"""

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    if "--host" in sys.argv:
        print("{}")
        return 0
    state_dir = Path(os.environ.get("GPUSHARE_STATE_DIR", REPO / ".gpushare")).resolve()
    kubeconfig = state_dir / "kubeconfig"
    if not kubeconfig.exists():
        print(f"no embedded cluster in {state_dir}; start it with `make sim-up` (gpushare sim up)", file=sys.stderr)
        return 1
    from kubernetes import client, config  # noqa: PLC0415 - only needed once the cluster exists

    api = config.new_client_from_config(config_file=str(kubeconfig))
    nodes = client.CoreV1Api(api).list_node(label_selector="nvidia.com/gpu.present=true").items
    variables = {"gpushare_kubeconfig": str(kubeconfig), "ansible_connection": "local"}
    prometheus = state_dir / "prometheus.json"  # written by `gpushare sim prometheus`
    if prometheus.exists():
        variables["baseline_prometheus_url"] = json.loads(prometheus.read_text())["url"]
    inventory = {
        "all": {"vars": variables},
        "gpu_nodes": {"hosts": sorted(n.metadata.name for n in nodes)},
        "_meta": {"hostvars": {}},
    }
    print(json.dumps(inventory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
