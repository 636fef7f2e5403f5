"""The YAML loader of the project's own parsing: libyaml's where PyYAML has it (about eight times
faster than the pure-Python one). Every runbook run parses the shipped argument specs and module
documentation at start and reads its run records (gpushare.bounded bounds those first)."""

from __future__ import annotations

from typing import Any

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
