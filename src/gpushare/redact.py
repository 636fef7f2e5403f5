"""The command line as recorded (the `gpushare.io/command` annotation of run records, the change
record, every file a runbook writes): the values of `-e` variables other than the runbooks' own
documented inputs replaced by `<redacted>`, so that a token passed on the command line (say
`-e x_token=...` for a callback or a lookup) is kept nowhere."""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Collection, Iterable
from importlib import import_module
from pathlib import Path

import yaml

from gpushare.binaries import REPO_ROOT

REDACTED = "<redacted>"
EXTRA_VARS = ("-e", "--extra-vars")
# Play-level inputs the playbooks and the README document besides the roles' argument specs.
PLAY_INPUTS = frozenset({"gpushare_kubeconfig", "gpushare_kube_context", "gpushare_node_name", "gpushare_output_dir"})


def _roles_dirs() -> list[Path]:
    """The collection's roles (as ansible loaded it), else this checkout's."""
    dirs = []
    try:
        collection = import_module("ansible_collections.gpushare.gpu_sharing")
        dirs += [Path(p) / "roles" for p in getattr(collection, "__path__", [])]
    except ImportError:
        pass
    return [d for d in [*dirs, REPO_ROOT / "roles"] if d.is_dir()]


def documented_inputs(roles_dirs: Iterable[Path]) -> frozenset[str]:
    """Every option of every entry point of the roles' meta/argument_specs.yml, and PLAY_INPUTS."""
    names: set[str] = set(PLAY_INPUTS)
    for roles in roles_dirs:
        for spec in sorted(roles.glob("*/meta/argument_specs.yml")):
            for entry in ((yaml.safe_load(spec.read_text()) or {}).get("argument_specs") or {}).values():
                names.update((entry or {}).get("options") or {})
    return frozenset(names)


@functools.cache
def runbook_inputs() -> frozenset[str]:
    return documented_inputs(_roles_dirs())


def extra_vars(value: str, documented: Collection[str]) -> str:
    """One `-e` value with the values of undocumented variables redacted: `key=value ...` pairs
    stay pairs, a JSON or YAML mapping stays a (JSON) mapping, `@file` is kept (a path, not a value);
    anything else is redacted whole."""
    if value.startswith("@"):
        return value
    text = value.strip()
    if text.startswith(("{", "[")):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return REDACTED
        if not isinstance(data, dict):
            return REDACTED
        return json.dumps({str(k): (v if str(k) in documented else REDACTED) for k, v in data.items()},
                          sort_keys=False, separators=(", ", ": "))
    try:
        words = shlex.split(value)
    except ValueError:
        return REDACTED
    pairs = []
    for word in words:
        key, sep, val = word.partition("=")
        if not sep:
            return REDACTED
        pairs.append(f"{key}={val}" if key in documented else f"{key}={REDACTED}")
    return " ".join(shlex.quote(p) for p in pairs)


def command_line(argv: list[str], documented: Collection[str] | None = None) -> list[str]:
    """`argv` with every `-e`/`--extra-vars` value (separate, `-eVALUE` or `--extra-vars=VALUE`) redacted."""
    known = runbook_inputs() if documented is None else documented
    out: list[str] = []
    pending = False
    for arg in argv:
        if pending:
            out.append(extra_vars(arg, known))
            pending = False
        elif arg in EXTRA_VARS:
            out.append(arg)
            pending = True
        elif arg.startswith("--extra-vars="):
            out.append("--extra-vars=" + extra_vars(arg.removeprefix("--extra-vars="), known))
        elif arg.startswith("-e") and not arg.startswith("--") and len(arg) > 2:
            out.append("-e" + extra_vars(arg[2:], known))
        else:
            out.append(arg)
    return out
