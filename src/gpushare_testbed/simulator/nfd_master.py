"""nfd-master as the GPU Operator's NFD subchart runs it (NodeFeature API, its namespace the
operator's): on a change of a node's NodeFeature objects, it merges their labels and writes them to
the node, removing those it wrote before and no longer has (kubernetes-sigs/node-feature-discovery
pkg/nfd-master/nfd-api-controller.go, nfd-master.go nfdAPIUpdateOneNode). It is driven by the
NodeFeature informer only, as upstream is (a node edited by someone else is set right at the next
NodeFeature change, or the hourly resync, which is not simulated). Decisions come from nfd."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpushare_testbed.simulator import nfd

if TYPE_CHECKING:
    from gpushare_testbed.simulator.simulator import Simulator


class NfdMaster:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def reconcile(self, name: str) -> None:
        sim = self.sim
        node = sim.nodes.get(name)
        if node is None:
            return
        objects = [o for o in sim.node_features.items() if nfd.node_of(o) == name]
        meta = node["metadata"]
        patch = nfd.node_update(meta.get("labels") or {}, meta.get("annotations") or {},
                                nfd.merged_labels(objects, sim.namespace))
        if patch:
            sim.patch_node(name, {"metadata": patch})
