"""Start-up orchestration: pid files that identify our processes, bounded readiness waits that
report the component's log, and no stray process after a failed start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpushare_testbed.controlplane import Launcher, StateDir, free_port
from gpushare_testbed.fleet import load_fleet
from gpushare_testbed.processes import (
    Component,
    ComponentError,
    alive,
    foreign,
    recorded_pid,
    start,
    stop,
    stop_all,
    wait_ready,
)


def sleeper(tmp_path: Path, name: str = "sleeper", code: str = "import time; time.sleep(60)") -> Component:
    return Component(name, (sys.executable, "-c", code), tmp_path / f"{name}.log", tmp_path / f"{name}.pid")


def test_started_process_is_tracked_and_stopped(tmp_path: Path) -> None:
    component = sleeper(tmp_path)
    pid = start(component)
    assert alive(component.pid_file) and recorded_pid(component.pid_file) == pid
    assert stop(component.pid_file)
    assert not alive(component.pid_file) and not component.pid_file.exists()


def test_go_components_get_a_gc_target_the_callers_environment_overrides(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def gogc(name: str) -> bytes:
        component = sleeper(tmp_path, name)
        environment = Path(f"/proc/{start(component)}/environ").read_bytes().split(b"\0")
        stop(component.pid_file)
        return next(entry for entry in environment if entry.startswith(b"GOGC="))

    monkeypatch.delenv("GOGC", raising=False)
    assert gogc("default") == b"GOGC=400"
    monkeypatch.setenv("GOGC", "100")
    assert gogc("chosen") == b"GOGC=100"


def test_a_reused_pid_is_not_ours(tmp_path: Path) -> None:
    pid_file = tmp_path / "other.pid"
    # Our own pid with a wrong start time stands for a pid the kernel gave to another process.
    pid_file.write_text(f'{{"pid": {os.getpid()}, "started": "1", "argv0": "x"}}')
    assert recorded_pid(pid_file) is None
    assert not stop(pid_file)


def test_component_dying_at_start_reports_its_log(tmp_path: Path) -> None:
    component = sleeper(tmp_path, "crasher", "import sys; print('listen tcp: address already in use'); sys.exit(1)")
    start(component)
    with pytest.raises(ComponentError, match="crasher exited during start-up(.|\n)*address already in use"):
        wait_ready(component, lambda: False, timeout_s=10)


def test_a_component_in_the_middle_of_an_exec_has_not_exited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a process execs, /proc/PID/environ reads empty (Kueue starts through `unshare ... sh -c
    'exec ...'`, two execs): the readiness wait must not call that an exit. make test once failed so
    on restarting Kueue under load ("kueue exited during start-up" with none of its own log lines)."""
    component = sleeper(tmp_path)
    start(component)
    monkeypatch.setattr("gpushare_testbed.processes._environment", lambda pid: [])
    answers = iter([False, True])
    try:
        wait_ready(component, lambda: next(answers), timeout_s=10)
    finally:
        monkeypatch.undo()
        stop(component.pid_file)


def test_readiness_timeout_names_the_component(tmp_path: Path) -> None:
    component = sleeper(tmp_path)
    start(component)
    try:
        with pytest.raises(ComponentError, match="sleeper was not ready after 0s"):
            wait_ready(component, lambda: False, timeout_s=0.3)
    finally:
        stop_all([component.pid_file])


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    component = Component("etcd", ("/nonexistent/etcd",), tmp_path / "etcd.log", tmp_path / "etcd.pid")
    with pytest.raises(ComponentError, match="binary /nonexistent/etcd does not exist; run `make binaries`"):
        start(component)


def test_failed_launch_leaves_no_stray_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """etcd starts (serving TLS with the certificate it is given, as the real one), kube-apiserver dies
    at once: the launcher stops etcd before reporting."""
    bins = tmp_path / "bin"
    bins.mkdir()
    for name, body in {
        "etcd": f"#!{sys.executable}\nimport http.server,sys\n"
                "port=int([a for a in sys.argv if a.startswith('--listen-client-urls=')][0].rsplit(':',1)[1])\n"
                "arg=lambda f: [a for a in sys.argv if a.startswith(f)][0].split('=',1)[1]\n"
                "class H(http.server.BaseHTTPRequestHandler):\n"
                "    def do_GET(self): self.send_response(200); self.end_headers()\n"
                "import ssl\nserver=http.server.HTTPServer(('127.0.0.1',port),H)\n"
                "tls=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); tls.load_cert_chain(arg('--cert-file='), arg('--key-file='))\n"
                "server.socket=tls.wrap_socket(server.socket, server_side=True)\nserver.serve_forever()\n",
        "kube-apiserver": f"#!{sys.executable}\nimport sys\nprint('error: bad flag'); sys.exit(2)\n",
    }.items():
        (bins / name).write_text(body)
        (bins / name).chmod(0o755)
    for name in ("kube-controller-manager", "kube-scheduler", "kubectl", "kwok"):
        (bins / name).write_text("#!/bin/sh\nexit 1\n")
        (bins / name).chmod(0o755)
    monkeypatch.setenv("GPUSHARE_BIN_DIR", str(bins))
    state = StateDir(tmp_path / "state")
    state.root.mkdir()
    launcher = Launcher(state, load_fleet(), "gpu-operator", None)
    with pytest.raises(ComponentError, match="kube-apiserver exited during start-up(.|\n)*bad flag"):
        launcher.up()
    assert [p.stem for p in launcher.started] == ["etcd", "kube-apiserver"]
    assert not any(alive(p) for p in state.pid_files())


def test_busy_apiserver_port_is_refused_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setenv("GPUSHARE_BIN_DIR", str(tmp_path))
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"):
        (tmp_path / name).write_text("")
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        state = StateDir(tmp_path / "state")
        state.root.mkdir()
        launcher = Launcher(state, load_fleet(), "gpu-operator", port)
        with pytest.raises(ComponentError, match=f"port {port} on 127.0.0.1 is already in use"):
            launcher.up()
        assert launcher.started == []


def test_a_pid_file_copied_from_proc_does_not_make_a_process_ours(tmp_path: Path) -> None:
    """Start time and command line can be read from /proc by anyone: they do not prove that `start`
    started the process (its environment does)."""
    unrelated = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        pid_file = tmp_path / "etcd.pid"
        started = Path(f"/proc/{unrelated.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        pid_file.write_text(json.dumps({"pid": unrelated.pid, "started": started, "argv0": "sleep", "argv": ["sleep", "60"]}))
        assert recorded_pid(pid_file) is None and not alive(pid_file)
        assert foreign(pid_file) == (f"pid {unrelated.pid} was not started by gpushare with this pid file "
                                     f"(no GPUSHARE_PID_DIR naming {tmp_path})")
        assert not stop(pid_file)
        assert unrelated.poll() is None
    finally:
        unrelated.kill()
        unrelated.wait()
