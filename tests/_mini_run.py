"""An agentic run over TrekBench-Mini's local index, answered by a scripted model on the fake
server: the run folder several end-to-end tests of the judges start from."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trek.answering.runner import run_system
from trek.llm import LLMCache, LLMClient
from trek.pages import PageStore
from trek.search import make_backend


def agentic_run(mini: Any, rd: Path, base_url: str, model: str, questions: Iterable[str], *,
                max_rounds: int, results_per_search: int = 3) -> Path:
    """Answer ``questions`` (Mini ids) with the scripted ``model`` at ``base_url`` into ``rd``."""
    store = PageStore(rd / "pages.sqlite")
    store.add_documents(mini.documents)
    client = LLMClient(model, base_url=base_url, cache=LLMCache(rd / "llm-cache.sqlite"), progress=False)
    wanted = set(questions)
    qs = [q for q in mini.questions if q.id in wanted]
    run_system(qs, rd, client, make_backend("local", store=store, cache=None), system="agentic",
               progress=False, store=store, results_per_search=results_per_search, max_rounds=max_rounds)
    store.close()
    return rd
