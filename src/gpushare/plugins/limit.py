"""An `-l` that names no host of the inventory: Ansible stops with "Could not match supplied host
pattern" before any callback loads (cli/playbook.py checks the limit right after reading the
inventory). This vars plugin runs while the inventory is read, so it can say first which GPU nodes
the inventory does have."""

from __future__ import annotations

from collections.abc import Iterable

from ansible import constants as C  # noqa: N812 - Ansible's own name for it
from ansible import context
from ansible.inventory.group import Group
from ansible.inventory.manager import split_host_pattern
from ansible.plugins.vars import BaseVarsPlugin
from ansible.utils.display import Display

from gpushare.plugins.output import NOTHING

GPU_GROUP = "gpu_nodes"
SHOWN = 20
# Patterns Ansible matches by glob, regex, slice or file: judged by Ansible alone.
_NOT_PLAIN = ("*", "?", "[", "~", "@")


def unmatched_names(limit: str, names: set[str]) -> list[str]:
    """The plain host or group names in `limit` that name nothing in the inventory; [] when any
    term is a pattern only Ansible can judge, or when some term matches."""
    terms = [t.lstrip("&!") for t in split_host_pattern(limit)]
    if not terms or any(c in t for t in terms for c in _NOT_PLAIN):
        return []
    missing = [t for t in terms if t not in names]
    return missing if len(missing) == len(terms) else []


def refusal(missing: Iterable[str], gpu_nodes: list[str]) -> str:
    listed = ", ".join(gpu_nodes[:SHOWN]) + (f", ... ({len(gpu_nodes)} in all)" if len(gpu_nodes) > SHOWN else "")
    where = f"The inventory's GPU nodes ({GPU_GROUP}): {listed}." if gpu_nodes else \
        f"The inventory has no group {GPU_GROUP}: add the GPU nodes there by their Kubernetes node name."
    return f"-l {', '.join(missing)}: no host or group of the inventory has that name. {where} {NOTHING}"


def _groups(root: Group) -> list[Group]:
    found, stack = [], [root]
    while stack:
        group = stack.pop()
        found.append(group)
        stack.extend(group.child_groups)
    return found


class VarsModule(BaseVarsPlugin):  # the name Ansible reads the plugin type from
    """Adds no variables; reports an unmatched `-l` once, when the inventory's `all` group is read."""

    _reported = False

    def get_vars(self, loader, path, entities, cache=True):  # noqa: ANN001, ANN201 - Ansible's signature
        super().get_vars(loader, path, entities)
        limit = (context.CLIARGS or {}).get("subset")
        for entity in entities if limit and not VarsModule._reported else ():
            if isinstance(entity, Group) and entity.name == "all":
                groups = _groups(entity)
                names = {h.name for h in entity.get_hosts()} | {g.name for g in groups}
                missing = unmatched_names(limit, names)
                if missing:
                    gpu = next((g for g in groups if g.name == GPU_GROUP), None)
                    gpu_nodes = sorted(h.name for h in gpu.get_hosts()) if gpu else []
                    Display().display(refusal(missing, gpu_nodes), color=C.COLOR_ERROR, stderr=True)
                    VarsModule._reported = True
        return {}
