"""A card that fell off the bus, read from DCGM before an enable shares it.

Xid 79 ("GPU has fallen off the bus") leaves a card unusable until the node is rebooted or the card
reset. The device plugin marks it unhealthy only until it reloads (k8s-device-plugin
internal/rm/health.go), and enabling sharing reloads it, so the node's allocatable alone does not
tell (the enable's `_unhealthy_problem` refuses while it still does). DCGM does: the exporter's
DCGM_FI_DEV_XID_ERRORS is a gauge holding the card's last Xid code (dcgm-exporter
etc/dcp-metrics-included.csv, "Value of the last XID error encountered"), which only a reset of the
card (a new DCGM host engine) clears. So a card whose last code reported in the window
(`timeslicing_xid_window`, 24h by default) is 79 has not been reset since it fell off the bus. The
window bounds how long a series that stopped (the exporter lost the card, or the node was down) is
still believed: a day covers a node down overnight without refusing a card replaced long ago.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpushare.dcgm_labels import host_of, on_hosts
from gpushare.gates.queries import node_regex

FALLEN_OFF_THE_BUS = 79


@dataclass(frozen=True)
class Card:
    node: str
    index: str
    uuid: str


@dataclass(frozen=True)
class XidCheck:
    """What the preflight learnt from Prometheus: the cards whose last Xid in the window is 79,
    the nodes with no Xid series, or why it could not tell."""

    url: str  # '' when no Prometheus is configured: the check is not run
    window: str
    fallen: tuple[Card, ...] = ()
    unseen: tuple[str, ...] = ()  # targets with no DCGM_FI_DEV_XID_ERRORS series in the window
    error: str = ""
    targets: tuple[str, ...] = ()

    @classmethod
    def of(cls, url: str | None, window: str, answer: dict[str, Any] | None, targets: list[str]) -> XidCheck:
        """From the preflight's `ansible.builtin.uri` result (None or skipped: not asked)."""
        url = (url or "").rstrip("/")
        if not url or not answer or answer.get("skipped"):
            return cls("", window, targets=tuple(targets))
        body = answer.get("json") if isinstance(answer.get("json"), dict) else {}
        if answer.get("status") != 200 or body.get("status") != "success":
            why = body.get("error") or answer.get("msg") or f"HTTP {answer.get('status')}"
            return cls(url, window, error=str(why)[:300], targets=tuple(targets))
        last: dict[tuple[str, str, str], float] = {}
        for series in (body.get("data") or {}).get("result") or []:
            labels = series.get("metric") or {}
            try:
                value = float((series.get("value") or [0, "nan"])[1])
            except (TypeError, ValueError):
                continue
            last[(host_of(labels), str(labels.get("gpu", "?")), str(labels.get("UUID", "?")))] = value
        fallen = tuple(Card(*key) for key, value in sorted(last.items()) if value == FALLEN_OFF_THE_BUS)
        seen = {node for node, _, _ in last}
        return cls(url, window, fallen, tuple(sorted(set(targets) - seen)), targets=tuple(targets))

    def problems(self) -> list[str]:
        """One refusal per target node with a card that fell off the bus; one if Prometheus failed."""
        if self.error:
            return [f"The Xid check could not read DCGM_FI_DEV_XID_ERRORS from Prometheus at {self.url} ({self.error}): "
                    "fix timeslicing_prometheus_url, or leave it empty to enable without the check."]
        problems = []
        for node in sorted({card.node for card in self.fallen if card.node in self.targets}):
            cards = [card for card in self.fallen if card.node == node]
            named = ", ".join(f"GPU {card.index} ({card.uuid})" for card in cards)
            problems.append(
                f"{node}: {named} reported Xid 79 (fallen off the bus) as {'their' if len(cards) > 1 else 'its'} last "
                f"Xid in the last {self.window} (DCGM_FI_DEV_XID_ERRORS at {self.url}), and no reset since: sharing "
                f"would put more pods on a card the node has lost. Drain the node (kubectl drain {node} "
                "--ignore-daemonsets --delete-emptydir-data), reboot it or reset the card (nvidia-smi -r -i "
                f"{cards[0].index}), uncordon it, then run this again.")
        return problems

    def note(self) -> str:
        """The plan's note on the check."""
        if not self.url:
            return ("Xid check: not run (no timeslicing_prometheus_url): a card that fell off the bus (Xid 79) "
                    "is refused only while the device plugin still reports it unhealthy")
        if self.unseen:
            return (f"Xid check: no DCGM_FI_DEV_XID_ERRORS series for {', '.join(self.unseen)} in the last "
                    f"{self.window} at {self.url}: Xid 79 not judged there")
        return f"Xid check: no card of the targets reported Xid 79 in the last {self.window} ({self.url})"


def query(targets: list[str], window: str) -> str:
    """The targets' cards' last Xid code in the window, one series per card, under either node label."""
    return on_hosts(f"last_over_time(DCGM_FI_DEV_XID_ERRORS{{<node>}}[{window}])", node_regex(targets))


_WINDOW = re.compile(r"[1-9]\d*[smhd]")  # one Prometheus duration unit: 24h, 90m, 2d


def window_problem(window: str) -> str | None:
    if _WINDOW.fullmatch(window):
        return None
    return f"timeslicing_xid_window must be a Prometheus duration such as 24h, 90m or 2d, got {window!r}."
