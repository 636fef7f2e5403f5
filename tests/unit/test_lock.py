"""The runbook lock (gpushare.runbook.lock and the gpushare_lock filter) without a cluster: when a
Lease holds, what a run is told, the changes that take and release it, and when a holder's process
is gone. Its renewer is tests/unit/test_lock_renewer.py; taking and renewing it against the API
server, tests/integration/test_k8s_lease_lock.py."""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from gpushare.plugins.filters import gpushare_lock
from gpushare.polling import wait_for
from gpushare.runbook import lock, processes
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
                                      "expired": False, "gone": False, "forged": [], "resource_version": ""}
    assert lock.refusal(None, NAME, NAMESPACE, NOW) == ""


def test_a_held_lock_is_refused_naming_the_holder_and_what_to_do() -> None:
    message = lock.refusal(lease(), NAME, NAMESPACE, NOW - dt.timedelta(minutes=1))
    assert message.startswith(f"Another runbook run holds the lock: Lease {NAMESPACE}/{NAME} is held by "
                              "enable-timeslicing@ops-laptop/20261201T093000Z-1a2b since 2026-12-01T09:30:00.000000Z "
                              "(renewed while it runs; valid until 2026-12-01T10:00:00Z)")
    assert f"kubectl -n {NAMESPACE} delete lease {NAME}" in message
    assert message.endswith("Nothing was changed.")
    assert lock.refusal(lease(), NAME, NAMESPACE, NOW) == ""  # expired: it may be taken over


def test_taking_a_free_lock_creates_the_lease() -> None:
    change = lock.take(None, NAME, NAMESPACE, "me", 600, NOW)
    assert (change.action, change.exists) == ("create", "fail")  # a second taker gets a conflict
    spec = change.body["spec"]
    assert spec == {"holderIdentity": "me", "acquireTime": "2026-12-01T10:00:00.000000Z",
                    "renewTime": "2026-12-01T10:00:00.000000Z", "leaseDurationSeconds": 600}
    assert lock.status(change.body, NOW + dt.timedelta(seconds=599))["held"]


def test_taking_an_expired_lock_replaces_exactly_the_version_read() -> None:
    change = lock.take(lease(), NAME, NAMESPACE, "me", 600, NOW + dt.timedelta(hours=1))
    assert change.action == "replace"
    assert change.preconditions == {"resourceVersion": "812"}
    assert change.body["metadata"]["resourceVersion"] == "812"
    assert "enable-timeslicing@ops-laptop/20261201T093000Z-1a2b, which let it expire" in change.why


def test_holder_identities_name_the_runbook_host_and_moment() -> None:
    assert re.fullmatch(r"rollback-timeslicing@[^/]+/20261201T100000Z-[0-9a-f]{4}",
                        lock.holder_identity("rollback-timeslicing", NOW))


def test_the_lock_filter_from_a_read() -> None:
    taken = gpushare_lock({"resources": {"lease": None}}, "enable-timeslicing", NAME, NAMESPACE, 1800)
    assert taken["refusal"] == ""
    assert taken["take"][0]["action"] == "create"
    assert taken["take"][0]["body"]["spec"]["holderIdentity"] == taken["holder"]
    # the task worker's parent, ansible-playbook: its end frees the lock at once
    assert taken["holder"].startswith(f"enable-timeslicing@{socket.gethostname()}/{os.getppid()}/")
    held = lease(acquired=(dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)).strftime(lock.MICRO))
    refused = gpushare_lock({"resources": {"lease": held}}, "rollback-timeslicing", NAME, NAMESPACE, 1800)
    assert refused["refusal"].startswith("Another runbook run holds the lock")


def test_a_holder_is_known_dead_only_by_its_process_on_this_machine() -> None:
    with_pid = lock.holder_identity("rollout-timeslicing", NOW, 4242)
    host = with_pid.partition("@")[2].partition("/")[0]
    assert re.fullmatch(rf"rollout-timeslicing@{re.escape(host)}/4242/20261201T100000Z-[0-9a-f]{{4}}", with_pid)
    assert lock.holder_process_alive(with_pid, host, lambda pid: pid != 4242) is False
    assert lock.holder_process_alive(with_pid, "another-machine", lambda pid: False) is True
    # a holder that names no process: only its expiry frees it
    assert lock.holder_process_alive(lock.holder_identity("enable-timeslicing", NOW), host, lambda pid: False) is True


HERE = "ops-laptop"


def here(pid: int = 4242) -> str:
    return f"enable-timeslicing@{HERE}/{pid}/20261201T093000Z-1a2b"


@pytest.mark.parametrize(("holder", "now_offset_s", "is_held"), [
    pytest.param(here(4242), 60, False, id="this-machine-process-ended-before-expiry"),
    pytest.param(here(4243), 60, True, id="this-machine-process-runs"),
    pytest.param(here(4243), 7200, True, id="this-machine-process-runs-past-expiry"),
    pytest.param(here(4242), 7200, False, id="this-machine-process-ended-and-expired"),
    pytest.param("enable-timeslicing@other-machine/4242/20261201T093000Z-1a2b", 60, True, id="other-machine"),
    pytest.param("enable-timeslicing@other-machine/4242/20261201T093000Z-1a2b", 1800, False, id="other-machine-expired"),
])
def test_a_holder_is_gone_when_its_process_here_ended_or_else_its_lease_expired(
        holder: str, now_offset_s: int, is_held: bool) -> None:
    now = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=now_offset_s)
    alive = lambda pid: pid != 4242  # noqa: E731
    assert lock.status(lease(holder=holder), now, HERE, alive)["held"] is is_held
    assert (lock.refusal(lease(holder=holder), NAME, NAMESPACE, now, HERE, alive) == "") is not is_held


def test_a_dead_holder_here_is_taken_over_at_once_and_a_live_one_is_named() -> None:
    now = dt.datetime(2026, 12, 1, 9, 31, tzinfo=dt.timezone.utc)
    dead = lock.status(lease(holder=here()), now, HERE, lambda pid: False)
    assert (dead["held"], dead["gone"], dead["expired"]) == (False, True, False)
    change = lock.take(lease(holder=here()), NAME, NAMESPACE, "me", 300, now)
    assert change.action == "replace" and change.preconditions == {"resourceVersion": "812"}
    expired = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
    message = lock.refusal(lease(holder=here()), NAME, NAMESPACE, expired, HERE, lambda pid: True)
    assert "Its process on this machine still runs." in message and message.endswith("Nothing was changed.")


FUTURE = "2099-01-01T00:00:00.000000Z"


@pytest.mark.parametrize("forged", [
    pytest.param(lease(renewed=FUTURE), id="renewed-in-2099"),
    pytest.param(lease(acquired=FUTURE), id="acquired-in-2099"),
    pytest.param(lease(holder=here(), acquired=FUTURE), id="dead-holder-here"),
    pytest.param(lease(holder="", renewed=FUTURE), id="no-holder"),
])
def test_a_lease_dated_in_the_future_is_refused_as_forged(forged: dict[str, Any]) -> None:
    now = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.timezone.utc)
    message = lock.refusal(forged, NAME, NAMESPACE, now, HERE, lambda pid: False)
    assert f"Lease {NAMESPACE}/{NAME}" in message and "is dated in the future" in message and FUTURE in message
    assert f"kubectl -n {NAMESPACE} delete lease {NAME}" in message and "administrator" in message
    assert message.endswith("Nothing was changed.")


def test_a_lease_a_little_ahead_is_another_clock_not_a_forgery() -> None:
    now = dt.datetime(2026, 12, 1, 9, 29, 10, tzinfo=dt.timezone.utc)  # 50 s behind the holder's clock
    assert lock.status(lease(), now)["forged"] == [] and lock.status(lease(), now)["held"]
    assert lock.status(lease(), now - dt.timedelta(seconds=11))["forged"] == ["acquireTime"]


def test_a_process_is_alive_until_it_ends_and_a_zombie_is_not() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert processes.pid_alive(os.getpid()) and processes.process_start(os.getpid())
    deadline = dt.datetime.now() + dt.timedelta(seconds=10)
    while processes.pid_alive(child.pid):  # ended, not reaped yet: a zombie
        assert dt.datetime.now() < deadline, "the child did not end"
        time.sleep(0.01)
    assert child.poll() == 0 and not processes.pid_alive(child.pid) and processes.process_start(child.pid) == ""


def test_a_process_command_line_is_read_until_it_is_gone() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "an argument with spaces"]
    child = subprocess.Popen(argv)
    wait_for(lambda: processes.command_line(child.pid) == argv, 10, "the child's exec to set its command line")
    child.kill()
    child.wait()
    assert processes.command_line(child.pid) == []
