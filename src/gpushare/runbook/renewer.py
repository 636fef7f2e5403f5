"""The runbook lock's renewer: a process of its own (`python -m gpushare.runbook.renewer`), started
by the gpushare_lock action once a run took the Lease, so that the lock is held while the run lives
and no longer. Every third of the Lease's duration it renews renewTime; when the run's
ansible-playbook process ends without having released the Lease (a killed run) it releases it; it
stops at once when the Lease is gone or another holder's. Each write is an update or a delete at the
resourceVersion it read, so it never re-creates a Lease nor touches another run's."""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import gpushare
from gpushare.k8s.session import ApiError, Session
from gpushare.runbook import lock

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
    body["spec"]["renewTime"] = now.strftime(lock.MICRO)
    return body


def renew(session: Session, name: str, namespace: str, holder: str, lease: dict[str, Any] | None,
          now: dt.datetime) -> dict[str, Any] | None:
    """One renewal of `lease` (as last written); the Lease as now written, or None when `holder` holds
    it no more (deleted: released; replaced: taken over). A conflict is read again once."""
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


def hold(session: Session, name: str, namespace: str, holder: str, owner_alive: Callable[[], bool],
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """Renew the Lease while `owner_alive()`; release it when the owner ends. Why it stopped."""
    lease = session.get("Lease", name, namespace)
    if holder_of(lease) != holder:
        return "the Lease is not this run's"
    interval = max(int(lease["spec"].get("leaseDurationSeconds") or 0) / 3, TICK_S)
    due = clock() + interval
    while owner_alive():
        if clock() >= due:
            try:
                lease = renew(session, name, namespace, holder, lease, dt.datetime.now(dt.timezone.utc))
            except ApiError:  # unreachable or refused: the Lease stays valid for two more intervals
                due = clock() + min(RETRY_S, interval)
                continue
            if lease is None:
                return "the Lease was released or taken over"
            due = clock() + interval
        sleep(min(TICK_S, interval))
    return "the run ended; it released the Lease" if release(session, name, namespace, holder) else "the run ended"


def start(kubeconfig: str | None, context: str | None, name: str, namespace: str, holder: str, owner: int) -> int:
    """Start the renewer of `holder`'s Lease for the run of process `owner`, detached (its own session:
    a Ctrl-C or a kill of the run's process group leaves it to release the Lease); its pid."""
    argv = [sys.executable, "-m", "gpushare.runbook.renewer", "--name", name, "--namespace", namespace,
            "--holder", holder, "--owner", str(owner), "--owner-start", lock.process_start(owner)]
    argv += [*(["--kubeconfig", kubeconfig] if kubeconfig else []), *(["--context", context] if context else [])]
    source = str(Path(gpushare.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True).pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpushare.runbook.renewer", description=__doc__.splitlines()[0])
    for option in ("--name", "--namespace", "--holder", "--owner"):
        parser.add_argument(option, required=True)
    parser.add_argument("--owner-start", default="")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    args = parser.parse_args(argv)
    owner = int(args.owner)

    def owner_alive() -> bool:
        return lock.pid_alive(owner) and lock.process_start(owner) == args.owner_start

    try:
        hold(Session(args.kubeconfig, args.context), args.name, args.namespace, args.holder, owner_alive)
    except ApiError:
        return 1  # the Lease expires by itself
    return 0


if __name__ == "__main__":
    sys.exit(main())
