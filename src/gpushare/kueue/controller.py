"""What the running Kueue controller is configured to do, where queue backfill depends on it: read
from its configuration ConfigMap (the Helm chart's `kueue-manager-config`, key
controller_manager_config.yaml, labelled app.kubernetes.io/version) with Kueue's own defaults
applied, as kueue apis/config/v1beta2/defaults.go and pkg/util/waitforpodsready (tags v0.17.0,
v0.19.2) apply them:

- WaitForPodsReady: up to v0.18 on only when the configuration has a `waitForPodsReady` section;
  from v0.19 always on unless the feature gate DisableWaitForPodsReady is set, with timeout 30m,
  blockAdmission false, recoveryTimeout = timeout, requeuing after an eviction with backoff 60 s
  doubling up to 3600 s and no limit to the requeues (backoffLimitCount unset).
- DRA-backed extended resources: from v0.19 (feature gates KueueDRAIntegration and
  KueueDRAIntegrationExtendedResource, both on by default) a request for an extended resource that
  a DeviceClass names in spec.extendedResourceName is charged to the quota of that name, or of the
  logical name the configuration's resources.deviceClassMappings gives the class.

Feature gates given on Kueue's command line (--feature-gates) are not in the ConfigMap and are not seen."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gpushare.bounded import load_yaml
from gpushare.kueue.capacity import drivers
from gpushare.kueue.status import parse_time

CONFIG_KEY = "controller_manager_config.yaml"
VERSION_LABEL = "app.kubernetes.io/version"
WAIT_DEFAULT_ON_SINCE = (0, 19)
DRA_EXTENDED_RESOURCE_SINCE = (0, 19)
DEFAULT_TIMEOUT_S = 30 * 60
DEFAULT_BACKOFF_BASE_S = 60
DEFAULT_BACKOFF_MAX_S = 3600
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


@dataclass(frozen=True)
class WaitForPodsReady:
    timeout_s: float
    block_admission: bool
    recovery_timeout_s: float  # 0: not checked
    backoff_base_s: int
    backoff_max_s: int
    backoff_limit_count: int | None  # None: requeued for ever


@dataclass(frozen=True)
class KueueConfig:
    """`unread`: why the configuration could not be read (then nothing else is known)."""

    source: str
    version: tuple[int, int] | None = None
    version_text: str | None = None
    config: Mapping[str, Any] | None = None
    unread: str | None = None

    def gate(self, name: str, default_since: tuple[int, int] | None) -> bool | None:
        """A feature gate as the configuration sets it, else its default for the version (None: unknown)."""
        gates = (self.config or {}).get("featureGates") or {}
        if name in gates:
            return bool(gates[name])
        if default_since is None:
            return False
        return None if self.version is None else self.version >= default_since

    def wait_for_pods_ready(self) -> WaitForPodsReady | None | str:
        """The WaitForPodsReady in force; None when off; a sentence when it depends on what was not read."""
        if self.unread:
            return f"not read ({self.unread})"
        section = (self.config or {}).get("waitForPodsReady")
        if self.gate("DisableWaitForPodsReady", None):
            return None
        if section is None:
            if self.version is None:
                return (f"not in Kueue's configuration, and its version was not read (no label {VERSION_LABEL} "
                        f"on {self.source}): on with Kueue v0.19 or later (timeout 30m), off before")
            if self.version < WAIT_DEFAULT_ON_SINCE:
                return None
            section = {}
        strategy = section.get("requeuingStrategy") or {}
        timeout = duration_s(section.get("timeout")) or DEFAULT_TIMEOUT_S
        recovery = section.get("recoveryTimeout")
        return WaitForPodsReady(
            timeout_s=timeout, block_admission=bool(section.get("blockAdmission", False)),
            recovery_timeout_s=timeout if recovery is None else duration_s(recovery),
            backoff_base_s=int(strategy.get("backoffBaseSeconds") or DEFAULT_BACKOFF_BASE_S),
            backoff_max_s=int(strategy.get("backoffMaxSeconds") or DEFAULT_BACKOFF_MAX_S),
            backoff_limit_count=strategy.get("backoffLimitCount"))

    def extended_resources_from_dra(self) -> bool | None:
        """Whether Kueue charges DRA-backed extended resources to their quota (None: version unknown)."""
        if self.gate("KueueDRAIntegration", (0, 18)) is False:
            return False
        return self.gate("KueueDRAIntegrationExtendedResource", DRA_EXTENDED_RESOURCE_SINCE)

    def device_class_mapping(self, device_class: str) -> str | None:
        """The logical resource name resources.deviceClassMappings gives a DeviceClass, if any."""
        for mapping in ((self.config or {}).get("resources") or {}).get("deviceClassMappings") or []:
            if device_class in (mapping.get("deviceClassNames") or []):
                return mapping.get("name")
        return None


def duration_s(value: Any) -> float:
    """A Go duration ("30m", "5m0s", "1h30m", "90s") in seconds; 0 for none."""
    if not value:
        return 0.0
    text = str(value)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 30m, 5m0s or 90s")
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(number) * scale[unit] for number, unit in parts)


def read(config_map: Mapping[str, Any] | None, source: str) -> KueueConfig:
    """The configuration of the ConfigMap read at `source` (namespace/name; None: it does not exist)."""
    if config_map is None:
        return KueueConfig(source, unread=f"no ConfigMap {source}")
    label = ((config_map.get("metadata") or {}).get("labels") or {}).get(VERSION_LABEL)
    found = _VERSION.match(label or "")
    version = (int(found[1]), int(found[2])) if found else None
    text = (config_map.get("data") or {}).get(CONFIG_KEY)
    if text is None:
        return KueueConfig(source, version, label, unread=f"{source} has no key {CONFIG_KEY}")
    try:
        config = load_yaml(text) or {}  # read back from the cluster: bounded, no aliases
        if not isinstance(config, Mapping):
            raise ValueError("not a mapping")
        KueueConfig(source, version, label, config).wait_for_pods_ready()
    except (yaml.YAMLError, ValueError, TypeError, AttributeError) as err:
        return KueueConfig(source, version, label, unread=f"{source} {CONFIG_KEY} does not parse: {err}")
    return KueueConfig(source, version, label, config)


def _seconds(value: float) -> str:
    whole = int(value)
    return f"{whole // 60}m" if whole and whole % 60 == 0 else f"{whole}s"


def wait_line(kueue: KueueConfig) -> str:
    """The plan's line on WaitForPodsReady and what it does to a backfilled job."""
    version = f"Kueue {kueue.version_text}" if kueue.version_text else "Kueue"
    setting = kueue.wait_for_pods_ready()
    if setting is None:
        return (f"WaitForPodsReady is off ({version}, {kueue.source}): an admitted job keeps its quota however long "
                "its pods take to start.")
    if isinstance(setting, str):
        return (f"WaitForPodsReady: {setting}. Where it is on, a backfilled job admitted whose pods are not all "
                "Ready within the timeout is evicted (PodsReadyTimeout) and requeued.")
    limit = ("no limit" if setting.backoff_limit_count is None
             else f"at most {setting.backoff_limit_count} times, then deactivated")
    block = ("; blockAdmission is true: the cluster admits nothing else until an admitted job's pods are Ready, "
             "which holds the small jobs back behind a big one" if setting.block_admission else "")
    return (f"WaitForPodsReady is on ({version}, {kueue.source}): a backfilled job admitted whose pods are not all "
            f"Ready within {_seconds(setting.timeout_s)} is evicted (PodsReadyTimeout) and requeued after "
            f"{setting.backoff_base_s}s, doubling up to {setting.backoff_max_s}s ({limit}){block}.")


def _selected(classes: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The DeviceClass the scheduler allocates from when several name one extended resource: the newest,
    then the first by name (the field's documentation; kueue pkg/dra/extended_resources.go)."""
    def created(dc: Mapping[str, Any]) -> float:
        stamp = (dc.get("metadata") or {}).get("creationTimestamp")
        return parse_time(stamp).timestamp() if stamp else 0.0
    newest = max(created(dc) for dc in classes)
    return min((dc for dc in classes if created(dc) == newest), key=lambda dc: dc["metadata"]["name"])


def dra_backed(resources: Iterable[str], device_classes: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    """quoted resource -> the DeviceClass that backs it through spec.extendedResourceName."""
    by_resource: dict[str, list[Mapping[str, Any]]] = {}
    for dc in device_classes or []:
        name = (dc.get("spec") or {}).get("extendedResourceName")
        if name:
            by_resource.setdefault(name, []).append(dc)
    return {r: _selected(by_resource[r])["metadata"]["name"] for r in resources if r in by_resource}


def dra_lines_and_problems(kueue: KueueConfig, quoted: Iterable[str],
                           device_classes: Iterable[Mapping[str, Any]] | None) -> tuple[list[str], list[str]]:
    """What Kueue does with the quoted resources that DRA backs: the plan's lines, and the refusals
    (a class mapped to another name: its jobs would be charged to a quota no team has)."""
    quoted = list(quoted)
    lines, problems = [], []
    counted = kueue.extended_resources_from_dra()
    classes = {dc["metadata"]["name"]: dc for dc in device_classes or []}
    for resource, device_class in dra_backed(quoted, device_classes).items():
        named = sorted(drivers(classes[device_class]))
        lines.append(f"The quotas of {resource} are checked against the nodes' allocatable {resource}, or on a node "
                     "with none, its devices of "
                     + (f"driver {', '.join(named)} (DeviceClass {device_class}'s selectors)" if named else
                        f"no driver: DeviceClass {device_class}'s selectors name none (device.driver == ...), "
                        "so its devices are not counted"))
        if counted is False:
            lines.append(f"{resource} is DRA-backed (DeviceClass {device_class}), but this Kueue leaves DRA out of its "
                         "quota (a release before v0.19, or its feature gates): those requests are charged as a plain "
                         "extended resource.")
            continue
        mapped = kueue.device_class_mapping(device_class)
        charged = mapped or resource
        when = "" if counted else " with Kueue v0.19 or later (its version was not read)"
        lines.append(f"{resource} is DRA-backed (DeviceClass {device_class} names it in extendedResourceName): "
                     f"Kueue charges pods' {resource} requests to the quota of {charged}{when}.")
        if mapped and mapped != resource and mapped not in quoted:
            problems.append(
                f"Kueue's configuration ({kueue.source}) maps DeviceClass {device_class}, which backs {resource}, to "
                f"{mapped} (resources.deviceClassMappings): jobs asking for {resource} are charged to {mapped}, "
                f"which no team has a quota of, and would never be admitted. Quote {mapped} instead of {resource}")
    return lines, problems
