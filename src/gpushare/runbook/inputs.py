"""Reading a runbook's inputs as a role passes them, the Kubernetes name rules they are checked
against (k8s.io/apimachinery/pkg/util/validation), and the input files a command reads (a fleet, a
metrics or thresholds file): the document and its numbers, each caller with its own words."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeGuard

import yaml

# Every refusal before the first write ends with this.
NOTHING = "Nothing was changed."

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN_PART = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
# `\Z`, not `$`: a name with a trailing newline is not a name.
# A DNS-1123 label (a namespace, a Service): at most 63 characters.
DNS_LABEL = re.compile(rf"^{_LABEL}\Z")
# A DNS-1123 subdomain (a ConfigMap, a node, most object names): at most 253 characters.
DNS_SUBDOMAIN = re.compile(rf"^(?=.{{1,253}}\Z){_SUBDOMAIN_PART}(\.{_SUBDOMAIN_PART})*\Z")
# A label value (may be empty) and a label key (an optional DNS-subdomain prefix and a name).
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
LABEL_KEY = re.compile(rf"^((?=[^/]{{1,253}}/){_SUBDOMAIN_PART}(\.{_SUBDOMAIN_PART})*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")

# Namespaces of the cluster and of the components the runbooks work with (the GPU Operator's, the
# runbooks' own, Kueue's; all kube-*): never a team's. deploy/rbac/61-admission-kueue.yaml names them too.
SYSTEM_NAMESPACES = ("default", "gpu-operator", "gpushare-system", "kueue-system")

_TRUE = ("true", "yes", "on", "1", "y", "t")  # what Ansible's boolean filter reads as true


def as_bool(value: Any) -> bool:
    """A yes/no input: a bool as the argument spec converted it, or the text -e gives."""
    return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE


def is_system_namespace(name: str, others: Iterable[str] = ()) -> bool:
    """`name` is kube-*, one of SYSTEM_NAMESPACES or one of `others` (the configured operator namespace...)."""
    return name.startswith("kube-") or name in SYSTEM_NAMESPACES or name in others


def optional_int(value: Any) -> int | None:
    """An optional whole number as a role passes it (null renders as None or "")."""
    return None if value is None or str(value).strip() in ("", "None") else int(value)


# format -> (parser, the errors that say the text is not that format)
# (a YAML timestamp that names no date, 2020-13-01, fails with a ValueError)
_PARSERS: dict[str, tuple[Any, tuple[type[Exception], ...]]] = {
    "YAML": (yaml.safe_load, (yaml.YAMLError, ValueError)),
    "JSON": (json.loads, (json.JSONDecodeError,))}


def read_document(path: Path, fmt: Literal["YAML", "JSON"], error: type[Exception], *, unreadable: str,
                  malformed: str, nested: str | None = None, stdin: bool = False) -> Any:
    """The document of an input file, or `error` with the caller's message: `unreadable` when the
    file cannot be read ({path}, {reason}: the system's reason), `malformed` when it is not UTF-8
    `fmt` ({path}, {error}: the parser's message), `nested` when it nests past Python's recursion
    limit ({path}; None: not caught). `stdin`: the path `-` reads standard input."""
    parse, syntax_errors = _PARSERS[fmt]
    try:
        return parse(sys.stdin.read() if stdin and str(path) == "-" else path.read_text(encoding="utf-8"))
    except OSError as err:
        raise error(unreadable.format(path=path, reason=err.strerror)) from None
    except (UnicodeDecodeError, *syntax_errors) as err:
        raise error(malformed.format(path=path, error=err)) from None
    except RecursionError:
        if nested is None:
            raise
        raise error(nested.format(path=path)) from None


def finite_number(value: object) -> TypeGuard[int | float]:
    """An int or float (not a bool) that a float can hold: not NaN, not infinite, not a huge int."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond any float
        return False


def bounded_number(value: object, kind: type[int] | type[float], low: float, high: float | None) -> bool:
    """A finite number (an int when `kind` is int) from `low` to `high` (None: no upper bound)."""
    return (finite_number(value) and (kind is not int or isinstance(value, int))
            and low <= value and (high is None or value <= high))
