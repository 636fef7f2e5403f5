"""Registering the simulated fleet with the API server and waiting until the cluster is usable."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpushare.fleet import Fleet
from gpushare.kube import api_client, node_ready, wait_for


def register_nodes(kubeconfig: Path, fleet: Fleet) -> None:
    """Create every fleet node that does not exist yet (as a kubelet registers itself)."""
    core = client.CoreV1Api(api_client(kubeconfig))
    existing = {n.metadata.name for n in core.list_node().items}

    def create(manifest: dict) -> None:
        try:
            core.create_node(manifest)
        except ApiException as err:
            if err.status != 409:
                raise

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(create, [n.manifest() for n in fleet.nodes if n.name not in existing]))


def wait_until_ready(kubeconfig: Path, fleet: Fleet, operator_namespace: str, timeout_s: float = 180) -> None:
    """Every fleet node Ready, the default ServiceAccount there, and every GPU node's plugin running."""
    api = api_client(kubeconfig)
    core = client.CoreV1Api(api)
    wanted = {n.name for n in fleet.nodes}

    def nodes_ready() -> bool:
        ready = {n.metadata.name for n in core.list_node().items if node_ready(n)}
        return wanted <= ready

    wait_for(nodes_ready, timeout_s, f"all {len(wanted)} nodes to be Ready", interval_s=0.25)
    wait_for(lambda: core.read_namespaced_service_account("default", "default"), timeout_s,
             "the default ServiceAccount")
    gpu_nodes = {n.name for n in fleet.gpu_nodes}

    def plugins_published() -> bool:
        labelled = {
            n.metadata.name for n in core.list_node(label_selector="nvidia.com/gpu.replicas").items
        }
        return gpu_nodes <= labelled

    wait_for(plugins_published, timeout_s,
             f"the device plugin to publish all {len(gpu_nodes)} GPU nodes", interval_s=0.25)
