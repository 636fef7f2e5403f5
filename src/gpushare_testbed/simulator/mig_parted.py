"""The simulated MIG manager's reading of a mig-parted config file, modelled on NVIDIA/mig-parted
(`nvidia-mig-parted assert --valid-config`, then `apply`):

- the file is YAML 1.1 (go-yaml v2 through sigs.k8s.io/yaml: `on`, `yes` and `y` are booleans,
  a number becomes JSON, which a Go int takes only whole and within 64 bits), its first document
  only, handed to api/spec/v1/spec.go: `version` must be "v1"; `mig-configs` maps each name to
  at least one entry; an entry needs `devices` ("all" or GPU indices) and `mig-enabled`, may
  have `device-filter` (one PCI device ID or a list) and `mig-devices` (profile -> count,
  pkg/types/mig_config.go AssertValidFormat), which MIG mode on requires and MIG mode off
  forbids; any other field is refused;
- an entry applies to a GPU whose PCI device ID its filter names (api/spec/v1/helpers.go
  MatchesDeviceFilter: each filter read by pkg/types NewDeviceIDFromString, strconv.ParseInt(s, 0,
  32), a `:<subsystem>` part matching only that subsystem (types.DeviceID.Matches); one it cannot
  read matches nothing) and whose index `devices` lists.

Errors carry mig-parted's wording; where a file has several faults, mig-parted names one in Go's
random map order, here the first in key order. The profile names are checked for their shape
(`[<c>c.]<g>g.<gb>gb[+attr]` or `-attr`), not with go-nvlib's exact reasons; a YAML syntax error
reads as PyYAML words it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml

PARSE_ERROR = "error parsing config file: unmarshal error: "
YAML_ERROR = PARSE_ERROR + "error converting YAML to JSON: "
JSON_ERROR = PARSE_ERROR + "error unmarshaling JSON: while decoding JSON: "
SELECT_ERROR = "error selecting MIG config: "
_PROFILE = re.compile(r"([0-9]+c\.)?[0-9]+g\.[0-9]+gb(?:[+-](?P<attributes>[A-Za-z][A-Za-z0-9.]*(,[A-Za-z][A-Za-z0-9.]*)*))?")
INT64 = 2**63


def _key(name: Any) -> str:
    """A map key as sigs.k8s.io/yaml turns it into a JSON key (`on` -> "true", `1.0` -> "1")."""
    if name is None:
        raise _NotJson("unsupported map key of type: %!s(<nil>), key: <nil>")
    if isinstance(name, bool):
        return str(name).lower()
    if isinstance(name, float) and name.is_integer():
        return str(int(name))
    return str(name)


class _NotJson(ValueError):
    """sigs.k8s.io/yaml cannot turn the document into JSON (YAML_ERROR is put before it)."""


class _GoYaml(yaml.SafeLoader):
    """YAML 1.1 as go-yaml v2 resolves it, turned into JSON as sigs.k8s.io/yaml does: PyYAML's
    SafeLoader, plus `y`, `Y`, `n`, `N` as booleans, and every map key made a JSON key at once
    (`on` and `1.0` are two keys, not one as True and 1.0 would be in a Python dict)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
        self.flatten_mapping(node)
        return {_key(self.construct_object(key, deep=True)): self.construct_object(value, deep=True) for key, value in node.value}


_GoYaml.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))
_GoYaml.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+(?:\.[0-9]*)?[eE][-+]?[0-9]+$"),
                              list("-+0123456789"))
_GoYaml.add_constructor("tag:yaml.org,2002:bool",
                        lambda loader, node: loader.construct_scalar(node).lower() in ("y", "yes", "true", "on"))


class MigConfigError(ValueError):
    """mig-parted refuses the config file, the selected config, or applying it to this node."""


class _Refused(ValueError):
    """What spec.go's UnmarshalJSON returns (JSON_ERROR is put before it)."""


@dataclass(frozen=True)
class Entry:
    """One entry of a named config (api/spec/v1 MigConfigSpec)."""

    device_filter: tuple[str, ...]  # () matches every GPU
    devices: tuple[int, ...] | None  # None: "all"
    mig_enabled: bool
    mig_devices: dict[str, int]  # profile -> instances per GPU, profiles with count 0 left out

    def matches(self, device_ids: Iterable[str], index: int) -> bool:
        """Whether this entry applies to GPU `index`, whose PCI device ID is one of `device_ids`."""
        if self.device_filter:
            hardware = [found for found in map(_device_id, device_ids) if found is not None]
            filters = [found for found in map(_device_id, self.device_filter) if found is not None]
            # a filter without a subsystem matches every subsystem; hardware read without one has subsystem 0
            if not any(want[0] == have[0] and want[1] in (None, have[1] or 0) for want in filters for have in hardware):
                return False
        return self.devices is None or index in self.devices


def _device_id(text: str) -> tuple[int, int | None] | None:
    """(device and vendor, subsystem or None), each `strconv.ParseInt(part, 0, 32)`; None when unreadable."""
    parts = text.split(":")
    try:
        values = [int(part, 0) for part in parts] if len(parts) <= 2 else []
    except ValueError:
        return None
    if not values or any(not -(2**31) <= value < 2**31 for value in values):
        return None
    return values[0], values[1] if len(values) == 2 else None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "string")


def _cannot(value: Any, go_type: str) -> _Refused:
    return _Refused(f"json: cannot unmarshal {_json_type(value)} into Go value of type {go_type}")


def _fields(value: Any) -> dict[str, Any]:
    """json.Unmarshal into map[string]json.RawMessage (null is no field)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _cannot(value, "map[string]json.RawMessage")
    return {str(key): item for key, item in value.items()}


def _string(value: Any) -> str | None:
    """json.Unmarshal into a string: null leaves it empty; None when the value is not a string."""
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def _json_number(value: int | float) -> str:
    """A number as the JSON text sigs.k8s.io/yaml hands to encoding/json: an integer go-yaml reads
    (int64 or uint64) as written, any other number as a float64 in full digits."""
    if isinstance(value, int) and -INT64 <= value < 2 * INT64:
        return str(value)
    return format(Decimal(repr(float(value))).normalize(), "f")


def _int(value: Any, go_type: str) -> int:
    """json.Unmarshal into a Go int (64 bits): a whole number in range; a float's text `2` included."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _cannot(value, go_type)
    text = _json_number(value)
    if not re.fullmatch(r"-?[0-9]+", text) or not -INT64 <= int(text) < INT64:
        raise _Refused(f"json: cannot unmarshal number {text} into Go value of type {go_type}")
    return int(text)


def _mig_devices(value: Any) -> dict[str, int] | None:
    """types.MigConfig (null sets the map to nil), then AssertValidFormat."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _cannot(value, "types.MigConfig")
    devices = {str(name): _int(count, "int") for name, count in value.items()}
    for name in sorted(devices):
        shape = _PROFILE.fullmatch(name)
        attributes = (shape.group("attributes") or "").split(",") if shape else []
        if not shape or len(attributes) != len(set(attributes)):
            raise _Refused(f"error validating values in 'mig-devices' field: invalid format for '{name}'")
        if devices[name] < 0:
            raise _Refused(f"error validating values in 'mig-devices' field: invalid count for '{devices[name]}': <nil>")
    if devices and not any(devices.values()):
        raise _Refused("error validating values in 'mig-devices' field: all counts for all MigProfiles are 0")
    return devices


def _entry(value: Any) -> Entry:
    """MigConfigSpec.UnmarshalJSON."""
    fields = _fields(value)
    for required in ("devices", "mig-enabled"):
        if required not in fields:
            raise _Refused(f"missing required field: {required}")
    device_filter: tuple[str, ...] = ()
    devices: tuple[int, ...] | None = None
    enabled, mig_devices = False, None
    for key in sorted(fields):
        raw = fields[key]
        if key == "device-filter":
            text = _string(raw)
            if text is None and not (isinstance(raw, list) and all(isinstance(item, str) for item in raw)):
                raise _Refused(f"({_cannot(raw, 'string')}, {_cannot(raw, '[]string')})")
            device_filter = (text,) if text else () if text is not None else tuple(raw)
        elif key == "devices":
            text = _string(raw)
            if text is not None and text != "all":
                raise _Refused(f"invalid string input for 'devices': {text}")
            if text is None:
                try:
                    if not isinstance(raw, list):
                        raise _cannot(raw, "[]int")
                    devices = tuple(_int(item, "int") for item in raw)
                except _Refused as err:
                    raise _Refused(f"({_cannot(raw, 'string')}, {err})") from None
        elif key == "mig-enabled":
            if raw is not None and not isinstance(raw, bool):
                raise _cannot(raw, "bool")
            enabled = bool(raw)
        elif key == "mig-devices":
            mig_devices = _mig_devices(raw)
        else:
            raise _Refused(f"unexpected field: {key}")
    if enabled and mig_devices is None:
        raise _Refused("missing required field 'mig-devices' when 'mig-enabled' is true")
    if not enabled and mig_devices:
        raise _Refused("MIG devices included when 'mig-enabled' is false")
    return Entry(device_filter, devices, enabled, {name: count for name, count in (mig_devices or {}).items() if count})


def _spec(document: Any) -> dict[str, list[Entry]]:
    """Spec.UnmarshalJSON; an empty file has no configs."""
    if document is None:
        return {}
    fields = _fields(document)
    if "version" not in fields and fields:
        raise _Refused("unable to parse with missing 'version' field")
    version = _string(fields.get("version"))
    if version is None:
        raise _cannot(fields["version"], "string")
    if version != "v1":
        raise _Refused(f"unknown version: {version}")
    configs: dict[str, list[Entry]] = {}
    for key in sorted(set(fields) - {"version"}):
        if key != "mig-configs":
            raise _Refused(f"unexpected field: {key}")
        named = fields[key]
        if named is not None and not isinstance(named, dict):
            raise _cannot(named, "map[string]v1.MigConfigSpecSlice")
        for name, entries in sorted((named or {}).items()):
            if entries is not None and not isinstance(entries, list):
                raise _cannot(entries, "v1.MigConfigSpecSlice")
            configs[name] = [_entry(entry) for entry in entries or []]
        if not configs:
            raise _Refused(f"at least one entry in '{key}' is required")
        for name, entries in sorted(configs.items()):
            if not entries:
                raise _Refused(f"at least one entry in '{name}' is required")
    return configs


def parse_configs(text: str) -> dict[str, list[Entry]]:
    """The named configs of a config file; MigConfigError in mig-parted's words."""
    try:
        document = next(iter(yaml.load_all(text, Loader=_GoYaml)), None)
    except yaml.YAMLError as err:
        raise MigConfigError(YAML_ERROR + str(err).replace("\n", " ")) from None
    except _NotJson as err:
        raise MigConfigError(YAML_ERROR + str(err)) from None
    try:
        return _spec(document)
    except _Refused as err:
        raise MigConfigError(JSON_ERROR + str(err)) from None


def select(configs: dict[str, list[Entry]], name: str) -> list[Entry]:
    """GetSelectedMigConfig: the entries of config `name`."""
    if name not in configs:
        raise MigConfigError(f"{SELECT_ERROR}selected mig-config not present: {name}")
    return configs[name]
