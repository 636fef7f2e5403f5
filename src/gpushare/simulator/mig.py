"""mig-parted's side of the MIG manager, with no I/O: parse a mig-parted config file (the
`config.yaml` key of the ConfigMap), apply a named config to a node's GPUs, and write the default
config the operator ships (assets/state-mig-manager/0400_configmap.yaml, generated here from the
catalog). Semantics follow NVIDIA/mig-parted api/spec/v1/spec.go and cmd/nvidia-mig-parted/apply.

A node's MIG layout is one entry per GPU: None (MIG mode disabled) or the list of MIG devices on it
(an empty list is MIG mode enabled with no devices)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union

import yaml

from gpushare.gpu_catalog import COMPUTE_SLICES, MEMORY_SLICES, GpuProduct

DISABLED = "all-disabled"
Layout = list[Union[list[str], None]]


class MigConfigError(ValueError):
    """mig-parted refuses the config file, the selected config, or applying it to this node."""


@dataclass(frozen=True)
class MigConfigSpec:
    device_filter: tuple[str, ...] | None  # PCI device IDs, e.g. ("0x20B010DE",); None matches every GPU
    devices: tuple[int, ...] | None  # GPU indices; None means `all`
    mig_enabled: bool
    mig_devices: dict[str, int]

    def matches(self, product: GpuProduct, index: int) -> bool:
        if self.device_filter is not None and product.pci_device_id.upper() not in self.device_filter:
            return False
        return self.devices is None or index in self.devices


def _entry(raw: Any, where: str) -> MigConfigSpec:
    if not isinstance(raw, dict):
        raise MigConfigError(f"{where}: expected a mapping")
    for required in ("devices", "mig-enabled"):
        if required not in raw:
            raise MigConfigError(f"{where}: missing required field: {required}")
    unexpected = set(raw) - {"device-filter", "devices", "mig-enabled", "mig-devices"}
    if unexpected:
        raise MigConfigError(f"{where}: unexpected field: {sorted(unexpected)[0]}")
    device_filter = raw.get("device-filter")
    if isinstance(device_filter, str):
        device_filter = [device_filter]
    if device_filter is not None and not (isinstance(device_filter, list) and all(isinstance(f, str) for f in device_filter)):
        raise MigConfigError(f"{where}: 'device-filter' must be a string or a list of strings")
    devices = raw["devices"]
    if devices != "all" and not (isinstance(devices, list) and all(isinstance(i, int) for i in devices)):
        raise MigConfigError(f"{where}: invalid input for 'devices': {devices!r}")
    enabled = raw["mig-enabled"]
    if not isinstance(enabled, bool):
        raise MigConfigError(f"{where}: 'mig-enabled' must be true or false")
    mig_devices = raw.get("mig-devices")
    if enabled and mig_devices is None:
        raise MigConfigError(f"{where}: missing required field 'mig-devices' when 'mig-enabled' is true")
    mig_devices = mig_devices or {}
    if not isinstance(mig_devices, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in mig_devices.items()):
        raise MigConfigError(f"{where}: error validating values in 'mig-devices' field")
    if not enabled and any(mig_devices.values()):
        raise MigConfigError(f"{where}: MIG devices included when 'mig-enabled' is false")
    return MigConfigSpec(
        tuple(f.upper() for f in device_filter) if device_filter is not None else None,
        None if devices == "all" else tuple(devices), enabled, {k: v for k, v in mig_devices.items() if v})


def parse_configs(text: str) -> dict[str, list[MigConfigSpec]]:
    """The `mig-configs` of a mig-parted config file; MigConfigError as mig-parted words it."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise MigConfigError(f"error parsing config file: unmarshal error: {err}") from None
    if not isinstance(document, dict):
        raise MigConfigError("error parsing config file: unmarshal error: expected a mapping")
    if document.get("version") != "v1":
        raise MigConfigError(f"error parsing config file: unmarshal error: unknown version: {document.get('version', '')}")
    unexpected = set(document) - {"version", "mig-configs"}
    if unexpected:
        raise MigConfigError(f"error parsing config file: unmarshal error: unexpected field: {sorted(unexpected)[0]}")
    configs = document.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise MigConfigError("error parsing config file: unmarshal error: at least one entry in 'mig-configs' is required")
    parsed = {}
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            raise MigConfigError(f"error parsing config file: unmarshal error: at least one entry in '{name}' is required")
        parsed[str(name)] = [_entry(e, f"error parsing config file: mig-configs.{name}[{i}]") for i, e in enumerate(entries)]
    return parsed


def select(configs: dict[str, list[MigConfigSpec]], name: str) -> list[MigConfigSpec]:
    """`nvidia-mig-parted assert --valid-config -c <name>`."""
    if name not in configs:
        raise MigConfigError(f"error selecting MIG config: selected mig-config not present: {name}")
    return configs[name]


def _check_fits(product: GpuProduct, wanted: dict[str, int]) -> None:
    unknown = [p for p in wanted if p not in product.mig_profiles]
    if unknown:
        raise MigConfigError(f"error setting MIGConfig: MIG profile {unknown[0]} is not supported on {product.name}")
    profiles = [(product.mig_profiles[p], n) for p, n in wanted.items()]
    compute = sum(p.compute_slices * n for p, n in profiles)
    memory = sum(p.memory_slices * n for p, n in profiles)
    if compute > COMPUTE_SLICES or memory > MEMORY_SLICES or any(n > p.max_per_gpu for p, n in profiles):
        layout_text = ", ".join(f"{p}x{n}" for p, n in wanted.items())
        raise MigConfigError(f"error setting MIGConfig: {layout_text} does not fit one {product.name}")


def apply(product: GpuProduct, current: Layout, entries: Iterable[MigConfigSpec]) -> Layout:
    """The layout after `nvidia-mig-parted apply` of `entries` (GPUs no entry matches keep theirs)."""
    result = list(current)
    for spec in entries:
        for index in range(len(result)):
            if not spec.matches(product, index):
                continue
            if not product.mig_capable:
                if spec.mig_enabled and spec.devices is not None:
                    raise MigConfigError("cannot set MIG config on non MIG-capable GPU")
                continue
            if not spec.mig_enabled:
                result[index] = None
                continue
            _check_fits(product, spec.mig_devices)
            result[index] = [p for p, n in spec.mig_devices.items() for _ in range(n)]
    return result


def mode_change(current: Layout, target: Layout) -> bool:
    """Whether going from `current` to `target` toggles MIG mode on any GPU."""
    return any((a is None) != (b is None) for a, b in zip(current, target))


def devices(layout: Layout) -> Counter[str]:
    return Counter(name for gpu in layout if gpu for name in gpu)


def default_config(products: Iterable[GpuProduct]) -> str:
    """The operator's default-mig-parted-config `config.yaml` for these products: all-disabled,
    all-enabled, all-<profile> (a device-filter per product where the count differs) and
    all-balanced (a device-filter per product)."""
    capable = [p for p in products if p.mig_capable]
    configs: dict[str, list[dict[str, Any]]] = {
        DISABLED: [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    for name in sorted({p for product in capable for p in product.mig_profiles}):
        having = [product for product in capable if name in product.mig_profiles]
        counts = {product.mig_profiles[name].max_per_gpu for product in having}
        if len(counts) == 1:
            configs[f"all-{name}"] = [{"devices": "all", "mig-enabled": True, "mig-devices": {name: counts.pop()}}]
        else:
            configs[f"all-{name}"] = [
                {"device-filter": [product.pci_device_id], "devices": "all", "mig-enabled": True,
                 "mig-devices": {name: product.mig_profiles[name].max_per_gpu}} for product in having]
    configs["all-balanced"] = [
        {"device-filter": [product.pci_device_id], "devices": "all", "mig-enabled": True,
         "mig-devices": dict(product.mig_balanced)} for product in capable]
    return yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=False)
