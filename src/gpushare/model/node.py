"""One model of a Kubernetes node for every runbook: GPU facts from the GPU Operator's labels,
what the device plugin advertises, the shared pool, the runbooks' cordon mark, and the
fingerprint that "unchanged" is judged by."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpushare.model.taints import Taint

NVIDIA = "nvidia.com/"  # the prefix of the GPU Operator's resources and labels
GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
PRESENT = "nvidia.com/gpu.present"
COUNT = "nvidia.com/gpu.count"
REPLICAS = "nvidia.com/gpu.replicas"
STRATEGY = "nvidia.com/gpu.sharing-strategy"
SHARING_STRATEGIES = ("time-slicing", "mps")  # GFD's strategy labels of a node whose GPUs are shared
PRODUCT = "nvidia.com/gpu.product"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"  # the mixed strategy's resources and GFD's labels of them
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
# Products the GPU Operator treats as MIG-capable when GFD has not labelled nvidia.com/mig.capable
# (controllers/state_manager.go hasMIGCapableGPU).
MIG_PRODUCT_HINTS = ("h100", "a100", "a30")
# The labels sharing changes, and so the ones "unchanged" compares (GFD's timestamp and the
# operator's deploy labels change on their own).
SHARING_LABELS = (COUNT, REPLICAS, STRATEGY, PRODUCT, CONFIG_LABEL)
CORDONED_BY = "gpushare.io/cordoned-by"


# What this model reads of a Node object, by part; `trimmed` keeps only that.
FIELDS = {"metadata": ("name", "uid", "resourceVersion", "creationTimestamp", "labels", "annotations"),
          "spec": ("taints", "unschedulable"), "status": ("capacity", "allocatable")}


def trimmed(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with only the FIELDS this model reads: a fleet's list is mostly conditions, addresses
    and node info, which no runbook plans with (a 500-node read is megabytes otherwise)."""
    kept: dict[str, Any] = {k: raw[k] for k in ("apiVersion", "kind") if k in raw}
    for part, names in FIELDS.items():
        if part in raw:
            kept[part] = {name: raw[part][name] for name in names if name in (raw[part] or {})}
    return kept


# Ansible copies and tags every value of a structure a task returns or passes on: a plan carrying a
# fingerprint per GPU node, or a read of every node, crosses it as one JSON text instead (on a
# 500-node fleet that halved the plan's and the verify's time).
def packed(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def unpacked(value: Any) -> Any:
    """What `packed` made (or the value itself when it was passed unpacked: a list read or built)."""
    return json.loads(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class Pool:
    """The shared pool: the label shared pods select and the taint that keeps other pods away."""

    label_key: str
    label_value: str
    taint: Taint | None

    @classmethod
    def of(cls, data: dict[str, Any]) -> Pool:
        taint = data.get("taint")
        return cls(str(data["label_key"]), str(data["label_value"]),
                   Taint(str(taint["key"]), str(taint.get("value") or ""), "NoSchedule") if taint else None)

    def as_dict(self) -> dict[str, Any]:
        return {"label_key": self.label_key, "label_value": self.label_value,
                "taint": {"key": self.taint.key, "value": self.taint.value} if self.taint else None}


def quantity(value: Any) -> int:
    """An extended-resource quantity (always an integer count); 0 when absent or not a count."""
    text = str(value if value is not None else 0)
    return int(text) if text.isdigit() else 0


@dataclass(frozen=True)
class Node:
    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.raw["metadata"]["name"]

    @property
    def resource_version(self) -> str:
        return str(self.raw["metadata"].get("resourceVersion") or "")

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.raw["metadata"].get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.raw["metadata"].get("annotations") or {})

    @property
    def taints(self) -> list[Taint]:
        return [Taint.of(t) for t in (self.raw.get("spec") or {}).get("taints") or []]

    @property
    def unschedulable(self) -> bool:
        return bool((self.raw.get("spec") or {}).get("unschedulable"))

    def capacity(self, resource: str) -> int:
        return quantity(((self.raw.get("status") or {}).get("capacity") or {}).get(resource))

    def allocatable(self, resource: str) -> int:
        return quantity(((self.raw.get("status") or {}).get("allocatable") or {}).get(resource))

    def resources(self, part: str, prefix: str = "") -> dict[str, str]:
        """status.<part> (capacity or allocatable) as the API server wrote it, resource -> quantity
        text, only the resources whose names start with `prefix`."""
        return {str(k): str(v) for k, v in ((self.raw.get("status") or {}).get(part) or {}).items()
                if str(k).startswith(prefix)}

    @property
    def ready(self) -> bool:
        """The kubelet's Ready condition is True (status.conditions: read from an untrimmed Node)."""
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (self.raw.get("status") or {}).get("conditions") or [])

    @property
    def gpu_present(self) -> bool:
        return self.labels.get(PRESENT) == "true"

    @property
    def gpus(self) -> int | None:
        """Physical GPUs as GPU feature discovery counts them; None before it has labelled the node."""
        count = self.labels.get(COUNT, "")
        return int(count) if count.isdigit() else None

    @property
    def replicas(self) -> int:
        value = self.labels.get(REPLICAS, "")
        return int(value) if value.isdigit() else 1

    @property
    def unhealthy(self) -> tuple[str, int, int] | None:
        """(resource, allocatable, capacity) of the whole-GPU resource whose allocatable is below its
        capacity: devices the device plugin reports unhealthy (an Xid), or a plugin that stopped
        serving them; None when every device advertised is allocatable. A resource the plugin no
        longer serves (allocatable 0) while the other one is served is a rename the kubelet still
        shows for 5 minutes, not a fault."""
        served = {r for r in (GPU, SHARED) if self.allocatable(r) > 0}
        for resource in (GPU, SHARED):
            allocatable, capacity = self.allocatable(resource), self.capacity(resource)
            if allocatable < capacity and (resource in served or not served):
                return resource, allocatable, capacity
        return None

    @property
    def strategy(self) -> str:
        return self.labels.get(STRATEGY, "none")

    @property
    def config_label(self) -> str:
        return self.labels.get(CONFIG_LABEL, "")

    @property
    def mig_config(self) -> str:
        return self.labels.get(MIG_CONFIG, "")

    @property
    def mig_enabled(self) -> bool:
        return self.mig_config not in ("", "all-disabled")

    @property
    def mig_in_hardware(self) -> str:
        """What GFD and the kubelet show of MIG devices, whoever enabled MIG (the MIG manager, or
        nvidia-smi with no nvidia.com/mig.config label to say so), as "key=value"; "" when nothing
        does. GFD (k8s-device-plugin internal/lm/mig-strategy.go) suffixes the product with
        -MIG-<profile> (-MIG-INVALID for a mix) under the single strategy and labels
        nvidia.com/mig-<profile>.count under mixed; the plugin advertises nvidia.com/mig-<profile>."""
        product = self.labels.get(PRODUCT, "")
        if "-MIG-" in product:
            return f"{PRODUCT}={product}"
        counts = [f"{k}={v}" for k, v in sorted(self.labels.items())
                  if k.startswith(MIG_RESOURCE_PREFIX) and k.endswith(".count") and quantity(v)]
        served = [f"{k}={v}" for k, v in sorted(self.resources("capacity", MIG_RESOURCE_PREFIX).items()) if quantity(v)]
        return (counts or served or [""])[0]

    @property
    def mig_state(self) -> str:
        """The MIG manager's nvidia.com/mig.config.state: pending, rebooting, success or failed ("" before any)."""
        return self.labels.get(MIG_STATE, "")

    @property
    def mig_capable(self) -> bool:
        """As the GPU Operator decides it: GFD's nvidia.com/mig.capable, else the product name."""
        if MIG_CAPABLE in self.labels:
            return self.labels[MIG_CAPABLE] == "true"
        return any(hint in self.labels.get(PRODUCT, "").lower() for hint in MIG_PRODUCT_HINTS)

    @property
    def product(self) -> str:
        """The GPU product without what GFD appends for MIG (-MIG-<profile>) or sharing (-SHARED)."""
        return self.labels.get(PRODUCT, "").split("-MIG-", 1)[0].removesuffix("-SHARED")

    @property
    def deploy_labels(self) -> dict[str, str]:
        """The operator's nvidia.com/gpu.deploy.<component> labels (the MIG manager pauses its GPU clients')."""
        return {k: v for k, v in self.labels.items() if k.startswith(DEPLOY_PREFIX)}

    @property
    def cordoned_by(self) -> str:
        return self.annotations.get(CORDONED_BY, "")

    @property
    def shares(self) -> bool:
        """The device plugin serves replicas of its GPUs (time-slicing or MPS): it advertises
        nvidia.com/gpu.shared, or GFD labels a sharing strategy. Not capacity: the kubelet keeps a
        resource no plugin serves any more at its capacity (allocatable 0) for 5 minutes
        (devicemanager endpointStopGracePeriod), e.g. right after a rollback."""
        return self.allocatable(SHARED) > 0 or self.labelled_shared

    @property
    def labelled_shared(self) -> bool:
        """GFD labels a sharing strategy (time-slicing or MPS) on the node."""
        return self.strategy in SHARING_STRATEGIES

    @property
    def shared_resource(self) -> str:
        """The resource the node's shares go by: nvidia.com/gpu when it shares without renaming (GFD
        then suffixes the product -SHARED), else nvidia.com/gpu.shared."""
        return GPU if self.labels.get(PRODUCT, "").endswith("-SHARED") else SHARED

    def in_pool(self, pool: Pool) -> bool:
        return self.labels.get(pool.label_key) == pool.label_value

    def pool_taint(self, pool: Pool) -> Taint | None:
        """The node's taint with the pool taint's key and effect (whoever set it)."""
        if pool.taint is None:
            return None
        return next((t for t in self.taints if t.key == pool.taint.key and t.effect == pool.taint.effect), None)

    def fingerprint(self, pool: Pool | None = None) -> dict[str, Any]:
        """What GPU sharing changes on a node; two equal fingerprints mean "unchanged" (a quantity of
        0 is none: the kubelet never removes a resource a plugin once served)."""
        labels = self.labels
        keys = SHARING_LABELS + ((pool.label_key,) if pool else ())
        return {
            "capacity": {k: v for k, v in self.resources("capacity", NVIDIA).items() if quantity(v)},
            "allocatable": {k: v for k, v in self.resources("allocatable", NVIDIA).items() if quantity(v)},
            "labels": {k: labels[k] for k in keys if k in labels},
            "taints": sorted(str(t) for t in self.taints),
            "unschedulable": self.unschedulable,
        }


CORDON_TAINT = "node.kubernetes.io/unschedulable:"


def fingerprint_changes(before: dict[str, Any], after: dict[str, Any], allocatable: bool = True,
                        schedulable: bool = True) -> list[str]:
    """What differs between two fingerprints, one short phrase per difference (without allocatable
    or schedulability where a roll of the operator's changes them for a while). The capacity of a
    resource no plugin serves, before or after (allocatable 0), is not compared: the kubelet keeps it
    for its endpointStopGracePeriod, then drops it to 0, on its own."""
    changes = []
    served = {k for fingerprint in (before, after) for k, v in (fingerprint.get("allocatable") or {}).items() if quantity(v)}
    for part in ("capacity", "allocatable", "labels"):
        if part == "allocatable" and not allocatable:
            continue
        was, now = before.get(part) or {}, after.get(part) or {}
        for key in sorted(set(was) | set(now)):
            if part == "capacity" and key not in served:
                continue
            if was.get(key) != now.get(key):
                absent = "(none)" if part == "labels" else "0"
                changes.append(f"{part} {key} {was.get(key, absent)} -> {now.get(key, absent)}")
    # a cordon's own taint (kube-controller-manager's) comes and goes with it
    was, now = (before.get("taints"), after.get("taints")) if schedulable else (
        [t for t in before.get("taints") or [] if not t.startswith(CORDON_TAINT)],
        [t for t in after.get("taints") or [] if not t.startswith(CORDON_TAINT)])
    if was != now:
        changes.append(f"taints {before.get('taints')} -> {after.get('taints')}")
    if schedulable and before.get("unschedulable") != after.get("unschedulable"):
        changes.append("cordoned" if after.get("unschedulable") else "uncordoned")
    return changes
