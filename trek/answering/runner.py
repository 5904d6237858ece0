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

The loop (resume, fan-out, checkpoints, failures, the run lock) is :mod:`trek.stage`'s; this
module adds the answering: :class:`AnswerStage`. One question's rejected call (a 400 such as an
over-long context, a refused search query) or internal error marks it ``failed`` and the run goes
on; errors that doom every question (:func:`trek.errors.is_run_fatal`) stop it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs
from trek.llm.client import LLMClient
from trek.llm.ledger import ledger_path
from trek.pages import AGENT_PAGE_CHARS, PageStore
from trek.search.agent import SearchSystem, SystemConfig
from trek.search.base import SearchBackend
from trek.stage import Slot, Stage, digest, execute, run_lock, synchronous
from trek.types import Question, RunMeta, Trajectory, Usage

__all__ = ["RunSummary", "FINAL_STATUSES", "AnswerStage", "system_config", "arun_system", "run_system"]

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
    _backend: tuple[Any, ...] = field(default=(), init=False, repr=False, compare=False)

    def watch(self, client: Any, backend: SearchBackend | None = None) -> None:
        super().watch(client)
        if backend is not None:
            self._backend = (backend, backend.calls, backend.cache_hits, backend.usage)

    def settle(self) -> None:
        super().settle()
        if self._backend:
            b, calls, hits, usage = self._backend
            self.search_calls, self.search_cache_hits, self.search_usage = b.calls - calls, b.cache_hits - hits, b.usage - usage

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
    question_set: tuple[list[str], int],
    previous: RunMeta | None,
    extra: dict[str, Any],
) -> RunMeta:
    versions, count = question_set
    prompt_versions = {"answer+system": " | ".join(versions)}
    backend = system.backend
    if backend is not None and hasattr(backend, "prompt_version"):
        prompt_versions["search"] = backend.prompt_version()
    config = {"system": system.system_dict(), "questions": count, **extra}
    return runs.new_meta(run_dir, "wild", client, previous, prompt_versions=prompt_versions, config=config)


def _versions(system: SearchSystem, questions: Iterable[Question]) -> tuple[list[str], int]:
    """The sorted prompt versions of a question set and its size, in one pass over it."""
    versions: set[str] = set()
    count = 0
    for q in questions:
        versions.add(system.prompt_version(q))
        count += 1
    return sorted(versions), count


def system_config(search_backend: SearchBackend | None, system: str = "agentic", effort: str | None = None,
                  **settings: Any) -> SystemConfig:
    """The system settings of a run (``no-search`` whenever there is no search backend);
    ``settings`` are :class:`~trek.search.agent.SystemConfig`'s fields (``max_rounds``, ``top_k``, ...)."""
    params = settings.pop("params", None)
    if params is not None:
        settings["params"] = dict(params)
    return SystemConfig(system=system if search_backend is not None else "no-search", effort=effort, **settings)


class AnswerStage(Stage[Question, Trajectory]):
    """Wild answering on :mod:`trek.stage`: one trajectory per question in ``answers.jsonl``."""

    record = Trajectory
    name = "answer"
    unit = "q"
    keep_unlisted = True  # answers to questions a smaller --limit leaves out stay in the file
    head_fields = ("question_id", "status", "input_key", "error")

    def __init__(self, root: Path, system: SearchSystem, client: LLMClient, tally: runs.Tally):
        self.root, self.system, self.client, self.tally = root, system, client, tally

    def slot(self, q: Question) -> Slot:
        return Slot(self.root / runs.ANSWERS, q.id)

    def input_key(self, q: Question) -> str:
        return digest({
            "question": [q.id, q.dataset, q.question, q.effective_year, q.effective_year_raw],
            "model": self.client.model, "system": self.system.system_dict(),
            "prompt": self.system.prompt_version(q),
        })

    def finished(self, t: Trajectory) -> bool:
        return t.status in FINAL_STATUSES

    async def produce(self, q: Question, key: str) -> Trajectory:
        t = await self.system.arun(q)
        return t.model_copy(update={"input_key": key})

    def failure(self, q: Question, key: str, error: str) -> Trajectory:
        return Trajectory(question_id=q.id, model=self.client.model or "", system=self.system.system_dict(),
                          status="failed", error=error, prompt_version=self.system.prompt_version(q), input_key=key)

    def postfix(self) -> str:
        return self.tally.dollars()

    def llm_clients(self) -> list[Any]:
        # the evaluated model and the backend's own model (a proxy search model; OpenAI's search
        # is the evaluated model itself): one budget for both
        return [self.client, getattr(self.system.backend, "client", None)]


async def arun_system(
    questions: Collection[Question],
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
    checkpoint_seconds: float = 1.0,
    max_rounds: int = 8,
    results_per_search: int = 5,
    top_k: int = 5,
    page_chars: int = AGENT_PAGE_CHARS,
    hints: bool = False,
    first_search: bool = False,
    params: dict[str, Any] | None = None,
) -> RunSummary:
    """Run ``system`` (``agentic``, ``search-then-read``; ``no-search`` without a backend) on
    ``questions`` into ``run_dir``. Re-running keeps ``ok``/``no_answer`` trajectories whose
    input (question, model, system, prompt version) is unchanged and retries the others.

    ``store``: the :class:`~trek.pages.PageStore` of opened pages; ``max_rounds`` ...
    ``params``: the system's settings (:func:`system_config`; ``page_chars`` is the page text
    shown, ``hints`` evidence advice, ``first_search`` a required search on the agentic system's
    first round, both off by default); ``max_concurrent_questions`` (default the
    client's ``max_connections``); ``run_config`` is recorded in ``run.json``. The caller owns the
    client and the backend (:func:`run_system` closes them).
    """
    root = Path(run_dir)
    seen: set[str] = set()
    for q in questions:  # ids alone: the questions may be read from a file, one at a time
        if q.id in seen:
            raise ValueError("question ids must be unique")
        seen.add(q.id)
    del seen
    config = system_config(search_backend, system, effort, max_rounds=max_rounds,
                           results_per_search=results_per_search, top_k=top_k, page_chars=page_chars,
                           hints=hints, first_search=first_search, params=params)
    sys_ = SearchSystem(client, search_backend, store, config)
    extra = dict(run_config or {})
    summary = RunSummary(run_dir=root, total=len(questions))
    with run_lock(root):
        previous = runs.read_meta(root)
        runs.check_identity(root, previous, client.model or "", sys_.system_dict())
        # the merged question set is written and indexed, not held (its prompt versions and size
        # are what run.json needs, taken in one pass)
        written = runs.grow_questions_indexed(root, questions)
        with written.reader() as read:
            question_set = _versions(sys_, (read(n) for n in range(len(written))))
        del written
        runs.write_meta(root, _meta(root, client, sys_, question_set, previous, extra))
        summary.watch(client, search_backend)
        stage = AnswerStage(root, sys_, client, summary)
        try:
            tally = await execute(stage, questions, outputs=[root / runs.ANSWERS],
                                  limit=max_concurrent_questions or client.max_connections, progress=progress,
                                  checkpoint_seconds=checkpoint_seconds, ledger=ledger_path(root / runs.ANSWERS))
        finally:
            summary.settle()
            extra["last_invocation"] = {
                "model_calls": summary.usage.calls,
                "model_cost_usd": round(summary.spent_usd, 6),
                "search_calls": summary.search_calls,
                "search_cache_hits": summary.search_cache_hits,
                "search_model_cost_usd": round(summary.search_usage.cost_usd or 0.0, 6),
            }
            runs.write_meta(root, _meta(root, client, sys_, question_set, runs.read_meta(root), extra))
    summary.skipped = tally.kept
    summary.ok = tally.counts["ok"]
    summary.failed = tally.counts["failed"]
    summary.no_answer = tally.counts["no_answer"]
    summary.pending = summary.total - summary.ok - summary.failed - summary.no_answer
    summary.errors = tally.errors
    return summary


#: The synchronous :func:`arun_system`; closes the client and the search backend at the end.
run_system = synchronous(arun_system, close=("client", "search_backend"))
