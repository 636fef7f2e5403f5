"""The device plugin's config types (NVIDIA/k8s-device-plugin v0.20.0 api/config/v1) as decoders.

CONFIG decodes the JSON value of a config file into a dict per struct, keyed by JSON field name,
exactly as encoding/json and the plugin's UnmarshalJSON methods fill `v1.Config`, raising the
same errors. Each decoder names the upstream file it follows.
"""

from __future__ import annotations

import re
from typing import Any

from gpushare.device_plugin_config.go_json import (
    Decode,
    Decoder,
    INT64_MAX,
    GoError,
    Number,
    bool_type,
    int_type,
    json_text,
    pointer_to,
    raw_map,
    raw_message,
    slice_of,
    string_type,
    StructType,
    unmarshal,
)

RESOURCE_PREFIX = "nvidia.com/"  # consts.go: ResourceNamePrefix
MAX_RESOURCE_NAME_LENGTH = 63  # consts.go: MaxResourceNameLength
# k8s.io/apimachinery pkg/util/validation: IsDNS1123Subdomain (its 253-character limit cannot be
# reached under the plugin's 63).
DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DNS1123_SUBDOMAIN_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    f"and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{DNS1123_SUBDOMAIN}')"
)
UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def custom(unmarshal_json: Any) -> Decode:
    """A type with an UnmarshalJSON method: it gets the raw value, null included."""

    def decode(_: Decoder, value: Any, current: Any) -> Any:
        return unmarshal_json(value, current)

    return decode


# --- resources.go -------------------------------------------------------------------------


def new_resource_name(name: str) -> str:
    """NewResourceName: prefix nvidia.com/ unless there, then the length and the DNS-1123 check."""
    if not name.startswith(RESOURCE_PREFIX):
        name = RESOURCE_PREFIX + name
    if len(name.encode()) > MAX_RESOURCE_NAME_LENGTH:
        raise GoError(f"fully-qualified resource name must be {MAX_RESOURCE_NAME_LENGTH} characters or less: {name}")
    if not re.fullmatch(DNS1123_SUBDOMAIN, name.split("/", 1)[1]):
        raise GoError(f"incorrect format for resource name '{name}': [{DNS1123_SUBDOMAIN_ERROR}]")
    return name


def _resource_name(value: Any, _: Any) -> str:
    """ResourceName.UnmarshalJSON (null reads as the empty name)."""
    return new_resource_name(unmarshal(value, string_type(), ""))


def _resource(value: Any, _: Any) -> dict[str, Any]:
    """Resource.UnmarshalJSON: an entry of the top-level `resources.gpus` / `resources.mig`."""
    fields = unmarshal(value, raw_map)
    if "pattern" not in fields:
        raise GoError("resources must have a 'pattern' field set")
    if "name" not in fields:
        raise GoError("resources must have a 'name' field set")
    return {
        "pattern": unmarshal(fields["pattern"], string_type("v1.ResourcePattern"), ""),
        "name": unmarshal(fields["name"], custom(_resource_name)),
    }


# --- replicas.go ----------------------------------------------------------------------------


def _replicated_resources(value: Any, current: Any) -> dict[str, Any]:
    """ReplicatedResources.UnmarshalJSON: sharing.timeSlicing and sharing.mps (keys are case-sensitive)."""
    fields = unmarshal(value, raw_map)
    result = dict(current or {})
    rename_by_default = fields.get("renameByDefault", False)
    result["renameByDefault"] = unmarshal(rename_by_default, bool_type, result.get("renameByDefault"))
    if "failRequestsGreaterThanOne" in fields:
        result["failRequestsGreaterThanOne"] = unmarshal(
            fields["failRequestsGreaterThanOne"], pointer_to(bool_type), result.get("failRequestsGreaterThanOne")
        )
    if "resources" not in fields:
        raise GoError("no resources specified")
    result["resources"] = unmarshal(
        fields["resources"], slice_of(custom(_replicated_resource), "[]v1.ReplicatedResource"), result.get("resources")
    )
    if not result["resources"]:
        raise GoError("no resources specified")
    for resource in result["resources"]:
        if result["renameByDefault"] and not resource.get("rename"):
            resource["rename"] = resource["name"] + ".shared"  # ResourceName.DefaultSharedRename
    return result


def _replicated_resource(value: Any, current: Any) -> dict[str, Any]:
    """ReplicatedResource.UnmarshalJSON: one entry of `resources` (name, devices, replicas, rename)."""
    fields = unmarshal(value, raw_map)
    if "name" not in fields:
        raise GoError("no resource name specified")
    result = dict(current or {})
    result["name"] = unmarshal(fields["name"], custom(_resource_name))
    result["devices"] = _replicated_devices(fields.get("devices", "all"))
    if "replicas" not in fields:
        raise GoError("no replicas specified")
    result["replicas"] = unmarshal(fields["replicas"], int_type(), result.get("replicas"))
    if result["replicas"] < 2:
        raise GoError("number of replicas must be >= 2")
    if "rename" in fields:
        result["rename"] = unmarshal(fields["rename"], custom(_resource_name))
    return result


def _replicated_devices(value: Any) -> Any:
    """ReplicatedDevices.UnmarshalJSON: "all", a count > 0, or a list of GPU/MIG indices and UUIDs."""
    try:
        devices = unmarshal(value, string_type(), "")
    except GoError:
        pass
    else:
        if devices != "all":
            raise GoError(f"devices set as '{devices}' but the only valid string input is 'all'")
        return devices
    try:
        count = unmarshal(value, int_type(), 0)
    except GoError:
        pass
    else:
        if count <= 0:
            raise GoError(f"devices set as '{count}' but a count of devices must be > 0")
        return count
    try:
        items = unmarshal(value, slice_of(raw_message, "[]json.RawMessage"))
    except GoError:
        raise GoError(f"unrecognized type for devices spec: {json_text(value)}") from None
    return [_device_ref(item) for item in items or []]


def _device_ref(value: Any) -> str:
    try:
        return str(unmarshal(value, int_type("uint64"), 0))
    except GoError:
        pass
    try:
        ref = unmarshal(value, string_type(), "")
    except GoError:
        ref = ""
    else:
        if _is_gpu_index(ref) or _is_mig_index(ref) or _is_gpu_uuid(ref) or _is_mig_uuid(ref):
            return ref
    raise GoError(f"unsupported type for device in devices list: {ref}, string")


def _is_gpu_index(ref: str) -> bool:
    return re.fullmatch("[0-9]+", ref) is not None and int(ref) < 2**64  # strconv.ParseUint(ref, 10, 0)


def _is_mig_index(ref: str) -> bool:
    parts = ref.split(":", 1)
    return len(parts) == 2 and all(_is_gpu_index(part) for part in parts)


def _is_gpu_uuid(ref: str) -> bool:
    return ref.startswith("GPU-") and _is_uuid(ref[4:])


def _is_mig_uuid(ref: str) -> bool:
    """MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>."""
    if not ref.startswith("MIG-"):
        return False
    suffix = ref[4:]
    if _is_uuid(suffix):
        return True
    parts = suffix.split("/", 2)
    return len(parts) == 3 and _is_gpu_uuid(parts[0]) and all(_is_gpu_index(part) for part in parts[1:])


def _is_uuid(text: str) -> bool:
    """github.com/google/uuid Parse, on the bytes: 8-4-4-4-12 hex digits (after urn:uuid: or one
    leading character when there are 45 or 38 bytes), or 32 hex digits."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) == 32:
        return re.fullmatch(rb"[0-9a-fA-F]{32}", raw) is not None
    if len(raw) == 45:
        if raw[:9].lower() != b"urn:uuid:":
            return False
        raw = raw[9:]
    elif len(raw) == 38:
        raw = raw[1:37]
    return len(raw) == 36 and re.fullmatch(UUID, raw) is not None


# --- flags.go, duration.go, imex.go, sharing.go, config.go --------------------------------------


def _device_list_strategy(value: Any, _: Any) -> list[str]:
    """deviceListStrategyFlag.UnmarshalJSON: one string or a list of strings."""
    try:
        return [unmarshal(value, string_type(), "")]
    except GoError:
        pass
    try:
        return unmarshal(value, slice_of(string_type(), "[]string")) or []
    except GoError:
        raise GoError(f"invalid deviceListStrategy: {json_text(value)}") from None


def _duration(value: Any, _: Any) -> Any:
    """Duration.UnmarshalJSON: a number of nanoseconds, "infinite", or what time.ParseDuration reads."""
    if isinstance(value, str):
        if value != "infinite":
            _parse_duration(value)
    elif not isinstance(value, Number):
        raise GoError("invalid duration")
    return value


def _parse_duration(text: str) -> None:
    """Go's time.ParseDuration, for its verdict: raise its error, or return."""
    units = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9}
    units["h"] = 60 * units["m"]
    invalid = GoError(f"time: invalid duration {_time_quote(text)}")
    rest = text[1:] if text[:1] in ("+", "-") else text
    if rest == "0":
        return
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not (rest[0] == "." or "0" <= rest[0] <= "9"):
            raise invalid
        whole, i = 0, 0
        while i < len(rest) and "0" <= rest[i] <= "9":
            if whole > 2**63 // 10:
                raise invalid
            whole = whole * 10 + int(rest[i])
            if whole > 2**63:
                raise invalid
            i += 1
        before_point, rest = i > 0, rest[i:]
        fraction, scale, after_point = 0, 1.0, False
        if rest[:1] == ".":
            rest, i, overflow = rest[1:], 0, False
            while i < len(rest) and "0" <= rest[i] <= "9":
                grown = fraction * 10 + int(rest[i])
                if overflow or fraction > INT64_MAX // 10 or grown > 2**63:
                    overflow = True
                else:
                    fraction, scale = grown, scale * 10
                i += 1
            after_point, rest = i > 0, rest[i:]
        if not before_point and not after_point:
            raise invalid
        i = 0
        while i < len(rest) and rest[i] != "." and not "0" <= rest[i] <= "9":
            i += 1
        if i == 0:
            raise GoError(f"time: missing unit in duration {_time_quote(text)}")
        unit_name, rest = rest[:i], rest[i:]
        if unit_name not in units:
            raise GoError(f"time: unknown unit {_time_quote(unit_name)} in duration {_time_quote(text)}")
        unit = units[unit_name]
        if whole > 2**63 // unit:
            raise invalid
        whole *= unit
        if fraction > 0:
            whole += int(float(fraction) * (float(unit) / scale))
            if whole > 2**63:
                raise invalid
        total += whole
        if total > 2**63:
            raise invalid
    if text[:1] != "-" and total > INT64_MAX:
        raise invalid


def _time_quote(text: str) -> str:
    """The time package's quote: bytes that are not printable ASCII as \\xNN."""
    out = []
    for char in text:
        if char < " " or not char.isascii():
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    return '"' + "".join(out) + '"'


def _field(name: str, decode: Decode) -> tuple[tuple[str, ...], Decode]:
    return (name,), decode


def _promoted(name: str, decode: Decode) -> tuple[tuple[str, ...], Decode]:
    """A field of the CommandLineFlags struct embedded in Flags: Go names it flags.CommandLineFlags.<name>."""
    return ("CommandLineFlags", name), decode


STRING, BOOL = pointer_to(string_type()), pointer_to(bool_type)
PLUGIN_FLAGS = StructType(
    "v1.PluginCommandLineFlags",
    {
        "passDeviceSpecs": _field("passDeviceSpecs", BOOL),
        "deviceListStrategy": _field("deviceListStrategy", pointer_to(custom(_device_list_strategy))),
        **{
            name: _field(name, STRING)
            for name in (
                "deviceIDStrategy",
                "cdiAnnotationPrefix",
                "nvidiaCTKPath",
                "containerDriverRoot",
                "sharedDevicesAllocationPolicy",
            )
        },
    },
)
GFD_FLAGS = StructType(
    "v1.GFDCommandLineFlags",
    {
        "oneshot": _field("oneshot", BOOL),
        "noTimestamp": _field("noTimestamp", BOOL),
        "sleepInterval": _field("sleepInterval", pointer_to(custom(_duration))),
        "outputFile": _field("outputFile", STRING),
        "machineTypeFile": _field("machineTypeFile", STRING),
    },
)
FLAGS = StructType(
    "v1.Flags",
    {
        **{
            name: _promoted(name, STRING)
            for name in ("migStrategy", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot", "deviceDiscoveryStrategy")
        },
        **{
            name: _promoted(name, BOOL)
            for name in ("failOnInitError", "gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI")
        },
        "plugin": _promoted("plugin", pointer_to(PLUGIN_FLAGS)),
        "gfd": _promoted("gfd", pointer_to(GFD_FLAGS)),
    },
)
RESOURCES = StructType(
    "v1.Resources",
    {
        "gpus": _field("gpus", slice_of(custom(_resource), "[]v1.Resource")),
        "mig": _field("mig", slice_of(custom(_resource), "[]v1.Resource")),
    },
)
SHARING = StructType(
    "v1.Sharing",
    {
        "timeSlicing": _field("timeSlicing", custom(_replicated_resources)),
        "mps": _field("mps", pointer_to(custom(_replicated_resources))),
    },
)
IMEX = StructType(
    "v1.Imex",
    {"channelIDs": _field("channelIDs", slice_of(int_type(), "[]int")), "required": _field("required", bool_type)},
)
CONFIG = StructType(
    "v1.Config",
    {
        "version": _field("version", string_type()),
        "flags": _field("flags", FLAGS),
        "resources": _field("resources", RESOURCES),
        "sharing": _field("sharing", SHARING),
        "imex": _field("imex", IMEX),
    },
)
