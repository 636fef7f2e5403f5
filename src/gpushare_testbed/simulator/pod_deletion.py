"""Which pods the simulated driver upgrade deletes or drains, as the GPU Operator's upgrade
controller picks them (NVIDIA/k8s-operator-libs pkg/upgrade with NVIDIA/gpu-operator's filter):

- its GPU pods (gpu-operator cmd/gpu-operator/main.go gpuPodSpecFilter): Running or Pending, with a
  container whose limits or requests name a resource starting `nvidia.com/gpu` or `nvidia.com/mig-`;
- kubectl's drain filters (k8s.io/kubectl pkg/drain filters.go, in their order, run with
  IgnoreAllDaemonSets): a pod whose controller is a DaemonSet and a mirror (static) pod are skipped;
  a pod with an emptyDir volume is an error unless deleteEmptyDir; a pod without a controller is an
  error unless force; a finished pod (Succeeded, Failed) passes every filter but the mirror one;
- the drain's `podSelector` (apimachinery labels.Parse: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
  `k in (a,b)`, `k notin (a,b)`; empty selects every pod)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
DELETE, SKIP = "delete", "skip"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# filters.go localStorageFatal and unmanagedFatal, as PodDeleteList.errors writes them
EMPTY_DIR = "Pods with local storage (use --delete-emptydir-data to override)"
UNMANAGED = "cannot delete Pods that declare no controller (use --force to override)"
_TERM = re.compile(r"\s*([^,(]+(?:\([^)]*\))?)\s*(?:,|$)")


@dataclass(frozen=True)
class DeletionRules:
    """spec.driver.upgradePolicy's podDeletion and drain settings (the CRD's defaults: all off, every pod)."""

    deletion_force: bool = False
    deletion_empty_dir: bool = False
    drain_force: bool = False
    drain_empty_dir: bool = False
    drain_selector: str = ""

    @classmethod
    def of(cls, upgrade_policy: dict[str, Any]) -> DeletionRules:
        deletion, drain = (value if isinstance(value := upgrade_policy.get(key), dict) else {} for key in ("podDeletion", "drain"))
        return cls(bool(deletion.get("force")), bool(deletion.get("deleteEmptyDir")), bool(drain.get("force")),
                   bool(drain.get("deleteEmptyDir")), str(drain.get("podSelector") or ""))


def is_gpu_pod(pod: Obj) -> bool:
    if (pod.get("status") or {}).get("phase") not in ("Running", "Pending"):
        return False
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        named = [*(resources.get("limits") or {}), *(resources.get("requests") or {})]
        if any(name.startswith(("nvidia.com/gpu", "nvidia.com/mig-")) for name in named):
            return True
    return False


def drain_verdict(pod: Obj, force: bool, empty_dir: bool) -> str:
    """DELETE, SKIP, or the fatal message of the first filter that refuses the pod (its DaemonSet taken to exist)."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    controller = next((owner for owner in meta.get("ownerReferences") or [] if owner.get("controller")), None)
    if not finished and controller is not None and controller.get("kind") == "DaemonSet":
        return SKIP
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return SKIP
    if not finished and not empty_dir and any("emptyDir" in volume for volume in spec.get("volumes") or []):
        return EMPTY_DIR
    if not finished and not force and controller is None:
        return UNMANAGED
    return DELETE


def deletion_refused(pod: Obj, rules: DeletionRules) -> bool:
    """The GPU-pod deletion cannot delete this pod (its drain helper leaves or refuses it)."""
    return drain_verdict(pod, rules.deletion_force, rules.deletion_empty_dir) != DELETE


def selected(selector: str, labels: dict[str, str]) -> bool:
    for term in (match.group(1).strip() for match in _TERM.finditer(selector) if match.group(1).strip()):
        if found := re.fullmatch(r"(\S+)\s+(in|notin)\s*\(([^)]*)\)", term):
            values = {value.strip() for value in found.group(3).split(",")}
            if (labels.get(found.group(1)) in values) != (found.group(2) == "in"):
                return False
        elif found := re.fullmatch(r"(\S+?)\s*(==|!=|=)\s*(\S*)", term):
            key, op, value = found.groups()
            if (labels.get(key) == value) != (op != "!="):
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True
