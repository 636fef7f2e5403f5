"""Where the runbooks write files on the control machine (ClusterPolicy backups, change records,
reports): one input, `gpushare_output_dir`, with a default that is never the directory a run
happens to start in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# ansible-runner (and so AWX) sets it to the run's artifact directory (ansible_runner/config/_base.py):
# files written there come back with the run's artifacts.
RUNNER_ARTIFACTS = "AWX_ISOLATED_DATA_DIR"


def output_dir(given: str | None, environ: Mapping[str, str], cwd: str) -> Path:
    """The directory a run writes its files under: `given` (a relative one from `cwd`, the directory
    ansible-playbook runs in); else the ansible-runner run's artifact directory; else
    $XDG_DATA_HOME/gpushare (~/.local/share/gpushare), the same for every run of this user."""
    if given:
        return Path(cwd, Path(given).expanduser())
    if environ.get(RUNNER_ARTIFACTS):
        return Path(environ[RUNNER_ARTIFACTS])
    data_home = environ.get("XDG_DATA_HOME") or str(Path(environ.get("HOME") or Path.home(), ".local", "share"))
    return Path(data_home, "gpushare")


def output_path(given: str | None, subdir: str) -> str:
    """`subdir` of the output directory, absolute, for this process (the filter gpushare_output_path)."""
    return str(output_dir(given, os.environ, os.environ.get("PWD") or os.getcwd()) / subdir)
