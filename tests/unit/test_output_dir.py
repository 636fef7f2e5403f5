"""Writing under the output directory (gpushare.output_dir): never into or through a symbolic link,
never chmodding a directory the runbooks did not create. The attack: a `reports` link in a shared
output directory, pointing at someone else's directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpushare.output_dir import OutputDirError, make_dir, write_new_file
from gpushare.plugins.filters import FILTERS


@pytest.fixture
def linked_reports(tmp_path: Path) -> tuple[Path, Path]:
    """(the shared output directory, the directory its `reports` link points at: mode 0700, empty)."""
    shared, victim = tmp_path / "shared", tmp_path / "victim"
    shared.mkdir()
    victim.mkdir(mode=0o700)
    victim.chmod(0o700)
    (shared / "reports").symlink_to(victim)
    return shared, victim


def untouched(victim: Path) -> bool:
    return victim.stat().st_mode & 0o777 == 0o700 and not any(victim.iterdir())


def test_a_linked_reports_directory_is_refused_before_anything_is_written(linked_reports: tuple[Path, Path]) -> None:
    shared, victim = linked_reports
    checked = FILTERS["gpushare_output_directory"]("reports", str(shared), "baseline_report_dir")
    assert checked == {"path": str(shared / "reports"), "problem": (
        f"baseline_report_dir reports is a symbolic link (to {victim}): the runbooks write only into a real "
        f"directory, never through a link; set baseline_report_dir to {victim} or remove the link")}
    with pytest.raises(OutputDirError, match=f"{shared / 'reports'} is a symbolic link"):
        write_new_file(shared / "reports" / "baseline.md", "report", 0o640, 0o750)
    assert untouched(victim)


def test_links_in_the_path_above_are_resolved_once(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "output").symlink_to(tmp_path / "real")  # gpushare_output_dir given as a link
    checked = FILTERS["gpushare_output_directory"](str(tmp_path / "output" / "reports"), "/", "change_record_dir")
    assert checked == {"path": str(tmp_path / "real" / "reports"), "problem": ""}


def test_an_existing_directory_keeps_its_mode_and_a_new_one_gets_the_mode_asked(tmp_path: Path) -> None:
    existing = tmp_path / "reports"
    existing.mkdir(mode=0o700)
    existing.chmod(0o700)
    write_new_file(existing / "new" / "record.md", "record", 0o600, 0o750)
    assert existing.stat().st_mode & 0o777 == 0o700
    assert (existing / "new").stat().st_mode & 0o777 == 0o750 & ~current_umask()
    assert (existing / "new" / "record.md").read_text() == "record"
    with pytest.raises(FileExistsError):
        write_new_file(existing / "new" / "record.md", "again")


def test_a_link_where_a_directory_is_to_be_created_is_refused(tmp_path: Path) -> None:
    (tmp_path / "victim").mkdir()
    (tmp_path / "baseline-20260101T000000Z").symlink_to(tmp_path / "victim")  # a plots directory, planted
    with pytest.raises(OutputDirError, match="is a symbolic link"):
        make_dir(tmp_path / "baseline-20260101T000000Z", 0o750)


def test_a_file_is_not_written_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "victim.md").write_text("theirs")
    (tmp_path / "record.md").symlink_to(tmp_path / "victim.md")
    with pytest.raises(FileExistsError):
        write_new_file(tmp_path / "record.md", "ours")
    assert (tmp_path / "victim.md").read_text() == "theirs"


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_gpushare_backup_into_a_linked_reports_directory_fails_and_writes_nothing(
        linked_reports: tuple[Path, Path], tmp_path: Path) -> None:
    """The runbooks' writer (backups, change records, MIG records, the baseline report), as a task."""
    shared, victim = linked_reports
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Write a record", "gpushare.gpu_sharing.gpushare_backup": {
            "content": "record", "dest": str(shared / "reports" / "record.md")}}]}]))
    (tmp_path / "ansible.cfg").write_text(f"[defaults]\ninterpreter_python = {sys.executable}\n")
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                          "play.yml"], cwd=tmp_path, env={**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{shared / 'reports'} is a symbolic link (to {victim})" in run.stdout
    assert untouched(victim)
