"""The DCGM exporter's view of the simulated GPUs: its metric names, help texts and labels.

Labels follow dcgm-exporter's template (internal/pkg/rendermetrics/render_metrics.go): `gpu`,
`UUID`, `pci_bus_id`, `device`, `modelName`, on MIG instances `GPU_I_PROFILE` and `GPU_I_ID`, then
the node label, then the Kubernetes mapping of the pod holding the card, its keys in sorted order
as the template ranges over them (`container`, `namespace`, `pod`). The node label is `hostname`
since upstream commit d5e5f51 (4.6.0-4.8.3, the image the GPU Operator deploys) and `Hostname`
before it: `Exporter.host_label` chooses. `Exporter.fields` is the exporter's counters file (its
`--collectors`, DCGM_EXPORTER_COLLECTORS): a family it does not list is not exported, as
DCGM_FI_DEV_FB_RESERVED is not before 4.3.1-4.4.0 (etc/dcp-metrics-included.csv). MIG instances
report no DCGM_FI_DEV_GPU_UTIL / DCGM_FI_DEV_MEM_COPY_UTIL, only the profiling ratios.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gpushare_testbed.dcgm_sim.profiles import Profile, Reading, reading, seed_of

# The node label, by release (the module doc): up to 4.5.3-4.8.2, since 4.6.0-4.8.3.
HOST_LABELS = ("Hostname", "hostname")
# NVML's names for the products GFD labels with dashes (gpu_catalog names).
NVML_NAMES = {
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-L4": "NVIDIA L4",
    "Tesla-T4": "Tesla T4",
}
_UUID_NAMESPACE = uuid.UUID("6f0c4f52-3c1b-4f3e-9a57-1d1b0c5e9a10")


@dataclass(frozen=True)
class SimGpu:
    """One series source: a whole GPU, or one MIG instance of it."""

    node: str
    index: int
    product: str
    fb_total_mib: int
    profile: Profile
    mig_profile: str | None = None
    mig_instance: int | None = None

    @property
    def uuid(self) -> str:
        return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{self.node}/{self.index}')}"

    @property
    def seed(self) -> int:
        return seed_of(self.node, self.index, self.mig_instance)

    @property
    def fb_reserved_mib(self) -> int:
        return round(self.fb_total_mib * 0.007)

    def labels(self, host_label: str = "hostname") -> dict[str, str]:
        labels = {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "pci_bus_id": f"00000000:{0x18 + 0x10 * self.index:02X}:00.0",
            "device": f"nvidia{self.index}",
            "modelName": NVML_NAMES.get(self.product, self.product.replace("-", " ")),
        }
        if self.mig_profile is not None:
            labels |= {"GPU_I_PROFILE": self.mig_profile, "GPU_I_ID": str(self.mig_instance)}
        labels[host_label] = self.node
        if self.profile.namespace is not None:
            pod = f"{self.profile.name}-{seed_of(self.node, self.index) % 0xFFFFF:05x}"
            labels |= {"container": "main", "namespace": self.profile.namespace, "pod": pod}
        return labels

    def reading(self, t: int, epoch: int) -> Reading | None:
        return reading(self.profile, self.seed, self.fb_total_mib - self.fb_reserved_mib, t, epoch)


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    whole_gpu_only: bool
    value: Callable[[SimGpu, Reading], str]


FAMILIES: tuple[Family, ...] = (
    Family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", True, lambda g, r: str(round(r.util_pct))),
    Family("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", True, lambda g, r: str(round(r.mem_copy_pct))),
    Family("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", False, lambda g, r: str(r.xid)),
    Family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", False,
           lambda g, r: str(g.fb_total_mib - g.fb_reserved_mib - r.fb_used_mib)),
    Family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", False, lambda g, r: str(r.fb_used_mib)),
    Family("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", False,
           lambda g, r: str(g.fb_reserved_mib)),
    Family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", False,
           lambda g, r: f"{r.util_pct / 100:.6f}"),
    Family("DCGM_FI_PROF_DRAM_ACTIVE",
           "Ratio of cycles the device memory interface is active sending or receiving data.", False,
           lambda g, r: f"{r.mem_copy_pct / 100:.6f}"),
)


@dataclass(frozen=True)
class Exporter:
    """What one dcgm-exporter writes: its node label's spelling and the fields it collects."""

    host_label: str = "hostname"
    fields: frozenset[str] | None = None  # None: every family the simulator models

    def __post_init__(self) -> None:
        if self.host_label not in HOST_LABELS:
            raise ValueError(f"host label {self.host_label!r}: dcgm-exporter writes {' or '.join(HOST_LABELS)}")

    def families(self) -> tuple[Family, ...]:
        return tuple(family for family in FAMILIES if self.fields is None or family.name in self.fields)


def collectors(path: Path) -> frozenset[str]:
    """The fields of a dcgm-exporter counters file (`DCGM_FI_..., type, help` lines, `#` comments),
    as etc/default-counters.csv and etc/dcp-metrics-included.csv are written."""
    fields = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name = text.split(",", 1)[0].strip()
        if not name.startswith("DCGM_") or "," not in text:
            raise ValueError(f"{path}:{number}: {text!r} is not a `DCGM_FI_..., type, help` line")
        fields.add(name)
    return frozenset(fields)


def label_text(labels: dict[str, str]) -> str:
    return ",".join(f'{key}="{value}"' for key, value in labels.items())


def exposition(gpus: Iterable[SimGpu], t: int, epoch: int, exporter: Exporter = Exporter()) -> str:
    """The exporter's /metrics body at time t (Prometheus text format, no timestamps)."""
    current = [(gpu, label_text(gpu.labels(exporter.host_label)), gpu.reading(t, epoch)) for gpu in gpus]
    lines: list[str] = []
    for family in exporter.families():
        lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} gauge"]
        for gpu, labels, now in current:
            if now is not None and not (family.whole_gpu_only and gpu.mig_profile is not None):
                lines.append(f"{family.name}{{{labels}}} {family.value(gpu, now)}")
    return "\n".join(lines) + "\n"


def openmetrics(gpus: Iterable[SimGpu], times: range, epoch: int, exporter: Exporter = Exporter()) -> str:
    """The same series at every time of `times`, with timestamps, grouped by family (OpenMetrics),
    as `promtool tsdb create-blocks-from openmetrics` reads them."""
    gpus, families = list(gpus), exporter.families()
    per_family: dict[str, list[str]] = {family.name: [] for family in families}
    for gpu in gpus:
        labels = label_text(gpu.labels(exporter.host_label))
        samples = [(t, r) for t in times if (r := gpu.reading(t, epoch)) is not None]
        for family in families:
            if family.whole_gpu_only and gpu.mig_profile is not None:
                continue
            out = per_family[family.name]
            out.extend(f"{family.name}{{{labels}}} {family.value(gpu, r)} {t}" for t, r in samples)
    lines: list[str] = []
    for family in families:
        if per_family[family.name]:
            lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} gauge", *per_family[family.name]]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
