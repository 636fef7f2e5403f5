"""The short form of a `--diff` entry, what the quiet stdout callback prints (`-v` prints Ansible's
usual diff of the whole object instead): a header line per object (`+` created, `-` deleted, `~`
changed), then one line per field that changed, its path dotted (`metadata.labels.gpu-mode`), text
of several lines as a block. A runbook's own bookkeeping (its run record, a backup, its lock) is one
line: what it is and its size, or the fields it changes."""

from __future__ import annotations

import difflib
from typing import Any

import yaml

# Shown of a bookkeeping write that changes fields: this many of their paths, then how many more.
SHOWN_FIELDS = 3
_ABSENT = object()


def size(text: str) -> str:
    count = len(text.encode())
    return f"{count} B" if count < 1024 else f"{round(count / 1024)} KiB"


def changed_fields(before: Any, after: Any, path: tuple[str, ...] = ()) -> list[tuple[str, Any, Any]]:
    """(dotted path, before, after) of each leaf that differs; a mapping on both sides (or on one, the
    other absent) is followed down to its leaves. An absent side is `_ABSENT`."""
    if before == after:
        return []
    if _mapping(before) and _mapping(after):
        keys = sorted({*_keys(before), *_keys(after)}, key=str)
        leaves = [leaf for key in keys for leaf in changed_fields(_get(before, key), _get(after, key), (*path, str(key)))]
        if leaves:
            return leaves
    return [(".".join(path), before, after)]


def _mapping(value: Any) -> bool:
    return value is _ABSENT or isinstance(value, dict)


def _keys(value: Any) -> list[Any]:
    return list(value) if isinstance(value, dict) else []


def _get(value: Any, key: Any) -> Any:
    return value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT


def field_lines(before: dict[str, Any] | None, after: dict[str, Any] | None, skip: tuple[str, ...] = ()) -> list[str]:
    """One line per changed field (more for text of several lines), indented under an object's header."""
    lines: list[str] = []
    for path, old, new in changed_fields(before or _ABSENT, after or _ABSENT):
        if path in skip:
            continue
        if new is _ABSENT:
            lines += _leaf("-", path, old)
        elif old is _ABSENT:
            lines += _leaf("+", path, new)
        elif _multiline(old) and _multiline(new):
            lines.append(f"  ~ {path}:")
            lines += [f"  {line[0]}     {line[2:]}" for line in difflib.ndiff(old.splitlines(), new.splitlines())
                      if not line.startswith("?")]
        else:
            lines += _leaf("-", path, old) + _leaf("+", path, new)
    return lines


def _multiline(value: Any) -> bool:
    return isinstance(value, str) and "\n" in value


def _leaf(sign: str, path: str, value: Any) -> list[str]:
    if _multiline(value):
        block = "|" if value.endswith("\n") else "|-"
        return [f"  {sign} {path}: {block}", *(f"  {sign}     {line}" for line in value.splitlines())]
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), sort_keys=True).strip()
    return [f"  {sign} {path}: {text.removesuffix('...').strip()}"]


def object_lines(title: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """An object's header and its changed fields; of a created or deleted object every field but
    those its header names."""
    sign = "+" if not before else "-" if not after else "~"
    return [f"{sign} {title}", *field_lines(before, after, skip=("kind", "metadata.name", "metadata.namespace"))]


def bookkeeping_line(title: str, what: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """One line for a write of the runbooks' own bookkeeping: created (with its size), deleted, or the
    paths of the fields it changes."""
    if not before:
        return f"+ {title} ({what}, {size(yaml.safe_dump(after, sort_keys=True))})"
    if not after:
        return f"- {title} ({what})"
    paths = [path for path, _, _ in changed_fields(before, after)]
    more = f" and {len(paths) - SHOWN_FIELDS} more" if len(paths) > SHOWN_FIELDS else ""
    return f"~ {title} ({what}: {', '.join(paths[:SHOWN_FIELDS])}{more})"
