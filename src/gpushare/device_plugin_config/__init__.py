"""The device plugin's configuration file, judged as NVIDIA/k8s-device-plugin v0.20.0 judges it.

`parse` is the plugin's verdict. It reads the text the way the plugin does at start
(cmd/nvidia-device-plugin/main.go: startPlugins > loadConfig > api/config/v1 NewConfig >
parseConfig: sigs.k8s.io/yaml, then encoding/json into the v1 structs; see sigs_yaml, go_json and
api_v1), lets the container's environment override the file's flags as NewConfig does (by
default the environment the GPU Operator gives the plugin), and checks the flags as validateFlags
does. A refusal is a ConfigError whose text is the plugin's own (save one: a text nested deeper
than MAX_DEPTH levels is refused in our words, not judged).

`lint` adds what the plugin accepts and then silently ignores (a key in the wrong place or the
wrong case, renaming and device selection it switches off, time-slicing under MPS, a bad flag
value that only its environment's override hides), so a runbook can refuse it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpushare.device_plugin_config import api_v1
from gpushare.device_plugin_config.go_json import GoError, StructType, fold, unmarshal
from gpushare.device_plugin_config.go_yaml import MAX_DEPTH, TooDeep, YAMLError
from gpushare.device_plugin_config.sigs_yaml import to_json

# The plugin's wrapping of config-file errors (startPlugins > loadConfig > NewConfig > parseConfig),
# so that every message here is a verbatim part of the line the plugin logs before it exits.
PARSE_ERROR = (
    "unable to load config: unable to finalize config: unable to parse config file: error parsing config file: "
)
YAML_ERROR = PARSE_ERROR + "unmarshal error: error converting YAML to JSON: "
LOAD_ERROR = PARSE_ERROR + "unmarshal error: error unmarshaling JSON: while decoding JSON: "
VALIDATE_ERROR = "unable to validate flags: "

# The device-plugin container's environment as the GPU Operator v26.7 renders it
# (assets/state-device-plugin/0500_daemonset.yaml; MIG_STRATEGY from ClusterPolicy spec.mig.strategy,
# whose chart default is single).
OPERATOR_ENV: Mapping[str, str] = {
    "PASS_DEVICE_SPECS": "true",
    "FAIL_ON_INIT_ERROR": "true",
    "DEVICE_LIST_STRATEGY": "envvar",
    "DEVICE_ID_STRATEGY": "uuid",
    "MPS_ROOT": "/run/nvidia/mps",
    "MIG_STRATEGY": "single",
}
# The flags validateFlags checks, each with the environment variables of the command-line flag that
# overrides the file's value when set (main.go: c.Flags; flags.go: updateFromCLIFlag) and its default.
FLAG_ENV: dict[tuple[str, ...], tuple[tuple[str, ...], Any]] = {
    ("migStrategy",): (("MIG_STRATEGY",), "none"),
    ("mpsRoot",): (("MPS_ROOT",), ""),
    ("deviceDiscoveryStrategy",): (("DEVICE_DISCOVERY_STRATEGY",), "auto"),
    ("plugin", "deviceListStrategy"): (("DEVICE_LIST_STRATEGY",), ["envvar"]),
    ("plugin", "deviceIDStrategy"): (("DEVICE_ID_STRATEGY",), "uuid"),
    ("plugin", "sharedDevicesAllocationPolicy"): (("SHARED_DEVICES_ALLOCATION_POLICY",), "distributed"),
}
MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")  # consts.go
SHARING_KEYS = ("renameByDefault", "failRequestsGreaterThanOne", "resources")  # replicas.go, case-sensitive
RESOURCE_KEYS = ("name", "devices", "replicas", "rename")
MPS_MAX_CLIENTS = 48  # cmd/mps-control-daemon/mps/device.go: maxClients (Volta and newer)


class ConfigError(ValueError):
    """The plugin would refuse this config; str() is the plugin's own error text (see the module doc)."""


@dataclass(frozen=True)
class Sharing:
    """How nvidia.com/gpu is shared (internal/lm/resource.go: its labels)."""

    strategy: str  # none | time-slicing | mps
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    replicas: int = 1  # replicas of nvidia.com/gpu (1 = not shared)
    # replicas of the nvidia.com/mig-<profile> resources it shares (the mixed MIG strategy's names)
    mig: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class PluginConfig:
    mig_strategy: str  # the MIG strategy the plugin runs with: its environment's, else the file's, else none
    sharing: Sharing


NO_SHARING = PluginConfig(mig_strategy="none", sharing=Sharing("none"))


def parse(text: str, env: Mapping[str, str] | None = None) -> PluginConfig:
    """The plugin's verdict on a config: what it runs with, or ConfigError with its message.

    env is the plugin container's environment (default OPERATOR_ENV); its variables of FLAG_ENV
    take precedence over the file's flags.
    """
    return _judge(text, OPERATOR_ENV if env is None else env)[2]


def lint(text: str, env: Mapping[str, str] | None = None) -> list[str]:
    """What the plugin accepts in this config but ignores; [] when parse refuses it (its error says why)."""
    env = OPERATOR_ENV if env is None else env
    try:
        document, config, _ = _judge(text, env)
    except ConfigError:
        return []
    problems = _lint_keys(document)
    problems += _lint_overridden_flags(config, env)
    sharing = config.get("sharing") or {}
    if sharing.get("mps") is not None and sharing.get("timeSlicing"):
        problems.append("'sharing.timeSlicing' is ignored: 'sharing.mps' takes precedence")
    for mechanism in ("timeSlicing", "mps"):
        problems += _lint_resources(mechanism, sharing.get(mechanism) or {})
    resources = config.get("resources") or {}
    if resources.get("gpus") or resources.get("mig"):
        problems.append("'resources' is ignored by the device plugin (it does not support renaming resources yet)")
    return problems


def _judge(text: str, env: Mapping[str, str]) -> tuple[Any, dict[str, Any], PluginConfig]:
    try:
        document = to_json(text)
    except YAMLError as err:
        raise ConfigError(YAML_ERROR + str(err)) from None
    except TooDeep:
        raise ConfigError(
            f"the config nests deeper than {MAX_DEPTH} levels; gpushare does not judge it (write it flatter)"
        ) from None
    try:
        config = unmarshal(document, api_v1.CONFIG) or {}
    except GoError as err:
        raise ConfigError(LOAD_ERROR + str(err)) from None
    version = config.get("version") or "v1"
    if version != "v1":
        raise ConfigError(f"{PARSE_ERROR}unknown version: {version}")
    sharing = config.get("sharing") or {}
    mps = sharing.get("mps")
    if mps is not None and mps.get("failRequestsGreaterThanOne") is None:
        mps["failRequestsGreaterThanOne"] = True  # config.go: NewConfig keeps MPS's historical default
    try:
        mig_strategy = _validate_flags(config, env, _strategy(config))
    except GoError as err:
        raise ConfigError(VALIDATE_ERROR + str(err)) from None
    replicated = mps if mps is not None else sharing.get("timeSlicing") or {}
    resources = replicated.get("resources") or []
    gpu = next((r for r in resources if r["name"] == "nvidia.com/gpu"), None)
    first: dict[str, int] = {}
    for resource in resources:  # a name listed twice: GFD labels the first (internal/lm/resource.go replicationInfo)
        if resource["name"].startswith("nvidia.com/mig-"):
            first.setdefault(resource["name"], resource["replicas"])
    mig = tuple(first.items())
    rename = bool(replicated.get("renameByDefault"))
    if gpu is None:
        return document, config, PluginConfig(mig_strategy, Sharing("none", rename_by_default=rename and bool(mig), mig=mig))
    shared = Sharing(
        _strategy(config),
        rename_by_default=rename,
        fail_requests_greater_than_one=bool(replicated.get("failRequestsGreaterThanOne")),
        replicas=gpu["replicas"],
        mig=mig,
    )
    return document, config, PluginConfig(mig_strategy, shared)


def _strategy(config: dict[str, Any]) -> str:
    """sharing.go: SharingStrategy (MPS when configured at all; every replicas is >= 2 once decoded)."""
    sharing = config.get("sharing") or {}
    if sharing.get("mps") is not None:
        return "mps"
    return "time-slicing" if (sharing.get("timeSlicing") or {}).get("resources") else "none"


def _flag(config: dict[str, Any], path: tuple[str, ...], env: Mapping[str, str]) -> Any:
    """The value the plugin runs with: its environment's, else the file's, else its default."""
    names, default = FLAG_ENV[path]
    for name in names:
        if name in env:
            return [part.strip() for part in env[name].split(",")] if isinstance(default, list) else env[name]
    value: Any = config.get("flags") or {}
    for key in path:
        value = (value or {}).get(key)
    return default if value is None else value


def _validate_flags(config: dict[str, Any], env: Mapping[str, str], strategy: str) -> str:
    """main.go: validateFlags (CDI strategies need NVML, which a GPU node's driver provides: not judged).

    Returns the MIG strategy the plugin runs with."""
    for list_strategy in _flag(config, ("plugin", "deviceListStrategy"), env):
        if list_strategy not in DEVICE_LIST_STRATEGIES:
            raise GoError(f"invalid --device-list-strategy option: invalid strategy: {list_strategy}")
    id_strategy = _flag(config, ("plugin", "deviceIDStrategy"), env)
    if id_strategy not in ("uuid", "index"):
        raise GoError(f"invalid --device-id-strategy option: {id_strategy}")
    policy = _flag(config, ("plugin", "sharedDevicesAllocationPolicy"), env)
    if policy not in ("distributed", "packed"):
        raise GoError(f"invalid --shared-devices-allocation-policy option: {policy}")
    mig_strategy = _flag(config, ("migStrategy",), env)
    if strategy == "mps":
        if mig_strategy == "mixed":
            raise GoError("using --mig-strategy=mixed is not supported with MPS")
        if not _flag(config, ("mpsRoot",), env):
            raise GoError("using MPS requires --mps-root to be specified")
    discovery = _flag(config, ("deviceDiscoveryStrategy",), env)
    if discovery not in ("auto", "nvml", "tegra"):
        raise GoError(f"invalid --device-discovery-strategy option {discovery}")
    if mig_strategy not in MIG_STRATEGIES:
        raise GoError(f"unknown MIG strategy: {mig_strategy}")
    channels = (config.get("imex") or {}).get("channelIDs") or []
    if channels not in ([], [0]):  # imex.go: AssertChannelIDsValid
        found = " ".join(str(channel) for channel in channels)
        raise GoError(f"invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found [{found}]")
    return str(mig_strategy)


# --- lint -----------------------------------------------------------------------------------


def _members(block: Any, struct: StructType, where: str, problems: list[str]) -> list[tuple[str, Any]]:
    """The (field, value) pairs encoding/json reads from a JSON object; reports the keys it ignores
    and those it reads in spite of their case."""
    if not isinstance(block, dict):
        return []
    members = []
    for key, value in block.items():
        name = struct.field_name(key)
        if name is None:
            scope = "" if where else "top-level "
            problems.append(f"unknown {scope}key '{where}{key}' is ignored by the device plugin")
        else:
            if name != key:
                problems.append(
                    f"'{where}{key}' is read as '{where}{name}' (the plugin ignores case there); write '{name}'"
                )
            members.append((name, value))
    return members


def _lint_keys(document: Any) -> list[str]:
    problems: list[str] = []
    for name, value in _members(document, api_v1.CONFIG, "", problems):
        if name == "flags":
            problems += _lint_flags(value)
        elif name == "sharing":
            problems += _lint_sharing(value)
    return problems


def _lint_flags(flags: Any) -> list[str]:
    problems: list[str] = []
    if isinstance(flags, dict):
        for key in SHARING_KEYS:
            if key in flags:
                problems.append(
                    f"'{key}' under 'flags' is ignored by the device plugin; move it to 'sharing.timeSlicing.{key}'"
                )
        flags = {key: value for key, value in flags.items() if key not in SHARING_KEYS}
    for name, value in _members(flags, api_v1.FLAGS, "flags.", problems):
        if name in ("plugin", "gfd"):
            _members(value, api_v1.PLUGIN_FLAGS if name == "plugin" else api_v1.GFD_FLAGS, f"flags.{name}.", problems)
    return problems


def _lint_overridden_flags(config: dict[str, Any], env: Mapping[str, str]) -> list[str]:
    """A flag of the file the environment overrides is not checked by the plugin: check it as written."""
    flags = config.get("flags") or {}
    overriding = {
        name
        for path, (names, _) in FLAG_ENV.items()
        if (flags.get(path[0]) if len(path) == 1 else (flags.get(path[0]) or {}).get(path[1])) is not None
        for name in names
    }
    try:
        _validate_flags(config, {name: env[name] for name in env if name not in overriding}, _strategy(config))
    except GoError as err:
        return [
            "'flags' holds a value the device plugin refuses when its environment does not override it: "
            f"{VALIDATE_ERROR}{err}"
        ]
    return []


def _lint_sharing(sharing: Any) -> list[str]:
    problems: list[str] = []
    if isinstance(sharing, dict):
        for key in SHARING_KEYS:
            if key in sharing:
                problems.append(f"'{key}' directly under 'sharing' is ignored; move it to 'sharing.timeSlicing.{key}'")
        sharing = {key: value for key, value in sharing.items() if key not in SHARING_KEYS}
    for mechanism, block in _members(sharing, api_v1.SHARING, "sharing.", problems):
        for key in block if isinstance(block, dict) else []:
            if key not in SHARING_KEYS:
                problems.append(_unknown_exact(f"sharing.{mechanism}.{key}", key, SHARING_KEYS))
        resources = block.get("resources") if isinstance(block, dict) else None
        for index, entry in enumerate(resources if isinstance(resources, list) else []):
            for key in entry if isinstance(entry, dict) else []:
                if key not in RESOURCE_KEYS:
                    problems.append(_unknown_exact(f"sharing.{mechanism}.resources[{index}].{key}", key, RESOURCE_KEYS))
    return problems


def _unknown_exact(where: str, key: str, known: tuple[str, ...]) -> str:
    """replicas.go reads these keys from a map, so their case must be exact."""
    same = next((name for name in known if fold(name) == fold(key)), None)
    hint = f" (these keys are case-sensitive: write '{same}')" if same else ""
    return f"unknown key '{where}' is ignored by the device plugin{hint}"


def _lint_resources(mechanism: str, block: dict[str, Any]) -> list[str]:
    problems = []
    seen: set[str] = set()
    rename_by_default = bool(block.get("renameByDefault"))
    for resource in block.get("resources") or []:
        name = resource["name"]
        if name in seen:
            problems.append(
                f"resource '{name}' is listed twice in 'sharing.{mechanism}.resources'; the node's labels use the first"
            )
        seen.add(name)
        if name != "nvidia.com/gpu" and not name.startswith("nvidia.com/mig-"):
            problems.append(f"resource '{name}' cannot be shared; only nvidia.com/gpu and MIG devices can")
        # config.go: DisableResourceNamingInConfig resets these, logging that they are not supported
        rename = resource.get("rename") or ""
        if rename != (name + ".shared" if rename_by_default else "") or resource["devices"] != "all":
            problems.append("'rename' and 'devices' are ignored by the device plugin; use renameByDefault")
        if mechanism == "mps" and resource["replicas"] > MPS_MAX_CLIENTS:
            problems.append(
                f"sharing.mps shares '{name}' {resource['replicas']} ways, more than the {MPS_MAX_CLIENTS} clients "
                "an MPS server takes: the MPS control daemon refuses it"
            )
    return problems
