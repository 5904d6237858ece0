"""Plain-text tables that fit the terminal: columns side by side, cells wrapped inside their
column when the whole would be wider than the width (``$COLUMNS``, else the terminal's, else 80),
never cut and never hard-wrapped by the terminal."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from typing import Any

__all__ = ["width", "render"]

GAP = "  "
#: The narrowest a column is made to fit the width.
NARROWEST = 8


def width() -> int:
    """The output width: ``$COLUMNS``, else the terminal's, else 80."""
    return shutil.get_terminal_size((80, 24)).columns


def _widths(cells: list[list[str]], limit: int) -> list[int]:
    """Column widths that fit ``limit``: the natural ones, the widest column narrowed first, none
    below :data:`NARROWEST` characters (a table of more columns than fit is left wider)."""
    natural = [max(len(line) for row in cells for line in row[i].splitlines() or [""]) for i in range(len(cells[0]))]
    floor = [min(n, NARROWEST) for n in natural]
    out = list(natural)
    while sum(out) + len(GAP) * (len(out) - 1) > limit:
        wide = [i for i in range(len(out)) if out[i] > floor[i]]
        if not wide:
            break
        i = max(wide, key=lambda j: out[j])
        out[i] -= 1
    return out


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, limit: int | None = None,
           right: Sequence[int] = ()) -> str:
    """``rows`` under ``headers`` as text no wider than ``limit`` (default :func:`width`): cells
    wrap within their column; columns of index in ``right`` are right-aligned."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    sizes = _widths(cells, limit or width())
    lines = []
    for r, row in enumerate(cells):
        wrapped = [textwrap.wrap(c, w, break_on_hyphens=False) or [""] for c, w in zip(row, sizes, strict=True)]
        for k in range(max(len(w) for w in wrapped)):
            parts = []
            for i, w in enumerate(wrapped):
                text = w[k] if k < len(w) else ""
                parts.append(text.rjust(sizes[i]) if i in right and r else text.ljust(sizes[i]))
            lines.append(GAP.join(parts).rstrip())
        if r == 0:
            lines.append(GAP.join("-" * s for s in sizes))
    return "\n".join(lines)
