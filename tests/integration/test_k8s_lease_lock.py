"""The runbook lock (gpushare.runbook.lock) on a real Lease: of two runs that take it at the same
moment exactly one wins, an expired Lease is taken over only at the version read, a run releases
only the Lease it holds, and its renewer (gpushare.runbook.renewer) renews it while the run lives."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import threading
import time
from typing import Any

import pytest

from gpushare.clock import utc_now
from gpushare.polling import wait_for
from gpushare.runbook import lock, renewer
from gpushare.k8s.changes import ChangeFailed, Outcome, apply_changes
from gpushare.k8s.session import ApiError, Session
from tests.integration.k8s_fixtures import namespace, session  # noqa: F401 - fixtures
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster

NAME = "gpushare-runbook-lock"


def take(session: Session, namespace: str, runbook: str, now: dt.datetime,
         lease: dict[str, Any] | None) -> list[Outcome]:
    holder = lock.holder_identity(runbook, now)
    return apply_changes(session, [lock.take(lease, NAME, namespace, holder, 1800, now)])


@pytest.mark.parametrize("round_", range(3))
def test_of_two_runs_taking_the_lock_at_once_exactly_one_wins(cluster: Cluster, namespace: str,
                                                              round_: int) -> None:
    sessions = [Session(cluster.kubeconfig), Session(cluster.kubeconfig)]
    now = utc_now()
    lease = sessions[0].get("Lease", NAME, namespace)
    assert lock.refusal(lease, NAME, namespace, now) == ""
    start = threading.Barrier(2)
    results: dict[str, Any] = {}

    def run(runbook: str, session: Session) -> None:
        start.wait()
        try:
            results[runbook] = take(session, namespace, runbook, now, lease)
        except ChangeFailed as err:
            results[runbook] = err

    threads = [threading.Thread(target=run, args=(r, s)) for r, s in zip(("enable", "rollback"), sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [r for r, outcome in results.items() if isinstance(outcome, list)]
    assert len(winners) == 1, results
    loser = next(outcome for outcome in results.values() if isinstance(outcome, ChangeFailed))
    assert loser.written == []
    held = sessions[0].get("Lease", NAME, namespace)
    assert held["spec"]["holderIdentity"].startswith(f"{winners[0]}@")
    refusal = lock.refusal(held, NAME, namespace, utc_now())
    assert held["spec"]["holderIdentity"] in refusal and refusal.endswith("Nothing was changed.")


def expired_lease(session: Session, namespace: str) -> dict[str, Any]:
    long_ago = (utc_now() - dt.timedelta(hours=2)).strftime(lock.MICRO)
    return session.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": NAME, "namespace": namespace},
                           "spec": {"holderIdentity": "enable-timeslicing@killed-host/1", "acquireTime": long_ago,
                                    "renewTime": long_ago, "leaseDurationSeconds": 60}})


def test_an_expired_lease_is_taken_over(session: Session, namespace: str) -> None:
    lease = expired_lease(session, namespace)
    now = utc_now()
    assert lock.status(lease, now)["expired"] and lock.refusal(lease, NAME, namespace, now) == ""
    outcome = take(session, namespace, "rollback-timeslicing", now, lease)[0]
    assert outcome.changed and outcome.change.action == "replace"
    held = session.get("Lease", NAME, namespace)
    assert held["spec"]["holderIdentity"].startswith("rollback-timeslicing@")
    assert held["metadata"]["uid"] == lease["metadata"]["uid"]
    assert lock.status(held, utc_now())["held"]


def test_an_expired_lease_renewed_meanwhile_is_not_taken_over(session: Session, namespace: str) -> None:
    lease = expired_lease(session, namespace)
    renewed = session.patch("Lease", NAME, {"spec": {"renewTime": utc_now().strftime(lock.MICRO)}}, namespace)
    with pytest.raises(ChangeFailed, match="it changed since it was read"):
        take(session, namespace, "rollback-timeslicing", utc_now(), lease)
    assert session.get("Lease", NAME, namespace)["metadata"]["resourceVersion"] == \
        renewed["metadata"]["resourceVersion"]


def test_the_api_server_refuses_a_takeover_at_a_stale_version(session: Session, namespace: str) -> None:
    """Between apply_changes' read and its write the version check is the API server's."""
    lease = expired_lease(session, namespace)
    change = lock.take(lease, NAME, namespace, "rollback-timeslicing@here/1", 1800, utc_now())
    session.patch("Lease", NAME, {"spec": {"holderIdentity": "enable-timeslicing@other/2"}}, namespace)
    with pytest.raises(ApiError) as refused:
        session.replace(change.body)
    assert refused.value.status == 409
    assert session.get("Lease", NAME, namespace)["spec"]["holderIdentity"] == "enable-timeslicing@other/2"


def test_a_run_releases_only_the_lease_it_holds(session: Session, namespace: str) -> None:
    holder = take(session, namespace, "enable-timeslicing", utc_now(), None)[0].after["spec"]["holderIdentity"]
    session.patch("Lease", NAME, {"spec": {"holderIdentity": "rollback-timeslicing@other/2"}}, namespace)
    assert renewer.release(session, NAME, namespace, holder) is False
    assert session.get("Lease", NAME, namespace)["spec"]["holderIdentity"] == "rollback-timeslicing@other/2"
    assert renewer.release(session, NAME, namespace, "rollback-timeslicing@other/2") is True
    assert session.get("Lease", NAME, namespace) is None


def renew_time(session: Session, namespace: str) -> str | None:
    return ((session.get("Lease", NAME, namespace) or {}).get("spec") or {}).get("renewTime")


def test_the_lease_is_renewed_while_the_run_lives_and_released_when_it_ends(cluster: Cluster, session: Session,
                                                                            namespace: str) -> None:
    """The renewer of a 3-second Lease, for a run played by a `sleep`: renewTime moves every second
    past the Lease's first expiry while the run lives; when it is killed the Lease is released."""
    run = subprocess.Popen(["sleep", "60"])
    try:
        holder = lock.holder_identity("enable-timeslicing", utc_now(), run.pid)
        taken = apply_changes(session, [lock.take(None, NAME, namespace, holder, 3, utc_now())])
        first = taken[0].after["spec"]["renewTime"]
        worker = renewer.start(str(cluster.kubeconfig), None, NAME, namespace, holder, run.pid, 3)
        seen = {first}
        deadline = time.monotonic() + 8
        while len(seen) < 4:  # three renewals, the last after the Lease taken would have expired
            assert time.monotonic() < deadline, f"renewTime moved only through {sorted(seen)}"
            assert lock.status(session.get("Lease", NAME, namespace), utc_now())["held"]
            seen.add(renew_time(session, namespace))
            time.sleep(0.2)
    finally:
        run.kill()
        run.wait()
    wait_for(lambda: session.get("Lease", NAME, namespace) is None, 5, "the renewer to release the Lease")
    wait_for(lambda: not lock.pid_alive(worker), 5, "the renewer to end")


def test_the_renewer_stops_when_the_run_released_the_lease(cluster: Cluster, session: Session, namespace: str) -> None:
    holder = lock.holder_identity("enable-timeslicing", utc_now(), os.getpid())
    apply_changes(session, [lock.take(None, NAME, namespace, holder, 3, utc_now())])
    worker = renewer.start(str(cluster.kubeconfig), None, NAME, namespace, holder, os.getpid(), 3)
    assert renewer.release(session, NAME, namespace, holder)
    wait_for(lambda: not lock.pid_alive(worker), 5, "the renewer to end")
    assert session.get("Lease", NAME, namespace) is None  # never re-created


def test_a_run_killed_before_the_first_renewal_has_its_lease_released(cluster: Cluster, session: Session,
                                                                       namespace: str) -> None:
    """The renewer connects only when the run ends unreleased, 100 s before its first renewal."""
    run = subprocess.Popen(["sleep", "60"])
    try:
        holder = lock.holder_identity("enable-timeslicing", utc_now(), run.pid)
        apply_changes(session, [lock.take(None, NAME, namespace, holder, 300, utc_now())])
        worker = renewer.start(str(cluster.kubeconfig), None, NAME, namespace, holder, run.pid, 300)
        wait_for(lambda: renewer.renews(worker) == holder, 5, "the renewer to start")
    finally:
        run.kill()
        run.wait()
    wait_for(lambda: session.get("Lease", NAME, namespace) is None, 10, "the renewer to release the Lease")
    wait_for(lambda: not lock.pid_alive(worker), 5, "the renewer to end")
