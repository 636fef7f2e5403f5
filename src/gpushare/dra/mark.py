"""The DRA pilot's node mark, read back as untrusted input: the runbook identity writes it, and anyone
holding that identity can forge it. Its text is bounded (gpushare.bounded) and typed before it is
trusted, and it must agree with the run record it names, which the enable writes before the mark."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpushare.bounded import Unreadable, load_json
from gpushare.model.node import Node
from gpushare.runbook.inputs import DNS_SUBDOMAIN, LABEL_VALUE
from gpushare.runbook.records import MANAGED_BY, PREFIX, Record, forged_advice

MARK = "gpushare.io/dra-pilot"
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DEVICE_PLUGIN_VALUES = (None, "true", "false")  # the operator's values, and unset
FIELDS = ("device_plugin", "plugin_label", "taint_added", "run")


@dataclass(frozen=True)
class PilotMark:
    """{"device_plugin", "plugin_label", "taint_added", "run"}: the node's labels before the enable,
    whether the pilot taint is the runbook's, and the enable's run record."""

    device_plugin: str | None
    plugin_label: str | None
    taint_added: bool
    run: str

    def text(self) -> str:
        return json.dumps({"device_plugin": self.device_plugin, "plugin_label": self.plugin_label,
                           "taint_added": self.taint_added, "run": self.run}, sort_keys=True)

    @classmethod
    def parse(cls, raw: str) -> PilotMark:
        """The mark as the enable writes it, else Unreadable saying why."""
        data = load_json(raw)
        if not isinstance(data, dict):
            raise Unreadable(f"it is a JSON {type(data).__name__}, not an object")
        extra = sorted(set(data) - set(FIELDS))
        if extra:
            raise Unreadable(f"it holds {', '.join(k[:40] for k in extra)}, which the enable never writes")
        device_plugin, plugin_label = data.get("device_plugin"), data.get("plugin_label")
        if device_plugin not in DEVICE_PLUGIN_VALUES:
            raise Unreadable(f"its device_plugin {str(device_plugin)[:40]!r} is none of true, false or unset")
        if plugin_label is not None and not (isinstance(plugin_label, str) and LABEL_VALUE.match(plugin_label)):
            raise Unreadable(f"its plugin_label {str(plugin_label)[:40]!r} is not a label value")
        taint_added, run = data.get("taint_added", True), data.get("run")
        if not isinstance(taint_added, bool):
            raise Unreadable(f"its taint_added is a {type(taint_added).__name__}, not true or false")
        if not (isinstance(run, str) and run.startswith(PREFIX) and DNS_SUBDOMAIN.match(run)):
            raise Unreadable(f"its run {str(run)[:80]!r} names no run record ({PREFIX}...)")
        return cls(device_plugin, plugin_label, taint_added, run)


def pilot_mark(node: Node) -> PilotMark | None:
    """The node's mark; None when it has none; Unreadable when it is not what the enable writes."""
    raw = node.annotations.get(MARK)
    if raw is None:
        return None
    try:
        return PilotMark.parse(raw)
    except Unreadable as err:
        raise Unreadable(f"the annotation {MARK} of node {node.name} cannot be read: {err}") from None


def record_disagreement(mark: PilotMark, node: str, records: list[dict[str, Any]], namespace: str) -> str:
    """Why the run record the mark names does not vouch for it ("": it does). The enable writes its record,
    labelled app.kubernetes.io/managed-by=gpushare and naming the node's labels before, ahead of the mark."""
    found = next((c for c in records if (c.get("metadata") or {}).get("name") == mark.run), None)
    where = f"node {node}'s {MARK} names run record {namespace}/{mark.run}"
    if found is None:
        return f"{where}, which does not exist: the enable writes its record before the mark."
    if ((found["metadata"].get("labels") or {}).get(MANAGED_BY)) != "gpushare":
        return f"{where}, which is not labelled {MANAGED_BY}=gpushare, as the runbooks write it. " + forged_advice(
            namespace, mark.run)
    record = Record.of(found)
    if record.problem:
        return f"{where}, which cannot be read ({record.problem}). " + forged_advice(namespace, mark.run)
    before = record.intent.node_labels.get(node)
    if record.runbook != "enable-dra-pilot" or before is None:
        return f"{where}, which is no enable-dra-pilot record of that node. " + forged_advice(namespace, mark.run)
    if before.get(DEVICE_PLUGIN_LABEL) != mark.device_plugin:
        return (f"{where}, which recorded {DEVICE_PLUGIN_LABEL}={before.get(DEVICE_PLUGIN_LABEL) or 'unset'}, the mark "
                f"{mark.device_plugin or 'unset'}. " + forged_advice(namespace, mark.run))
    return ""
