"""The one connection setup over the official Kubernetes client, for the runbooks' Session, the simulator and the fixtures."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config


def api_client(kubeconfig: Path | str | None = None, context: str | None = None, retries: bool = True,
               persist: bool = True) -> client.ApiClient:
    """The official client's connection (auth, TLS, pooling) for a kubeconfig's context. The runbooks'
    Session sends each request once (`retries=False`: it retries itself, see k8s/session.py) and never
    writes a refreshed token back to the kubeconfig (`persist=False`)."""
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(Path(kubeconfig).expanduser()) if kubeconfig else None,
        context=context or None, client_configuration=configuration, persist_config=persist,
    )
    if not retries:
        configuration.retries = False
    # The simulator and fixtures run many requests in parallel against one API server.
    configuration.connection_pool_maxsize = 32
    return client.ApiClient(configuration)
