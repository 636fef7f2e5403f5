"""Which k8s-device-plugin release a container runs, read from its image tag, and the behaviours the
simulator follows that changed between releases (NVIDIA/k8s-device-plugin tags v0.17.0-v0.20.0). The
runbooks read the config-manager's from their own model (gpushare.model.releases); a unit test holds
the two to the same verdicts.

- config-manager (cmd/config-manager/main.go): up to v0.18.1 the first `SyncableConfig.Get()` waits
  for the node informer, so `config-manager-init` applies the key the node label names (or
  crash-loops on a missing one); from v0.18.2 / v0.19.0 (commit ab05acef5, backported as 09d51359c)
  the first Get never waits: init applies DEFAULT_CONFIG before its informer has seen the label and
  the sidecar switches by signalling its process once it has. The sidecar signals the first process
  whose argv[0] equals PROCESS_TO_SIGNAL exactly (findPidToSignal); before v0.20.0 the scan indexes
  an empty cmdline and panics on the first kernel thread it meets (#1726, fixed by #1822), which a
  pod with hostPID sees. A failed signal ends the sidecar after it re-pointed the config file.
- gpu-feature-discovery: from v0.19.0 `--use-node-feature-api` defaults to true (labels go to an NFD
  NodeFeature object, cmd/gpu-feature-discovery/main.go; internal/lm/output.go).

A tag that names no release (a digest, `latest`) is taken as the newest behaviour."""

from __future__ import annotations

import re

Version = tuple[int, int, int]
_RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
CONFIG_MANAGER_INIT_NEVER_WAITS: Version = (0, 18, 2)
GFD_NODE_FEATURE_API_BY_DEFAULT: Version = (0, 19, 0)
SIGNAL_SCAN_SKIPS_KERNEL_THREADS: Version = (0, 20, 0)
# what the config-manager exits with (klog.Error of signalProcess's error; the Go runtime's panic)
KERNEL_THREAD_PANIC = "panic: runtime error: index out of range [0] with length 0"
NO_PROCESS_FOUND = "error finding pid: no process found"


def release(image: str) -> Version | None:
    """The release an image reference's tag names (`nvcr.io/nvidia/k8s-device-plugin:v0.17.4-ubi9`
    -> (0, 17, 4)); None for a digest or a tag that names none."""
    name = image.rsplit("/", 1)[-1]
    if "@" in name or ":" not in name:
        return None
    match = _RELEASE.match(name.split(":", 1)[1])
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def at_least(image: str, version: Version) -> bool:
    found = release(image)
    return found is None or found >= version


def tag(image: str) -> str:
    """The image's tag or digest as written, for messages (`v0.20.0`)."""
    name = image.rsplit("/", 1)[-1]
    return name.split("@", 1)[1] if "@" in name else name.split(":", 1)[1] if ":" in name else "an untagged image"


def init_waits_for_label(config_manager_image: str) -> bool:
    """Whether config-manager-init waits for the node label before it picks a key (up to v0.18.1)."""
    return not at_least(config_manager_image, CONFIG_MANAGER_INIT_NEVER_WAITS)


def signal_failure(config_manager_image: str, process_to_signal: str, argv0: str, host_pid: bool) -> str | None:
    """What the config-manager sidecar exits with when it signals its pod's main process, whose
    argv[0] is `argv0`; None when the signal reaches it."""
    if host_pid and not at_least(config_manager_image, SIGNAL_SCAN_SKIPS_KERNEL_THREADS):
        return KERNEL_THREAD_PANIC
    return None if argv0 == process_to_signal else NO_PROCESS_FOUND


_TRUE, _FALSE = ("1", "t", "true"), ("0", "f", "false")  # strconv.ParseBool, as urfave/cli reads a BoolFlag


def gfd_uses_node_feature_api(gfd_image: str, env: dict[str, str]) -> bool:
    """Whether GFD publishes its labels through a NodeFeature object: USE_NODE_FEATURE_API (or
    GFD_USE_NODE_FEATURE_API, which wins) when set, else its release's default."""
    for name in ("GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"):
        value = env.get(name, "").strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    return at_least(gfd_image, GFD_NODE_FEATURE_API_BY_DEFAULT)
