"""The runbook lock (gpushare.runbook.lock and the gpushare_lock filters) without a cluster: when a
Lease holds, what a run is told, and the changes that take and release it. Taking it against the
API server is tests/integration/test_k8s_lease_lock.py."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from gpushare.k8s.changes import Change
from gpushare.plugins.filters import gpushare_lock, gpushare_lock_release
from gpushare.runbook import lock
from tests.unit.cluster_objects import NAMESPACE, NOW

NAME = "gpushare-runbook-lock"


def lease(holder: str = "enable-timeslicing@ops-laptop/20261201T093000Z-1a2b", renewed: str | None = None,
          acquired: str = "2026-12-01T09:30:00.000000Z", duration: int | None = 1800) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": holder, "acquireTime": acquired}
    if renewed:
        spec["renewTime"] = renewed
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "resourceVersion": "812", "uid": "uid-lease"},
            "spec": spec}


@pytest.mark.parametrize(("held", "now_offset_s", "is_held"), [
    pytest.param(lease(), 0, True, id="within-its-duration"),
    pytest.param(lease(), 1799, True, id="a-second-before-it-expires"),
    pytest.param(lease(), 1800, False, id="at-expiry"),
    pytest.param(lease(renewed="2026-12-01T09:55:00.000000Z"), 1800, True, id="renewed"),
    pytest.param(lease(holder=""), 0, False, id="no-holder"),
    pytest.param(lease(duration=None), 0, False, id="no-duration"),
    pytest.param(lease(acquired=""), 0, False, id="never-acquired"),
])
def test_when_a_lease_holds(held: dict[str, Any], now_offset_s: int, is_held: bool) -> None:
    now = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=now_offset_s)
    current = lock.status(held, now)
    assert current["held"] is is_held
    assert current["exists"] and current["resource_version"] == "812"


def test_no_lease() -> None:
    assert lock.status(None, NOW) == {"exists": False, "held": False, "holder": "", "acquired": "", "expires": "",
                                      "expired": False, "resource_version": ""}
    assert lock.refusal(None, NAME, NAMESPACE, NOW) == ""


def test_a_held_lock_is_refused_naming_the_holder_and_what_to_do() -> None:
    message = lock.refusal(lease(), NAME, NAMESPACE, NOW - dt.timedelta(minutes=1))
    assert message.startswith(f"Another runbook run holds the lock: Lease {NAMESPACE}/{NAME} is held by "
                              "enable-timeslicing@ops-laptop/20261201T093000Z-1a2b since 2026-12-01T09:30:00.000000Z "
                              "(valid until 2026-12-01T10:00:00Z)")
    assert f"kubectl -n {NAMESPACE} delete lease {NAME}" in message
    assert message.endswith("Nothing was changed.")
    assert lock.refusal(lease(), NAME, NAMESPACE, NOW) == ""  # expired: it may be taken over


def test_taking_a_free_lock_creates_the_lease() -> None:
    change = Change.from_dict(lock.take(None, NAME, NAMESPACE, "me", 600, NOW))
    assert (change.action, change.exists) == ("create", "fail")  # a second taker gets a conflict
    spec = change.body["spec"]
    assert spec == {"holderIdentity": "me", "acquireTime": "2026-12-01T10:00:00.000000Z",
                    "renewTime": "2026-12-01T10:00:00.000000Z", "leaseDurationSeconds": 600}
    assert lock.status(change.body, NOW + dt.timedelta(seconds=599))["held"]


def test_taking_an_expired_lock_replaces_exactly_the_version_read() -> None:
    change = Change.from_dict(lock.take(lease(), NAME, NAMESPACE, "me", 600, NOW + dt.timedelta(hours=1)))
    assert change.action == "replace"
    assert change.preconditions == {"resourceVersion": "812"}
    assert change.body["metadata"]["resourceVersion"] == "812"
    assert "enable-timeslicing@ops-laptop/20261201T093000Z-1a2b let expire" in change.why


def test_release_deletes_only_the_version_taken() -> None:
    change = Change.from_dict(lock.release(NAME, NAMESPACE, "901"))
    assert (change.action, change.preconditions) == ("delete", {"resourceVersion": "901"})


def test_holder_identities_name_the_runbook_host_and_moment() -> None:
    assert re.fullmatch(r"rollback-timeslicing@[^/]+/20261201T100000Z-[0-9a-f]{4}",
                        lock.holder_identity("rollback-timeslicing", NOW))


def test_the_lock_filter_from_a_read() -> None:
    taken = gpushare_lock({"resources": {"lease": None}}, "enable-timeslicing", NAME, NAMESPACE, 1800)
    assert taken["refusal"] == ""
    assert taken["take"][0]["action"] == "create"
    assert taken["take"][0]["body"]["spec"]["holderIdentity"] == taken["holder"]
    assert taken["holder"].startswith("enable-timeslicing@")
    held = lease(acquired=(dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)).strftime(lock.MICRO))
    refused = gpushare_lock({"resources": {"lease": held}}, "rollback-timeslicing", NAME, NAMESPACE, 1800)
    assert refused["refusal"].startswith("Another runbook run holds the lock")


def test_the_release_filter_releases_only_what_this_run_took() -> None:
    created = {"changed": True, "objects": [lease() | {"metadata": {"name": NAME, "resourceVersion": "901"}}]}
    assert gpushare_lock_release(created, NAME, NAMESPACE) == [lock.release(NAME, NAMESPACE, "901")]
    assert gpushare_lock_release({"changed": False, "objects": [lease()]}, NAME, NAMESPACE) == []
    assert gpushare_lock_release({}, NAME, NAMESPACE) == []
    assert gpushare_lock_release({"changed": True, "objects": [None]}, NAME, NAMESPACE) == []


def test_a_holder_is_known_dead_only_by_its_process_on_this_machine() -> None:
    with_pid = lock.holder_identity("rollout-timeslicing", NOW, 4242)
    host = with_pid.partition("@")[2].partition("/")[0]
    assert re.fullmatch(rf"rollout-timeslicing@{re.escape(host)}/4242/20261201T100000Z-[0-9a-f]{{4}}", with_pid)
    assert lock.holder_process_alive(with_pid, host, lambda pid: pid != 4242) is False
    assert lock.holder_process_alive(with_pid, "another-machine", lambda pid: False) is True
    # a Lease's holder names no process: only its expiry frees it
    assert lock.holder_process_alive(lock.holder_identity("enable-timeslicing", NOW), host, lambda pid: False) is True

