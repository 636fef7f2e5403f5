"""The enable runbook's node mark (gpushare.timeslicing_common.mark): as it writes it, as older runs
wrote it, unreadable, absent."""

from __future__ import annotations

import json

import pytest

from gpushare.model.node import Node
from gpushare.timeslicing_common.mark import Mark, timeslicing_mark
from tests.unit.cluster_objects import mark, node


def test_mark_as_the_enable_runbook_writes_it() -> None:
    raw = mark(replicas=4, taint_added=False)["gpushare.io/timeslicing"]
    parsed = Mark.parse(raw)
    assert parsed == Mark("time-slicing-config", "shared", 4, "node", "gpushare-run-enable-20261201t090000z-0a0a",
                          False, True, raw)
    assert Mark.parse(parsed.text()).text() == parsed.text() == raw


def test_a_mark_written_before_taint_added_existed_says_the_runbook_added_the_taint() -> None:
    parsed = Mark.parse(json.dumps({"configmap": "time-slicing-config", "key": "shared", "replicas": 2}))
    assert parsed.valid and parsed.taint_added and parsed.scope == "node"


@pytest.mark.parametrize("raw", ["", "not json", "[1, 2]", '{"replicas": "two"}', "null"])
def test_an_unreadable_mark_is_kept_as_invalid(raw: str) -> None:
    parsed = Mark.parse(raw)
    assert not parsed.valid and parsed.raw == raw


def test_no_mark() -> None:
    assert Mark.parse(None) is None
    assert timeslicing_mark(Node(node("gpu-node"))) is None


def test_a_nodes_mark_is_read_from_its_annotation() -> None:
    annotations = mark(replicas=3) | {"gpushare.io/cordoned-by": "enable-timeslicing"}
    found = timeslicing_mark(Node(node("gpu-node", annotations=annotations)))
    assert found == Mark.parse(annotations["gpushare.io/timeslicing"]) and found.replicas == 3 and found.valid
