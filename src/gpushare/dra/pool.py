"""A node's ResourceSlice pool as a DRA driver publishes it, and when it is complete: the slices of
the highest generation only (a lower one is stale: the scheduler ignores it), as many as their
`resourceSliceCount`, with the node's GPUs (count and UUIDs) between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pool:
    node: str
    generation: int = 0
    expected_slices: int = 0  # resourceSliceCount of the top generation
    slices: int = 0  # slices of the top generation
    stale: int = 0  # slices of a lower generation
    devices: dict[str, str] = field(default_factory=dict)  # device name -> uuid, of the top generation

    @classmethod
    def of(cls, slices: list[dict[str, Any]], driver: str, node: str) -> Pool:
        mine = [s for s in slices if (s.get("spec") or {}).get("driver") == driver
                and ((s["spec"].get("pool") or {}).get("name") == node)]
        if not mine:
            return cls(node)
        top = max(int(s["spec"]["pool"].get("generation") or 0) for s in mine)
        current = [s for s in mine if int(s["spec"]["pool"].get("generation") or 0) == top]
        devices = {d["name"]: ((d.get("attributes") or {}).get("uuid") or {}).get("string", "")
                   for s in current for d in s["spec"].get("devices") or []}
        return cls(node, top, int(current[0]["spec"]["pool"].get("resourceSliceCount") or 0), len(current),
                   len(mine) - len(current), devices)

    def problems(self, gpus: int, uuids: list[str] | None = None) -> list[str]:
        """What keeps the pool from being complete for `gpus` GPUs (and those UUIDs, when given)."""
        if not self.slices:
            return [f"{self.node}: no ResourceSlice of its pool yet"]
        problems = []
        if self.slices != self.expected_slices:
            problems.append(f"{self.node}: pool generation {self.generation} has {self.slices} of its "
                            f"{self.expected_slices} slices (resourceSliceCount): incomplete")
        if len(self.devices) != gpus:
            problems.append(f"{self.node}: pool generation {self.generation} has {len(self.devices)} devices, "
                            f"the node has {gpus} GPUs (nvidia.com/gpu.count)")
        if uuids is not None and sorted(self.devices.values()) != sorted(uuids):
            problems.append(f"{self.node}: the pool's device UUIDs {', '.join(sorted(self.devices.values()))} are not "
                            f"DCGM's {', '.join(sorted(uuids))}")
        return problems

    def line(self) -> str:
        stale = f", {self.stale} stale slice(s) of a lower generation not counted" if self.stale else ""
        return (f"pool {self.node}: generation {self.generation}, {self.slices}/{self.expected_slices} slices, "
                f"devices {', '.join(f'{k} ({v})' for k, v in sorted(self.devices.items())) or 'none'}{stale}")
