"""What runs cost: one pricing rule over recorded usage, for ``trek cost`` and Table 12.

The rule (:func:`trek.llm.usage.recorded_dollars`): a usage is worth the dollars recorded with it
at run time (the price table then, Batch API discount included), else its model's price in the
table now (full price), else it is unknown (NaN, and so is every total it enters: never
silently lower). Search fees are the billed search calls times the backend's fee (the price
table's ``search`` entry). The functions below apply it to records as they are stored, so the
two views agree to the cent:

* :func:`record_spend` splits one JSONL record's usage by the model that spent it: a
  trajectory's search model (``search_usage``, e.g. ``proxy:MODEL``) apart from the answering
  model, a TrekTrace record by its steps (each names its model);
* :func:`run_spend` totals one run directory the Table-12 way: the answering tokens, the search
  fees, and the judges (the grades and TrekTrace's diagnosis, probes of the evaluated model
  included);
* :func:`summarize_usage` (``trek cost RUN``): one row per JSONL file and model, plus search-fee
  rows and a ``TOTAL``; for a run directory its total equals :func:`run_spend`'s;
* :func:`run_costs`: one run's Table-12 row; :func:`trek.report.costs.cost_table` puts the rows
  together, plus a ``total`` row.

Records are read the way the run loaders read them: in a file, a later record with the same
``question_id`` (or ``id``) replaces an earlier one.

Table 12's columns: ``model``, ``search``, ``effort`` (from ``run.json``), ``questions``; tokens in
thousands over every trajectory of the run: ``input_k`` (prompt), ``cached_input_k`` (served from
the provider's prompt cache), ``output_k`` (completion, reasoning included) and ``reasoning_k``
(a proxy search model's tokens are part of a trajectory's usage and count here too);
``token_usd`` (the trajectories' dollars); ``search_calls`` and ``search_usd`` (every search a
trajectory records counts, also those a re-run served from the search cache: the table is the
cost of the configuration, not of one invocation; a native OpenAI web search counts once per
action); ``judge_usd`` (the grades' judge dollars plus the TrekTrace records' dollars);
``total_usd`` = tokens + search + judges.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trek import runs as _runs
from trek.llm.usage import PriceTable, recorded_dollars
from trek.types import RecordError, Trajectory, Usage, iter_json_lines

__all__ = [
    "COST_COLUMNS", "RunSpend", "Spend", "load_prices", "record_spend", "run_costs", "run_spend",
    "search_calls_billed", "summarize_usage",
]

COST_COLUMNS = [
    "model", "search", "effort", "questions", "input_k", "cached_input_k", "output_k", "reasoning_k",
    "token_usd", "search_calls", "search_usd", "judge_usd", "total_usd",
]


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The price table: the bundled table merged with ``path`` (or ``$TREK_PRICES``)."""
    return PriceTable.load(path)


def _billed(calls: Iterable[Any]) -> int:
    actions, single = set(), 0
    for c in calls:
        action = c.get("action") if isinstance(c, dict) else getattr(c, "action", None)
        if action is None:
            single += 1
        else:
            actions.add(action)
    return len(actions) + single


def search_calls_billed(t: Trajectory | Mapping[str, Any]) -> int:
    """Search calls a trajectory (a record or its JSON) paid for: one per recorded query, one per
    action for native OpenAI search (whose queries share an action)."""
    calls = t.get("search_calls") if isinstance(t, Mapping) else t.search_calls
    return _billed(calls or [])


@dataclass(frozen=True)
class Spend:
    """What one model spent in one record: its usage and dollars (``None``: no price known)."""

    model: str
    usage: Usage
    usd: float | None


def _usage(obj: Any, where: str) -> Usage:
    """A stored usage object; without a ``cost_usd`` field it has no recorded dollars. A usage
    that is not an object, or holds a negative or non-finite count or cost, is an error naming
    the field (a sum over it would be wrong without a word)."""
    if not isinstance(obj, dict):
        raise ValueError(f"field '{where}': must be an object of token counts, got {type(obj).__name__}")
    for name in _COUNTS:
        v = obj.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            raise ValueError(f"field '{where}.{name}': a token or call count cannot be negative, got {v}")
    cost = obj.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and not (math.isfinite(cost) and cost >= 0):
        raise ValueError(f"field '{where}.cost_usd': must be a non-negative number of dollars, got {cost}")
    try:
        u = Usage.model_validate(obj)
    except Exception as e:  # noqa: BLE001 - pydantic's message names the field
        from pydantic import ValidationError

        from trek.types import describe_validation_error

        detail = describe_validation_error(e) if isinstance(e, ValidationError) else str(e)
        raise ValueError(f"field '{where}': {detail}") from None
    for name in _COUNTS:
        if getattr(u, name) < 0:
            raise ValueError(f"field '{where}.{name}': a token or call count cannot be negative, got {getattr(u, name)}")
    if u.cost_usd is not None and not (math.isfinite(u.cost_usd) and u.cost_usd >= 0):
        raise ValueError(f"field '{where}.cost_usd': must be a non-negative number of dollars, got {u.cost_usd}")
    return u if "cost_usd" in obj else u.model_copy(update={"cost_usd": None})


def record_spend(rec: Mapping[str, Any], prices: PriceTable, default_model: str | None = None) -> list[Spend]:
    """The spend in one stored record, by model (empty for a record that spent nothing).

    A TrekTrace record (``steps``) spends per step, at each step's model; a trajectory whose
    ``search_usage`` has calls spends that part at its search model's rate (``system.proxy_model``)
    and the rest at ``model``; any other record at ``model`` (else ``judge_model``, else
    ``default_model``, else ``"?"``). Raises ``ValueError`` naming the field when a usage object
    is malformed.
    """
    steps = rec.get("steps")
    if isinstance(steps, list) and steps and all(isinstance(s, dict) and "usage" in s for s in steps):
        out = []
        for i, step in enumerate(steps):
            u = _usage(step["usage"], f"steps[{i}].usage")
            model = str(step.get("model") or "?")
            if _spent(u):
                out.append(Spend(model, u, recorded_dollars(u, model, prices)))
        return out
    if rec.get("usage") is None:
        return []
    u = _usage(rec["usage"], "usage")
    if not _spent(u):
        return []
    model = next((rec[k] for k in ("model", "judge_model") if isinstance(rec.get(k), str)), None) or default_model or "?"
    search = rec.get("search_usage")
    out = []
    if search is not None and not isinstance(search, dict):
        _usage(search, "search_usage")  # raises: not an object
    if isinstance(search, dict) and search.get("calls"):
        s = _usage(search, "search_usage")
        system = rec.get("system") if isinstance(rec.get("system"), dict) else {}
        search_model = str(system.get("proxy_model") or model)
        out.append(Spend(search_model, s, recorded_dollars(s, search_model, prices)))
        u = u - s  # the answering model's part (dollars too when both were recorded)
        if any(getattr(u, c) < 0 for c in _COUNTS):
            raise ValueError("field 'search_usage': counts more than the record's whole 'usage', which includes it")
    out.append(Spend(model, u, recorded_dollars(u, model, prices)))
    return out


def _spent(u: Usage) -> bool:
    """A usage that holds a call, a token or a dollar (an exact-match grade holds none)."""
    return bool(u.calls or u.prompt_tokens or u.completion_tokens or u.cost_usd)


def _latest(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """A JSONL file's records in line order, a later one with the same ``question_id`` (or
    ``id``) replacing an earlier one, as the run loaders read them. Two passes over the file:
    the first keeps only each key's last line number, so no record is held."""
    last: dict[str, int] = {}
    for lineno, rec in iter_json_lines(path):
        key = rec.get("question_id", rec.get("id"))
        if key is not None:
            last[str(key)] = lineno
    for lineno, rec in iter_json_lines(path):
        key = rec.get("question_id", rec.get("id"))
        if key is None or last.get(str(key)) == lineno:
            yield lineno, rec


def _file_spend(
    path: Path, prices: PriceTable, default_model: str | None = None
) -> Iterator[tuple[int, dict[str, Any], list[Spend]]]:
    for lineno, rec in _latest(path):
        try:
            spends = record_spend(rec, prices, default_model)
        except ValueError as e:
            raise RecordError(path, lineno, str(e)) from None
        yield lineno, rec, spends


def _dollars(spends: Iterable[Spend]) -> float:
    """Sum of dollars; NaN when any part has no price."""
    total = 0.0
    for s in spends:
        total += math.nan if s.usd is None else s.usd
    return total


@dataclass
class RunSpend:
    """What one run directory cost, by the rule of this module (see the module doc)."""

    model: str | None
    search: str
    effort: str
    questions: int
    tokens: Usage = field(default_factory=Usage)
    token_usd: float = 0.0
    search_calls: int = 0
    search_usd: float = 0.0
    grade_usd: float = 0.0  # the grades' judge
    trace_usd: float = 0.0  # the TrekTrace records (judges and probes of the evaluated model)

    @property
    def judge_usd(self) -> float:
        """Table 12's ``judge_usd``: grading plus TrekTrace."""
        return self.grade_usd + self.trace_usd

    @property
    def total_usd(self) -> float:
        return self.token_usd + self.search_usd + self.judge_usd


def _search_backend(run_dir: Path) -> str:
    meta = _runs.read_meta(run_dir)
    system = (meta.config.get("system") if meta else None) or {}
    return str(system.get("search") or "none")


def _run_model(run_dir: Path) -> str | None:
    meta = _runs.read_meta(run_dir)
    return meta.model if meta else None


def run_spend(run_dir: str | os.PathLike[str], prices: PriceTable) -> RunSpend:
    """Tokens and dollars of one run directory: its answers, search fees, grades and TrekTrace
    records (each file read when present)."""
    rd = Path(run_dir)
    meta = _runs.read_meta(rd)
    system = (meta.config.get("system") if meta else None) or {}
    questions = _runs.load_questions(rd)
    model = meta.model if meta and meta.model else None
    if (rd / _runs.ANSWERS).exists():  # validates the records against the question set, one at a time
        for _, t in _runs.iter_checked(rd / _runs.ANSWERS, Trajectory, questions):
            model = model or t.model
    search = _search_backend(rd)
    out = RunSpend(model=model, search=search, effort=system.get("effort") or "-", questions=len(questions))
    if (rd / _runs.ANSWERS).exists():
        for _, rec, spends in _file_spend(rd / _runs.ANSWERS, prices, model):
            out.tokens = out.tokens + Usage.model_validate(rec.get("usage") or {}).model_copy(update={"cost_usd": 0.0})
            out.token_usd += _dollars(spends)
            out.search_calls += search_calls_billed(rec)
    fee = prices.search_fee(search)
    out.search_usd = math.nan if fee is None else out.search_calls * fee
    if (rd / _runs.GRADES).exists():
        out.grade_usd = sum(_dollars(spends) for _, _, spends in _file_spend(rd / _runs.GRADES, prices))
    if (rd / _runs.TRACE).exists():
        out.trace_usd = sum(_dollars(spends) for _, _, spends in _file_spend(rd / _runs.TRACE, prices))
    return out


_COLUMNS = [
    "file", "model", "records", "calls", "cached_calls", "prompt_tokens",
    "completion_tokens", "reasoning_tokens", "cached_tokens", "cost_usd",
]
_COUNTS = ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")


def summarize_usage(run_dir: str | os.PathLike[str], prices: PriceTable | None = None) -> pd.DataFrame:
    """``trek cost RUN``: one row per (JSONL file, model) with summed usage and dollars, one row
    per answers file with search fees (model ``search:BACKEND``, ``calls`` = billed searches,
    backend from the run's ``run.json``), and a ``TOTAL`` row.

    Every ``*.jsonl`` file under ``run_dir`` is read; records with a ``usage`` object (or
    TrekTrace steps) count, split by model as :func:`record_spend` does, and priced by the one
    rule (recorded dollars, else the current table). A row with a part without a price has NaN
    dollars, and so has the ``TOTAL`` (never silently lower). For a run directory the total
    equals Table 12's ``total_usd`` of that run.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run directory {root} does not exist")
    prices = prices or PriceTable.load()
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def row(rel: str, model: str) -> dict[str, Any]:
        return rows.setdefault((rel, model), {c: 0 for c in _COLUMNS} | {"file": rel, "model": model, "cost_usd": 0.0})

    for path in sorted(root.rglob("*.jsonl")):
        rel = str(path.relative_to(root))
        billed = 0
        run_model = _run_model(path.parent) if path.name == _runs.ANSWERS else None
        for _, rec, spends in _file_spend(path, prices, run_model):
            for s in spends:
                r = row(rel, s.model)
                r["records"] += 1
                for c in _COUNTS:
                    r[c] += getattr(s.usage, c)
                r["cost_usd"] += math.nan if s.usd is None else s.usd
            if path.name == _runs.ANSWERS and spends:
                billed += search_calls_billed(rec)
        backend = _search_backend(path.parent) if path.name == _runs.ANSWERS else "none"
        if billed and backend != "none":
            fee = prices.search_fee(backend)
            r = row(rel, f"search:{backend}")
            r["calls"] = billed
            r["cost_usd"] = math.nan if fee is None else billed * fee
    df = pd.DataFrame(list(rows.values()), columns=_COLUMNS)
    if not df.empty:
        total = df.drop(columns=["file", "model"]).sum(numeric_only=True)
        total["cost_usd"] = df["cost_usd"].sum(skipna=False)  # NaN when any part has no price
        df = pd.concat([df, pd.DataFrame([{"file": "TOTAL", "model": "", **total.to_dict()}])], ignore_index=True)
    return df


def run_costs(run_dir: str | os.PathLike[str], prices: PriceTable) -> dict[str, object]:
    """One run's row of Table 12, keyed by :data:`COST_COLUMNS` (see the module doc)."""
    s = run_spend(Path(run_dir), prices)
    return {
        "model": s.model,
        "search": s.search,
        "effort": s.effort,
        "questions": s.questions,
        "input_k": s.tokens.prompt_tokens / 1000,
        "cached_input_k": s.tokens.cached_tokens / 1000,
        "output_k": s.tokens.completion_tokens / 1000,
        "reasoning_k": s.tokens.reasoning_tokens / 1000,
        "token_usd": s.token_usd,
        "search_calls": s.search_calls,
        "search_usd": s.search_usd,
        "judge_usd": s.judge_usd,
        "total_usd": s.total_usd,
    }
