"""Properties of the fleet file on any input: a Fleet of valid, unique node names, or a FleetError
with a message, never another exception."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from gpushare_testbed.fleet import MAX_NODES, NODE_KEYS, Fleet, FleetError, load_fleet, parse_fleet
from gpushare.gpu_catalog import SIMULATED
from gpushare.runbook.inputs import DNS_SUBDOMAIN

EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
           | st.sampled_from([10**400, -1, 0, 1, 2, 10**9]))
ANY = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                   max_leaves=10)
NAMES = st.sampled_from(["gpu-node", "gpu-{index}", "{index}", "Gpu", "gpu_node", "a" * 64, "-a", "a.", "gpu\n",
                         "gpu-{index}-{index}", ""]) | st.text(max_size=10)
NODE = st.fixed_dictionaries(
    {"name": NAMES | SCALARS},
    optional={
        "count": st.integers(-2, 30) | st.sampled_from([10**9, 10**400]) | SCALARS,
        "gpus": st.integers(-1, 16) | SCALARS,
        "product": st.sampled_from(sorted(SIMULATED)) | SCALARS | ANY,
        "cpu": SCALARS, "memory": SCALARS, "pods": SCALARS,
        "labels": st.dictionaries(st.text(max_size=6) | st.integers(), SCALARS, max_size=3) | ANY,
    },
) | st.dictionaries(st.sampled_from(sorted(NODE_KEYS)) | st.text(max_size=6), SCALARS, max_size=4) | ANY
VALID_NODE = st.builds(
    lambda name, count, gpus, product: {"name": name if count == 1 else f"{name}-{{index}}", "count": count,
                                        "gpus": gpus, **({"product": product} if gpus else {})},
    st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True), st.integers(0, 20), st.integers(0, 8),
    st.sampled_from(sorted(SIMULATED)))
NODE_LIST = st.lists(VALID_NODE, min_size=1, max_size=4)


def _spoilt(nodes: list[dict[str, Any]], at: int, key: str, value: Any) -> dict[str, Any]:
    """A valid fleet with one key of one node replaced (or added) by `value`."""
    at %= len(nodes)
    return {"nodes": [*nodes[:at], {**nodes[at], key: value}, *nodes[at + 1:]]}


FLEETS = st.fixed_dictionaries({"nodes": NODE_LIST}) | st.builds(
    _spoilt, NODE_LIST, st.integers(0, 3), st.sampled_from(sorted(NODE_KEYS)) | st.text(max_size=4), SCALARS | ANY,
) | st.fixed_dictionaries({"nodes": st.lists(NODE, max_size=5)}) | st.dictionaries(
    st.sampled_from(["nodes"]) | st.text(max_size=6), ANY, max_size=2) | ANY


def verdict(document: Any) -> Fleet | str:
    try:
        fleet = parse_fleet(document, source="generated")
    except FleetError as err:
        assert str(err).startswith("generated:"), err
        event("refused")
        return str(err)
    assert isinstance(fleet, Fleet)
    event("accepted")
    return fleet


@EXAMPLES
@given(FLEETS)
# Each a traceback or a hang before the fix: a product that is not a string, a name
# ending in a newline, a count no machine could hold.
@example({"nodes": [{"name": "gpu", "gpus": 1, "product": ["H100"]}]})
@example({"nodes": [{"name": "gpu\n"}]})
@example({"nodes": [{"name": "gpu-{index}", "count": 10**9}]})
def test_any_fleet_document_gives_a_fleet_of_valid_unique_nodes_or_a_clear_error(document: Any) -> None:
    fleet = verdict(document)
    if isinstance(fleet, Fleet):
        names = [node.name for node in fleet.nodes]
        assert 0 < len(names) <= MAX_NODES and len(set(names)) == len(names)
        assert all(DNS_SUBDOMAIN.match(name) for name in names), names
        assert all(node.manifest()["metadata"]["name"] == node.name for node in fleet.nodes)


FILE_BYTES = (FLEETS.map(lambda d: yaml.safe_dump(d).encode()) | st.text(max_size=40).map(str.encode)
              | st.integers(1, 3000).map(lambda depth: ("[" * depth + "]" * depth).encode())
              | st.sampled_from([b"nodes: &a [*a]", b"? [a]\n: 1\n", b"nodes: !!binary zz", b"\t"])
              | st.binary(max_size=40))


@EXAMPLES
@given(FILE_BYTES)
def test_any_fleet_file_gives_a_fleet_or_a_clear_error(content: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".yaml") as handle:
        handle.write(content)
        handle.flush()
        try:
            load_fleet(Path(handle.name))
            event("accepted")
        except FleetError as err:
            assert handle.name in str(err), err
            event("refused")
