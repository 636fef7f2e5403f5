"""The GPU Operator's operands as the runbooks see them: which DaemonSets read the device-plugin
config, their pods on each node, and whether a pod runs the current template and can see the
config ConfigMap as it is now."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from gpushare.clock import parse_time

DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
GFD = "gpu-feature-discovery"
MPS = "nvidia-device-plugin-mps-control-daemon"
DRIVER = "nvidia-driver-daemonset"
VALIDATOR = "nvidia-operator-validator"  # its image is tagged with the operator's own release
# spec.devicePlugin.config is rendered into these (gpu-operator controllers/object_controls.go,
# handleDevicePluginConfig): a config change must restart their pods, and only theirs.
CONFIG_READERS = (DEVICE_PLUGIN, GFD, MPS)


def last_write(obj: dict[str, Any]) -> dt.datetime | None:
    """When an object was last written (its newest managedFields entry, else its creation)."""
    metadata = obj.get("metadata") or {}
    times = [parse_time(m.get("time")) for m in metadata.get("managedFields") or []]
    times.append(parse_time(metadata.get("creationTimestamp")))
    times = [t for t in times if t]
    return max(times) if times else None


@dataclass(frozen=True)
class OperandPod:
    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.raw["metadata"]["name"]

    @property
    def uid(self) -> str:
        return self.raw["metadata"]["uid"]

    @property
    def node(self) -> str:
        return (self.raw.get("spec") or {}).get("nodeName") or ""

    @property
    def daemonset(self) -> str:
        owners = self.raw["metadata"].get("ownerReferences") or []
        return next((o["name"] for o in owners if o.get("kind") == "DaemonSet"), "")

    @property
    def template_generation(self) -> str:
        return (self.raw["metadata"].get("labels") or {}).get("pod-template-generation", "")

    @property
    def terminating(self) -> bool:
        return bool(self.raw["metadata"].get("deletionTimestamp"))

    @property
    def ready(self) -> bool:
        status = self.raw.get("status") or {}
        return (status.get("phase") == "Running" and not self.terminating
                and any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []))

    @property
    def ready_since(self) -> dt.datetime | None:
        """When the pod last became Ready (its Ready condition's lastTransitionTime); None unless Ready."""
        conditions = (self.raw.get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if c.get("type") == "Ready" and c.get("status") == "True"), None)
        return parse_time(ready.get("lastTransitionTime")) if ready and self.ready else None

    @property
    def created(self) -> dt.datetime | None:
        return parse_time(self.raw["metadata"].get("creationTimestamp"))

    def sees(self, configmap: dict[str, Any] | None, started_after: Collection[str] = ()) -> bool:
        """The pod mounted the ConfigMap after its last write (a running pod sees a change only once
        the kubelet refreshes the volume, which a runbook cannot observe): it was created in a later
        second, or it is one of `started_after`, the pods a restart saw start after that very write
        (timestamps are whole seconds: the write's own second cannot tell)."""
        written = last_write(configmap) if configmap else None
        return written is None or (self.created is not None and self.created > written) or self.uid in started_after

    def problem(self) -> str:
        """Why the pod is not Ready, in the words kubectl would show."""
        status = self.raw.get("status") or {}
        for kind, statuses in (("init container", status.get("initContainerStatuses")),
                               ("container", status.get("containerStatuses"))):
            for container in statuses or []:
                waiting = (container.get("state") or {}).get("waiting") or {}
                terminated = (container.get("state") or {}).get("terminated") or {}
                if waiting.get("reason") or (terminated and terminated.get("exitCode")):
                    detail = waiting.get("message") or terminated.get("message") or ""
                    reason = waiting.get("reason") or terminated.get("reason") or "Error"
                    return f"{kind} {container.get('name')}: {reason}" + (f" ({detail})" if detail else "")
        return "terminating" if self.terminating else f"phase {status.get('phase') or 'Pending'}, not Ready"


@dataclass(frozen=True)
class Operand:
    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.raw["metadata"]["name"]

    @property
    def generation(self) -> str:
        """The template's generation, which the controller copies into pod-template-generation
        (metadata.generation also counts changes outside the template, e.g. minReadySeconds)."""
        metadata = self.raw["metadata"]
        return str((metadata.get("annotations") or {}).get("deprecated.daemonset.template.generation")
                   or metadata.get("generation", ""))

    @property
    def template(self) -> dict[str, Any]:
        return ((self.raw.get("spec") or {}).get("template") or {}).get("spec") or {}

    def selects(self, labels: dict[str, str]) -> bool:
        """Whether the template's nodeSelector picks a node with these labels (the operator's DaemonSets
        select their nodes by label: nvidia.com/gpu.deploy.<operand>=true)."""
        return all(labels.get(k) == v for k, v in (self.template.get("nodeSelector") or {}).items())

    def mounts(self, configmap: str) -> bool:
        return any((v.get("configMap") or {}).get("name") == configmap for v in self.template.get("volumes") or [])

    @property
    def image(self) -> str:
        """The first container's image."""
        return next((c.get("image", "") for c in self.template.get("containers") or []), "")

    @property
    def tolerations(self) -> list[dict[str, Any]]:
        return list(self.template.get("tolerations") or [])

    def current(self, pod: OperandPod) -> bool:
        return pod.template_generation == self.generation

    def rollout(self) -> tuple[int, int]:
        """(nodes running the current template, nodes it should run on)."""
        status = self.raw.get("status") or {}
        return int(status.get("updatedNumberScheduled") or 0), int(status.get("desiredNumberScheduled") or 0)

    @property
    def on_delete(self) -> bool:
        """updateStrategy OnDelete (ClusterPolicy daemonsets.updateStrategy): a new template reaches a
        node only when its pod is deleted; the controller never rolls."""
        return ((self.raw.get("spec") or {}).get("updateStrategy") or {}).get("type") == "OnDelete"

    @property
    def rolling(self) -> bool:
        """The DaemonSet controller has nodes left to move to the current template (or has not seen it
        yet). Under OnDelete it moves none: its nodes wait for their pods to be deleted, not for a roll."""
        status = self.raw.get("status") or {}
        updated, desired = self.rollout()
        return int(status.get("observedGeneration") or 0) < int(self.raw["metadata"].get("generation") or 0) \
            or (updated < desired and not self.on_delete)


def pods_by_node(pods: list[dict[str, Any]], daemonset: str) -> dict[str, list[OperandPod]]:
    grouped: dict[str, list[OperandPod]] = {}
    for raw in pods:
        pod = OperandPod(raw)
        if pod.daemonset == daemonset and pod.node:
            grouped.setdefault(pod.node, []).append(pod)
    return grouped
