"""Ansible's values as the runbooks' Python takes them, and the command line a run was started with:
the one module below the Ansible adapter (gpushare.plugins) that knows Ansible's types. Every
runbook's filters use it; it imports no runbook."""

from __future__ import annotations

import getpass
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ansible.template import is_trusted_as_template

from gpushare.redact import command_line

# Exactly these types carry no Ansible tag (a tagged value is an instance of a subclass), so they
# are neither trusted templates nor in need of a copy.
UNTAGGED = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """Ansible's values as plain Python data (what the models and yaml expect). A string Ansible
    trusts as a template is rendered; the rest is copied as stored, without rendering each value
    through Ansible's lazy containers: on a 500-node read that rendering took most of a run."""
    if type(value) in UNTAGGED:
        return value
    non_lazy = getattr(value, "_non_lazy_copy", None)  # ansible-core's lazy dict and list
    raw = non_lazy() if non_lazy is not None else value
    if isinstance(raw, dict):
        return {str(k): plain(value[k] if _template(v) else v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return [plain(value[i] if _template(v) else v) for i, v in enumerate(raw)]
    for native in (str, bool, int, float):  # tagged subclasses as the plain type
        if isinstance(raw, native):
            return native(raw)
    return raw


def _template(value: Any) -> bool:
    return type(value) not in UNTAGGED and is_trusted_as_template(value)


def read_resources(read: dict[str, Any]) -> dict[str, Any]:
    """What a gpushare_read of a phase found, as ClusterState.of takes it."""
    return {**(read.get("resources") or {}), "not_served": read.get("not_served") or [],
            "nodes_version": (read.get("versions") or {}).get("nodes", "")}


def invocation() -> dict[str, str]:
    """The command line as typed (this process is ansible-playbook or its forked worker), the values of
    `-e` variables other than the runbooks' documented inputs redacted, and the user."""
    argv = command_line(list(sys.argv))
    if argv:
        argv[0] = Path(argv[0]).name
    return {"command": shlex.join(argv), "user": os.environ.get("USER") or getpass.getuser()}
