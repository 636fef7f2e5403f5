"""Plain-text tables for command output."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]], width: int | None = None) -> str:
    """Columns padded to their widest line; a cell may hold several lines. With `width`, the last
    column wraps (continuations indented by two spaces, at least 20 wide) to fit lines in `width`."""
    cells = [[[str(h)] for h in headers]] + [[str(c).splitlines() or [""] for c in row] for row in rows]
    widths = [max(len(line) for row in cells for line in row[i]) for i in range(len(headers))]
    if width is not None:
        widths[-1] = min(widths[-1], max(width - sum(widths[:-1]) - 2 * (len(widths) - 1), 20))
        for row in cells:
            row[-1] = [part for line in row[-1] for part in wrap(line, widths[-1])]
    lines = []
    for row in cells:
        for k in range(max(len(cell) for cell in row)):
            parts = ((cell[k] if k < len(cell) else "").ljust(w) for cell, w in zip(row, widths))
            lines.append("  ".join(parts).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def wrap(line: str, width: int, indent: str = "  ") -> list[str]:
    """`line` broken at spaces into pieces of at most `width`, continuations indented."""
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [""]
