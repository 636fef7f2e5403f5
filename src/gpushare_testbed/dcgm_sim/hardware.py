"""Which GPUs (and MIG instances) the simulated nodes hold, read from the Node objects, and which
workload profile each one runs. A card the simulator's Xid fault names (node_agent.XID_ANNOTATION:
fallen off the bus) reports Xid 79 in DCGM_FI_DEV_XID_ERRORS from the fault's time on."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpushare_testbed.dcgm_sim.exposition import SimGpu
from gpushare_testbed.dcgm_sim.profiles import FLEET_PROFILES, Profile
from gpushare_testbed.fleet import HARDWARE_ANNOTATION
from gpushare.gpu_catalog import product as lookup_product
from gpushare_testbed.simulator.mig import devices
from gpushare_testbed.simulator.mig_manager import applied_layout
from gpushare_testbed.simulator.node_agent import XID_ANNOTATION

@dataclass(frozen=True)
class NodeHardware:
    name: str
    count: int
    product: str
    mig_layout: tuple[tuple[str, ...] | None, ...] = ()  # per GPU: its MIG devices, None with MIG off
    replicas: int = 1  # GFD's nvidia.com/gpu.replicas: the pods a card's workload runs as
    xid_gpus: tuple[int, ...] = ()  # the cards of the simulator's Xid fault ...
    xid_at: float | None = None  # ... and when it struck


def node_hardware(nodes: Iterable[Any]) -> list[NodeHardware]:
    """The simulated hardware of Node objects (client models or dicts), GPU nodes only, by name."""
    found = []
    for node in nodes:
        meta = node["metadata"] if isinstance(node, dict) else node.metadata.to_dict()
        hardware = (meta.get("annotations") or {}).get(HARDWARE_ANNOTATION)
        if not hardware:
            continue
        spec = json.loads(hardware)
        layout = applied_layout(meta.get("annotations") or {}, int(spec["count"]))
        replicas = str((meta.get("labels") or {}).get("nvidia.com/gpu.replicas", "1"))
        fault = json.loads((meta.get("annotations") or {}).get(XID_ANNOTATION) or "{}")
        found.append(NodeHardware(meta["name"], int(spec["count"]), spec["product"],
                                  tuple(tuple(devices(gpu)) if gpu is not None else None for gpu in layout),
                                  int(replicas) if replicas.isdigit() and int(replicas) > 0 else 1,
                                  tuple(int(gpu) for gpu in fault.get("gpus") or ()),
                                  float(fault["at"]) if "at" in fault else None))
    return sorted(found, key=lambda n: n.name)


def fleet_gpus(nodes: Sequence[NodeHardware], profiles: Sequence[Profile] = FLEET_PROFILES) -> list[SimGpu]:
    """Every GPU of the fleet, or its MIG instances; profiles handed out in order, round robin."""
    gpus: list[SimGpu] = []
    position = 0
    for node in nodes:
        product = lookup_product(node.product)
        for index in range(node.count):
            profile = profiles[position % len(profiles)]
            position += 1
            mig = node.mig_layout[index] if index < len(node.mig_layout) else None
            if mig is None:
                gpus.append(SimGpu(node.name, index, node.product, product.memory_mib, profile, replicas=node.replicas,
                                   xid_since=node.xid_at if index in node.xid_gpus else None))
                continue
            # MIG mode on: DCGM reports the instances only (none when the GPU has no instances).
            for instance, name in enumerate(mig, start=1):
                memory = product.mig_profiles[name].memory_mib
                gpus.append(SimGpu(node.name, index, node.product, memory, profile, name, instance))
    return gpus
