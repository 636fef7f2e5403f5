"""The runbook lock's renewer (gpushare.runbook.renewer) against an in-memory API server that keeps
resourceVersions as the real one does: it renews only its own Lease at the version it read, stops
when the Lease is released or taken over, and releases it when the run ends."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from gpushare.k8s.session import ApiError
from gpushare.runbook import lock, renewer

NAME, NAMESPACE = "gpushare-runbook-lock", "gpushare-system"
ME = "enable-timeslicing@ops-laptop/4242/20261201T093000Z-1a2b"
OTHER = "rollback-timeslicing@other-machine/7/20261201T094000Z-3c4d"
NOW = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.timezone.utc)


class Leases:
    """One Lease behind get, replace (update at its resourceVersion) and delete (at a precondition)."""

    def __init__(self, holder: str = ME, duration: int = 30) -> None:
        self.lease: dict[str, Any] | None = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "resourceVersion": "1"},
            "spec": {"holderIdentity": holder, "acquireTime": "2026-12-01T09:30:00.000000Z",
                     "renewTime": "2026-12-01T09:30:00.000000Z", "leaseDurationSeconds": duration}}
        self.writes: list[str] = []
        self.before_delete: list[Any] = []  # what happens between a release's read and its delete

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.lease)

    def _version(self, version: str) -> None:
        if self.lease is None:
            raise ApiError(404, "NotFound", "leases not found")
        if version != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        self._version(body["metadata"]["resourceVersion"])
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        self.writes.append(f"update {body['spec']['holderIdentity']} {body['spec']['renewTime']}")
        return copy.deepcopy(self.lease)

    def take_over(self, holder: str) -> None:
        self.replace({**copy.deepcopy(self.lease), "spec": {**self.lease["spec"], "holderIdentity": holder}})

    def delete(self, kind: str, name: str, namespace: str, preconditions: dict[str, str]) -> dict[str, Any] | None:
        while self.before_delete:
            self.before_delete.pop(0)()
        if self.lease is None:
            return None
        self._version(preconditions["resourceVersion"])
        self.lease = None
        self.writes.append("delete")
        return {}


def test_a_renewal_moves_renew_time_at_the_version_read() -> None:
    leases = Leases()
    written = renewer.renew(leases, NAME, NAMESPACE, ME, leases.get("Lease", NAME, NAMESPACE), NOW)
    assert written["spec"]["renewTime"] == "2026-12-01T10:00:00.000000Z"
    assert written["spec"]["acquireTime"] == "2026-12-01T09:30:00.000000Z"
    assert written["metadata"]["resourceVersion"] == "2"
    assert lock.status(written, NOW + dt.timedelta(seconds=29))["held"]


def test_a_stale_copy_is_read_again_and_renewed_while_still_this_runs() -> None:
    leases = Leases()
    stale = leases.get("Lease", NAME, NAMESPACE)
    leases.replace(leases.get("Lease", NAME, NAMESPACE))  # written in between, still this run's
    assert renewer.renew(leases, NAME, NAMESPACE, ME, stale, NOW)["metadata"]["resourceVersion"] == "3"


@pytest.mark.parametrize("lost", ["taken-over", "released"])
def test_a_lease_taken_over_or_released_is_never_written_again(lost: str) -> None:
    leases = Leases()
    mine = leases.get("Lease", NAME, NAMESPACE)
    if lost == "taken-over":
        leases.take_over(OTHER)
    else:
        leases.lease = None
    writes = list(leases.writes)
    assert renewer.renew(leases, NAME, NAMESPACE, ME, mine, NOW) is None
    assert leases.writes == writes
    assert leases.lease is None or leases.lease["spec"]["holderIdentity"] == OTHER


def test_release_deletes_only_this_runs_lease_and_reads_again_after_a_renewal() -> None:
    leases = Leases()
    leases.before_delete.append(lambda: leases.replace(leases.get("Lease", NAME, NAMESPACE)))  # a renewal
    assert renewer.release(leases, NAME, NAMESPACE, ME) is True
    assert leases.lease is None
    taken = Leases(holder=OTHER)
    assert renewer.release(taken, NAME, NAMESPACE, ME) is False
    assert taken.lease is not None and taken.writes == []
    assert renewer.release(leases, NAME, NAMESPACE, ME) is False  # none left


class Run:
    """A fake clock and a run that lives for `lives_s` seconds, with something done at a moment."""

    def __init__(self, lives_s: float, at: dict[float, Any] | None = None) -> None:
        self.now, self.lives_s, self.at = 0.0, lives_s, dict(at or {})

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        for moment in [m for m in self.at if m <= self.now]:
            self.at.pop(moment)()

    def alive(self) -> bool:
        return self.now < self.lives_s


def test_while_the_run_lives_the_lease_is_renewed_every_third_of_its_duration_then_released() -> None:
    leases, run = Leases(duration=30), Run(lives_s=45)
    why = renewer.hold(leases, NAME, NAMESPACE, ME, run.alive, run.sleep, run.clock)
    assert [w.split()[0] for w in leases.writes] == ["update", "update", "update", "update", "delete"]  # 10, 20, 30, 40 s
    assert why == "the run ended; it released the Lease" and leases.lease is None


def test_the_renewer_stops_once_the_lease_is_taken_over_and_releases_nothing() -> None:
    leases = Leases(duration=30)
    run = Run(lives_s=1000, at={15: lambda: leases.take_over(OTHER)})
    why = renewer.hold(leases, NAME, NAMESPACE, ME, run.alive, run.sleep, run.clock)
    assert why == "the Lease was released or taken over" and run.now < 25
    assert leases.lease["spec"]["holderIdentity"] == OTHER


def test_an_unanswered_renewal_is_tried_again_soon() -> None:
    leases, run = Leases(duration=60), Run(lives_s=26)
    answers = iter([ApiError(0, "Unreachable", "no answer")])
    replace = leases.replace

    def flaky(body: dict[str, Any]) -> dict[str, Any]:
        failure = next(answers, None)
        if failure:
            raise failure
        return replace(body)

    leases.replace = flaky  # type: ignore[method-assign]
    renewer.hold(leases, NAME, NAMESPACE, ME, run.alive, run.sleep, run.clock)
    assert [w.split()[0] for w in leases.writes] == ["update", "delete"]  # at 20 s refused, at 25 s renewed


def test_a_lease_that_is_not_this_runs_is_left_alone() -> None:
    leases, run = Leases(holder=OTHER), Run(lives_s=100)
    assert renewer.hold(leases, NAME, NAMESPACE, ME, run.alive, run.sleep, run.clock) == "the Lease is not this run's"
    assert leases.writes == [] and run.now == 0
