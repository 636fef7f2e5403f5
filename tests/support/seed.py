"""The source runbook's own time-slicing ConfigMap (examples/seed/), for tests that replay it."""

from __future__ import annotations

import yaml

from tests.support.cluster import REPO

SEED_CONFIGMAP = REPO / "examples" / "seed" / "time-slicing-config.yaml"


def seed_config(replicas: int = 4) -> str:
    """The seed's `shared` config value, with its replica count replaced."""
    text = yaml.safe_load(SEED_CONFIGMAP.read_text())["data"]["shared"]
    return text.replace("replicas: 4", f"replicas: {replicas}")
