"""One fixed colour per dataset, TrekTrace label, Ctrl method, Ctrl condition and shortcut
heuristic, used by every figure.

A bar of FreshQA is the same blue in Figure 2, in Table 1's figure and in Table 10's, whatever
else a figure draws and in whatever order. Names outside these tables (a run label, a model, a
dataset of your own) get a colour from :data:`SPARE` picked by a stable hash of the name, moved
on to the next free one when two names of one figure would share it (:func:`colours`).

Colours are from the colour-blind-safe Okabe-Ito set and Paul Tol's muted scheme, with greys
for aggregates (``all``, ``micro``, ``macro``, ``total``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

__all__ = [
    "DATASETS", "LABELS", "METHODS", "CONDITIONS", "HEURISTICS", "KINDS", "SPARE",
    "colour", "colours",
]

DATASETS: dict[str, str] = {
    "freshqa": "#0072B2",       # blue
    "infodeepseek": "#E69F00",  # orange
    "sealqa": "#009E73",        # green
    "all": "#404040",           # aggregates: greys
    "micro": "#404040",
    "macro": "#9A9A9A",
    "total": "#404040",
}

#: TrekTrace labels (``trek.trace.labels.LABELS``).
LABELS: dict[str, str] = {
    "Pre-retrieval": "#332288",
    "Retrieval": "#88CCEE",
    "Interpretation": "#DDCC77",
    "Distraction": "#CC6677",
    "Randomness": "#AA4499",
}

#: Ctrl baselines (``trek.rag.METHODS``).
METHODS: dict[str, str] = {
    "direct": "#0072B2",
    "rerank": "#D55E00",
    "filter": "#009E73",
    "structured": "#CC79A7",
}

#: Ctrl conditions and ablations (``trek.ctrl.conditions.ALL_CONDITIONS``): the gold positions in
#: blues (OO's), the budgets in purples, each swap beside the colour of the condition it swaps.
CONDITIONS: dict[str, str] = {
    "GOLD": "#E69F00",
    "OO": "#0072B2",
    "MND": "#009E73",
    "SAA": "#D55E00",
    "SBA": "#CC79A7",
    "OO:gold=first": "#08306B",  # positions: blues, dark to light
    "OO:gold=1/3": "#2171B5",
    "OO:gold=2/3": "#6BAED6",
    "OO:gold=last": "#9ECAE1",
    "OO:k=5": "#CBC9E2",         # budgets: purples, light to dark
    "OO:k=10": "#9E9AC8",
    "OO:k=15": "#6A51A3",
    "OO:k=20": "#3F007D",
    "OO:timeswap": "#56B4E9",
    "SAA:domainswap": "#F0A07A",
}

#: Ctrl shortcut heuristics (``trek.ctrl.shortcuts.HEURISTICS``).
HEURISTICS: dict[str, str] = {
    "latest": "#0072B2",
    "majority": "#E69F00",
    "latest_real_domain": "#009E73",
}

#: Every kind of name a figure colours by; runs and models have no fixed colours (only :data:`SPARE`).
KINDS: dict[str, dict[str, str]] = {
    "dataset": DATASETS, "label": LABELS, "method": METHODS, "condition": CONDITIONS,
    "heuristic": HEURISTICS, "run": {}, "model": {},
}

#: Colours for names the tables above do not know (runs, models, datasets of your own).
SPARE: tuple[str, ...] = (
    "#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#BBBBBB",
    "#117733", "#882255", "#44AA99", "#999933", "#661100",
)


def _table(kind: str) -> dict[str, str]:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown colour kind {kind!r}; known: {', '.join(KINDS)}") from None


def _spare_start(name: str) -> int:
    return zlib.crc32(str(name).encode("utf-8")) % len(SPARE)


def colour(kind: str, name: str) -> str:
    """The colour of one ``name`` of ``kind`` (a key of :data:`KINDS`); a name the table does not know gets its hashed :data:`SPARE` colour."""
    table = _table(kind)
    return table[name] if name in table else SPARE[_spare_start(name)]


def colours(kind: str, names: Iterable[str]) -> dict[str, str]:
    """Colours for the ``names`` drawn together in one figure: the fixed ones where the table
    knows the name, else a :data:`SPARE` colour no other name of the figure has (while any is
    free), starting from the name's hashed one."""
    table = _table(kind)
    names = list(dict.fromkeys(names))
    out = {n: table[n] for n in names if n in table}
    used = set(out.values())
    for n in names:
        if n in out:
            continue
        start = _spare_start(n)
        order = [SPARE[(start + i) % len(SPARE)] for i in range(len(SPARE))]
        out[n] = next((c for c in order if c not in used), order[0])
        used.add(out[n])
    return {n: out[n] for n in names}
