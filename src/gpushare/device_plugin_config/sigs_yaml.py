"""YAML text to the JSON value the device plugin decodes, as sigs.k8s.io/yaml v1.6.0 makes it.

sigs.k8s.io/yaml (yaml.go: Unmarshal) decodes the first YAML document with go-yaml v2 (go_yaml),
turns map keys into strings and the scalar under a top-level string field of the target struct
(the device plugin's Config has one, `version`) into its string form (convertToJSONableObject; a
target with its own UnmarshalJSON, as mig-parted's Spec, gets no such conversion), and writes the
result with encoding/json, which cannot write NaN or infinities, then hands that JSON to the
target's decoding (go_json; api_v1 for the plugin, gpushare.mig_parted_config for mig-parted).
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpushare.device_plugin_config.go_format import format_float, go_syntax
from gpushare.device_plugin_config.go_json import Number, fold
from gpushare.device_plugin_config.go_yaml import GoMap, YAMLError, decode


def to_json(text: str, string_fields: tuple[str, ...] = ("version",)) -> Any:
    """The JSON value (None, bool, str, Number, list, dict in Go's key order) sigs.k8s.io/yaml makes of
    text for a target struct whose top-level Go string fields are `string_fields`."""
    return _marshal(_jsonable(decode(text), string_fields))


def _jsonable(value: Any, string_fields: tuple[str, ...] = ()) -> Any:
    """convertToJSONableObject: string keys; the scalar under a string field becomes a string."""
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if not isinstance(value, GoMap):
        return value
    result: dict[str, Any] = {}
    for (go_type, key), item in value.items():
        if go_type in ("nil", "uint64"):
            type_name = "%!s(<nil>)" if go_type == "nil" else "uint64"
            raise YAMLError(
                f"unsupported map key of type: {type_name}, key: {go_syntax(key)}, value: {go_syntax(item)}"
            )
        if go_type == "bool":
            name = "true" if key else "false"
        elif go_type == "float":
            name = format_float(key, "g", 32)
            name = {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(name, name)
        else:
            name = str(key)
        if any(fold(name) == fold(f) for f in string_fields) and not isinstance(item, list | dict | type(None)):
            result[name] = _go_string_form(item)
        else:
            result[name] = _jsonable(item)
    return result


def _go_string_form(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value, "g", 32)
    return str(value)


def _marshal(value: Any) -> Any:
    """encoding/json's Marshal, kept as values: map keys sorted, numbers as written, NaN refused."""
    if isinstance(value, dict):
        return {_valid_utf8(key): _marshal(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_marshal(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return Number(str(value))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise YAMLError(f"json: unsupported value: {format_float(value, 'g', 64)}")
        exponent = value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21)
        text = format_float(value, "e" if exponent else "f", 64)
        return Number(re.sub(r"e-0(\d)$", r"e-\1", text))
    return _valid_utf8(value)


def _valid_utf8(text: str) -> str:
    """encoding/json writes each byte that is not UTF-8 as U+FFFD."""
    return re.sub("[\udc80-\udcff]", "\ufffd", text)


