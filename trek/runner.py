"""The runner: answer a question set with one search-augmented system.

:func:`run_system` (and ``trek wild run``, its command in :mod:`trek.cli.run`) writes a run
directory laid out by :mod:`trek.runs`::

    RUN_DIR/questions.jsonl    the Question records
    RUN_DIR/answers.jsonl      one Trajectory per question (rewritten atomically as questions finish)
    RUN_DIR/run.json           RunMeta: model, endpoint base URL (never a key), system config,
                               prompt versions, timestamps
    RUN_DIR/llm-cache.sqlite   model replies ($TREK_CACHE overrides)
    RUN_DIR/search-cache.sqlite search results ($TREK_SEARCH_CACHE overrides)
    RUN_DIR/pages.sqlite       page snapshots ($TREK_PAGES overrides)

Running again resumes: questions whose trajectory is ``ok`` or ``no_answer`` are skipped,
``pending`` and ``failed`` ones are tried again (with the caches, a finished run re-run makes no
HTTP request). One question's rejected call (a 400 such as an over-long context, a refused search
query, an internal error) marks that question ``failed`` with its error and the run goes on; only
errors that doom every question (a rejected key, an unknown model, an unsupported parameter, a
search backend without a valid key) stop it. Questions run concurrently;
their model calls share one client, which bounds the connections to the endpoint.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs
from trek.aio import fan_out, run_closing
from trek.llm.client import FatalLLMError, LLMClient
from trek.pages import AGENT_PAGE_CHARS, PageStore
from trek.search.agent import SearchSystem, SystemConfig
from trek.search.base import FatalSearchError, SearchBackend
from trek.types import Question, RunMeta, Trajectory, Usage

__all__ = ["RunSummary", "FINAL_STATUSES", "system_config", "arun_system", "run_system"]

#: Trajectory statuses a re-run keeps; ``pending`` and ``failed`` questions are tried again.
FINAL_STATUSES = ("ok", "no_answer")


@dataclass
class RunSummary(runs.Tally):
    """What a run did: question counts, the model usage of this invocation, search activity."""

    run_dir: Path = field(kw_only=True)
    no_answer: int = 0
    search_calls: int = 0
    search_cache_hits: int = 0
    search_usage: Usage = field(default_factory=Usage)

    def describe(self) -> str:
        lines = [
            f"{self.run_dir}: {self.ok}/{self.total} questions answered, {self.pending} pending, "
            f"{self.failed} failed, {self.no_answer} without an answer "
            f"({self.skipped} already done before this run)",
            self.model_line(),
            f"search: {self.search_calls} calls, {self.search_cache_hits} from cache",
        ]
        if self.search_usage.calls:
            lines.append(
                f"search model: {self.search_usage.calls} calls, {self.search_usage.total_tokens} tokens, "
                f"${self.search_usage.cost_usd or 0.0:.4f}"
            )
        return "\n".join(lines)


def _meta(
    run_dir: Path,
    client: LLMClient,
    system: SearchSystem,
    questions: Sequence[Question],
    previous: RunMeta | None,
    extra: dict[str, Any],
) -> RunMeta:
    versions = sorted({system.prompt_version(q) for q in questions})
    prompt_versions = {"answer+system": " | ".join(versions)}
    backend = system.backend
    if backend is not None and hasattr(backend, "prompt_version"):
        prompt_versions["search"] = backend.prompt_version()
    config = {"system": system.system_dict(), "questions": len(questions), **extra}
    return runs.new_meta(run_dir, "wild", client, previous, prompt_versions=prompt_versions, config=config)


def system_config(
    search_backend: SearchBackend | None,
    system: str = "agentic",
    effort: str | None = None,
    *,
    max_rounds: int = 8,
    results_per_search: int = 5,
    top_k: int = 5,
    page_chars: int = AGENT_PAGE_CHARS,
    hints: bool = False,
    params: dict[str, Any] | None = None,
) -> SystemConfig:
    """The system settings of a run (``no-search`` whenever there is no search backend)."""
    return SystemConfig(
        system=system if search_backend is not None else "no-search", effort=effort, max_rounds=max_rounds,
        results_per_search=results_per_search, top_k=top_k, page_chars=page_chars, hints=hints,
        params=dict(params or {}),
    )


async def arun_system(
    questions: Sequence[Question],
    run_dir: str | os.PathLike[str],
    client: LLMClient,
    search_backend: SearchBackend | None,
    system: str = "agentic",
    effort: str | None = None,
    progress: bool = True,
    *,
    store: PageStore | None = None,
    max_concurrent_questions: int | None = None,
    run_config: dict[str, Any] | None = None,
    flush_seconds: float = 1.0,
    **settings: Any,
) -> RunSummary:
    """Run one system over ``questions`` into ``run_dir`` (async). See :func:`run_system`;
    ``settings`` are the keywords of :func:`system_config` (``max_rounds``, ``top_k``, ...)."""
    root = Path(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique")
    sys_ = SearchSystem(client, search_backend, store, system_config(search_backend, system, effort, **settings))
    previous = runs.read_meta(root)
    if previous is not None:
        old_sys = previous.config.get("system")
        if previous.model != client.model or old_sys != sys_.system_dict():
            raise ValueError(
                f"{root} holds a run of model {previous.model!r} with system {old_sys}; this run is "
                f"model {client.model!r} with system {sys_.system_dict()}. Use a new --run directory."
            )
    extra = dict(run_config or {})
    runs.write_records(root, runs.QUESTIONS, questions)
    runs.write_meta(root, _meta(root, client, sys_, questions, previous, extra))

    done = runs.load_answers(root)
    todo = [q for q in questions if not (q.id in done and done[q.id].status in FINAL_STATUSES)]
    summary = RunSummary(run_dir=root, total=len(questions), skipped=len(questions) - len(todo))
    summary.watch(client)
    s_calls0 = search_backend.calls if search_backend else 0
    s_hits0 = search_backend.cache_hits if search_backend else 0
    s_usage0 = search_backend.usage if search_backend else Usage()

    order = {qid: i for i, qid in enumerate(ids)}

    def flush() -> None:
        known = sorted(
            (t for t in done.values() if t.question_id in order), key=lambda t: order[t.question_id]
        )
        others = [t for t in done.values() if t.question_id not in order]
        runs.write_records(root, runs.ANSWERS, [*known, *others])

    last_flush = time.monotonic()
    counts = {"ok": 0, "pending": 0, "failed": 0}

    async def one(q: Question) -> Trajectory:
        try:
            return await sys_.arun(q)
        except (FatalLLMError, FatalSearchError):
            raise
        except Exception as e:  # noqa: BLE001 - one broken question must not stop the others
            return Trajectory(
                question_id=q.id,
                model=client.model or "",
                system=sys_.system_dict(),
                status="failed",
                error=f"internal error: {type(e).__name__}: {e}",
                prompt_version=sys_.prompt_version(q),
            )

    def finished(_: int, traj: Trajectory) -> None:
        nonlocal last_flush
        done[traj.question_id] = traj
        counts[traj.status] = counts.get(traj.status, 0) + 1
        now = time.monotonic()
        if now - last_flush >= flush_seconds:
            flush()
            last_flush = now

    try:
        await fan_out(
            todo,
            one,
            limit=max_concurrent_questions or client.max_connections,
            desc=f"answer ({sys_.config.system})",
            unit="q",
            progress=progress,
            postfix=lambda: summary.progress(counts),
            on_result=finished,
        )
    finally:
        flush()
        summary.settle()
        if search_backend is not None:
            summary.search_calls = search_backend.calls - s_calls0
            summary.search_cache_hits = search_backend.cache_hits - s_hits0
            summary.search_usage = search_backend.usage - s_usage0
        extra["last_invocation"] = {
            "model_calls": summary.usage.calls,
            "model_cost_usd": round(summary.spent_usd, 6),
            "search_calls": summary.search_calls,
            "search_cache_hits": summary.search_cache_hits,
            "search_model_cost_usd": round(summary.search_usage.cost_usd or 0.0, 6),
        }
        runs.write_meta(root, _meta(root, client, sys_, questions, runs.read_meta(root), extra))
    final = [done[q.id] for q in questions if q.id in done]
    summary.ok = sum(t.status == "ok" for t in final)
    summary.failed = sum(t.status == "failed" for t in final)
    summary.no_answer = sum(t.status == "no_answer" for t in final)
    summary.pending = summary.total - summary.ok - summary.failed - summary.no_answer
    summary.errors = [
        f"{t.status} {t.question_id}: {t.error}" for t in final if t.status in ("pending", "failed") and t.error
    ]
    return summary


def run_system(*args: Any, **kw: Any) -> RunSummary:
    """Run ``system`` (``agentic``, ``search-then-read``; ``no-search`` when ``search_backend`` is
    ``None``) on ``questions``, writing ``questions.jsonl``, ``answers.jsonl`` and ``run.json``
    into ``run_dir``. Re-running resumes: ok and no_answer questions are skipped, pending and
    failed ones retried.

    Keyword arguments: ``store`` (the :class:`~trek.pages.PageStore` for opened pages),
    ``max_rounds``, ``results_per_search``, ``top_k``, ``page_chars`` (page text shown to the
    system, default :data:`~trek.pages.AGENT_PAGE_CHARS`), ``hints`` (evidence advice, off by
    default), ``params`` (extra sampling parameters), ``max_concurrent_questions``,
    ``run_config`` (recorded in ``run.json``).

    Arguments are those of :func:`arun_system` (``questions``, ``run_dir``, ``client``,
    ``search_backend``, ``system``, ``effort``, ``progress``, then the keywords); the client and
    the backend are closed at the end.
    """
    return run_closing(arun_system, *args, close=("client", "search_backend"), **kw)
