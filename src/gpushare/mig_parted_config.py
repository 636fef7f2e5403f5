"""A mig-parted config file (the `config.yaml` key of the MIG manager's ConfigMap) judged as
mig-parted v0.15.0 judges it, refusals worded as its own, for the MIG runbook's checks (the simulated MIG manager reads the file
on its own, gpushare_testbed.simulator.mig_parted; tests/unit/test_mig_parted_models.py holds them together).

`nvidia-mig-parted assert --valid-config -f <file> -c <name>` (cmd/nvidia-mig-parted/assert/assert.go:
ParseConfigFile, GetSelectedMigConfig) reads the file with sigs.k8s.io/yaml: go-yaml v2 decodes the
first YAML document only (YAML 1.1: `on`, `y`, `Off` are booleans, so a config named `on` is
"true"), map keys become strings, and encoding/json hands the result to api/spec/v1/spec.go
(Spec.UnmarshalJSON, MigConfigSpec.UnmarshalJSON; pkg/types/mig_config.go AssertValidFormat,
go-nvlib pkg/nvlib/device/mig_profile.go for the profile names). Spec has its own UnmarshalJSON,
so sigs.k8s.io/yaml turns no scalar into a string (`version: 1` is a number, refused). The machinery
is the device plugin's (gpushare.device_plugin_config: go_yaml, sigs_yaml, go_json).

Where a file has more than one fault, mig-parted names one picked by Go's random map order (the
fields of an entry, the profiles of `mig-devices`, the top-level keys); here the first in key order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpushare.device_plugin_config.go_json import (
    Decoder,
    GoError,
    bool_type,
    int_type,
    map_of,
    raw_map,
    slice_of,
    string_type,
    unmarshal,
)
from gpushare.device_plugin_config.go_yaml import MAX_DEPTH, TooDeep, YAMLError
from gpushare.device_plugin_config.sigs_yaml import to_json

PARSE_ERROR = "error parsing config file: unmarshal error: "  # assert.go: assertWrapper, ParseConfigFile
YAML_ERROR = PARSE_ERROR + "error converting YAML to JSON: "  # sigs.k8s.io/yaml: Unmarshal
JSON_ERROR = PARSE_ERROR + "error unmarshaling JSON: while decoding JSON: "
SELECT_ERROR = "error selecting MIG config: "
VERSION = "v1"


class MigConfigError(ValueError):
    """mig-parted refuses the config file, the selected config, or applying it to this node."""


def device_id(text: str) -> tuple[int, int | None] | None:
    """types.NewDeviceIDFromString: `<devicevendor>[:<subdevicevendor>]`, each strconv.ParseUint(s, 0, 32)."""
    parts = text.split(":")
    if len(parts) > 2:
        return None
    values = [_parse_uint32(p) for p in parts]
    if any(v is None for v in values):
        return None
    return values[0], values[1] if len(values) == 2 else None  # type: ignore[return-value]


def _parse_uint32(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 32): 0x / 0o / 0b / 0 prefixes, underscores between digits."""
    match = re.fullmatch(r"0[xX](?P<x>[0-9a-fA-F_]+)|0[oO](?P<o>[0-7_]+)|0[bB](?P<b>[01_]+)|(?P<d>[1-9][0-9_]*|0[0-7_]*)", text)
    if match is None or "__" in text or text.endswith("_") or text.startswith("_"):
        return None
    base, digits = next((b, d) for b, d in zip((16, 8, 2, 10), match.group("x", "o", "b", "d")) if d is not None)
    if base == 10 and len(digits) > 1 and digits[0] == "0":
        base = 8  # a leading 0 is octal
    value = int(digits.replace("_", ""), base)
    return value if value < 2**32 else None


@dataclass(frozen=True)
class MigConfigSpec:
    """One entry of a config (api/spec/v1 MigConfigSpec)."""

    device_filter: tuple[str, ...] | None  # PCI device IDs as written; None (or empty) matches every GPU
    devices: tuple[int, ...] | None  # GPU indices; None means `all`
    mig_enabled: bool
    mig_devices: dict[str, int]  # profile -> instances per GPU (profiles with count 0 left out)

    def matches(self, device_ids: Iterable[str], index: int) -> bool:
        """api/spec/v1/helpers.go MatchesDeviceFilter and MatchesDevices, for GPU `index` whose PCI
        device ID is one of `device_ids` (`0x20B010DE`, with `:<subsystem>` where known). A filter
        naming a subsystem matches only that subsystem (types.DeviceID.Matches); one it cannot
        parse matches nothing."""
        if self.device_filter:
            hardware = [i for i in map(device_id, device_ids) if i is not None]
            filters = [f for f in map(device_id, self.device_filter) if f is not None]
            if not any(f[0] == h[0] and (f[1] is None or f[1] == (h[1] or 0)) for f in filters for h in hardware):
                return False
        return self.devices is None or index in self.devices

    @property
    def filters_by_subsystem(self) -> bool:
        return any((i := device_id(f)) is not None and i[1] is not None for f in self.device_filter or ())


# --- pkg/types/mig_config.go and go-nvlib mig_profile.go ---------------------------------------


def _profile_field(text: str, unit: str) -> str | None:
    """parseMigProfileField: what is wrong with `<number><unit>`, None when nothing."""
    if text.strip() != text:  # Go's TrimSpace: ASCII blanks and the Unicode ones
        return f"leading or trailing spaces on '%d{unit}'"
    if not text.endswith(unit):
        return f"missing '{unit}' from '%d{unit}'"
    number = text[: -len(unit)]
    if not re.fullmatch(r"[+-]?[0-9]+", number) or not -(2**63) <= int(number) < 2**63:  # strconv.Atoi
        return f"malformed number in '%d{unit}'"
    return None


def _profile_attributes(text: str) -> str | None:
    """parseMigProfileAttributes."""
    seen: set[str] = set()
    for attribute in text.split(","):
        if attribute in seen:
            return "non unique attribute in list"
        if attribute == "":
            return "empty attribute in list"
        if attribute.strip() != attribute:
            return "leading or trailing spaces in attribute"
        if attribute[0].isdigit() and attribute[0].isascii():
            return "attribute begins with a number"
        if attribute[0] == "." or attribute[-1] == ".":
            return "attribute begins/ends with a dot"
        if not re.fullmatch(r"[A-Za-z0-9.]+", attribute):
            return "non alpha-numeric character or digit in attribute"
        seen.add(attribute)
    return None


def profile_problem(profile: str) -> str | None:
    """go-nvlib parseMigProfile (AssertValidMigProfileFormat): `[<c>c.]<g>g.<gb>gb[+attr,...|-attr,...]`;
    what is wrong with `profile`, None when its format is valid."""
    if profile == "":
        return "profile is the empty string"
    plus, minus = profile.split("+", 1), profile.split("-", 1)
    if len(plus) == 2 and len(minus) == 2:
        return f"profile '{profile}' contains both '+/-' attributes"
    parts = plus if len(plus) == 2 else minus
    fields = parts[0].split(".", 2)
    units = {3: ("c", "g", "gb"), 2: ("g", "gb")}.get(len(fields))
    if units is None:
        return f"cannot parse fields of '{profile}': parsed wrong number of fields, expected 2 or 3"
    for text, unit in zip(fields, units):
        if (problem := _profile_field(text, unit)) is not None:
            return f"cannot parse fields of '{profile}': {problem}"
    if len(parts) == 2 and (problem := _profile_attributes(parts[1])) is not None:
        return f"cannot parse attributes of '{profile}': {problem}"
    return None


def _assert_valid_format(devices: dict[str, int]) -> None:
    """MigConfig.AssertValidFormat."""
    for name in sorted(devices):
        if (problem := profile_problem(name)) is not None:
            raise GoError(f"invalid format for '{name}': {problem}")
        if devices[name] < 0:
            raise GoError(f"invalid count for '{devices[name]}': <nil>")  # it formats a nil error
    if devices and not any(devices.values()):
        raise GoError("all counts for all MigProfiles are 0")


# --- api/spec/v1/spec.go ---------------------------------------------------------------------


def _either(value: Any, *decoders: Any) -> Any:
    """Try json.Unmarshal into each type in turn; `(err1, err2)` when neither takes it."""
    errors = []
    for decoder in decoders:
        try:
            return unmarshal(value, decoder)
        except GoError as err:
            errors.append(str(err))
    raise GoError(f"({', '.join(errors)})")


def _entry(_: Decoder, value: Any, __: Any) -> MigConfigSpec:
    """MigConfigSpec.UnmarshalJSON (an element of a config's list; null is an entry without fields)."""
    fields = unmarshal(value, raw_map)
    for required in ("devices", "mig-enabled"):
        if required not in fields:
            raise GoError(f"missing required field: {required}")
    device_filter: tuple[str, ...] | None = None
    devices: tuple[int, ...] | None = None
    enabled = False
    mig_devices: dict[str, int] | None = None
    for key in sorted(fields):
        raw = fields[key]
        if key == "device-filter":
            found = _either(raw, string_type(), slice_of(string_type(), "[]string"))
            device_filter = ((found,) if found else ()) if isinstance(found, str) else tuple(found or ())
        elif key == "devices":
            found = _either(raw, string_type(), slice_of(int_type(), "[]int"))
            if isinstance(found, str):
                if found != "all":
                    raise GoError(f"invalid string input for '{key}': {found}")
            else:
                devices = tuple(found or ())
        elif key == "mig-enabled":
            enabled = unmarshal(raw, bool_type)
        elif key == "mig-devices":
            mig_devices = unmarshal(raw, map_of(int_type(), "types.MigConfig"), {})
            try:
                _assert_valid_format(mig_devices or {})
            except GoError as err:
                raise GoError(f"error validating values in '{key}' field: {err}") from None
        else:
            raise GoError(f"unexpected field: {key}")
    if enabled and mig_devices is None:
        raise GoError("missing required field 'mig-devices' when 'mig-enabled' is true")
    if not enabled and mig_devices:
        raise GoError("MIG devices included when 'mig-enabled' is false")
    return MigConfigSpec(device_filter or None, devices, enabled, {k: v for k, v in (mig_devices or {}).items() if v})


def _spec(value: Any) -> dict[str, list[MigConfigSpec]]:
    """Spec.UnmarshalJSON. A document that is null (empty) is never handed to it: no configs."""
    if value is None:
        return {}
    fields = unmarshal(value, raw_map)
    if "version" not in fields and fields:
        raise GoError("unable to parse with missing 'version' field")
    version = unmarshal(fields.get("version"), string_type(), "")
    if version != VERSION:
        raise GoError(f"unknown version: {version}")
    configs: dict[str, list[MigConfigSpec]] = {}
    for key in sorted(set(fields) - {"version"}):
        if key != "mig-configs":
            raise GoError(f"unexpected field: {key}")
        configs = unmarshal(fields[key], map_of(slice_of(_entry, "v1.MigConfigSpecSlice"),
                                                "map[string]v1.MigConfigSpecSlice"), {}) or {}
        if not configs:
            raise GoError(f"at least one entry in '{key}' is required")
        for name in sorted(configs):
            if not configs[name]:
                raise GoError(f"at least one entry in '{name}' is required")
    return configs


def parse_configs(text: str) -> dict[str, list[MigConfigSpec]]:
    """The `mig-configs` of a mig-parted config file; MigConfigError as mig-parted words it."""
    try:
        document = to_json(text, string_fields=())
    except YAMLError as err:
        raise MigConfigError(YAML_ERROR + str(err)) from None
    except TooDeep:
        raise MigConfigError(f"the config nests deeper than {MAX_DEPTH} levels; gpushare does not judge it "
                             "(write it flatter)") from None
    try:
        return {name: list(entries) for name, entries in _spec(document).items()}
    except GoError as err:
        raise MigConfigError(JSON_ERROR + str(err)) from None


def yaml_key(name: str) -> str:
    """The config name mig-parted finds for `name` written as a plain YAML key (`on` -> `true`, `1.0` -> `1`)."""
    try:
        document = to_json(f"{name}: x\n", string_fields=())
    except (YAMLError, TooDeep):
        return name
    return next(iter(document)) if isinstance(document, dict) and len(document) == 1 else name


def select(configs: dict[str, list[MigConfigSpec]], name: str) -> list[MigConfigSpec]:
    """`nvidia-mig-parted assert --valid-config -c <name>` (GetSelectedMigConfig)."""
    if name not in configs:
        raise MigConfigError(f"{SELECT_ERROR}selected mig-config not present: {name}")
    return configs[name]

