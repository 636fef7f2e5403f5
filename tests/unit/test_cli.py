"""The `gpushare` command line: --version, readable errors for a missing subcommand, help for every
option, and `sim up` / `sim status` on a cluster that is already running (no cluster needed: the
running cluster is a process recorded in the state directory, as `sim up` records its components)."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushare import __version__
from gpushare.cli import build_parser, main
from gpushare_testbed.controlplane import COMPONENTS, StateDir, fleet_digest
from gpushare_testbed.fleet import default_fleet_path, load_fleet
from gpushare_testbed.processes import Component, start, stop


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpushare {__version__}"


@pytest.mark.parametrize(("argv", "commands"), [
    ([], "sim, gate, queue, baseline, rbac"),
    (["rbac"], "render"),
    (["sim"], "up, down, status, restart, kubeconfig, gpu-operator, dcgm-exporter, prometheus"),
    (["queue"], "status"),
])
def test_a_missing_subcommand_lists_the_subcommands(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                    commands: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    prog = " ".join(["gpushare", *argv])
    assert f"{prog}: error: choose a command: {commands} (see `{prog} --help`)" in err
    assert "required" not in err


def parsers(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ("gate",)) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if name not in skip:
                    yield from parsers(child, skip)


def test_every_option_of_gpushare_sim_and_queue_has_help() -> None:
    missing = [f"{p.prog} {'/'.join(a.option_strings)}" for p in parsers(build_parser()) for a in p._actions
               if a.option_strings and not a.help]
    assert missing == []


@pytest.fixture
def running_cluster(tmp_path: Path) -> Iterator[StateDir]:
    """A state directory as `sim up` leaves it, its components played by one live process."""
    state = StateDir(tmp_path / "state")
    state.root.mkdir()
    state.mark()
    sleeper = Component("etcd", (sys.executable, "-c", "import time; time.sleep(120)"), state.log("etcd"),
                        state.pid_file("etcd"))
    start(sleeper)
    for name in COMPONENTS[1:]:
        state.pid_file(name).write_text(state.pid_file("etcd").read_text())
    state.info.write_text(json.dumps({"components": list(COMPONENTS),
                                      "fleet": {"source": "default", "digest": fleet_digest(load_fleet())}}))
    yield state
    stop(state.pid_file("etcd"))


def other_fleet(tmp_path: Path) -> Path:
    path = tmp_path / "other.yaml"
    path.write_text("nodes:\n  - name: gpu-node\n    gpus: 2\n    product: NVIDIA-H100-80GB-HBM3\n")
    return path


def test_up_with_another_fleet_on_a_running_cluster_refuses_and_says_how_to_restart(
        running_cluster: StateDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = other_fleet(tmp_path)
    assert main(["sim", "up", "--fleet", str(fleet), "--state-dir", str(running_cluster.root)]) == 1
    err = capsys.readouterr().err
    assert f"is already running and it runs the fleet default, not {fleet}" in err
    state = f"--state-dir {running_cluster.root}"
    assert f"gpushare sim down {state} && gpushare sim up --fleet {fleet} {state}" in err


@pytest.mark.parametrize("fleet", [None, "default file"])
def test_up_with_the_same_fleet_is_idempotent(running_cluster: StateDir, capsys: pytest.CaptureFixture[str],
                                              fleet: str | None) -> None:
    extra = ["--fleet", str(default_fleet_path())] if fleet else []
    assert main(["sim", "up", *extra, "--state-dir", str(running_cluster.root)]) == 0
    assert "embedded cluster already running" in capsys.readouterr().out


def test_up_without_kueue_on_a_cluster_running_it_refuses(running_cluster: StateDir,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "up", "--without", "kueue", "--state-dir", str(running_cluster.root)]) == 1
    err = capsys.readouterr().err
    assert ("it runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, gpu-operator-sim, "
            "dcgm-exporter, kueue") in err
    assert "gpushare sim up --without kueue" in err


def test_up_with_a_broken_fleet_on_a_running_cluster_is_bad_input(running_cluster: StateDir, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodes: 3\n")
    assert main(["sim", "up", "--fleet", str(broken), "--state-dir", str(running_cluster.root)]) == 2
    assert "expected a mapping with a `nodes:` list" in capsys.readouterr().err


def test_an_unknown_component_to_leave_out_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sim", "up", "--without", "etcd"])
    assert "argument --without: invalid choice: 'etcd' (choose from 'gpu-operator-sim', 'kueue')" in capsys.readouterr().err


def test_status_shows_a_dead_component_with_its_log_tail(running_cluster: StateDir,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    running_cluster.pid_file("kueue").write_text(json.dumps({"pid": 1, "started": "0", "argv0": "kueue"}))
    running_cluster.log("kueue").write_text('{"level":"error","msg":"Unable to start manager"}\n')
    assert main(["sim", "status", "--state-dir", str(running_cluster.root)]) == 1
    out = capsys.readouterr().out
    assert any(line.split()[:2] == ["kueue", "stopped"] for line in out.splitlines())
    assert f"kueue has stopped. Last lines of {running_cluster.log('kueue')}:\n" in out
    assert "Unable to start manager" in out
    assert "restart it with `gpushare sim down` then `gpushare sim up`" in out


# ---- `sim down` and `sim up` touch only a directory `up` created ------------------------------------
@pytest.mark.parametrize("command", ["down", "up"])
# {"components": []}: a cluster.json whose components all run (there are none), so the directory looked running
@pytest.mark.parametrize("info", ["{}", '{"components": []}'])
def test_a_directory_up_did_not_create_is_left_intact(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      command: str, info: str) -> None:
    foreign = tmp_path / "home"
    (foreign / "notes").mkdir(parents=True)
    (foreign / "notes" / "todo.txt").write_text("keep me\n")
    (foreign / "cluster.json").write_text(info)  # looks like a state directory, but up did not mark it
    assert main(["sim", command, "--state-dir", str(foreign)]) == 1
    err = capsys.readouterr().err
    assert f"{foreign} is not a state directory of `gpushare sim up` (it has no .gpushare-sim-state file)" in err
    assert (foreign / "notes" / "todo.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in foreign.iterdir()) == ["cluster.json", "notes"]


def test_down_removes_a_directory_up_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = StateDir(tmp_path / "state")
    state.root.mkdir()
    state.mark()
    (state.root / "logs").mkdir()
    assert main(["sim", "down", "--state-dir", str(state.root)]) == 0
    assert not state.root.exists()
    assert "nothing was running" in capsys.readouterr().out


def test_down_of_a_missing_directory_does_nothing(tmp_path: Path) -> None:
    assert main(["sim", "down", "--state-dir", str(tmp_path / "absent")]) == 0


@pytest.mark.parametrize("command", ["down", "up"])
def test_a_marker_copied_from_another_state_directory_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    other, state = StateDir(tmp_path / "cluster"), StateDir(tmp_path / "home")
    other.root.mkdir()
    other.mark()
    state.root.mkdir()
    shutil.copy(other.marker, state.marker)
    (state.root / "thesis.tex").write_text("keep me\n")
    state.info.write_text('{"components": []}')
    assert main(["sim", command, "--state-dir", str(state.root)]) == 1
    err = capsys.readouterr().err
    assert (f"{state.root} is not a state directory of `gpushare sim up` (its .gpushare-sim-state file was not "
            "written by `up` for this directory)") in err
    assert (state.root / "thesis.tex").read_text() == "keep me\n"


def test_down_removes_its_own_directory_with_what_others_wrote_into_it(tmp_path: Path) -> None:
    """The test harness logs its runs into the state directory (tests/support/ansible.py)."""
    state = StateDir(tmp_path / "home")
    state.root.mkdir()
    state.mark()
    (state.root / "runbook-runs.jsonl").write_text("{}\n")
    assert main(["sim", "down", "--state-dir", str(state.root)]) == 0
    assert not state.root.exists()


def test_down_leaves_alone_a_live_process_a_pid_file_names_but_up_did_not_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pid file crafted from /proc (pid, start time, command line) of a process that leads its own
    group, as the components do: `down` names it and does not signal it."""
    unrelated = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        state = StateDir(tmp_path / "state")
        state.root.mkdir()
        state.mark()
        state.pid_file("etcd").parent.mkdir()
        started = Path(f"/proc/{unrelated.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        state.pid_file("etcd").write_text(json.dumps({"pid": unrelated.pid, "started": started, "argv0": "sleep",
                                                      "argv": ["sleep", "60"]}))
        assert main(["sim", "down", "--state-dir", str(state.root)]) == 0
        captured = capsys.readouterr()
        assert (f"left alone, not a process `gpushare sim up` started here: etcd: pid {unrelated.pid} was not "
                "started by gpushare with this pid file") in captured.err
        assert "nothing was running" in captured.out
        assert unrelated.poll() is None, "the unrelated process was signalled"
        assert not state.root.exists()
    finally:
        unrelated.kill()
        unrelated.wait()
