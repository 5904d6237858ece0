"""What tracing a run would cost, before any call (``trek trace --dry-run``).

Per case still to trace (finished ones are kept for free), the calls lie between

* **low**, 2: the gold URLs were all retrieved, the gold-only probe answers, the analysis judge
  grades it wrong (Interpretation, stop);
* **high**, 7 (8 with the stale-reference check): key evidence and evidence match (diagnostic),
  query adequacy, both probes and both probe verdicts.

Input tokens are o200k_base counts of the pages as the prompts show them (gold pages up to
50,000 characters, others up to 3,500, from the run's page store; nothing is fetched), plus
:data:`PROMPT_TOKENS` of instructions per call. Output runs from 1 token per call to
``assume_output`` (or the role's ``max_tokens``). Each role's calls are priced with its model.
When no role that calls a model has an input price, the pages are not tokenized: their tokens are
bounds from their length (:func:`trek.tokens.chat_token_bounds`' rule; a note says so).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from trek.aio import run_sync
from trek.llm.estimate import Estimate
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS, PageStore, normalize_url
from trek.runs import default_pages_path
from trek.tokens import MAX_TOKEN_BYTES, count_tokens, text_token_bounds
from trek.trace.common import RoleModel, fetch_pages, render_pages
from trek.trace.inputs import FAILED_OUTCOMES, noise_context, select_cases

__all__ = ["PROMPT_TOKENS", "estimate_trace"]

#: Tokens of instructions, question, references and answers around the pages in one call.
PROMPT_TOKENS = 400


def estimate_trace(
    run_dir: str | os.PathLike[str],
    *,
    diagnostic: RoleModel,
    analysis: RoleModel,
    evaluated: RoleModel,
    check_stale: bool = False,
    assume_output: int = 4096,
    outcomes: tuple[str, ...] = FAILED_OUTCOMES,
    gold_chars: int = GOLD_CHARS,
    other_chars: int = NON_GOLD_CHARS,
    unknown: str = "incomplete",
) -> Estimate:
    """The :class:`~trek.llm.estimate.Estimate` of ``trek trace`` on ``run_dir`` (see the module doc);
    the other arguments are those the trace will use. The cases kept are exactly those the trace
    keeps (same stage plan: models, prompt versions, pages and settings in the input key)."""
    from trek.stage import plan
    from trek.trace.pipeline import TraceConfig, TraceStage

    rd = Path(run_dir)
    selection = select_cases(rd, outcomes)
    store = PageStore(default_pages_path(rd), fetch=False)
    try:
        config = TraceConfig(diagnostic, analysis, evaluated, store, check_stale, None, gold_chars, other_chars,
                             unknown)
        from trek.trace.exact import for_trace
        from trek.trace.pipeline import exact_roles

        played = exact_roles(diagnostic, analysis)
        if played:  # the same input keys as the trace (annotations included)
            config.exact = for_trace(config.role(played[0]).client, store, rd, played)
        todo = plan(TraceStage(rd, config, []), selection.cases, keep=False)  # the cases read again, not kept
        n_todo = todo.runs
        priced = [who.client.prices.get(who.model) for who in (diagnostic, analysis, evaluated)
                  if who.client.makes_calls]
        count = any(p is not None and p.input > 0 for p in priced)  # else no price needs the tokenizer
        # (role, low input, high input, low calls, high calls) summed over the cases
        role_in = run_sync(_role_inputs(_page_tokens(store, (c for c, _, _ in todo.iter_jobs()), gold_chars,
                                                     other_chars, count), check_stale))
    finally:
        store.close()
    parts = []
    for role, who in (("diagnostic", diagnostic), ("analysis", analysis), ("evaluated", evaluated)):
        in_lo, in_hi, c_lo, c_hi = role_in[role]
        if not who.client.makes_calls:  # the exact judge answers from the annotations: no call, no token
            parts.append(Estimate(label=f"trek trace, {role} role (exact judge)", model=who.model,
                                  items=len(selection.cases), cached_items=len(selection.cases) - n_todo,
                                  calls=(0, 0), input_tokens=(0, 0), output_tokens=(0, 0), token_usd=(0.0, 0.0)))
            continue
        cap = who.params.get("max_tokens") or who.params.get("max_completion_tokens") or assume_output
        out = (c_lo, c_hi * int(cap))
        price = who.client.prices.get(who.model)
        usd = ((in_lo * price.input + out[0] * price.output) / 1e6, (in_hi * price.input + out[1] * price.output) / 1e6) \
            if price else (float("nan"), float("nan"))
        part = Estimate(label=f"trek trace, {role} role", model=who.model, items=len(selection.cases),
                        cached_items=len(selection.cases) - n_todo, calls=(c_lo, c_hi),
                        input_tokens=(in_lo, in_hi), output_tokens=out, token_usd=usd)
        if price is None:
            part.notes.append(f"model {who.model!r} has no price in the price table (--prices)")
        parts.append(part)
    parts[-1].notes.append(f"{n_todo} cases to trace: 2 to {8 if check_stale else 7} calls each; replies "
                           "already in the cache are counted too (re-asks of unreadable replies are not)")
    if n_todo and not count:
        parts[-1].notes.append(f"page tokens are bounds from their length (1 to {MAX_TOKEN_BYTES} bytes a token), "
                               "not a count: no role's model has an input price")
    total = parts[0] + parts[1] + parts[2]
    total.label = "trek trace"
    return total


async def _role_inputs(sizes: Any, check_stale: bool) -> dict[str, list[int]]:
    """Per role, (low input, high input, low calls, high calls) summed over the cases' page sizes."""
    role_in = {"diagnostic": [0, 0, 0, 0], "analysis": [0, 0, 0, 0], "evaluated": [0, 0, 0, 0]}
    p = PROMPT_TOKENS
    async for (gold_lo, gold), (_, noise) in sizes:
        steps_high = {"diagnostic": [gold + p, noise + p] + ([gold + p] if check_stale else []),
                      "analysis": [p, p, p], "evaluated": [gold + p, noise + gold + p]}
        steps_low = {"diagnostic": [], "analysis": [p], "evaluated": [gold_lo + p]}
        for role in role_in:
            role_in[role][0] += sum(steps_low[role])
            role_in[role][1] += sum(steps_high[role])
            role_in[role][2] += len(steps_low[role])
            role_in[role][3] += len(steps_high[role])
    return role_in


async def _page_tokens(store: PageStore, cases: Iterable[Any], gold_chars: int, other_chars: int,
                       count: bool = True) -> AsyncIterator[tuple[tuple[int, int], tuple[int, int]]]:
    """((low, high) tokens of the gold pages, of the retrieved pages) of each case as the prompts
    render them: counted (low = high), or without ``count`` bounds from their length; one case at
    a time."""
    tokens = (lambda text: (n := count_tokens(text), n)) if count else text_token_bounds
    for case in cases:
        gold_keys = {normalize_url(u) for u in case.question.gold_urls}
        gold = await fetch_pages(store, case.question.gold_urls)
        noise = await fetch_pages(store, noise_context(case.collection, case.question.gold_urls))
        limits = {"gold_chars": gold_chars, "other_chars": other_chars}
        yield tokens(render_pages(gold, gold_keys, **limits)), tokens(render_pages(noise, gold_keys, **limits))
