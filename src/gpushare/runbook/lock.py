"""The one-run-at-a-time lock: a coordination.k8s.io Lease in the runbooks' namespace. Taking it
is a create (atomic: a second run gets a conflict) or, for a Lease whose holder let it expire
(a killed run), a replace of exactly the version that was read. Who holds a lock, and whether
its process still runs, are written here for every lock (the rollout's record too)."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import socket
from typing import Any, Callable

from gpushare.clock import parse_time, stamp

MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


def status(lease: dict[str, Any] | None, now: dt.datetime) -> dict[str, Any]:
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or 0)
    expires = renewed + dt.timedelta(seconds=duration) if renewed and duration else None
    expired = bool(lease) and (expires is None or now >= expires)
    return {"exists": bool(lease), "held": bool(holder) and not expired, "holder": holder,
            "acquired": spec.get("acquireTime") or "", "expires": stamp(expires) if expires else "",
            "expired": expired, "resource_version": ((lease or {}).get("metadata") or {}).get("resourceVersion", "")}


def holder_identity(runbook: str, now: dt.datetime, pid: int | None = None) -> str:
    """`<runbook>@<host>/[<pid>/]<stamp>-<hex>`; with `pid`, the process whose end on this host
    frees the lock at once (holder_process_alive)."""
    process = f"{pid}/" if pid is not None else ""
    return f"{runbook}@{socket.gethostname()}/{process}{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder_process_alive(holder: str, host: str = "", alive: Callable[[int], bool] = pid_alive) -> bool:
    """False only when `holder` names a process on this host (`host`: this machine's name) that is
    gone (a killed run); a holder on another machine, or without a process, may be alive."""
    where, _, rest = holder.partition("@")[2].partition("/")
    pid = rest.split("/")[0]
    if where == (host or socket.gethostname()) and pid.isdigit():
        return alive(int(pid))
    return True


def refusal(lease: dict[str, Any] | None, name: str, namespace: str, now: dt.datetime) -> str:
    """Why this run may not take the lock; empty when it may."""
    current = status(lease, now)
    if not current["held"]:
        return ""
    return (f"Another runbook run holds the lock: Lease {namespace}/{name} is held by {current['holder']} since "
            f"{current['acquired']} (valid until {current['expires']}). Wait for that run to finish. If it is dead "
            f"(a killed run), wait until the Lease expires or delete it: kubectl -n {namespace} delete lease {name}. "
            "Nothing was changed.")


def take(lease: dict[str, Any] | None, name: str, namespace: str, holder: str, duration_s: int,
         now: dt.datetime) -> dict[str, Any]:
    """The change that takes the lock (create, or replace an expired Lease at the version read)."""
    moment = now.strftime(MICRO)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
            "spec": {"holderIdentity": holder, "acquireTime": moment, "renewTime": moment,
                     "leaseDurationSeconds": int(duration_s)}}
    if lease is None:
        return {"action": "create", "kind": "Lease", "name": name, "namespace": namespace, "body": body,
                "why": "take the runbook lock"}
    version = lease["metadata"]["resourceVersion"]
    body["metadata"]["resourceVersion"] = version
    return {"action": "replace", "kind": "Lease", "name": name, "namespace": namespace, "body": body,
            "preconditions": {"resourceVersion": version},
            "why": f"take over the runbook lock that {status(lease, now)['holder']} let expire"}


def release(name: str, namespace: str, resource_version: str) -> dict[str, Any]:
    return {"action": "delete", "kind": "Lease", "name": name, "namespace": namespace,
            "preconditions": {"resourceVersion": resource_version}, "why": "release the runbook lock"}
