"""YAML text the project itself ships (argument specs, module documentation), parsed with libyaml's
loader where PyYAML has it: every runbook run parses these at start, and the pure-Python loader
took about a third of a second of it."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
