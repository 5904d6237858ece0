"""Plain-text tables that fit the width (``$COLUMNS``, else the terminal's, else 80): columns
side by side, cells wrapped inside their column (after a space, ``_``, ``/`` or ``-``) when the
whole would be wider; a table with more columns than can fit is wrapped by column, in blocks that
repeat its first (key) columns. Numbers are never broken. Nothing is cut here; a caller that
would rather cut a long name (``trek runs list``'s models) does so with :func:`shorten`.
A long key can also stand on a line of its own above its row (``above``), the row's cells
indented beneath it."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from typing import Any

__all__ = ["width", "render", "frame", "shorten", "fits", "legend", "ELLIPSIS"]

GAP = "  "
#: How far the cells of a row are indented below a key printed above them.
INDENT = "  "
#: The mark :func:`shorten` puts where it cut.
ELLIPSIS = "\u2026"
#: The narrowest a text column is made before the table is wrapped by column instead.
NARROWEST = 18
_BREAK = re.compile(r"(?<=[ _/\-])")


def width() -> int:
    """The output width: ``$COLUMNS``, else the terminal's, else 80."""
    return shutil.get_terminal_size((80, 24)).columns


def _wrap(text: str, w: int) -> list[str]:
    """``text`` in lines of at most ``w`` characters, broken after a space, ``_``, ``/`` or
    ``-`` where it can be, else inside a word."""
    lines: list[str] = []
    for para in text.splitlines() or [""]:
        line = ""
        for piece in _BREAK.split(para):
            while len(piece) > w:
                if line:
                    lines.append(line.rstrip())
                    line = ""
                lines.append(piece[:w])
                piece = piece[w:]
            if len((line + piece).rstrip()) > w:
                lines.append(line.rstrip())
                line = piece.lstrip()
            else:
                line += piece
        lines.append(line.rstrip())
    return lines or [""]


def _floor(cells: list[list[str]], i: int, numeric: bool) -> int:
    """How narrow column ``i`` may get: its longest header piece, its longest number."""
    head = max(len(p.strip()) for p in _BREAK.split(cells[0][i]) or [""])
    if numeric:
        return max([head, *(len(row[i]) for row in cells[1:])])
    natural = max(len(line) for row in cells for line in row[i].splitlines() or [""])
    return max(head if head <= NARROWEST else NARROWEST, min(natural, NARROWEST))


def _widths(cells: list[list[str]], cols: list[int], limit: int, numeric: set[int]) -> list[int] | None:
    """Widths of ``cols`` that fit ``limit`` (the widest narrowed first), or None when they cannot."""
    natural = {i: max(len(line) for row in cells for line in row[i].splitlines() or [""]) for i in cols}
    floor = {i: min(natural[i], _floor(cells, i, i in numeric)) for i in cols}
    out = dict(natural)
    room = limit - len(GAP) * (len(cols) - 1)
    if sum(floor.values()) > room:
        return None
    for i in (j for j in cols if j in numeric):  # number columns first: only their headers wrap
        out[i] -= min(out[i] - floor[i], max(0, sum(out.values()) - room))
    while sum(out.values()) > room:
        i = max((j for j in cols if out[j] > floor[j]), key=lambda j: out[j])
        out[i] -= 1
    return [out[i] for i in cols]


def shorten(text: str, most: int) -> str:
    """``text`` when it has at most ``most`` characters, else its first ``most - 1`` and an ellipsis."""
    return text if len(text) <= most else text[: max(most - 1, 0)] + ELLIPSIS


def fits(headers: Sequence[str], rows: Sequence[Sequence[Any]], limit: int | None = None) -> bool:
    """Whether the table fits ``limit`` (default :func:`width`) with every cell on one line."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    natural = [max(len(line) for row in cells for line in row[i].splitlines() or [""]) for i in range(len(headers))]
    return sum(natural) + len(GAP) * (len(headers) - 1) <= (limit or width())


def legend(names: Sequence[tuple[str, str]], *, limit: int | None = None) -> str:
    """A key to a table's column names, ``name: meaning; ...``, as lines no wider than ``limit``
    (default :func:`width`), broken between entries (inside one only when it alone is wider)."""
    limit = limit or width()
    lines: list[str] = []
    line = ""
    for i, (name, meaning) in enumerate(names):
        entry = f"{name}: {meaning}" + (";" if i < len(names) - 1 else "")
        if line and len(line) + 1 + len(entry) > limit:
            lines.append(line)
            line = ""
        line = f"{line} {entry}" if line else entry
        if len(line) > limit:
            *whole, line = _wrap(line, limit)
            lines += whole
    return "\n".join([*lines, line])


def _block(cells: list[list[str]], cols: list[int], sizes: list[int], right: set[int],
           above: Sequence[str] | None = None) -> list[str]:
    lines = []
    for r, row in enumerate(cells):
        if above is not None:
            lines.append(above[r])
        wrapped = [_wrap(row[i], w) for i, w in zip(cols, sizes, strict=True)]
        for k in range(max(len(w) for w in wrapped)):
            parts = []
            for i, w, size in zip(cols, wrapped, sizes, strict=True):
                text = w[k] if k < len(w) else ""
                parts.append(text.rjust(size) if i in right and r else text.ljust(size))
            lines.append((INDENT if above is not None else "") + GAP.join(parts).rstrip())
        if r == 0:
            lines.append((INDENT if above is not None else "") + GAP.join("-" * s for s in sizes))
    return lines


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, limit: int | None = None,
           right: Sequence[int] = (), keys: int = 1, above: Sequence[str] | None = None,
           whole: Sequence[int] = ()) -> str:
    """``rows`` under ``headers`` as text no wider than ``limit`` (default :func:`width`): cells
    wrap within their column; columns of index in ``right`` are numbers (right-aligned, never
    broken). When the columns cannot fit side by side, the table comes in blocks of columns, each
    led by the first ``keys`` columns.

    Cells of the columns in ``whole`` are never broken either (left-aligned: names already cut
    to size). ``above``, one line for the header and one per row, puts each on a line of its own
    above its row (never wrapped: a run folder to copy), and indents the cells by :data:`INDENT`."""
    limit = limit or width()
    if above is not None:
        if len(above) != len(rows) + 1:
            raise ValueError(f"above needs {len(rows) + 1} lines (the header's and one per row), got {len(above)}")
        limit -= len(INDENT)
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    every, numeric, unbroken = list(range(len(headers))), set(right), {*right, *whole}
    sizes = _widths(cells, every, limit, unbroken)
    if sizes is not None or len(every) <= keys + 1:
        return "\n".join(_block(cells, every, sizes or [len(c) for c in cells[0]], numeric, above))
    lead, blocks, group = every[:keys], [], []
    for i in every[keys:]:
        if group and _widths(cells, [*lead, *group, i], limit, unbroken) is None:
            blocks.append(group)
            group = []
        group.append(i)
    blocks.append(group)
    out: list[str] = []
    for group in blocks:
        cols = [*lead, *group]
        sizes = _widths(cells, cols, limit, unbroken) or [max(len(row[i]) for row in cells) for i in cols]
        out += [*([""] if out else []), *_block(cells, cols, sizes, numeric, above)]
    return "\n".join(out)


def frame(df: Any, *, index: bool = True, float_format: Any = None, limit: int | None = None) -> str:
    """A DataFrame as :func:`render` text: pandas' own formatting of each numeric column (or
    ``float_format`` for float columns), the index as the first column(s) when ``index`` (the key
    columns of a table wrapped by column; else the first column), numbers right-aligned."""
    import pandas as pd

    def column(s: Any) -> list[str]:
        if not len(s):
            return []
        if float_format is not None and pd.api.types.is_float_dtype(s):
            return [float_format(v) for v in s]
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            return [v.strip() for v in s.to_string(index=False, header=False).splitlines()]
        return ["" if v is None else str(v) for v in s.astype(object)]

    keys = df.index.nlevels if index else 1
    shown = df.reset_index() if index else df
    names = ["" if (index and i < keys and str(c) in ("index", "level_0")) else str(c)
             for i, c in enumerate(shown.columns)]
    cols = [column(shown.iloc[:, i]) for i in range(shown.shape[1])]
    right = [i for i in range(shown.shape[1]) if pd.api.types.is_numeric_dtype(shown.iloc[:, i])
             and not pd.api.types.is_bool_dtype(shown.iloc[:, i])]
    rows = [list(r) for r in zip(*cols, strict=True)] if cols and cols[0] else []
    return render(names, rows, limit=limit, right=right, keys=keys)
