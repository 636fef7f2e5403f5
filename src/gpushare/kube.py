"""Small helpers over the official Kubernetes client: connecting and bounded polling."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kubernetes import client, config

T = TypeVar("T")


def api_client(kubeconfig: Path | str | None = None, context: str | None = None) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(kubeconfig) if kubeconfig else None, context=context, client_configuration=configuration
    )
    # The simulator and fixtures run many requests in parallel against one API server.
    configuration.connection_pool_maxsize = 32
    return client.ApiClient(configuration)


class WaitTimeout(TimeoutError):
    """A bounded wait ran out; the message names what was awaited and the last observation."""


def wait_for(probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """Poll until `probe` returns a truthy value; raise WaitTimeout naming `what` otherwise."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            result = probe()
            if result:
                return result
        except Exception as err:  # noqa: BLE001 - the last error is reported on timeout
            last_error = err
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise WaitTimeout(f"timed out after {timeout_s:.0f}s waiting for {what}{detail}")
        time.sleep(interval_s)
