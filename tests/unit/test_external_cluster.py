"""`scripts/external_cluster.py down` stops every shard's cluster, not only the first one's."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import external_cluster


def test_down_stops_every_shard_a_run_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (".gpushare-external", ".gpushare-external-1", ".gpushare-external-3", ".gpushare-external-x",
                 ".gpushare-external-0", ".gpushare-external-02", ".gpushare-test-gw1"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(external_cluster, "REPO", tmp_path)
    stopped: list[int] = []
    monkeypatch.setattr(external_cluster, "down", stopped.append)
    monkeypatch.setattr("sys.argv", ["external_cluster.py", "down"])
    assert external_cluster.main() == 0
    assert stopped == [0, 1, 3]


def test_down_with_no_shard_on_disk_still_stops_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(external_cluster, "REPO", tmp_path)
    stopped: list[int] = []
    monkeypatch.setattr(external_cluster, "down", stopped.append)
    monkeypatch.setattr("sys.argv", ["external_cluster.py", "down"])
    assert external_cluster.main() == 0
    assert stopped == [0]
