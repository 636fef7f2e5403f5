"""The one-run-at-a-time lock: a coordination.k8s.io Lease in the runbooks' namespace. Taking it
is a create (atomic: a second run gets a conflict) or, for a Lease whose holder is gone (its
process on this machine ended, or it let the Lease expire), a replace of exactly the version that
was read. While the run lives its renewer (gpushare.runbook.renewer) renews the Lease. Who holds a
lock, and whether its process still runs, are written here for every lock (the rollout's record too)."""

from __future__ import annotations

import datetime as dt
import secrets
import socket
from typing import Any, Callable

from gpushare.k8s.changes import Change
from gpushare.clock import MICRO, parse_time, stamp
from gpushare.runbook.processes import pid_alive

# How far in the future a Lease's times may be (another machine's clock) before it is refused as forged.
CLOCK_SKEW_S = 60


def status(lease: dict[str, Any] | None, now: dt.datetime, host: str = "",
           alive: Callable[[int], bool] | None = None) -> dict[str, Any]:
    """The Lease as a run sees it. `held`: another run may still be at work, so the lock may not be
    taken: a holder whose process on this machine (`host`) still runs holds it even past its expiry (its
    renewer died, the run did not), one whose process ended holds it no more, and any other holder
    holds it until it expires. `forged`: the times that lie beyond the clock-skew allowance; such a
    Lease is never taken over."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or 0)
    expires = renewed + dt.timedelta(seconds=duration) if renewed and duration else None
    expired = bool(lease) and (expires is None or now >= expires)
    process = holder_process(holder, host, alive or pid_alive) if holder else None
    forged = [f for f in ("renewTime", "acquireTime") if (parse_time(spec.get(f)) or now) > now + dt.timedelta(
        seconds=CLOCK_SKEW_S)]
    return {"exists": bool(lease), "held": bool(holder) and (bool(forged) or process is True or (
                not expired and process is None)),
            "holder": holder, "acquired": spec.get("acquireTime") or "", "expires": stamp(expires) if expires else "",
            "expired": expired, "gone": process is False, "forged": forged,
            "resource_version": ((lease or {}).get("metadata") or {}).get("resourceVersion", "")}


def holder_identity(runbook: str, now: dt.datetime, pid: int | None = None) -> str:
    """`<runbook>@<host>/[<pid>/]<stamp>-<hex>`; with `pid`, the process whose end on this host
    frees the lock at once (holder_process_alive)."""
    process = f"{pid}/" if pid is not None else ""
    return f"{runbook}@{socket.gethostname()}/{process}{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


def holder_process(holder: str, host: str = "", alive: Callable[[int], bool] = pid_alive) -> bool | None:
    """Whether the process `holder` names still runs, when it is on this machine (`host`: this
    machine's name); None when that cannot be told (another machine, or no process named)."""
    where, _, rest = holder.partition("@")[2].partition("/")
    pid = rest.split("/")[0]
    if where == (host or socket.gethostname()) and pid.isdigit():
        return alive(int(pid))
    return None


def holder_process_alive(holder: str, host: str = "", alive: Callable[[int], bool] = pid_alive) -> bool:
    """False only when `holder` names a process on this machine that is gone (a killed run)."""
    return holder_process(holder, host, alive) is not False


def refusal(lease: dict[str, Any] | None, name: str, namespace: str, now: dt.datetime, host: str = "",
            alive: Callable[[int], bool] | None = None) -> str:
    """Why this run may not take the lock; empty when it may."""
    current = status(lease, now, host, alive)
    remove = f"kubectl -n {namespace} delete lease {name}"
    if current["forged"]:
        spec = (lease or {}).get("spec") or {}
        times = ", ".join(f"{f} {spec[f]}" for f in current["forged"])
        return (f"The runbook lock Lease {namespace}/{name} (holder {current['holder'] or 'none'}) is dated in the future "
                f"({times}; now is {stamp(now)}): no run wrote that, and it would block every run. If this machine's "
                f"clock is right, have an administrator delete it ({remove}) and find who wrote it. Nothing was changed.")
    if not current["held"]:
        return ""
    alive_here = " Its process on this machine still runs." if current["expired"] else ""
    return (f"Another runbook run holds the lock: Lease {namespace}/{name} is held by {current['holder']} since "
            f"{current['acquired']} (renewed while it runs; valid until {current['expires']}).{alive_here} Wait for "
            f"that run to finish: its lock is released when it ends, even when it is killed. If its machine is gone, "
            f"the Lease expires by itself, or delete it: {remove}. Nothing was changed.")


def take(lease: dict[str, Any] | None, name: str, namespace: str, holder: str, duration_s: int,
         now: dt.datetime) -> Change:
    """The change that takes the lock (create, or replace an expired Lease at the version read)."""
    moment = now.strftime(MICRO)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
            "spec": {"holderIdentity": holder, "acquireTime": moment, "renewTime": moment,
                     "leaseDurationSeconds": int(duration_s)}}
    if lease is None:
        return Change("create", "Lease", name, namespace=namespace, body=body, why="take the runbook lock")
    version = lease["metadata"]["resourceVersion"]
    body["metadata"]["resourceVersion"] = version
    return Change("replace", "Lease", name, namespace=namespace, body=body, preconditions={"resourceVersion": version},
                  why=f"take over the runbook lock of {_gone(status(lease, now))}")


def _gone(current: dict[str, Any]) -> str:
    how = "whose process ended" if current["gone"] else "which let it expire"
    return f"{current['holder'] or 'no holder'}, {how}"
