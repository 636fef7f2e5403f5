"""A mig-parted config file (the `config.yaml` key of the MIG manager's ConfigMap) read as
mig-parted reads it (NVIDIA/mig-parted api/spec/v1/spec.go: `version`, `mig-configs`, each entry's
`devices`, `mig-enabled`, `mig-devices`, `device-filter`; `nvidia-mig-parted assert --valid-config`
for the selection), its refusals worded as mig-parted's. The one parser of the runbook's checks and
the simulated MIG manager."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml


def device_id(text: str) -> str:
    """A PCI device ID as the operator's default config writes it (`0x20B010DE`): mig-parted reads
    the hex number, so case and the prefix's case do not matter."""
    return "0x" + text.upper().removeprefix("0X")


class MigConfigError(ValueError):
    """mig-parted refuses the config file, the selected config, or applying it to this node."""


@dataclass(frozen=True)
class MigConfigSpec:
    device_filter: tuple[str, ...] | None  # PCI device IDs, e.g. ("0x20B010DE",); None matches every GPU
    devices: tuple[int, ...] | None  # GPU indices; None means `all`
    mig_enabled: bool
    mig_devices: dict[str, int]

    def matches(self, device_ids: Iterable[str], index: int) -> bool:
        """Whether the entry applies to GPU `index`, a GPU with these PCI device IDs."""
        if self.device_filter is not None and not {device_id(i) for i in device_ids} & set(self.device_filter):
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
        tuple(device_id(f) for f in device_filter) if device_filter is not None else None,
        None if devices == "all" else tuple(devices), enabled, {k: v for k, v in mig_devices.items() if v})


def _yaml_problem(err: yaml.YAMLError) -> str:
    """One line, as Go's YAML decoder words it: `yaml: line 2: <problem>`."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None)
    return f"yaml: line {mark.line + 1}: {problem}" if mark is not None and problem else str(err).splitlines()[0]


def parse_configs(text: str) -> dict[str, list[MigConfigSpec]]:
    """The `mig-configs` of a mig-parted config file; MigConfigError as mig-parted words it."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise MigConfigError(f"error parsing config file: unmarshal error: {_yaml_problem(err)}") from None
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
