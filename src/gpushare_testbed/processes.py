"""Starting, tracking and stopping the embedded cluster's processes through pid files.

A pid file is untrusted input: a process counts as ours only if it still has the start time the
file records, leads its own process group (as `start` makes it), and carries in its environment the
pid file's directory, which `start` sets and no other process has. Anything else is left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpushare.polling import pauses


# In the environment of every process `start` starts: the directory of its pid file.
OWNER_ENV = "GPUSHARE_PID_DIR"
# The Go runtime's GC target for the components (the Python ones ignore it), unless the caller's
# environment sets GOGC: a heap 5x the live data rather than 2x. Garbage collection was a fifth of
# the API server's CPU bringing up 500 nodes; at 400 that API server spent 8-15% less CPU for twice
# the memory (2 GiB), and on test_enable_timeslicing.py's scenarios 16% less for 25% more. Only CPU
# and memory change, no behaviour.
GO_GC_PERCENT = "400"


class ComponentError(RuntimeError):
    """A component failed to start; the message carries the tail of its log."""


@dataclass(frozen=True)
class Component:
    name: str
    argv: tuple[str, ...]
    log: Path
    pid_file: Path


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log written)"
    return "\n".join(text[-lines:]) or "(log is empty)"


def start(component: Component, env: dict[str, str] | None = None) -> int:
    component.log.parent.mkdir(parents=True, exist_ok=True)
    component.pid_file.parent.mkdir(parents=True, exist_ok=True)
    executable = Path(component.argv[0])
    if executable.is_absolute() and not executable.exists():
        raise ComponentError(f"{component.name}: binary {executable} does not exist; run `make binaries`")
    with component.log.open("ab") as log:
        process = subprocess.Popen(
            component.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={"GOGC": GO_GC_PERCENT, **os.environ, **(env or {}), OWNER_ENV: _owner(component.pid_file)},
        )
    _wait_exec(process)
    record = {"pid": process.pid, "started": _start_time(process.pid), "argv0": component.argv[0],
              "argv": list(component.argv)}
    component.pid_file.write_text(json.dumps(record))
    return process.pid


def _wait_exec(process: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Popen returns while the kernel may still be setting up the new program, its environment not
    yet readable: wait until it is (or the process is gone), so that `_identify` sees OWNER_ENV."""
    deadline, pause = time.monotonic() + timeout_s, pauses(0.001)
    while not _environment(process.pid)[0] and process.poll() is None and time.monotonic() < deadline:
        time.sleep(next(pause))


def _owner(pid_file: Path) -> str:
    return str(pid_file.parent.absolute())


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, ...]."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19] if fields else None  # field 22 of stat: start time, fixed at fork


def _environment(pid: int) -> list[bytes]:
    """The process's environment ([] when it is not ours to read: another user's)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _identify(pid_file: Path) -> tuple[int | None, str]:
    """(pid, "") for a live process `start` started with this pid file; (None, why not) for another
    live process the file names; (None, "") when it names none (no file, a dead or reaped process)."""
    try:
        record = json.loads(pid_file.read_text())
        pid, started = record["pid"], record.get("started")
    except (OSError, ValueError, KeyError, TypeError):
        return None, ""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None, ""
    fields = _stat_fields(pid)
    if not fields or fields[0] == "Z":
        return None, ""
    if fields[19] != started:
        return None, f"pid {pid} is another process now: it started at another time than the recorded one"
    if fields[2] != str(pid):
        return None, f"pid {pid} does not lead its own process group, as every process `start` starts does"
    if f"{OWNER_ENV}={_owner(pid_file)}".encode() not in _environment(pid):
        return None, f"pid {pid} was not started by gpushare with this pid file (no {OWNER_ENV} naming {pid_file.parent})"
    return pid, ""


def recorded_pid(pid_file: Path) -> int | None:
    """The pid from a pid file, if that process is still one we started with it."""
    return _identify(pid_file)[0]


def foreign(pid_file: Path) -> str:
    """Why the live process a pid file names is not ours ("" when it is, or when none lives)."""
    return _identify(pid_file)[1]


def alive(pid_file: Path) -> bool:
    return recorded_pid(pid_file) is not None


def _runs(pid_file: Path) -> bool:
    """Whether the process a pid file records still runs: its pid, started at the recorded time, not a
    zombie. Unlike `alive` it does not read the environment, which is empty while the process is in
    an exec (a component started through `unshare ... sh -c 'exec ...'` execs twice)."""
    try:
        record = json.loads(pid_file.read_text())
        fields = _stat_fields(int(record["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return bool(fields) and fields[0] != "Z" and fields[19] == record.get("started")


def stop(pid_file: Path, grace_s: float = 10.0) -> bool:
    """Stop the process a pid file records, only if it is ours (`recorded_pid`); True if one was stopped."""
    pid = recorded_pid(pid_file)
    pid_file.unlink(missing_ok=True)
    if pid is None:
        return False
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        deadline, pause = time.monotonic() + wait, pauses(0.05)
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            fields = _stat_fields(pid)
            if not fields or fields[0] == "Z":
                return True
            time.sleep(next(pause))
    return True


def restart(name: str, pid_file: Path, log: Path) -> Component:
    """Stop the process a pid file records and start it again with the same command line."""
    try:
        argv = json.loads(pid_file.read_text())["argv"]
    except (OSError, ValueError, KeyError):
        raise ComponentError(f"{name} is not running (no usable pid file {pid_file})") from None
    if not alive(pid_file):
        raise ComponentError(f"{name} is not running (pid file {pid_file})")
    stop(pid_file)
    component = Component(name, tuple(argv), log, pid_file)
    start(component)
    return component


def wait_ready(component: Component, probe: Callable[[], bool], timeout_s: float) -> None:
    """Poll `probe` until it answers True; fail with the log tail if the process dies or time runs out."""
    deadline, pause = time.monotonic() + timeout_s, pauses(0.5)
    while time.monotonic() < deadline:
        if not _runs(component.pid_file):
            raise ComponentError(
                f"{component.name} exited during start-up. Last lines of {component.log}:\n{log_tail(component.log)}"
            )
        if probe():
            return
        time.sleep(next(pause))
    raise ComponentError(
        f"{component.name} was not ready after {timeout_s:.0f}s. Last lines of {component.log}:\n{log_tail(component.log)}"
    )


def stop_all(pid_files: Sequence[Path]) -> list[str]:
    """Stop components in reverse start order; returns the names stopped."""
    stopped = []
    for pid_file in reversed(pid_files):
        if stop(pid_file):
            stopped.append(pid_file.stem)
    return stopped
