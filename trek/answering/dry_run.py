"""What a ``trek wild run`` would cost, before it runs (``--dry-run``, ``--confirm-above``).

:func:`estimate_wild_run` builds each unfinished question's first model request with the real
system code (:class:`~trek.search.agent.SearchSystem` driving a
:class:`~trek.llm.estimate.RecordingClient`, so the prompts, tools and parameters are exactly
those the run would send, and nothing is sent), then applies the system's
:class:`~trek.llm.estimate.Assumption`:

* ``no-search``: one call per question;
* ``search-then-read``: one call per question, its prompt grown by up to ``top_k`` pages of
  ``page_chars`` characters (~4 characters a token), and one search call;
* ``agentic``: 1 to ``max_rounds + 1`` model calls per question (or exactly ``--assume-rounds``),
  one tool call per round, each adding up to one page (``page_chars / 4`` tokens) plus the tool
  call to every later prompt; one search call per round but the last;
* native OpenAI search (``--search openai``): one Responses call per question and 0 to
  ``max_rounds`` (or ``--assume-rounds``) searches inside it, the results they bring billed as up
  to 1,000 input tokens each.

Questions the run would keep are left out, by the run's own rule (:func:`trek.stage.plan` with
:class:`~trek.answering.runner.AnswerStage`: a final answer whose input key, i.e. question, model, system
settings and prompt version, is unchanged), and so are those whose first request is in the run's
cache (they replay from it).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from trek import runs
from trek.aio import fan_out, run_sync
from trek.answering.runner import AnswerStage, system_config
from trek.llm.client import LLMClient
from trek.llm.estimate import Assumption, Estimate, RecordingClient, estimate_requests
from trek.pages import PageStore
from trek.search.agent import SearchSystem
from trek.search.base import SearchBackend, SearchOutcome
from trek.stage import plan
from trek.types import Question, SearchCall

__all__ = ["NATIVE_SEARCH_INPUT_TOKENS", "estimate_wild_run"]

#: Assumed input tokens that one native OpenAI web search adds to the model's prompt.
NATIVE_SEARCH_INPUT_TOKENS = 1000
#: How many questions' first steps the estimate records at a time.
CHUNK = 1000


class _NoResults:
    """A stand-in backend for search-then-read dry runs: same name and settings, no search made."""

    def __init__(self, real: SearchBackend):
        self._real = real
        self.name = real.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def acall(self, query: str, k: int | None = None) -> SearchOutcome:
        return SearchOutcome(call=SearchCall(query=query, backend=self.name, results=[]))


def estimate_wild_run(
    questions: Collection[Question],
    run_dir: str | Path,
    client: LLMClient,
    backend: SearchBackend | None,
    *,
    system: str = "agentic",
    effort: str | None = None,
    store: PageStore | None = None,
    assume_rounds: int | None = None,
    assume_output: int = 4096,
    **settings: Any,
) -> Estimate:
    """The :class:`~trek.llm.estimate.Estimate` of answering ``questions`` into ``run_dir``;
    ``settings`` are those of :func:`trek.answering.runner.system_config`."""
    cfg = system_config(backend, system, effort, **settings)
    # the run's own rules: it refuses another model or system in the directory, and keeps a final
    # answer only while its input key is unchanged (a changed prompt version re-answers)
    real = SearchSystem(client, backend, store, cfg)
    runs.check_identity(run_dir, runs.read_meta(run_dir), client.model or "", real.system_dict())
    keeps = AnswerStage(Path(run_dir), real, client, runs.Tally())
    # the questions to estimate are read again from the source as they are recorded, never listed
    todo = plan(keeps, questions, keep=False)
    n_todo = todo.runs
    rec = RecordingClient(client)
    max_rounds, top_k, page_chars = cfg.max_rounds, cfg.top_k, cfg.page_chars
    sys_ = SearchSystem(rec, _NoResults(backend) if cfg.system == "search-then-read" and backend else backend,
                        store, cfg)

    def recorded() -> Iterator[tuple[str, dict[str, Any], int]]:
        # the first steps of CHUNK questions at a time, handed on and released: an estimate of a
        # large run never holds every first request (nor every pending trajectory)
        jobs = (q for q, _, _ in todo.iter_jobs()) if n_todo else iter(())
        while chunk := list(itertools.islice(jobs, CHUNK)):
            run_sync(fan_out(chunk, sys_.arun, progress=False, keep_results=False))
            out, rec.recorded = rec.recorded, []
            yield from out

    name = backend.name if backend is not None else None
    page_tokens = page_chars // 4
    if cfg.system == "no-search":
        a = Assumption(description="one model call per question, no search")
    elif cfg.system == "search-then-read":
        a = Assumption(
            description=f"one search and one model call per question reading up to {top_k} pages of "
                        f"{page_chars:,} characters (~{top_k * page_tokens:,} tokens)",
            extra_input=(0, top_k * (page_tokens + 20)), search_low=1, search_high=1, search_backend=name,
        )
    elif sys_.native:
        n = assume_rounds or max_rounds
        a = Assumption(
            description=f"one Responses call per question with {'exactly' if assume_rounds else 'up to'} {n} "
                        f"built-in web searches, each adding up to {NATIVE_SEARCH_INPUT_TOKENS:,} input tokens",
            extra_input=((n if assume_rounds else 0) * NATIVE_SEARCH_INPUT_TOKENS, n * NATIVE_SEARCH_INPUT_TOKENS),
            search_low=n if assume_rounds else 0, search_high=n, search_backend=name,
        )
    else:
        a = Assumption.agentic(assume_rounds or max_rounds + 1, page_tokens + 100, name,
                               assumed=assume_rounds is not None)
    est = estimate_requests(recorded(), client, label="trek wild run", assumption=a, assume_output=assume_output)
    est.items = len(questions)
    est.cached_items += len(questions) - n_todo
    if name and name.startswith("proxy"):
        est.notes.append("the proxy search model's own tokens are not included")
    return est
