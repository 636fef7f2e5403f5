"""Where the runbooks write files on the control machine (ClusterPolicy backups, change records,
reports): one input, `gpushare_output_dir`, with a default that is never the directory a run
happens to start in; and how they write there, never through a symbolic link."""

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


# The rule for every directory the runbooks write into (reports/, backups/, or the one an input
# names): it is never a symbolic link, nor is any directory they create below it; the links in the
# path leading to it (gpushare_output_dir itself may be one) are resolved once. A directory that
# exists is used as it is (never chmodded); files are created new, never through a link.


class OutputDirError(OSError):
    """A directory the runbooks would write into is a symbolic link or cannot be created."""


def directory(variable: str, given: str, cwd: str) -> dict[str, str]:
    """{path, problem}: the directory the input `variable` names (`given`; a relative one from `cwd`,
    where ansible-playbook runs) as an absolute path, the links in its parents resolved, and why the
    runbooks cannot write into it ("" when they can)."""
    lexical = Path(os.path.normpath(Path(cwd, given)))
    where = Path(os.path.realpath(lexical.parent), lexical.name) if lexical.name else lexical
    if where.is_symlink():
        target = os.path.realpath(where)
        return {"path": str(where), "problem": (
            f"{variable} {given} is a symbolic link (to {target}): the runbooks write only into a real directory, "
            f"never through a link; set {variable} to {target} or remove the link")}
    existing = next(p for p in (where, *where.parents) if p.exists())
    if not existing.is_dir():
        problem = "is not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = "is not writable by this user"
    else:
        return {"path": str(where), "problem": ""}
    said = (f"{variable} {given} {problem}" if existing == where
            else f"{variable} {given} cannot be created: {existing} {problem}")
    return {"path": str(where), "problem": f"{said}; set {variable} to a directory this user can write"}


def refuse_link(path: Path) -> None:
    """OutputDirError when `path` is a symbolic link."""
    if path.is_symlink():
        raise OutputDirError(f"{path} is a symbolic link (to {os.path.realpath(path)}): the runbooks write only into "
                             "a real directory, never through a link; remove the link or name the directory it points to")


def make_dir(path: Path, mode: int) -> None:
    """`path` and its missing parents created with `mode` (an existing directory keeps its mode);
    OutputDirError when it is a symbolic link or cannot be created."""
    refuse_link(path)
    missing = []
    for part in (path, *path.parents):
        if part.is_symlink() or part.exists():
            break
        missing.append(part)
    try:
        for part in reversed(missing):
            os.mkdir(part, mode)  # never through a link: an existing name, link or not, fails
    except OSError as err:
        raise OutputDirError(f"cannot create {path}: {err.strerror} ({err.filename})") from None
    refuse_link(path)
    if not path.is_dir():
        raise OutputDirError(f"{path} is not a directory")


def write_new_file(dest: Path, content: str, mode: int = 0o600, directory_mode: int = 0o700) -> None:
    """Create `dest` with `content` (its directory first, with `directory_mode`, when missing); never
    through a link, never over an existing file (OutputDirError, FileExistsError)."""
    make_dir(dest.parent, directory_mode)
    descriptor = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(content)
