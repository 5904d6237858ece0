"""Run the Ctrl baselines over frozen contexts: one standard run directory per (model, method, condition).

    RUNS/<model>__<method>__<condition>/run.json         RunMeta (kind "ctrl"): model, endpoint,
                                                          method settings, condition, prompt versions
    RUNS/<model>__<method>__<condition>/questions.jsonl  the questions that have this condition
    RUNS/<model>__<method>__<condition>/answers.jsonl    one Trajectory per question; its ``details``
                                                          hold the method's intermediate outputs
    RUNS/llm-cache.sqlite                                 one response cache for the grid ($TREK_CACHE)

So ``trek grade`` (each dataset's own protocol), :func:`trek.runs.frame` and the notebooks read
these runs like any other. The whole grid fans out through one :func:`trek.aio.fan_out` with one
progress bar (done/total, ok/pending, dollars). Running again resumes: an answer is kept when it is
``ok`` and was made from the same context text (its ``sha256``); pending ones are tried again, and
with the cache a finished grid re-run makes no HTTP request. A request the endpoint rejects for
one question only (an over-long context) marks that answer ``failed`` (retried on the next run)
and the grid goes on; a rejection that would hit every question stops it. A run directory made with other
settings (model, method settings, sampling parameters) is refused rather than mixed.
Gold-only is Direct on ``GOLD``; the other methods are not run on ``GOLD`` unless asked.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs as R
from trek.aio import fan_out, run_closing
from trek.contexts import Context as CtxRecord
from trek.llm.client import FatalLLMError, LLMClient
from trek.llm.estimate import Estimate
from trek.llm.usage import PriceTable
from trek.rag import METHODS, Method
from trek.rag.answer import MethodOutput
from trek.search.agent import is_run_fatal
from trek.types import Question, RunMeta, Trajectory

__all__ = ["Cell", "CtrlRunSummary", "run_label", "plan_grid", "grid_rows", "arun_ctrl", "run_ctrl", "KIND"]

KIND = "ctrl"
GOLD = "GOLD"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "x"


def run_label(model: str, method: str, condition: str) -> str:
    """The run directory name: ``<model>__<method>__<condition>`` with unsafe characters as ``-``
    (``OO:gold=1/3`` -> ``OO-gold-1-3``); ``run.json`` keeps the exact names."""
    return f"{_slug(model)}__{method}__{_slug(condition)}"


@dataclass(frozen=True)
class Cell:
    """One run directory of the grid."""

    method: str
    condition: str
    run_dir: Path
    order: int


def plan_grid(model: str, methods: Sequence[str], conditions: Sequence[str], runs_root: str | os.PathLike[str],
              *, all_methods_on_gold: bool = False) -> list[Cell]:
    """The (method, condition) cells in condition-major order; on ``GOLD`` only Direct (gold-only)
    unless ``all_methods_on_gold``."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    cells = []
    for cond in conditions:
        for m in methods:
            if cond == GOLD and m != "direct" and not all_methods_on_gold:
                continue
            cells.append(Cell(m, cond, Path(runs_root) / run_label(model, m, cond), len(cells)))
    if not cells:
        raise ValueError("the grid is empty: give at least one method and one condition")
    return cells


def _contexts_by_condition(contexts: Iterable[CtxRecord]) -> dict[str, list[CtxRecord]]:
    out: dict[str, list[CtxRecord]] = {}
    for c in contexts:
        out.setdefault(c.condition, []).append(c)
    return out


def _done(cell: Cell, by_cond: Mapping[str, list[CtxRecord]]) -> dict[str, Trajectory]:
    """Finished answers of a cell (ok and made from the same context text)."""
    if not cell.run_dir.is_dir():
        return {}
    sha = {c.question_id: c.sha256 for c in by_cond.get(cell.condition, [])}
    return {
        qid: t for qid, t in R.load_answers(cell.run_dir).items()
        if t.status == "ok" and qid in sha and t.details.get("context_sha256") == sha[qid]
    }


def grid_rows(cells: Sequence[Cell], contexts: Sequence[CtxRecord], methods: Mapping[str, Method]) -> list[dict[str, Any]]:
    """What a run of the grid would do: per cell the questions, those still to answer and the
    model calls that makes (re-asks of unreadable replies not counted; cached calls send nothing)."""
    by_cond = _contexts_by_condition(contexts)
    rows = []
    for cell in cells:
        n = len(by_cond.get(cell.condition, []))
        todo = n - len(_done(cell, by_cond))
        m = methods[cell.method]
        row = {"run": cell.run_dir.name, "method": cell.method, "condition": cell.condition, "questions": n,
               "to_answer": todo, "calls": todo * m.calls}
        rows.append(row)
    return rows


#: Tokens of a baseline prompt around the documents (instructions, question), for estimates.
PROMPT_TOKENS = 200


def estimate_grid(
    cells: Sequence[Cell], contexts: Sequence[CtxRecord], methods: Mapping[str, Method], model: str,
    prices: PriceTable, *, max_tokens: int | None = None, assume_output: int = 4096,
) -> Estimate:
    """The ``--dry-run`` estimate of a grid: calls, input tokens (o200k_base of each rendered
    context plus the prompt around it; low = one read of the context per answer, Rerank reading
    its top 10 only; high = one read per call), output tokens (low 1 per call, high ``max_tokens``
    or ``assume_output``) and dollars from the price table. Finished answers cost nothing."""
    from trek.tokens import count_tokens

    by_cond = _contexts_by_condition(contexts)
    size = {c.sha256: count_tokens(c.rendered) + PROMPT_TOKENS for c in contexts}
    items = cached = calls = in_lo = in_hi = 0
    for cell in cells:
        done, m = _done(cell, by_cond), methods[cell.method]
        for c in by_cond.get(cell.condition, []):
            items += 1
            if c.question_id in done:
                cached += 1
                continue
            t = size[c.sha256]
            calls += m.calls
            k = getattr(m, "k", None)  # Rerank reads only its top k documents
            in_lo += round(t * min(1.0, k / max(1, len(c.documents)))) if k else t
            in_hi += t * m.calls
    out = (calls, (max_tokens or assume_output) * calls)  # a reply has at least one token
    price = prices.get(model)
    usd = ((in_lo * price.input + out[0] * price.output) / 1e6, (in_hi * price.input + out[1] * price.output) / 1e6) \
        if price else (float("nan"), float("nan"))
    notes = ["re-asks of unreadable replies are not counted", "o200k_base token counts"]
    if price is None:
        notes.append(f"model {model!r} has no price in the price table (--prices)")
    return Estimate(label="trek ctrl run", model=model, items=items, cached_items=cached, calls=(calls, calls),
                    input_tokens=(in_lo, in_hi), output_tokens=out, token_usd=usd, notes=notes)


@dataclass
class CtrlRunSummary(R.Tally):
    """What a grid run did."""

    runs: list[Path] = field(default_factory=list)
    scorer_calls: int = 0

    def describe(self) -> str:
        return (
            f"{len(self.runs)} runs: {self.ok}/{self.total} answers ok, {self.pending} pending, {self.failed} failed "
            f"({self.skipped} already done before this run)\n"
            f"{self.model_line()}; relevance scorer: {self.scorer_calls} requests"
        )


def _meta(cell: Cell, client: LLMClient, method: Method, params: dict[str, Any], n: int, previous: RunMeta | None,
          extra: dict[str, Any]) -> RunMeta:
    config = {"method": cell.method, "condition": cell.condition, "settings": method.config(),
              "params": params, "questions": n, "order": cell.order, **extra}
    return R.new_meta(cell.run_dir, KIND, client, previous, prompt_versions=method.versions(), config=config)


def _check_previous(cell: Cell, previous: RunMeta | None, client: LLMClient, method: Method,
                    params: dict[str, Any]) -> None:
    if previous is None:
        return
    old = previous.config
    same = (previous.kind == KIND and previous.model == client.model and old.get("method") == cell.method
            and old.get("condition") == cell.condition and old.get("settings") == method.config()
            and old.get("params") == params)
    if not same:
        raise ValueError(
            f"{cell.run_dir} holds a run with other settings (model {previous.model!r}, "
            f"{old.get('method')} {old.get('settings')}, params {old.get('params')}); this run is model "
            f"{client.model!r}, {method.config()}, params {params}. Use a new --runs folder."
        )


async def arun_ctrl(
    contexts: Sequence[CtxRecord],
    questions: Mapping[str, Question],
    runs_root: str | os.PathLike[str],
    client: LLMClient,
    methods: Mapping[str, Method],
    conditions: Sequence[str],
    *,
    params: dict[str, Any] | None = None,
    all_methods_on_gold: bool = False,
    progress: bool = True,
    run_config: dict[str, Any] | None = None,
    flush_seconds: float = 1.0,
) -> CtrlRunSummary:
    """Run every method on every condition (see :func:`run_ctrl`)."""
    params = dict(params or {})
    model = client.model or ""
    by_cond = _contexts_by_condition(contexts)
    missing_c = [c for c in conditions if c not in by_cond]
    if missing_c:
        raise ValueError(f"no context for condition(s) {missing_c}; the file has {sorted(by_cond)}")
    missing_q = sorted({c.question_id for c in contexts if c.condition in conditions} - set(questions))
    if missing_q:
        raise ValueError(f"no question record for {len(missing_q)} context(s), e.g. {missing_q[:3]}")
    cells = plan_grid(model, list(methods), conditions, runs_root, all_methods_on_gold=all_methods_on_gold)
    extra = dict(run_config or {})

    done: dict[Path, dict[str, Trajectory]] = {}
    order: dict[Path, list[str]] = {}
    jobs: list[tuple[Cell, Question, CtxRecord]] = []
    summary = CtrlRunSummary(runs=[c.run_dir for c in cells])
    for cell in cells:
        ctxs = by_cond[cell.condition]
        method = methods[cell.method]
        previous = R.read_meta(cell.run_dir)
        _check_previous(cell, previous, client, method, params)
        cell.run_dir.mkdir(parents=True, exist_ok=True)
        R.write_records(cell.run_dir, R.QUESTIONS, [questions[c.question_id] for c in ctxs])
        R.write_meta(cell.run_dir, _meta(cell, client, method, params, len(ctxs), previous, extra))
        done[cell.run_dir] = R.load_answers(cell.run_dir)
        order[cell.run_dir] = [c.question_id for c in ctxs]
        finished = _done(cell, by_cond)
        summary.total += len(ctxs)
        summary.skipped += len(finished)
        jobs += [(cell, questions[c.question_id], c) for c in ctxs if c.question_id not in finished]

    summary.watch(client)
    scorers = {id(m.scorer): m.scorer for m in methods.values() if getattr(m, "scorer", None) is not None}
    scorer0 = sum(getattr(s, "calls", 0) for s in scorers.values())
    counts = {"ok": 0, "pending": 0, "failed": 0}
    dirty: set[Path] = set()
    last_flush = time.monotonic()

    def flush(cells_: Iterable[Path]) -> None:
        for rd in cells_:
            have = done[rd]
            R.write_records(rd, R.ANSWERS, [have[qid] for qid in order[rd] if qid in have])

    async def one(job: tuple[Cell, Question, CtxRecord]) -> tuple[Cell, Trajectory]:
        cell, q, ctx = job
        method = methods[cell.method]
        try:
            out = await method.arun(q, ctx, client, params)
            status, error = out.status, out.error
        except FatalLLMError as e:
            if is_run_fatal(e):  # the same request shape fails for every question: stop
                raise
            out, status, error = MethodOutput(), "failed", f"request rejected: {e}"
        except Exception as e:  # noqa: BLE001 - one broken question must not stop the grid
            out, status, error = MethodOutput(), "failed", f"internal error: {type(e).__name__}: {e}"
        traj = Trajectory(
            question_id=q.id, model=model, system={"method": cell.method, "condition": cell.condition},
            final_answer=out.final_answer if status == "ok" else None, status=status,  # type: ignore[arg-type]
            error=error, usage=out.usage, messages=out.replies,
            prompt_version=" ".join(f"{k}={v}" for k, v in sorted(method.versions().items())),
            details={**out.details, "context_sha256": ctx.sha256},
        )
        return cell, traj

    def finished_job(_: int, result: tuple[Cell, Trajectory]) -> None:
        nonlocal last_flush
        cell, traj = result
        done[cell.run_dir][traj.question_id] = traj
        counts[traj.status] += 1
        dirty.add(cell.run_dir)
        if time.monotonic() - last_flush >= flush_seconds:
            flush(sorted(dirty))
            dirty.clear()
            last_flush = time.monotonic()

    try:
        await fan_out(jobs, one, limit=client.max_connections, desc=f"ctrl {model}", unit="q",
                      progress=progress, postfix=lambda: summary.progress(counts), on_result=finished_job)
    finally:
        flush(sorted(dirty))
        summary.settle()
        summary.scorer_calls = sum(getattr(s, "calls", 0) for s in scorers.values()) - scorer0
    for cell in cells:
        have = done[cell.run_dir]
        for c in by_cond[cell.condition]:
            t = have.get(c.question_id)
            if t is not None and t.status == "ok":
                summary.ok += 1
                continue
            if t is not None and t.status == "failed":
                summary.failed += 1
            else:
                summary.pending += 1
            if t is not None and t.error:
                summary.errors.append(f"{t.status} {cell.run_dir.name} {c.question_id}: {t.error}")
    return summary


def run_ctrl(*args: Any, **kw: Any) -> CtrlRunSummary:
    """Run ``methods`` (name -> configured method) on each of ``conditions`` of ``contexts`` with
    ``client``'s model, writing one run directory per (method, condition) under ``runs_root``.

    Keyword arguments: ``params`` (sampling parameters sent with every call, e.g.
    ``{"reasoning_effort": "high"}``; recorded), ``all_methods_on_gold``, ``progress``,
    ``run_config`` (extra entries for each ``run.json``'s ``config``). Resumable; see the module doc.
    Arguments are those of :func:`arun_ctrl` (``contexts``, ``questions``, ``runs_root``,
    ``client``, ``methods``, ``conditions``, then the keywords); the client is closed at the end.
    """
    return run_closing(arun_ctrl, *args, close=("client",), **kw)
