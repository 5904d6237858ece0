"""Usage and cost summaries of a run directory (``trek cost RUN_DIR``)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from trek.llm.usage import PriceTable
from trek.types import RecordError, Usage, iter_json_lines

__all__ = ["summarize_usage"]

_COLUMNS = [
    "file", "model", "records", "calls", "cached_calls", "prompt_tokens",
    "completion_tokens", "reasoning_tokens", "cached_tokens", "cost_usd",
]


def _model_of(rec: dict) -> str | None:
    for k in ("model", "judge_model"):
        if isinstance(rec.get(k), str):
            return rec[k]
    return None


def _add(rows: dict[tuple[str, str], dict], rel: str, model: str, u: Usage, prices: PriceTable) -> None:
    row = rows.setdefault((rel, model), {c: 0 for c in _COLUMNS} | {"file": rel, "model": model, "cost_usd": 0.0})
    row["records"] += 1
    for c in ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
        row[c] += getattr(u, c)
    cost = prices.cost(model, u)
    row["cost_usd"] = float("nan") if cost is None or pd.isna(row["cost_usd"]) else row["cost_usd"] + cost


def summarize_usage(run_dir: str | os.PathLike[str], prices: PriceTable | None = None) -> pd.DataFrame:
    """One row per (JSONL file, model) with summed usage and dollars, plus a ``TOTAL`` row.

    Every ``*.jsonl`` file under ``run_dir`` is read; records with a ``usage`` object count. The
    part of a trajectory's usage that its search model spent (``search_usage``, e.g. a
    ``proxy:MODEL`` search) gets a row of its own, priced at that model's rate.
    Dollars are recomputed from the current price table, so editing prices updates the
    summary; a model without a price shows ``NaN`` dollars (tokens only).
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run directory {root} does not exist")
    prices = prices or PriceTable.load()
    rows: dict[tuple[str, str], dict] = {}
    for path in sorted(root.rglob("*.jsonl")):
        rel = str(path.relative_to(root))
        for lineno, rec in iter_json_lines(path):
            if not isinstance(rec.get("usage"), dict):
                continue
            try:
                u = Usage.model_validate(rec["usage"])
            except Exception as e:  # noqa: BLE001
                raise RecordError(path, lineno, f"field 'usage': {e}") from None
            model = _model_of(rec) or "?"
            search = rec.get("search_usage")
            if isinstance(search, dict) and search.get("calls"):
                # a trajectory's usage includes the search model's tokens: price those at its own rate
                s = Usage.model_validate(search)
                system = rec.get("system") if isinstance(rec.get("system"), dict) else {}
                _add(rows, rel, str(system.get("proxy_model") or model), s, prices)
                u = u - s
            _add(rows, rel, model, u, prices)
    df = pd.DataFrame(list(rows.values()), columns=_COLUMNS)
    if not df.empty:
        total = df.drop(columns=["file", "model"]).sum(numeric_only=True, min_count=1)
        total["cost_usd"] = df["cost_usd"].sum(skipna=True, min_count=1)  # NaN when nothing had a price
        df = pd.concat([df, pd.DataFrame([{"file": "TOTAL", "model": "", **total.to_dict()}])], ignore_index=True)
    return df
