"""Loading a filter plugin of this repository by path (plugins are files, not a package)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any

from tests.support.cluster import REPO


def load_plugin(relative_path: str) -> ModuleType:
    path = REPO / relative_path
    spec = importlib.util.spec_from_file_location(f"filters_under_test_{path.stem}", path)
    assert spec and spec.loader, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_filters(relative_path: str) -> dict[str, Callable[..., Any]]:
    """The filters a plugin file registers, by filter name."""
    return load_plugin(relative_path).FilterModule().filters()
