"""The k8s-device-plugin releases' GFD behaviour the simulator follows (the config-manager's, which the
runbooks apply too, are in gpushare.model.releases): from v0.19.0 `--use-node-feature-api` defaults
to true (labels go to an NFD NodeFeature object, cmd/gpu-feature-discovery/main.go;
internal/lm/output.go)."""

from __future__ import annotations

from gpushare.model.releases import Version, at_least

GFD_NODE_FEATURE_API_BY_DEFAULT: Version = (0, 19, 0)
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
