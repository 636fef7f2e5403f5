"""Processes on this machine as /proc tells them (Linux): whether one runs, when it started (a pid
and its start tell a process from a later one given the same pid), and its command line. Light on
purpose: the lock's renewer imports it at start-up, and nothing else until it must talk to the API
server."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs; one that ended but is not yet reaped (a zombie) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _proc_stat(pid)[:1] != ["Z"]


def process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot); empty where it cannot be told."""
    fields = _proc_stat(pid)
    return fields[19] if len(fields) > 19 else ""


def command_line(pid: int) -> list[str]:
    """The arguments process `pid` was started with; [] when it is gone (or a kernel thread)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat from its state on (the command name before it may hold spaces); [] without it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return []
