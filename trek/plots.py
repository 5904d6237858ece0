"""The figure style shared by every notebook, and a saver that writes PDF and PNG."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from trek.paper import record_output  # noqa: E402

__all__ = ["use_style", "save_figure", "PALETTE"]

PALETTE = ["#3b6ea8", "#d1843b", "#5a9e6f", "#b5525c", "#7f6aa8", "#8c8c8c"]


def use_style() -> None:
    """Apply Trek's plotting defaults (small, print-friendly, colour-blind-safe palette)."""
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE)
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


def save_figure(fig: plt.Figure, name: str, figures_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``<figures_dir>/<name>.pdf`` and ``.png`` (reproducible: no timestamps in the PDF)."""
    d = Path(figures_dir)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for ext, meta in (("pdf", {"CreationDate": None, "ModDate": None}), ("png", {"Software": None})):
        p = d / f"{name}.{ext}"
        tmp = d / f".{name}.tmp.{ext}"
        fig.savefig(tmp, format=ext, metadata=meta)
        os.replace(tmp, p)
        record_output(p)
        out.append(p)
    return out
