"""Tables as CSV and LaTeX: :func:`save_table` writes both, :func:`to_latex` renders through
pandas' Styler (``DataFrame.style.to_latex``, which needs jinja2).

A MultiIndex becomes proper headers: row levels are columns of their own, with a repeated
value shown once (``\\multirow``); column levels become stacked header rows with
``\\multicolumn`` spans. Every text (cells, headers, index names, caption) is escaped for
LaTeX, and a ``Δ`` becomes ``$\\Delta$``. Missing numbers print as ``--``.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from trek.outputs import atomic_write, csv_safe
from trek.report.paths import record_output

__all__ = ["escape", "to_latex", "save_table"]

_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "Δ": r"$\Delta$", "\n": " ",
}
_SPECIAL_RE = re.compile("|".join(re.escape(k) for k in _SPECIAL))


def escape(value: Any) -> str:
    """``value`` as LaTeX text: special characters escaped in one pass, ``Δ`` as ``$\\Delta$``,
    line breaks as spaces."""
    return _SPECIAL_RE.sub(lambda m: _SPECIAL[m.group(0)], str(value))


def _cell(float_format: str):
    def fmt(v: Any) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return "--"
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, numbers.Integral):
            return str(int(v))
        if isinstance(v, numbers.Real):
            return float_format % float(v)
        return escape(v)

    return fmt


def _names(index: pd.Index) -> list[str | None]:
    return [None if n is None else escape(n) for n in index.names]


def to_latex(df: pd.DataFrame, *, caption: str | None = None, float_format: str = "%.1f", index: bool = True) -> str:
    """A booktabs table (``\\toprule``/``\\midrule``/``\\bottomrule``) in a ``table`` float.

    ``float_format`` is a printf format for real numbers (``"%.1f"``, ``"%.4g"``); integers print
    as integers. With ``index=False`` the row labels are left out.
    """
    body = df.copy()
    body.index = body.index.set_names(_names(body.index))
    body.columns = body.columns.set_names(_names(body.columns))
    styler = body.style.format(_cell(float_format))
    styler = styler.format_index(escape, axis=0).format_index(escape, axis=1)
    if not index:
        styler = styler.hide(axis="index")
    return styler.to_latex(
        hrules=True,
        caption=escape(caption) if caption else None,
        position="t",
        position_float="centering",
        multirow_align="t",
        multicol_align="c",
        siunitx=False,
    )


def save_table(
    df: pd.DataFrame,
    name: str,
    tables_dir: str | os.PathLike[str],
    *,
    caption: str | None = None,
    float_format: str = "%.1f",
    index: bool = True,
) -> list[Path]:
    """Write ``<tables_dir>/<name>.csv`` and ``.tex`` (each whole or not at all) and record them
    in the ``make paper`` manifest."""
    d = Path(tables_dir)
    d.mkdir(parents=True, exist_ok=True)
    csv_path, tex_path = d / f"{name}.csv", d / f"{name}.tex"
    tex = to_latex(df, caption=caption, float_format=float_format, index=index)
    atomic_write(csv_path, csv_safe(df).to_csv(index=index, float_format=float_format))  # inert in a spreadsheet
    atomic_write(tex_path, tex)
    for p in (csv_path, tex_path):
        record_output(p)
    return [csv_path, tex_path]
