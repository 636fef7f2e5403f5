"""How much of an extended resource a pod holds, counted as the scheduler counts it."""

from __future__ import annotations

from typing import Any


def container_request(container: dict[str, Any], resource: str) -> int:
    """A container's amount of `resource`: its limit, else its request (extended resources need both equal)."""
    spec = container.get("resources") or {}
    wanted = {**(spec.get("requests") or {}), **(spec.get("limits") or {})}
    try:
        return max(int(str(wanted.get(resource) or 0)), 0)
    except ValueError:
        return 0


def pod_request(pod: dict[str, Any], resource: str) -> int:
    """The larger of the containers' sum and the largest init container (init containers run one
    at a time and their devices are reused by the containers after them)."""
    spec = pod.get("spec") or {}
    containers = sum(container_request(c, resource) for c in spec.get("containers") or [])
    init = max((container_request(c, resource) for c in spec.get("initContainers") or []), default=0)
    return max(containers, init)
