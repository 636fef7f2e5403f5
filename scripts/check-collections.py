#!/usr/bin/env python3
"""Check that the Ansible collections installed with the `ansible` package satisfy requirements.yml.

Galaxy is not reachable from our machines, so collections come from the pinned `ansible` PyPI
package; this check keeps requirements.yml honest instead of silently ignored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version


def installed_versions() -> dict[str, str]:
    result = subprocess.run(
        ["ansible-galaxy", "collection", "list", "--format", "json"],
        capture_output=True, text=True, check=True,
    )
    versions: dict[str, str] = {}
    for collections in json.loads(result.stdout).values():
        for name, info in collections.items():
            versions.setdefault(name, info["version"])
    return versions


def main() -> int:
    requirements = yaml.safe_load(Path(sys.argv[1] if len(sys.argv) > 1 else "requirements.yml").read_text())
    installed = installed_versions()
    problems = []
    for entry in requirements.get("collections", []):
        name, wanted = entry["name"], str(entry.get("version", "*"))
        have = installed.get(name)
        if have is None:
            problems.append(f"{name} is not installed; it should come with the pinned `ansible` package")
            continue
        try:
            spec = SpecifierSet("" if wanted == "*" else wanted)
        except InvalidSpecifier:
            problems.append(f"{name}: cannot read version range {wanted!r} in requirements.yml")
            continue
        if Version(have) not in spec:
            problems.append(
                f"{name} {have} does not satisfy {wanted}; pin an `ansible` release in "
                "requirements-dev.txt that bundles a matching version, or adjust requirements.yml"
            )
        else:
            print(f"collection {name} {have} satisfies {wanted}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
