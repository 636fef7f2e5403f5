"""The runbook lock's renewer: a process of its own (`python -m gpushare.runbook.renewer`), started
by the gpushare_lock action once a run took the Lease, so that the lock is held while the run lives
and no longer. Every third of the Lease's duration it renews renewTime; when the run's
ansible-playbook process ends without having released the Lease (a killed run) it releases it; it
stops at once when the Lease is gone or another holder's. Each write is an update or a delete at the
resourceVersion it read, so it never re-creates a Lease nor touches another run's.

Most runs end, and release the Lease themselves, before the first renewal is due: such a run tells
its renewer to stop (SIGTERM, see `stop`), and the renewer then ends having made no request. So it
imports the kubernetes client (gpushare.k8s.session) only once a request is due."""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import gpushare
from gpushare.clock import MICRO
from gpushare.runbook import processes

if TYPE_CHECKING:
    from gpushare.k8s.session import Session

MODULE = "gpushare.runbook.renewer"
# Pause between two looks at the run's process.
TICK_S = 1.0
# Pause before a renewal that failed (API server unreachable, an error) is tried again.
RETRY_S = 5.0
# Reads and deletes a release tries before giving up (each conflict is a renewal in between).
RELEASE_TRIES = 5


def holder_of(lease: dict[str, Any] | None) -> str:
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def renewed(lease: dict[str, Any] | None, holder: str, now: dt.datetime) -> dict[str, Any] | None:
    """`lease` with renewTime `now`, to be written at the version read; None when `holder` does not hold it."""
    if holder_of(lease) != holder:
        return None
    body = copy.deepcopy(lease)
    body["spec"]["renewTime"] = now.strftime(MICRO)
    return body


def renew(session: Session, name: str, namespace: str, holder: str, lease: dict[str, Any] | None,
          now: dt.datetime) -> dict[str, Any] | None:
    """One renewal of `lease` (as last written); the Lease as now written, or None when `holder` holds
    it no more (deleted: released; replaced: taken over). A conflict is read again once."""
    from gpushare.k8s.session import ApiError  # noqa: PLC0415 - imported with the session it was given
    for attempt in range(2):
        body = renewed(lease, holder, now)
        if body is None:
            return None
        try:
            return session.replace(body)
        except ApiError as err:
            if err.status not in (404, 409) or attempt:
                raise
        lease = session.get("Lease", name, namespace)
    return None


def release(session: Session, name: str, namespace: str, holder: str) -> bool:
    """Delete the Lease if `holder` holds it, at the version read; whether it was deleted. A renewal
    between the read and the delete (a conflict) is read again."""
    from gpushare.k8s.session import ApiError  # noqa: PLC0415 - imported with the session it was given
    for _ in range(RELEASE_TRIES):
        lease = session.get("Lease", name, namespace)
        if holder_of(lease) != holder:
            return False
        try:
            return session.delete("Lease", name, namespace,
                                  preconditions={"resourceVersion": lease["metadata"]["resourceVersion"]}) is not None
        except ApiError as err:
            if err.status != 409:
                raise
    raise ApiError(409, "Conflict", f"Lease {namespace}/{name} changed {RELEASE_TRIES} times while this run released "
                                    f"it; it expires by itself, or delete it: kubectl -n {namespace} delete lease {name}")


def hold(connect: Callable[[], Session], name: str, namespace: str, holder: str, duration_s: float,
         owner_alive: Callable[[], bool], stopped: Callable[[], bool] = lambda: False,
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """Renew the Lease every third of `duration_s` while `owner_alive()`; release it when the owner
    ends, unless `stopped()` (the run released it itself). Why it stopped. Until the first renewal is
    due (it reads the Lease first) or the owner ends, it makes no request nor calls `connect()`, which
    gives the session."""
    interval = max(duration_s / 3, TICK_S)
    due = clock() + interval
    session: Session | None = None
    lease: dict[str, Any] | None = None  # as last written
    while owner_alive() and not stopped():
        if clock() >= due:
            from gpushare.k8s.session import ApiError  # noqa: PLC0415 - the kubernetes client, once a request is due
            session = session or connect()
            try:
                lease = renew(session, name, namespace, holder, lease or session.get("Lease", name, namespace),
                              dt.datetime.now(dt.timezone.utc))
            except ApiError:  # unreachable or refused: the Lease stays valid for two more intervals
                due = clock() + min(RETRY_S, interval)
                continue
            if lease is None:
                return "the Lease was released or taken over"
            due = clock() + interval
        sleep(min(TICK_S, interval))
    if stopped():
        return "told to stop: the run released the Lease"
    return "the run ended; it released the Lease" if release(session or connect(), name, namespace, holder) else "the run ended"


def start(kubeconfig: str | None, context: str | None, name: str, namespace: str, holder: str, owner: int,
          duration_s: int) -> int:
    """Start the renewer of `holder`'s Lease (valid `duration_s` from each renewal) for the run of process
    `owner`, detached (its own session: a Ctrl-C or a kill of the run's process group leaves it to
    release the Lease); its pid."""
    import subprocess  # noqa: PLC0415 - the renewer itself starts none

    argv = [sys.executable, "-m", MODULE, "--name", name, "--namespace", namespace, "--holder", holder,
            "--owner", str(owner), "--owner-start", processes.process_start(owner), "--duration", str(duration_s)]
    argv += [*(["--kubeconfig", kubeconfig] if kubeconfig else []), *(["--context", context] if context else [])]
    source = str(Path(gpushare.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True).pid


def stop(pid: int, holder: str) -> bool:
    """Tell the renewer `pid` of `holder`'s Lease to stop, once the run released the Lease itself;
    whether it was told. A pid that is not that renewer (it ended, and its pid may be another
    process's now) is left alone."""
    if renews(pid) != holder:
        return False
    os.kill(pid, signal.SIGTERM)
    return True


def renews(pid: int) -> str:
    """The holder whose Lease process `pid` renews; empty when it is no renewer."""
    return argument(pid, "--holder")


def argument(pid: int, option: str) -> str:
    """The value of `option` (say --owner) the renewer `pid` was started with; empty when it is no renewer."""
    argv = processes.command_line(pid)
    return _option(argv, option) if _option(argv, "-m") == MODULE else ""


def _option(argv: list[str], option: str) -> str:
    """The value given `option` in `argv`; empty without it."""
    return argv[argv.index(option) + 1] if option in argv[:-1] else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    for option in ("--name", "--namespace", "--holder", "--owner", "--duration"):
        parser.add_argument(option, required=True)
    parser.add_argument("--owner-start", default="")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    args = parser.parse_args(argv)
    owner = int(args.owner)
    told_to_stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: told_to_stop.append(signum))

    def owner_alive() -> bool:
        return processes.pid_alive(owner) and processes.process_start(owner) == args.owner_start

    def connect() -> Session:
        from gpushare.k8s.session import Session  # noqa: PLC0415 - the kubernetes client, once a request is due
        return Session(args.kubeconfig, args.context)

    # An ApiError (unreachable, refused) ends it with status 1: the Lease then expires by itself.
    hold(connect, args.name, args.namespace, args.holder, float(args.duration), owner_alive, lambda: bool(told_to_stop))
    return 0


if __name__ == "__main__":
    sys.exit(main())
