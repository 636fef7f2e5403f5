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


@dataclass(frozen=True)
class PilotSettings:
    """The enable's and verify's inputs (roles/dra_pilot entry points enable and verify)."""

    readiness: Settings
    plugin_label: str = "nvidia.com/dra-kubelet-plugin"
    class_name: str = "gpu-pilot.gpushare.io"
    check_namespace: str = "gpushare-share-check"
    check_image: str = "registry.k8s.io/pause:3.10"
    namespace: str = "gpu-operator"  # the GPU Operator's
    records_namespace: str = "gpushare-system"
    drain_timeout: int = 300
    drain_grace_period: int | None = None
    plugin_timeout: int = 300
    verify_timeout: int = 180
    prometheus_url: str = ""  # where DCGM's series are: the pool's UUIDs are compared with them

    @classmethod
    def of(cls, inputs: dict[str, Any]) -> PilotSettings:
        grace = inputs.get("drain_grace_period")
        return cls(
            readiness=Settings.of(inputs),
            plugin_label=str(inputs.get("plugin_label") or "nvidia.com/dra-kubelet-plugin"),
            class_name=str(inputs.get("class_name") or "gpu-pilot.gpushare.io"),
            check_namespace=str(inputs.get("check_namespace") or "gpushare-share-check"),
            check_image=str(inputs.get("check_image") or "registry.k8s.io/pause:3.10"),
            namespace=str(inputs.get("namespace") or "gpu-operator"),
            records_namespace=str(inputs.get("records_namespace") or "gpushare-system"),
            drain_timeout=int(inputs.get("drain_timeout") or 300),
            drain_grace_period=None if grace in (None, "") else int(grace),
            plugin_timeout=int(inputs.get("plugin_timeout") or 300),
            verify_timeout=int(inputs.get("verify_timeout") or 180),
            prometheus_url=str(inputs.get("prometheus_url") or ""),
        )

    @property
    def sharing(self) -> str:
        return self.readiness.sharing

    def gpu_config(self) -> dict[str, Any]:
        """The driver's GpuConfig for the sharing asked for (resource.nvidia.com/v1beta1)."""
        if self.sharing == "mps":
            sharing: dict[str, Any] = {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 25}}
        else:
            sharing = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}
        return {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": sharing}

    def problems(self) -> list[str]:
        problems = self.readiness.problems()
        if "/" not in self.plugin_label:
            problems.append(f"dra_pilot_plugin_label is {self.plugin_label!r}; give a prefixed label key "
                            "(nvidia.com/dra-kubelet-plugin).")
        for name, value in (("dra_pilot_drain_timeout", self.drain_timeout), ("dra_pilot_plugin_timeout",
                            self.plugin_timeout), ("dra_pilot_verify_timeout", self.verify_timeout)):
            if value <= 0:
                problems.append(f"{name} is {value}; give a number of seconds above 0.")
        return problems
