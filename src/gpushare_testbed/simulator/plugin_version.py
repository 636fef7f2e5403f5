"""Which k8s-device-plugin release a container runs, read from its image tag, and the behaviours that
changed between releases (NVIDIA/k8s-device-plugin tags v0.17.0-v0.20.0):

- config-manager: up to v0.18.1 the first `SyncableConfig.Get()` waits for the node informer, so
  `config-manager-init` applies the key the node label names (or crash-loops on a missing one); from
  v0.18.2 / v0.19.0 (commit ab05acef5 "Fix race condition in config-manager when label is unset",
  backported as 09d51359c) the first Get never waits: init applies DEFAULT_CONFIG before its informer
  has seen the label and the sidecar switches by SIGHUP once it has (cmd/config-manager/main.go);
- gpu-feature-discovery: from v0.19.0 `--use-node-feature-api` defaults to true (labels go to an NFD
  NodeFeature object, cmd/gpu-feature-discovery/main.go; internal/lm/output.go).

A tag that names no release (a digest, `latest`) is taken as the newest behaviour."""

from __future__ import annotations

import re

Version = tuple[int, int, int]
_RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
CONFIG_MANAGER_INIT_NEVER_WAITS: Version = (0, 18, 2)
GFD_NODE_FEATURE_API_BY_DEFAULT: Version = (0, 19, 0)
_TRUE, _FALSE = ("1", "t", "true"), ("0", "f", "false")  # strconv.ParseBool, as urfave/cli reads a BoolFlag


def release(image: str) -> Version | None:
    """The release an image reference's tag names (`nvcr.io/nvidia/k8s-device-plugin:v0.17.4-ubi9`
    -> (0, 17, 4)); None for a digest or a tag that names none."""
    name = image.rsplit("/", 1)[-1]
    if "@" in name or ":" not in name:
        return None
    match = _RELEASE.match(name.split(":", 1)[1])
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def _at_least(image: str, version: Version) -> bool:
    found = release(image)
    return found is None or found >= version


def init_waits_for_label(config_manager_image: str) -> bool:
    """Whether config-manager-init waits for the node label before it picks a key (up to v0.18.1)."""
    return not _at_least(config_manager_image, CONFIG_MANAGER_INIT_NEVER_WAITS)


def gfd_uses_node_feature_api(gfd_image: str, env: dict[str, str]) -> bool:
    """Whether GFD publishes its labels through a NodeFeature object: USE_NODE_FEATURE_API (or
    GFD_USE_NODE_FEATURE_API, which wins) when set, else its release's default."""
    for name in ("GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"):
        value = env.get(name, "").strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    return _at_least(gfd_image, GFD_NODE_FEATURE_API_BY_DEFAULT)
