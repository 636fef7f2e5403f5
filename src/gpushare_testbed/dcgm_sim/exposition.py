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

Pods and cards (internal/pkg/transformation/kubernetes.go, `PodMapper.Process`): by default one pod
is mapped to a card and its labels ride on the card's series. With KUBERNETES_VIRTUAL_GPUS=true
(`Exporter.virtual_gpus`) every series of a card is copied to each pod sharing it
(`toDeviceToSharingPods`, the replica in `vgpu` when the card is shared) and the card's own series
is dropped; up to 4.5.2-4.8.1 a node whose cards hold any pod drops its idle cards' series too (the
whole family is replaced). From 4.5.3-4.8.2 (upstream fb5e3dc, process_metrics.go: `isPerProcessMetric`,
`createPerProcessMetrics`; `Exporter.per_process`) DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED keep
the card's own series and add one per pod with its own processes' value (SM utilisation, memory)
and `pod_uid`, and idle cards keep their series. A card runs one pod per replica of its node
(`SimGpu.replicas`, GFD's nvidia.com/gpu.replicas), its profile's load split evenly among them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from gpushare_testbed.dcgm_sim.profiles import Profile, Reading, reading, seed_of
from gpushare_testbed.gpu_identity import gpu_uuid, nvml_name

# The node label, by release (the module doc): up to 4.5.3-4.8.2, since 4.6.0-4.8.3.
HOST_LABELS = ("Hostname", "hostname")
# The families that carry per-process values beside the card's own (process_metrics.go, metricGPUUtil, metricFBUsed).
PER_PROCESS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")


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
    replicas: int = 1  # pods sharing the card when its profile runs something (one per replica)
    xid_since: float | None = None  # fell off the bus then (Xid 79), whatever its profile says

    @property
    def uuid(self) -> str:
        return gpu_uuid(self.node, self.index)

    @property
    def seed(self) -> int:
        return seed_of(self.node, self.index, self.mig_instance)

    @property
    def fb_reserved_mib(self) -> int:
        return round(self.fb_total_mib * 0.007)

    @property
    def pods(self) -> int:
        """The pods on the card: none without a workload, one per replica on a whole shared GPU."""
        if self.profile.namespace is None:
            return 0
        return self.replicas if self.mig_profile is None else 1

    def pod_labels(self, pod: int) -> dict[str, str]:
        """The Kubernetes mapping of the card's pod number `pod`, in the template's (sorted) key order."""
        name = f"{self.profile.name}-{seed_of(self.node, self.index) % 0xFFFFF:05x}"
        return {"container": "main", "namespace": str(self.profile.namespace),
                "pod": name if self.pods == 1 else f"{name}-{pod}"}

    def pod_uid(self, pod: int) -> str:
        return f"{seed_of(self.node, self.index, 'pod', pod):08x}-0000-4000-8000-{pod:012x}"

    def labels(self, host_label: str = "hostname") -> dict[str, str]:
        """The card's own labels and, as the exporter maps one pod to a card by default, its pod's."""
        labels = self.card_labels(host_label)
        if self.pods:
            labels |= self.pod_labels(0)
        return labels

    def card_labels(self, host_label: str = "hostname") -> dict[str, str]:
        labels = {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "pci_bus_id": f"00000000:{0x18 + 0x10 * self.index:02X}:00.0",
            "device": f"nvidia{self.index}",
            "modelName": nvml_name(self.product),
        }
        if self.mig_profile is not None:
            labels |= {"GPU_I_PROFILE": self.mig_profile, "GPU_I_ID": str(self.mig_instance)}
        labels[host_label] = self.node
        return labels

    def reading(self, t: int, epoch: int) -> Reading | None:
        now = reading(self.profile, self.seed, self.fb_total_mib - self.fb_reserved_mib, t, epoch)
        if now is not None and self.xid_since is not None and t >= self.xid_since:
            return replace(now, xid=79)
        return now


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
    """What one dcgm-exporter writes: its node label's spelling, the fields it collects and how it
    maps pods to cards (the module doc). The defaults are the newest release's, 4.6.0-4.8.3."""

    host_label: str = "hostname"
    fields: frozenset[str] | None = None  # None: every family the simulator models
    virtual_gpus: bool = False  # KUBERNETES_VIRTUAL_GPUS=true
    per_process: bool = True  # with virtual_gpus: per-pod GPU_UTIL / FB_USED beside the card's (4.5.3-4.8.2 on)

    def __post_init__(self) -> None:
        if self.host_label not in HOST_LABELS:
            raise ValueError(f"host label {self.host_label!r}: dcgm-exporter writes {' or '.join(HOST_LABELS)}")

    def families(self) -> tuple[Family, ...]:
        return tuple(family for family in FAMILIES if self.fields is None or family.name in self.fields)


# dcgm-exporter's image tag is <DCGM version>-<exporter version>; what changed, by exporter version.
_TAG = re.compile(r":\d+\.\d+\.\d+-(\d+)\.(\d+)\.(\d+)")
PER_PROCESS_SINCE = (4, 8, 2)  # 4.5.3-4.8.2: upstream fb5e3dc (process_metrics.go)
LOWER_HOSTNAME_SINCE = (4, 8, 3)  # 4.6.0-4.8.3: upstream d5e5f51 (render_metrics.go), released by #711
_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # urfave/cli's BoolFlag from an env var (strconv.ParseBool)


def exporter_of(image: str, env: Mapping[str, str]) -> Exporter:
    """The exporter an operand container runs: its image's version (a tag the simulator cannot read,
    a digest say, is taken for the newest) and its KUBERNETES_VIRTUAL_GPUS."""
    match = _TAG.search(image)
    version = tuple(int(part) for part in match.groups()) if match else None

    def since(first: tuple[int, int, int]) -> bool:
        return version is None or version >= first

    return Exporter("hostname" if since(LOWER_HOSTNAME_SINCE) else "Hostname",
                    virtual_gpus=env.get("KUBERNETES_VIRTUAL_GPUS", "") in _TRUE, per_process=since(PER_PROCESS_SINCE))


@dataclass(frozen=True)
class Series:
    """One series of a family: its labels, and how many pods split the card's value (1: the whole value)."""

    gpu: SimGpu
    labels: str
    share: int = 1


def _series(gpu: SimGpu, family: Family, exporter: Exporter) -> list[Series]:
    if family.whole_gpu_only and gpu.mig_profile is not None:
        return []
    host = exporter.host_label
    if not exporter.virtual_gpus or not gpu.pods:
        return [Series(gpu, label_text(gpu.labels(host)))]
    card = gpu.card_labels(host)
    per_process = exporter.per_process and family.name in PER_PROCESS
    copies = []
    for pod in range(gpu.pods):
        labels = card | gpu.pod_labels(pod)
        if per_process:
            labels["pod_uid"] = gpu.pod_uid(pod)
        if gpu.pods > 1:  # the device plugin's shared device IDs, <UUID>::<replica> (getSharedGPU)
            labels["vgpu"] = str(pod)
        copies.append(Series(gpu, label_text(labels), gpu.pods if per_process else 1))
    return [Series(gpu, label_text(card)), *copies] if per_process else copies


def series(gpus: Iterable[SimGpu], exporter: Exporter) -> dict[str, list[Series]]:
    """Every family's series as `exporter` writes them for `gpus`."""
    gpus = list(gpus)
    # Up to 4.5.2-4.8.1 KUBERNETES_VIRTUAL_GPUS replaces a family's series on a node by the pods'
    # copies as soon as one card of the node holds a pod: its idle cards are not exported.
    silent = {gpu.node for gpu in gpus if gpu.pods} if exporter.virtual_gpus and not exporter.per_process else set()
    return {family.name: [one for gpu in gpus if gpu.pods or gpu.node not in silent
                          for one in _series(gpu, family, exporter)]
            for family in exporter.families()}


def _value(family: Family, one: Series, now: Reading) -> str:
    if one.share == 1:
        return family.value(one.gpu, now)
    part = Reading(now.util_pct / one.share, now.mem_copy_pct, now.fb_used_mib // one.share, now.xid)
    return family.value(one.gpu, part)


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
    gpus = list(gpus)
    now = {id(gpu): gpu.reading(t, epoch) for gpu in gpus}
    lines: list[str] = []
    for family, each in zip(exporter.families(), series(gpus, exporter).values()):
        lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} gauge"]
        for one in each:
            if (reading_now := now[id(one.gpu)]) is not None:
                lines.append(f"{family.name}{{{one.labels}}} {_value(family, one, reading_now)}")
    return "\n".join(lines) + "\n"


def openmetrics(gpus: Iterable[SimGpu], times: range, epoch: int, exporter: Exporter = Exporter()) -> str:
    """The same series at every time of `times`, with timestamps, grouped by family (OpenMetrics),
    as `promtool tsdb create-blocks-from openmetrics` reads them."""
    gpus = list(gpus)
    samples = {id(gpu): [(t, r) for t in times if (r := gpu.reading(t, epoch)) is not None] for gpu in gpus}
    lines: list[str] = []
    for family, each in zip(exporter.families(), series(gpus, exporter).values()):
        out = [f"{family.name}{{{one.labels}}} {_value(family, one, r)} {t}" for one in each
               for t, r in samples[id(one.gpu)]]
        if out:
            lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} gauge", *out]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
