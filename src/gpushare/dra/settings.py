"""The readiness's inputs as roles/dra_pilot passes them, and their problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHARING = ("timeslicing", "mps")
# The NVIDIA DRA driver's feature gate each sharing strategy needs (k8s-dra-driver-gpu's featureGates).
DRIVER_GATES = {"timeslicing": "TimeSlicingSettings", "mps": "MPSSupport"}
METRICS_COMPONENTS = ("kube-scheduler", "kube-controller-manager")


@dataclass(frozen=True)
class Settings:
    sharing: str = "timeslicing"
    extended_resource: bool = False
    extended_resource_name: str = "nvidia.com/gpu"
    device_class: str = "gpu.nvidia.com"
    queue_namespace: str = ""
    driver_namespace: str = "nvidia-dra-driver-gpu"
    kueue_namespace: str = "kueue-system"
    metrics_urls: dict[str, str] = field(default_factory=dict)
    metrics_ca_file: str = ""

    @classmethod
    def of(cls, inputs: dict[str, Any]) -> Settings:
        return cls(
            sharing=str(inputs.get("sharing") or "timeslicing"),
            extended_resource=str(inputs.get("extended_resource")).lower() in ("true", "yes", "1"),
            extended_resource_name=str(inputs.get("extended_resource_name") or "nvidia.com/gpu"),
            device_class=str(inputs.get("device_class") or "gpu.nvidia.com"),
            queue_namespace=str(inputs.get("queue_namespace") or ""),
            driver_namespace=str(inputs.get("driver_namespace") or "nvidia-dra-driver-gpu"),
            kueue_namespace=str(inputs.get("kueue_namespace") or "kueue-system"),
            metrics_urls={str(k): str(v) for k, v in (inputs.get("metrics_urls") or {}).items() if v},
            metrics_ca_file=str(inputs.get("metrics_ca_file") or ""),
        )

    def problems(self) -> list[str]:
        problems = []
        if self.sharing not in SHARING:
            problems.append(f"dra_pilot_sharing is {self.sharing!r}; give one of {', '.join(SHARING)}.")
        unknown = sorted(set(self.metrics_urls) - set(METRICS_COMPONENTS))
        if unknown:
            problems.append(f"dra_pilot_metrics_urls names {', '.join(unknown)}; it takes "
                            f"{' and '.join(METRICS_COMPONENTS)} only.")
        return problems
