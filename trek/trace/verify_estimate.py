"""What ``trek trace verify`` would cost, before any call (``trek trace verify --dry-run``).

The experiments still to run (the stage plan of :class:`~trek.trace.verify.VerifyStage`: a kept
record costs nothing) are played with every role's judge replaced by a recording judge
(:class:`trek.trace.estimate.RecordingJudge`), so each prompt counted is rendered as verify would
send it: the gold-plus-noise probe's own template over the case's own pages, the judges' questions
with their real fields. Nothing is sent and nothing is written.

* **Distractor search**, per case with ``n`` noise pages. Low: the re-run of the whole context
  answered right (the label refuted after one probe). High: the re-run, the gold pages alone, the
  binary split (``ceil(log2 n)`` probes) and its check, then delta debugging at its worst
  (:func:`ddmin_worst`) and its check. The prompts of the re-run, the gold pages alone, the split
  and its check are rendered and counted; each ddmin probe is counted at the whole context's
  tokens (a subset's prompt is never longer). Each probe's answer check by the analysis judge is
  counted the same way (none for the exact judge).
* **Query repair**, per case on a backend that is asked again. Low: the diagnostic judge's
  repaired queries (no call for the exact judge). High: also the evidence match over the new
  results (the gold pages' key evidence, then the match), rendered over as many of the case's
  own retrieved pages as the searches can return, standing in for results not known yet. The
  searches are counted apart (up to :data:`~trek.trace.verify.REPAIR_QUERIES_MAX` a case).

With a limit of probes per search (``max_probes``), the high figure of a search is at most that
many probes (and their checks), each at the whole context's tokens.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from trek import runs
from trek.aio import run_sync
from trek.llm.estimate import Estimate
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS
from trek.tokens import MAX_TOKEN_BYTES
from trek.trace.common import RoleModel
from trek.trace.estimate import RecordingJudge, _Path, role_estimates
from trek.types import RecordError

__all__ = ["ddmin_worst", "estimate_verify"]

ROLES = ("diagnostic", "analysis", "evaluated")


def ddmin_worst(n: int) -> int:
    """An upper bound on the tests delta debugging makes over ``n`` pages: ``(n^2 + 7n) / 2``, the
    worst case of ddmin (each distinct subset is asked once; ``0`` for one page or none)."""
    return 0 if n < 2 else (n * n + 7 * n) // 2


def _recording(config: Any, path: _Path) -> Any:
    """``config`` (a :class:`~trek.trace.verify.VerifyConfig`) with each role played by a recording judge on ``path``."""
    t = config.trace
    swap = {name: dataclasses.replace(who, client=RecordingJudge(who.client, path))
            for name, who in (("diagnostic", t.diagnostic), ("analysis", t.analysis), ("evaluated", t.evaluated))}
    return dataclasses.replace(config, trace=dataclasses.replace(t, **swap, audit={}))


def _sent(path: _Path, book: str = "low") -> dict[str, list[int]]:
    got = path.low if book == "low" else path.high
    return {r: list(got.get(r, [0, 0])) for r in ROLES}


async def _distractor(item: Any, config: Any, count: bool, memo: dict[Any, tuple[int, int]]) -> tuple[dict, dict, int]:
    """Per role ``[calls, tokens]``: the cheapest play and the dearest (see the module doc), and
    the case's noise pages."""
    from trek.trace.verify import distractor_search

    low = _Path((True,), count, memo)  # the re-run answered right: refuted
    await distractor_search(item, _recording(config, low), {})
    # the re-run and every subset wrong, the gold pages alone right: the split, then its check
    split = _Path((False, True) + (False,) * 64, count, memo)
    out: dict[str, Any] = {}
    await distractor_search(item, _recording(config, split), out)
    high = {r: list(v) for r, v in _sent(split, "high").items()}
    n = out.get("noise_pages") or 0
    if n and out.get("search"):  # a search ran: the split's check may fail and ddmin run to its worst
        whole = _sent(low, "high")  # one re-run of the whole context (and its check), the dearest probe
        extra = ddmin_worst(n) + 1
        for role, (calls, tokens) in whole.items():
            if calls:
                high[role][0] += extra * calls
                high[role][1] += extra * tokens
                if config.max_probes is not None:  # no more probes (each with its check) than the limit
                    high[role][0] = min(high[role][0], config.max_probes * calls)
                    high[role][1] = min(high[role][1], config.max_probes * tokens)
    return _sent(low), high, n


async def _repair(item: Any, config: Any, count: bool, memo: dict[Any, tuple[int, int]]) -> tuple[dict, dict, int]:
    """Per role ``[calls, tokens]`` of a query repair, low and high, and its searches (high)."""
    from trek.trace.verify import REPAIR, REPAIR_QUERIES_MAX, _Asker, _equivalent

    spec = config.search_spec
    zero = {r: [0, 0] for r in ROLES}
    if spec in (None, "", "none") or (spec != "local" and not config.live_repair):
        return zero, zero, 0
    low = _Path((), count, memo)
    c = _Asker(item, _recording(config, low)).run()
    q = item.case.question
    queries = "\n".join(f"{i}. {s}" for i, s in enumerate(item.case.queries, 1)) or "(none)"
    fields = {"question": q.question, "effective_year": c.year, "queries": queries}
    await c.ask(REPAIR, fields, facts=(q,))
    high = _Path((), count, memo)
    c = _Asker(item, _recording(config, high)).run()
    await c.ask(REPAIR, fields, facts=(q,))
    results = list(item.case.collection)[: REPAIR_QUERIES_MAX * config.results_per_search]
    if results:
        await _equivalent(c, item, results, list(q.gold_urls))
    return _sent(low), _sent(high, "high"), REPAIR_QUERIES_MAX


async def _play_all(jobs: Any, config: Any, count: bool) -> tuple[dict[str, list[int]], dict[str, int]]:
    figures = {r: [0, 0, 0, 0] for r in ROLES}
    seen = {"distractor_search": 0, "query_repair": 0, "searches": 0, "noise_pages": 0}
    for item, _, _ in jobs:  # one experiment at a time
        memo: dict[Any, tuple[int, int]] = {}
        if item.experiment == "distractor_search":
            low, high, n = await _distractor(item, config, count, memo)
            seen["noise_pages"] = max(seen["noise_pages"], n)
        else:
            low, high, searches = await _repair(item, config, count, memo)
            seen["searches"] += searches
        seen[item.experiment] += 1
        for role in ROLES:
            f = figures[role]
            f[0] += low[role][1]
            f[1] += high[role][1]
            f[2] += low[role][0]
            f[3] += high[role][0]
    return figures, seen


def estimate_verify(
    run_dir: str | os.PathLike[str], *, diagnostic: RoleModel, analysis: RoleModel, evaluated: RoleModel,
    live_repair: bool = False, max_probes: int | None = None, assume_output: int = 4096, gold_chars: int = GOLD_CHARS,
    other_chars: int = NON_GOLD_CHARS,
) -> Estimate:
    """The :class:`~trek.llm.estimate.Estimate` of ``trek trace verify`` on ``run_dir`` (module
    doc); the experiments kept are exactly those verify keeps (the same stage plan)."""
    from trek.stage import plan
    from trek.trace.ctrl import trace_store
    from trek.trace.pipeline import TraceConfig, begin_judges, load_trace
    from trek.trace.verify import VerifyConfig, VerifyStage, _search_spec, items_of

    rd = Path(run_dir)
    if not (rd / runs.TRACE).exists():
        raise RecordError(rd / runs.TRACE, None, "not traced yet: run trek trace on the run first")
    store = trace_store(rd)
    roles = {"diagnostic": diagnostic, "analysis": analysis, "evaluated": evaluated}
    try:
        tconfig = TraceConfig(diagnostic, analysis, evaluated, store, gold_chars=gold_chars, other_chars=other_chars)
        spec, k = _search_spec(rd)
        config = VerifyConfig(tconfig, rd, live_repair, None, spec, k, None, max_probes)
        items = items_of(rd, load_trace(rd))
        begin_judges(rd, tconfig, [it.case for it in items])
        todo = plan(VerifyStage(rd, config, []), items, keep=False)
        priced = [who.client.prices.get(who.model) for who in roles.values() if who.client.makes_calls]
        count = any(p is not None and p.input > 0 for p in priced)
        figures, seen = run_sync(_play_all(todo.iter_jobs(), config, count))
        n_todo = todo.runs
    finally:
        store.close()
    parts = role_estimates("trek trace verify", roles, figures, len(items), len(items) - n_todo, assume_output)
    notes = parts[-1].notes
    if n_todo:
        notes.append(f"{n_todo} experiment(s) to run: {seen['distractor_search']} distractor search(es) (low: the "
                     f"re-run answered right; high: the split, then delta debugging at its worst, (n^2 + 7n)/2 "
                     f"probes for n noise pages, at most {seen['noise_pages']} here, each counted at the whole "
                     f"context's tokens) and {seen['query_repair']} query repair(s)")
    if seen["searches"]:
        notes.append(f"query repair: up to {seen['searches']} search(es) on the run's backend ({spec}), not priced")
    if n_todo and not count:
        notes.append(f"prompt tokens are bounds from their length (1 to {MAX_TOKEN_BYTES} bytes a token), not a "
                     "count: no role's model has an input price")
    total = parts[0] + parts[1] + parts[2]
    total.label = "trek trace verify"
    return total

