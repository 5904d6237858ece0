"""Table 12: tokens and dollars per configuration, one row per run (the prices and the rules
for dollars are :mod:`trek.costs`')."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pandas as pd

from trek.costs import COST_COLUMNS, run_costs
from trek.llm.usage import PriceTable

__all__ = ["cost_table"]


def cost_table(runs: Mapping[str, str | os.PathLike[str]], prices: PriceTable | None = None) -> pd.DataFrame:
    """Table 12 for ``{label: run directory}``: one row per run (:func:`trek.costs.run_costs`) plus
    a ``total`` row. NaN dollars mean a model or search backend without a price."""
    prices = prices or PriceTable.load()
    rows = {label: run_costs(d, prices) for label, d in runs.items()}
    df = pd.DataFrame.from_dict(rows, orient="index", columns=COST_COLUMNS)
    if df.empty:
        return df
    # dollars: an unknown price in any row leaves the total unknown (NaN), never silently lower
    total = {c: "" if c in ("model", "search", "effort") else df[c].sum(skipna=not c.endswith("_usd"))
             for c in COST_COLUMNS}
    df.loc["total"] = total
    df.index.name = "run"
    return df
