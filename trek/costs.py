"""Tokens and dollars of a configuration, read from the usage the runs recorded.

:func:`run_costs` gives one run's record (configuration: model x search x effort, read from
``run.json``); :func:`trek.report.costs.cost_table` puts them together as Table 12:

* tokens in thousands over every trajectory of the run: ``input_k`` (prompt), ``cached_input_k``
  (the part of the prompt the provider served from its prompt cache), ``output_k`` (completion,
  reasoning included) and ``reasoning_k``. A proxy search model's tokens are part of a
  trajectory's usage and are counted here too;
* ``token_usd``: the dollars recorded with each trajectory's usage (the price table at run time,
  Batch API discount included); a trajectory recorded without dollars (model without a price
  then) is priced with ``prices`` now, and stays NaN if the model still has none;
* ``search_usd``: search calls times the backend's fee per call (the price table's ``search``
  entry). Every search a trajectory records counts, also those a re-run served from the search
  cache: the table is the cost of the configuration, not of one invocation. A native OpenAI web
  search counts once per action (one action may run several queries);
* ``judge_usd``: the dollars recorded with the grades' judge usage (same rule for missing dollars);
* ``total_usd`` = tokens + search + judge.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from trek import runs as _runs
from trek.llm.usage import PriceTable
from trek.types import Trajectory, Usage

__all__ = ["COST_COLUMNS", "run_costs", "load_prices", "search_calls_billed"]

COST_COLUMNS = [
    "model", "search", "effort", "questions", "input_k", "cached_input_k", "output_k", "reasoning_k",
    "token_usd", "search_calls", "search_usd", "judge_usd", "total_usd",
]


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The price table for Table 12: the bundled table merged with ``path`` (or ``$TREK_PRICES``)."""
    return PriceTable.load(path)


def search_calls_billed(t: Trajectory) -> int:
    """Search calls a trajectory paid for: one per recorded query, one per action for native
    OpenAI search (whose queries share an action)."""
    actions = {c.action for c in t.search_calls if c.action is not None}
    return len(actions) + sum(1 for c in t.search_calls if c.action is None)


def _dollars(u: Usage, model: str | None, prices: PriceTable) -> float:
    if u.cost_usd is not None:
        return float(u.cost_usd)
    cost = prices.cost(model, u)
    return math.nan if cost is None else cost


def run_costs(run_dir: str | os.PathLike[str], prices: PriceTable) -> dict[str, object]:
    """The tokens and dollars of one run, keyed by :data:`COST_COLUMNS` (see the module doc)."""
    run_dir = Path(run_dir)
    meta = _runs.read_meta(run_dir)
    system = (meta.config.get("system") if meta else None) or {}
    questions = _runs.load_questions(run_dir)
    answers = _runs.load_answers(run_dir, questions)
    grades = _runs.load_grades(run_dir, questions) if (run_dir / _runs.GRADES).exists() else {}
    search = str(system.get("search") or "none")
    model = meta.model if meta and meta.model else next((t.model for t in answers.values()), None)
    used = Usage()
    token_usd = 0.0
    n_search = 0
    for t in answers.values():
        used = used + t.usage.model_copy(update={"cost_usd": 0.0})
        token_usd += _dollars(t.usage, t.model or model, prices)
        n_search += search_calls_billed(t)
    judge_usd = 0.0
    for g in grades.values():
        if g.usage.calls:
            judge_usd += _dollars(g.usage, g.judge_model, prices)
    fee = prices.search_fee(search)
    search_usd = math.nan if fee is None else n_search * fee
    return {
        "model": model,
        "search": search,
        "effort": system.get("effort") or "-",
        "questions": len(questions),
        "input_k": used.prompt_tokens / 1000,
        "cached_input_k": used.cached_tokens / 1000,
        "output_k": used.completion_tokens / 1000,
        "reasoning_k": used.reasoning_tokens / 1000,
        "token_usd": token_usd,
        "search_calls": n_search,
        "search_usd": search_usd,
        "judge_usd": judge_usd,
        "total_usd": token_usd + search_usd + judge_usd,
    }
