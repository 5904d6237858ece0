"""The figure style shared by every notebook, legends built from what was drawn, and a saver
that writes PDF and PNG."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from trek.outputs import atomic_write  # noqa: E402
from trek.report.palette import SPARE  # noqa: E402
from trek.report.paths import record_output  # noqa: E402

__all__ = ["use_style", "ZERO_MARK", "grouped_bars", "drawn_legend", "finish", "save_figure", "counts_of_shares",
           "wilson_errors", "wrapped"]


def use_style() -> None:
    """Apply Trek's plotting defaults (small, print-friendly; series take their colours from
    :mod:`trek.report.palette`, anything else from its spare colour-blind-safe colours)."""
    sns.set_theme(context="paper", style="whitegrid", palette=list(SPARE))
    plt.rcParams.update({
        "figure.figsize": (6.0, 3.2),
        "figure.dpi": 110,
        "savefig.dpi": 200,
        "savefig.bbox": "tight",
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "legend.fontsize": 8,
        "pdf.fonttype": 42,
    })


#: What marks a bar whose value is 0 (a missing value draws nothing).
ZERO_MARK = "0"


def grouped_bars(ax: plt.Axes, groups: Sequence[object], series: Mapping[str, Sequence[float]],
                 colour: Mapping[str, str], errors: Mapping[str, np.ndarray] | None = None,
                 width: float = 0.8) -> None:
    """One group of bars per entry of ``groups`` on the x axis, one bar per ``series`` (name ->
    one value per group) in ``colour[name]`` and labelled with its name (so :func:`drawn_legend`
    finds it); ``errors[name]`` is a 2 x groups array of lower and upper error lengths. A value of
    exactly 0 gets a ``0`` printed in the bar's colour on the axis (:data:`ZERO_MARK`), so a zero
    can be told from a missing value (NaN: nothing drawn)."""
    x = np.arange(len(groups))
    each = width / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        err = None if errors is None else errors.get(name)
        ys = np.asarray(values, dtype=float)
        xs = x - width / 2 + each * (i + 0.5)
        ax.bar(xs, ys, each, color=colour[name], label=str(name), yerr=err,
               error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"})
        for xi in xs[ys == 0]:
            ax.annotate(ZERO_MARK, (xi, 0), xytext=(0, 1.5), textcoords="offset points", ha="center", va="bottom",
                        fontsize=6, color=colour[name], gid="zero-mark")
    ax.set_xticks(x, [str(g) for g in groups])


def counts_of_shares(shares: Sequence[float], n: int) -> np.ndarray:
    """The counts behind percentages of ``n`` cases rounded to 0.1 (what the tables hold): ``k``
    with ``round(100 k / n, 1)`` equal to each share. A share that no count of ``n`` gives is a
    ``ValueError``; NaN stays NaN (a group without a case)."""
    pct = np.asarray(shares, dtype=float)
    if n <= 0:
        return np.full(pct.shape, np.nan)
    k = np.round(pct * n / 100.0)
    ok = np.isnan(pct) | (np.abs(np.round(100.0 * k / n, 1) - pct) < 1e-6)
    if not ok.all():
        raise ValueError(f"shares {pct[~ok].tolist()} are not counts of {n} cases rounded to 0.1%")
    return k


def wilson_errors(k: Sequence[float], n: int, level: float = 0.95) -> np.ndarray:
    """The 2 x len(k) error lengths (below, above; in percentage points) of the Wilson interval
    of each ``k`` of ``n`` (:func:`trek.stats.wilson_ci`) around ``100 k / n``, as ``yerr`` takes
    them; NaN where ``k`` is NaN or ``n`` is 0."""
    from trek.stats import wilson_ci

    out = np.full((2, len(k)), np.nan)
    for i, ki in enumerate(np.asarray(k, dtype=float)):
        if n > 0 and not np.isnan(ki):
            lo, hi = wilson_ci(int(ki), int(n), level)
            share = ki / n
            out[:, i] = (100.0 * (share - lo), 100.0 * (hi - share))
    return out.clip(0)


def wrapped(text: str, width_inches: float, fontsize: float = 9.0) -> str:
    """``text`` folded at spaces to fit ``width_inches`` at ``fontsize`` points (about half a
    point's width per character), each line kept as it was where it fits."""
    import textwrap

    chars = max(30, int(width_inches * 72 / (0.52 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def drawn_legend(axes: Iterable[plt.Axes], order: Iterable[str] | None = None) -> tuple[list, list[str]]:
    """``(handles, labels)`` of every labelled series drawn on any of ``axes``, each label once
    (its first artist), in ``order`` where given and then in drawing order: a legend made from
    this names exactly what the figure shows, whichever panel shows it."""
    found: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    rank = {name: i for i, name in enumerate(order or [])}
    labels = sorted(found, key=lambda s: (rank.get(s, len(rank)), list(found).index(s)))
    return [found[s] for s in labels], labels


def finish(fig: plt.Figure, ax: plt.Axes, *, title: str, ylabel: str, ylim: tuple[float, float], legend: str,
           order: Iterable[str] | None = None, **legend_kw) -> plt.Figure:
    """Title, y label and range of a one-panel figure, and a frameless legend titled ``legend`` to
    the right of what is drawn on it (:func:`drawn_legend`); returns ``fig``, laid out."""
    ax.set_ylabel(ylabel)
    ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.legend(*drawn_legend([ax], order), title=legend, **{"frameon": False, "loc": "upper left",
                                                            "bbox_to_anchor": (1.0, 1.0), **legend_kw})
    fig.tight_layout()
    return fig


def save_figure(fig: plt.Figure, name: str, figures_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``<figures_dir>/<name>.pdf`` and ``.png`` (reproducible: no timestamps in the PDF),
    each through :func:`trek.outputs.atomic_write`, and record them in the ``make paper`` manifest."""
    d = Path(figures_dir)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for ext, meta in (("pdf", {"CreationDate": None, "ModDate": None}), ("png", {"Software": None})):
        p = d / f"{name}.{ext}"
        atomic_write(p, lambda fh, ext=ext, meta=meta: fig.savefig(fh, format=ext, metadata=meta))
        record_output(p)
        out.append(p)
    return out
