"""A pod that reads the device-plugin config through the config-manager (the device plugin and GFD),
as its kubelet and its containers see it, with no I/O:

- the config ConfigMap as MOUNTED: a snapshot taken when the pod starts, refreshed by the kubelet
  only every `refresh_s` seconds (its sync period plus the ConfigMap cache TTL);
- `config-manager-init` (ONESHOT): up to v0.18.1 it waits for the node label and picks the key it
  names (or DEFAULT_CONFIG, or the empty config) from the mounted keys, or crash-loops; from v0.18.2
  its first read never waits (commit ab05acef5): it applies DEFAULT_CONFIG before its informer has
  seen the label, and fails only when that key is missing;
- the main container: loads the selected config at start, and again in place on SIGHUP;
- the `config-manager` sidecar: once its informer has delivered the node (`label_delay` after the
  start, from v0.18.2), on a label the loaded key does not follow, re-selects and SIGHUPs the main
  container; on a key it cannot find it exits (crash-loops) and the loaded config stays in effect.
  So from v0.18.2 a pod started on a labelled node serves the default first, then the labelled key;
  a label naming a missing key leaves init Completed, the main container on the default and the
  sidecar in CrashLoopBackOff.

Follows NVIDIA/k8s-device-plugin cmd/config-manager/main.go (SyncableConfig.Get, updateConfigName
with FALLBACK_STRATEGIES=empty, as the operator sets it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gpushare_testbed.simulator.nvidia_judge import ConfigError

T = TypeVar("T")
EMPTY = ""  # the config-manager's empty config: /config/config.yaml -> /dev/null
MISSING_FILE = ("unable to load config: unable to finalize config: unable to parse config file: "
                "read error: open /config/config.yaml: no such file or directory")


class SelectError(ValueError):
    """The config-manager exits with this message."""


def select_config(label: str | None, default: str, keys: Iterable[str]) -> str:
    files = set(keys)
    if not files:
        raise SelectError("no configuration files available")
    if label:
        if label not in files:
            raise SelectError(f"specified config {label} does not exist")
        return label
    if default:
        if default not in files:
            raise SelectError("specified config  does not exist")  # sic: upstream prints the empty label
        return default
    return EMPTY


@dataclass
class ManagedPod(Generic[T]):
    uid: str
    config_map: str | None  # None: rendered without devicePlugin.config (no config-manager at all)
    default: str
    # None: init waits for the node label (up to v0.18.1); else how long after init the sidecar's
    # informer delivers the label (v0.18.2 and later)
    label_delay: float | None = None
    label_at: float | None = None  # when the sidecar is first told the node label (None: at once)
    mount: dict[str, str] | None = None  # the mounted ConfigMap data; None while it cannot be mounted
    mounted_at: float | None = None
    label: str | None = None  # the node label value the config-manager last acted on
    selected: str | None = None  # the key /config/config.yaml points to; None until init succeeded
    init_error: str | None = None
    init_restarts: int = 0
    sidecar_error: str | None = None
    sidecar_restarts: int = 0
    loaded: T | None = None  # what the main process runs with
    main_error: str | None = None
    main_restarts: int = 0
    started_at: float = 0.0  # last start or in-place reload of the main process
    events: list[tuple[str, str]] = field(default_factory=list)  # (container, message) failures to report
    reported: tuple | None = None  # what the pod's status last said (set once written)
    reported_version: int = 0  # the pod's resourceVersion after that write (0: written by no one, or gone)

    @property
    def mounted(self) -> bool:
        return self.config_map is None or self.mount is not None

    @property
    def running(self) -> bool:
        """The main container runs with a loaded config."""
        return self.selected is not None and self.main_error is None

    @property
    def ready(self) -> bool:
        return self.running and self.sidecar_error is None

    def refresh_due(self, now: float, refresh_s: float) -> float | None:
        """When the pod next changes on its own: the kubelet refreshes the mounted ConfigMap, or the
        sidecar is told the node label (None: nothing mounted from a ConfigMap)."""
        if self.config_map is None:
            return None
        refresh = (self.mounted_at or now) + refresh_s
        return min(refresh, self.label_at) if self.label_at is not None and self.label_at > now else refresh

    def sees_label(self, now: float) -> bool:
        return self.label_at is None or now >= self.label_at

    def sync(self, label: str | None, configmap: dict[str, str] | None, now: float, refresh_s: float,
             load: Callable[[str], T]) -> bool:
        """Advance to what the pod does given the node label and the ConfigMap as the API has it now;
        `load` parses a config text for the main container or raises ConfigError with its message.
        True when anything visible changed."""
        before = self.visible()
        remounted = self._kubelet_mount(configmap, now, refresh_s)
        if not self.mounted:
            return self.visible() != before
        started = self.selected is None
        if started:
            if self.config_map is None:
                self._start(EMPTY, now, load)
            elif remounted or self.init_restarts == 0 and self.init_error is None or (
                    self.label_delay is None and label != self.label):
                self._init(label if self.label_delay is None else None, now, load)
                if self.selected is not None and self.label_delay is not None:
                    self.label_at = now + self.label_delay
            if self.selected is None:
                return self.visible() != before
        if self.config_map is not None and self.sees_label(now) and (
                label != self.label or self.sidecar_error and remounted):
            self._sidecar(label, now, load)
        if self.main_error and remounted and not started:
            self._start(self.selected, now, load)
        return self.visible() != before

    def retry(self, now: float, load: Callable[[str], T]) -> None:
        """The main process starts again with the selected config after it failed (the device
        plugin's own retry loop, which waits for its MPS daemon this way)."""
        if self.main_error and self.selected is not None:
            self._start(self.selected, now, load)

    def visible(self) -> tuple:
        """What the pod's status shows."""
        return (self.mounted, self.selected, self.init_error, self.init_restarts, self.sidecar_error,
                self.sidecar_restarts, self.main_error, self.main_restarts, self.started_at)

    def _kubelet_mount(self, configmap: dict[str, str] | None, now: float, refresh_s: float) -> bool:
        if self.config_map is None:
            return False
        if self.mounted_at is not None and now < self.mounted_at + refresh_s:
            return False
        changed = configmap != self.mount
        self.mount, self.mounted_at = (dict(configmap) if configmap is not None else None), now
        return changed

    def _select(self, label: str | None, container: str) -> tuple[str | None, str | None]:
        """The config-manager in `container` reads the node label: (the key it selects, None), or
        (None, why it exits), reported as an event of the container."""
        self.label = label
        try:
            return select_config(label, self.default, self.mount or {}), None
        except SelectError as err:
            self.events.append((container, str(err)))
            return None, str(err)

    def _init(self, label: str | None, now: float, load: Callable[[str], T]) -> None:
        key, self.init_error = self._select(label, "config-manager-init")
        if key is None:
            self.init_restarts += 1
        else:
            self._start(key, now, load)

    def _sidecar(self, label: str | None, now: float, load: Callable[[str], T]) -> None:
        key, self.sidecar_error = self._select(label, "config-manager")
        if key is None:
            self.sidecar_restarts += 1
        elif key != self.selected:
            self._start(key, now, load)  # SIGHUP: the main process reloads in place

    def _start(self, key: str, now: float, load: Callable[[str], T]) -> None:
        self.selected, self.started_at = key, now
        text = EMPTY if key == EMPTY else (self.mount or {}).get(key)
        try:
            if text is None:
                raise ConfigError(MISSING_FILE)
            self.loaded, self.main_error = load(text), None
        except ConfigError as err:
            self.main_error, self.main_restarts = str(err), self.main_restarts + 1
            self.events.append(("main", str(err)))
