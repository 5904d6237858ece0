"""What tracing a run would cost, before any call (``trek trace --dry-run``).

The dry run *plays the schedule*: each case still to trace (finished ones are kept for free) is
traced by :func:`trek.trace.pipeline.trace_case` with every role's judge replaced by a recording
judge (:class:`RecordingJudge`). It sends nothing: a role that makes model calls has its prompt
rendered as the trace would send it, and its tokens counted; every role's reply is made up from
the question's reply schema, its yes/no fields taken one way and then the other, so the case is
played down every branch of the schedule (at most :data:`MAX_PATHS` paths). Per role, the low
figure is the cheapest path and the high one the dearest; a probe added through a custom schedule
(:func:`~trek.trace.schedule.with_entry`) is counted like the built-in tests, with no count written
by hand.

Input tokens are o200k_base counts of each rendered prompt (as one user message); when no role
that calls a model has an input price, the prompts are not tokenized and their tokens are bounds
from their length (:func:`trek.tokens.chat_token_bounds`; a note says so). Output runs from 1
token per call to ``assume_output`` (or the role's ``max_tokens``). Each role's calls are priced
with its model; a judge that makes no call (the exact judge) costs nothing. Re-asks of unreadable
replies are not counted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek.aio import run_sync
from trek.llm.estimate import Estimate
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS
from trek.templates import render
from trek.tokens import MAX_TOKEN_BYTES, chat_token_bounds, count_chat_tokens
from trek.trace.common import RoleModel
from trek.trace.inputs import FAILED_OUTCOMES, select_cases
from trek.trace.records import Step

__all__ = ["MAX_PATHS", "RecordingJudge", "estimate_trace", "role_estimates"]

#: The most schedule paths a case is played down (each yes/no reply doubles them).
MAX_PATHS = 256


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
    schedule: tuple[Any, ...] | None = None,
) -> Estimate:
    """The :class:`~trek.llm.estimate.Estimate` of ``trek trace`` on ``run_dir`` (see the module doc);
    the other arguments are those the trace will use (``schedule``: default the C.4 schedule). The
    cases kept are exactly those the trace keeps (same stage plan: models, prompt versions, pages
    and settings in the input key)."""
    from trek.stage import plan
    from trek.trace.ctrl import trace_store
    from trek.trace.pipeline import TraceConfig, TraceStage, begin_judges
    from trek.trace.schedule import SCHEDULE

    rd = Path(run_dir)
    selection = select_cases(rd, outcomes)
    store = trace_store(rd)
    roles = {"diagnostic": diagnostic, "analysis": analysis, "evaluated": evaluated}
    try:
        config = TraceConfig(diagnostic, analysis, evaluated, store, check_stale, None, gold_chars, other_chars,
                             unknown, schedule=schedule or SCHEDULE)
        begin_judges(rd, config, selection.cases)  # the same input keys as the trace (annotations included)
        todo = plan(TraceStage(rd, config, []), selection.cases, keep=False)  # the cases read again, not kept
        n_todo = todo.runs
        priced = [who.client.prices.get(who.model) for who in roles.values() if who.client.makes_calls]
        count = any(p is not None and p.input > 0 for p in priced)  # else no price needs the tokenizer
        totals = run_sync(_play_all((c for c, _, _ in todo.iter_jobs()), config, count))
    finally:
        store.close()
    parts = role_estimates("trek trace", roles, totals.roles, len(selection.cases), len(selection.cases) - n_todo,
                           assume_output)
    if n_todo:
        parts[-1].notes.append(f"{n_todo} cases to trace: {totals.fewest} to {totals.most} model calls each, by the "
                               f"schedule played down every branch; replies already in the cache are counted too "
                               "(re-asks of unreadable replies are not)")
    if totals.capped:
        parts[-1].notes.append(f"{totals.capped} case(s) have more than {MAX_PATHS} schedule paths: the dearest "
                               "path played stands for the high figure")
    if n_todo and not count:
        parts[-1].notes.append(f"prompt tokens are bounds from their length (1 to {MAX_TOKEN_BYTES} bytes a token), "
                               "not a count: no role's model has an input price")
    total = parts[0] + parts[1] + parts[2]
    total.label = "trek trace"
    return total


def role_estimates(label: str, roles: dict[str, RoleModel], figures: dict[str, list[int]], items: int, cached: int,
                   assume_output: int) -> list[Estimate]:
    """One :class:`Estimate` per role of a stage played with recording judges: ``figures`` holds per
    role ``[low input, high input, low calls, high calls]``; output runs from 1 token a call to
    the role's ``max_tokens`` (else ``assume_output``); a judge that makes no call costs nothing."""
    parts = []
    for role, who in roles.items():
        in_lo, in_hi, c_lo, c_hi = figures.get(role, [0, 0, 0, 0])
        if not who.client.makes_calls:  # a judge that decides without a model: no call, no token
            parts.append(Estimate(label=f"{label}, {role} role (no model call)", model=who.model, items=items,
                                  cached_items=cached, calls=(0, 0), input_tokens=(0, 0), output_tokens=(0, 0),
                                  token_usd=(0.0, 0.0)))
            continue
        cap = who.params.get("max_tokens") or who.params.get("max_completion_tokens") or assume_output
        out = (c_lo, c_hi * int(cap))
        price = who.client.prices.get(who.model)
        usd = ((in_lo * price.input + out[0] * price.output) / 1e6, (in_hi * price.input + out[1] * price.output) / 1e6) \
            if price else (float("nan"), float("nan"))
        part = Estimate(label=f"{label}, {role} role", model=who.model, items=items, cached_items=cached,
                        calls=(c_lo, c_hi), input_tokens=(in_lo, in_hi), output_tokens=out, token_usd=usd)
        if price is None:
            part.notes.append(f"model {who.model!r} has no price in the price table (--prices)")
        parts.append(part)
    return parts


@dataclass
class _Totals:
    """Per role ``[low input, high input, low calls, high calls]`` summed over the cases."""

    roles: dict[str, list[int]] = field(default_factory=lambda: {r: [0, 0, 0, 0] for r in
                                                                 ("diagnostic", "analysis", "evaluated")})
    fewest: int = 0
    most: int = 0
    capped: int = 0
    seen: bool = False


class _Path:
    """One play of a case: the yes/no choices taken (``prefix`` first, then yes) and what each role
    would have sent."""

    def __init__(self, prefix: tuple[bool, ...], count: bool, memo: dict[Any, tuple[int, int]]):
        self.prefix = prefix
        self.taken: list[bool] = []
        self.count = count
        self.memo = memo
        #: per role, [calls, tokens] certain to be sent and [calls, tokens] that may be
        self.low: dict[str, list[int]] = {}
        self.high: dict[str, list[int]] = {}

    def choose(self) -> bool:
        i = len(self.taken)
        self.taken.append(self.prefix[i] if i < len(self.prefix) else True)
        return self.taken[-1]

    def sent(self, role: str, prompt: str, certain: bool = True) -> None:
        key = hashlib.blake2b(prompt.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        got = self.memo.get(key)
        if got is None:
            messages = [{"role": "user", "content": prompt}]
            got = self.memo[key] = ((n := count_chat_tokens(messages)), n) if self.count else chat_token_bounds(messages)
        for book, n in ((self.low, got[0]), (self.high, got[1])) if certain else ((self.high, got[1]),):
            figures = book.setdefault(role, [0, 0])
            figures[0] += 1
            figures[1] += n


def _made_up(schema: dict[str, Any], path: _Path) -> Any:
    """A reply of the shape ``schema`` asks for: yes/no fields chosen by ``path``, the rest filler."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: _made_up(v, path) for k, v in (schema.get("properties") or {}).items()}
    if kind == "boolean":
        return path.choose()
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "string":
        return "dry run"
    return None


class RecordingJudge:
    """The judge of one role in a dry run (see the module doc): it stands in for ``real`` (whose
    ``makes_calls`` it keeps), renders and counts what a model would be sent, and answers every
    question with a reply made up from its schema."""

    def __init__(self, real: Any, path: _Path):
        self.real = real
        self.path = path
        self.makes_calls = real.makes_calls
        self.answers_without_model = real.answers_without_model
        self.model = getattr(real, "model", "")
        self.base_url = getattr(real, "base_url", "")

    async def answer(self, who: Any, request: Any) -> Step:
        q = request.question
        if self.makes_calls:  # a judge that also decides alone (a cascade) may send it, or not
            self.path.sent(who.role, render(q.template, q.prompt, **request.fields),
                           certain=not self.answers_without_model)
        try:
            value, status = q.validate(_made_up(q.schema, self.path)), "ok"
        except ValueError:  # a reader stricter than its schema: the reply counts as unreadable
            value, status = {}, "unknown"
        return Step(name=request.step, role=who.role, model=who.model, endpoint=self.base_url,
                    template=q.template, version="dry-run", status=status, value=value)  # type: ignore[arg-type]

    def trace_basis(self, question: Any) -> Any:
        return None

    def trace_settings(self) -> dict[str, Any]:
        return {}

    def trace_versions(self) -> dict[str, str]:
        return {}


async def _play(case: Any, config: Any, count: bool) -> tuple[dict[str, list[int]], int, int, bool]:
    """Per role ``[low input, high input, low calls, high calls]`` of one case over the schedule's
    paths, the fewest and most calls of a path, and whether the paths were capped."""
    from trek.trace.pipeline import trace_case

    memo: dict[Any, tuple[int, int]] = {}
    stack: list[tuple[bool, ...]] = [()]
    played: list[_Path] = []
    while stack and len(played) < MAX_PATHS:
        path = _Path(stack.pop(), count, memo)
        swap = {name: dataclasses.replace(who, client=RecordingJudge(who.client, path))
                for name, who in (("diagnostic", config.diagnostic), ("analysis", config.analysis),
                                  ("evaluated", config.evaluated))}
        await trace_case(case, dataclasses.replace(config, **swap, audit={}), key="dry-run")
        played.append(path)
        stack.extend(tuple(path.taken[:i]) + (not path.taken[i],) for i in range(len(path.prefix), len(path.taken)))
    out = {}
    for role in ("diagnostic", "analysis", "evaluated"):
        low = [p.low.get(role, [0, 0]) for p in played]
        high = [p.high.get(role, [0, 0]) for p in played]
        out[role] = [min(t[1] for t in low), max(t[1] for t in high), min(c[0] for c in low),
                     max(c[0] for c in high)]
    per_path = [(sum(c for c, _ in p.low.values()), sum(c for c, _ in p.high.values())) for p in played]
    return out, min(lo for lo, _ in per_path), max(hi for _, hi in per_path), bool(stack)


async def _play_all(cases: Iterable[Any], config: Any, count: bool) -> _Totals:
    totals = _Totals()
    for case in cases:  # one case at a time: a large run's cases are never all in memory
        roles, fewest, most, capped = await _play(case, config, count)
        for role, figures in roles.items():
            totals.roles[role] = [a + b for a, b in zip(totals.roles[role], figures, strict=True)]
        totals.fewest = fewest if not totals.seen else min(totals.fewest, fewest)
        totals.most = max(totals.most, most)
        totals.capped += capped
        totals.seen = True
    return totals
