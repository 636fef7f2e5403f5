"""The device plugin's configuration file, parsed and validated as NVIDIA/k8s-device-plugin does.

Parsing is lenient like the plugin's (unknown keys are ignored); `lint` additionally reports the
misplacements the plugin silently ignores, so a runbook can refuse them before they ship.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

TOP_LEVEL_KEYS = ("version", "flags", "resources", "sharing", "imex")
SHARING_KEYS = ("renameByDefault", "failRequestsGreaterThanOne", "resources")
MIG_STRATEGIES = ("none", "single", "mixed")
# The plugin's wrapping of config-file errors (startPlugins > loadConfig > NewConfig > parseConfig),
# so that every message here is a verbatim part of the line the plugin logs before it exits.
PARSE_ERROR = (
    "unable to load config: unable to finalize config: unable to parse config file: error parsing config file: "
)
LOAD_ERROR = PARSE_ERROR + "unmarshal error: error unmarshaling JSON: while decoding JSON: "
# Go's encoding/json names for the JSON types a YAML value becomes.
JSON_TYPES = {str: "string", int: "number", float: "number", bool: "bool", list: "array", dict: "object"}


class ConfigError(ValueError):
    """The plugin would refuse this config; str() is the plugin's own error text."""


@dataclass(frozen=True)
class Sharing:
    strategy: str  # none | time-slicing | mps
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    replicas: int = 1  # replicas of nvidia.com/gpu (1 = not shared)


@dataclass(frozen=True)
class PluginConfig:
    mig_strategy: str | None
    sharing: Sharing


NO_SHARING = PluginConfig(mig_strategy=None, sharing=Sharing("none"))


def _fail(message: str) -> ConfigError:
    return ConfigError(LOAD_ERROR + message)


def _load(text: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{PARSE_ERROR}unmarshal error: {err}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise _fail("json: cannot unmarshal into Go value of type v1.Config")
    return document


def _type_error(value: Any, go_type: str) -> str:
    return f"json: cannot unmarshal {JSON_TYPES.get(type(value), 'value')} into Go value of type {go_type}"


def _resource_name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise _fail("no resource name specified")
    return raw if "/" in raw else f"nvidia.com/{raw}"


def _parse_sharing_block(block: Any, mps: bool) -> tuple[bool, bool, dict[str, int]]:
    if not isinstance(block, dict):
        raise _fail("no resources specified")
    resources = block.get("resources")
    if not isinstance(resources, list) or not resources:
        raise _fail("no resources specified")
    replicas: dict[str, int] = {}
    for entry in resources:
        if not isinstance(entry, dict) or "name" not in entry:
            raise _fail("no resource name specified")
        name = _resource_name(entry["name"])
        if "replicas" not in entry:
            raise _fail("no replicas specified")
        count = 0 if entry["replicas"] is None else entry["replicas"]  # JSON null leaves Go's int at 0
        if isinstance(count, bool) or not isinstance(count, int):
            raise _fail(_type_error(count, "int"))
        if count < 2:
            raise _fail("number of replicas must be >= 2")
        replicas[name] = count
    # null, like a missing key, keeps the default
    rename = False if block.get("renameByDefault") is None else block["renameByDefault"]
    fail_gt_one = mps if block.get("failRequestsGreaterThanOne") is None else block["failRequestsGreaterThanOne"]
    for value in (rename, fail_gt_one):
        if not isinstance(value, bool):
            raise _fail(_type_error(value, "bool"))
    return rename, fail_gt_one, replicas


def parse(text: str) -> PluginConfig:
    """Parse a config as the plugin does; raise ConfigError with the plugin's message otherwise."""
    document = _load(text)
    version = document.get("version", "") or ""
    if version != "v1":
        if version:
            raise ConfigError(f"{PARSE_ERROR}unknown version: {version}")
    flags = document.get("flags") or {}
    mig_strategy = flags.get("migStrategy") if isinstance(flags, dict) else None
    if mig_strategy is not None and mig_strategy not in MIG_STRATEGIES:
        raise ConfigError(f"unable to validate flags: unknown MIG strategy: {mig_strategy}")
    sharing = document.get("sharing") or {}
    if not isinstance(sharing, dict):
        raise _fail("json: cannot unmarshal into Go struct field Config.sharing")
    mps = sharing.get("mps")
    time_slicing = sharing.get("timeSlicing")
    parsed_mps = _parse_sharing_block(mps, mps=True) if mps is not None else None
    parsed_ts = _parse_sharing_block(time_slicing, mps=False) if time_slicing is not None else None
    # MPS wins when both are configured with replicas.
    if parsed_mps and any(r > 1 for r in parsed_mps[2].values()):
        strategy, (rename, fail_gt_one, replicas) = "mps", parsed_mps
    elif parsed_ts:
        strategy, (rename, fail_gt_one, replicas) = "time-slicing", parsed_ts
    else:
        return PluginConfig(mig_strategy, Sharing("none"))
    gpu_replicas = replicas.get("nvidia.com/gpu", 1)
    if gpu_replicas == 1:
        return PluginConfig(mig_strategy, Sharing("none"))
    return PluginConfig(mig_strategy, Sharing(strategy, rename, fail_gt_one, gpu_replicas))


def lint(text: str) -> list[str]:
    """Mistakes the plugin accepts silently: misplaced or unknown keys, unsharable resources."""
    try:
        document = _load(text)
    except ConfigError:
        return []
    problems = []
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            problems.append(f"unknown top-level key {key!r} is ignored by the device plugin")
    flags = document.get("flags")
    if isinstance(flags, dict):
        for key in SHARING_KEYS:
            if key in flags:
                problems.append(
                    f"{key!r} under 'flags' is ignored by the device plugin; "
                    f"move it to 'sharing.timeSlicing.{key}'"
                )
    sharing = document.get("sharing")
    if isinstance(sharing, dict):
        for key in sharing:
            if key in SHARING_KEYS:
                problems.append(f"{key!r} directly under 'sharing' is ignored; move it to 'sharing.timeSlicing.{key}'")
            elif key not in ("timeSlicing", "mps"):
                problems.append(f"unknown key 'sharing.{key}' is ignored by the device plugin")
        for mechanism in ("timeSlicing", "mps"):
            block = sharing.get(mechanism)
            if isinstance(block, dict):
                for key in block:
                    if key not in SHARING_KEYS:
                        problems.append(f"unknown key 'sharing.{mechanism}.{key}' is ignored by the device plugin")
                for entry in block.get("resources") or []:
                    name = entry.get("name") if isinstance(entry, dict) else None
                    if isinstance(name, str):
                        full = name if "/" in name else f"nvidia.com/{name}"
                        if full != "nvidia.com/gpu" and not full.startswith("nvidia.com/mig-"):
                            problems.append(f"resource {name!r} cannot be shared; only nvidia.com/gpu and MIG devices can")
                    if isinstance(entry, dict) and ("rename" in entry or entry.get("devices", "all") != "all"):
                        problems.append("'rename' and 'devices' are ignored by the device plugin; use renameByDefault")
    return problems
