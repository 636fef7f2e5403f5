"""The Go wrapper modules of build/ that share dependencies pin them at one version, so that a cold
build compiles each shared package once (Go's build cache keys a package by its module version)."""

from __future__ import annotations

import re
from pathlib import Path

BUILD = Path(__file__).resolve().parents[2] / "build"
REQUIREMENT = re.compile(r"^[ \t]*(?:require[ \t]+)?(\S+)[ \t]+(v\S+)", re.MULTILINE)


def requirements(wrapper: str) -> dict[str, str]:
    """module -> version, every requirement of build/<wrapper>/go.mod (Go lists each module of the build there)."""
    return dict(REQUIREMENT.findall((BUILD / wrapper / "go.mod").read_text()))


def test_kwok_and_kueue_pin_every_shared_module_at_one_version() -> None:
    kwok, kueue = requirements("kwok"), requirements("kueue")
    shared = sorted(set(kwok) & set(kueue))
    assert "k8s.io/client-go" in shared, "expected the wrappers to share the Kubernetes client at least"
    differing = [f"{module}: kwok {kwok[module]}, kueue {kueue[module]}" for module in shared if kwok[module] != kueue[module]]
    assert not differing, ("pin these at the higher version in both build/kwok and build/kueue "
                           "(go get MODULE@VERSION in each): " + "; ".join(differing))
