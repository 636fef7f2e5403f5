"""The runbook lock's renewer (gpushare.runbook.renewer) against an in-memory API server that keeps
resourceVersions as the real one does: it renews only its own Lease at the version it read, stops
when the Lease is released or taken over, and releases it when the run ends. It makes no request
(imports no kubernetes client) until a renewal is due or the run ended unreleased, and only the
renewer of this run's holder is told to stop."""

from __future__ import annotations

import copy
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpushare.k8s.session import ApiError
from gpushare.polling import wait_for
from gpushare.runbook import lock, processes, renewer

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


class Connection:
    """The renewer's `connect`: the in-memory API server, and how often a session was asked for."""

    def __init__(self, leases: Leases) -> None:
        self.leases, self.calls = leases, 0

    def __call__(self) -> Leases:
        self.calls += 1
        return self.leases


def hold(leases: Leases, run: Run, duration_s: int = 30, stopped: Any = lambda: False) -> tuple[str, Connection]:
    connect = Connection(leases)
    return renewer.hold(connect, NAME, NAMESPACE, ME, duration_s, run.alive, stopped, run.sleep, run.clock), connect


def test_while_the_run_lives_the_lease_is_renewed_every_third_of_its_duration_then_released() -> None:
    leases, run = Leases(duration=30), Run(lives_s=45)
    why, connect = hold(leases, run)
    assert [w.split()[0] for w in leases.writes] == ["update", "update", "update", "update", "delete"]  # 10, 20, 30, 40 s
    assert why == "the run ended; it released the Lease" and leases.lease is None
    assert connect.calls == 1


def test_the_renewer_stops_once_the_lease_is_taken_over_and_releases_nothing() -> None:
    leases = Leases(duration=30)
    run = Run(lives_s=1000, at={15: lambda: leases.take_over(OTHER)})
    why, _ = hold(leases, run)
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
    hold(leases, run, duration_s=60)
    assert [w.split()[0] for w in leases.writes] == ["update", "delete"]  # at 20 s refused, at 25 s renewed


def test_an_unanswered_first_read_is_tried_again_soon() -> None:
    leases, run = Leases(duration=60), Run(lives_s=26)
    answers = iter([ApiError(0, "Unreachable", "no answer")])
    get = leases.get

    def flaky(kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        failure = next(answers, None)
        if failure:
            raise failure
        return get(kind, name, namespace)

    leases.get = flaky  # type: ignore[method-assign]
    hold(leases, run, duration_s=60)
    assert [w.split()[0] for w in leases.writes] == ["update", "delete"]  # at 20 s unread, at 25 s renewed


def test_a_lease_that_is_not_this_runs_is_left_alone_from_the_first_renewal() -> None:
    leases, run = Leases(holder=OTHER), Run(lives_s=100)
    assert hold(leases, run)[0] == "the Lease was released or taken over"
    assert leases.writes == [] and run.now == 10


def test_a_run_that_released_the_lease_and_stopped_its_renewer_costs_no_request() -> None:
    told: list[bool] = []
    leases = Leases(duration=300)
    run = Run(lives_s=8, at={5: lambda: (setattr(leases, "lease", None), told.append(True))})  # released at 5 s
    why, connect = hold(leases, run, duration_s=300, stopped=lambda: bool(told))
    assert why == "told to stop: the run released the Lease" and run.now == 5
    assert connect.calls == 0


def test_a_run_killed_before_the_first_renewal_has_its_lease_released() -> None:
    leases, run = Leases(duration=300), Run(lives_s=8)
    why, connect = hold(leases, run, duration_s=300)
    assert why == "the run ended; it released the Lease" and leases.lease is None
    assert leases.writes == ["delete"] and connect.calls == 1


def test_the_renewer_imports_no_kubernetes_client_at_start_up() -> None:
    imported = subprocess.run([sys.executable, "-c", "import sys, gpushare.runbook.renewer; "
                               "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes' "
                               "or m.startswith('gpushare.k8s')))"],
                              capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]"


@pytest.fixture
def owner() -> Any:
    """A run's process: lives until the test ends."""
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def test_only_this_holders_renewer_is_told_to_stop(owner: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """The renewer started for a run, told to stop by its own holder, ends at once having made no
    request: with no kubeconfig, connecting would have ended it with status 1. A pid that is not that
    renewer is never signalled."""
    worker = renewer.start(str(tmp_path / "no-kubeconfig"), None, NAME, NAMESPACE, ME, owner.pid, 300)
    wait_for(lambda: catches_sigterm(worker), 10, "the renewer to start")
    assert renewer.renews(worker) == ME and renewer.argument(worker, "--owner") == str(owner.pid)
    assert renewer.argument(owner.pid, "--owner") == ""  # not a renewer
    assert renewer.stop(worker, OTHER) is False and renewer.stop(owner.pid, ME) is False
    assert processes.pid_alive(worker) and owner.poll() is None
    started = time.monotonic()
    assert renewer.stop(worker, ME) is True
    wait_for(lambda: not processes.pid_alive(worker), 5, "the renewer to end")
    assert time.monotonic() - started < 3 and owner.poll() is None
    assert renewer.stop(worker, ME) is False  # ended: its pid is no renewer's any more
    assert os.waitstatus_to_exitcode(os.waitpid(worker, 0)[1]) == 0


def catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a handler for SIGTERM (its SigCgt mask in /proc)."""
    caught = next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def test_the_renewer_is_told_by_its_command_line() -> None:
    argv = [sys.executable, "-m", "gpushare.runbook.renewer", "--name", NAME, "--holder", ME, "--owner", "42"]
    assert renewer._option(argv, "--holder") == ME and renewer._option(argv, "-m") == renewer.MODULE
    assert renewer._option([*argv, "--context"], "--context") == "" and renewer._option(["sleep", "60"], "-m") == ""
