"""``trek wild run`` as one library call: answer TrekBench-Wild (or TrekBench-Mini) with one
search-augmented system into a run directory.

:func:`run_wild` takes the run directory, the evaluated model's :class:`~trek.roles.Role`, the
search proxy's endpoint and one :class:`WildSettings`; it loads the questions, builds the
clients (through :meth:`trek.runs.RunDir.client`), the page store and the search backend,
estimates the cost, asks ``proceed`` and runs :func:`trek.answering.runner.run_system`. The command in
:mod:`trek.cli.run` only parses its options into these.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from trek.roles import Role
from trek.types import Question

__all__ = ["WildSettings", "check_partial", "load_questions", "run_wild"]

#: The search systems ``trek wild run`` chooses from (no-search comes with ``--search none``).
WILD_SYSTEMS = ("agentic", "search-then-read")
PROXY_APIS = ("chat", "responses")

SEARCH_CHOICE = ("choose a search backend with --search: tavily, duckduckgo, openai, proxy:MODEL, local (a corpus "
                 "you loaded into the run's page store with trek pages add) or none")


@dataclasses.dataclass(frozen=True)
class WildSettings:
    """What a Wild run answers with: the question set (``questions``: wild or mini, from
    ``data_dir``, the first ``limit``), the ``search`` backend (``None``: local for mini), the
    ``system`` (the keywords of :func:`trek.answering.runner.run_system` that choose and set it: ``system``,
    ``effort``, ``max_rounds``, ``results_per_search``, ``top_k``, ...), live page fetching
    (``fetch``: ``None`` is on for web backends), the proxy search model's API, the clients'
    ``timeout``/``max_retries`` and the estimate's assumptions."""

    questions: str = "wild"
    data_dir: Path | None = None
    limit: int | None = None
    allow_partial: bool = False
    search: str | None = None
    fetch: bool | None = None
    fetch_timeout: float = 20.0
    proxy_api: str = "chat"
    system: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    timeout: float = 120.0
    max_retries: int = 6
    assume_rounds: int | None = None
    assume_output: int = 4096

    def checked(self) -> WildSettings:
        """These settings with the search backend chosen; a ``ValueError`` naming the flag for a
        choice that is not one."""
        from trek.search.agent import EFFORTS

        system, effort = self.system.get("system", "agentic"), self.system.get("effort")
        if system not in WILD_SYSTEMS:
            raise ValueError(f"--system must be agentic or search-then-read, not {system!r}")
        if effort is not None and effort not in EFFORTS:
            raise ValueError(f"--effort must be one of {', '.join(EFFORTS)}, not {effort!r}")
        if self.proxy_api not in PROXY_APIS:
            raise ValueError("--proxy-api must be chat or responses")
        from trek.datasets.sets import QUESTION_SETS

        if self.questions not in QUESTION_SETS:
            import difflib

            near = difflib.get_close_matches(str(self.questions), QUESTION_SETS, n=1)
            raise ValueError(f"--questions {self.questions}: no such question set; choose "
                             f"{' or '.join(QUESTION_SETS)}" + (f" (did you mean {near[0]}?)" if near else ""))
        if self.search is None and self.questions != "mini":
            raise ValueError(SEARCH_CHOICE)
        return dataclasses.replace(self, search=self.search or "local")

    def system_settings(self, store: Any) -> dict[str, Any]:
        """The keywords of :func:`trek.answering.runner.run_system` (and of the estimate) for ``store``."""
        return {**self.system, "store": store}


def _warn(text: str) -> None:
    print(text, file=sys.stderr)


def check_partial(bench: Any, allow_partial: bool, warn: Callable[[str], None] = _warn) -> bool:
    """Stop on a TrekBench-Wild with fewer questions than the paper's (``IncompleteDataError``)
    unless ``allow_partial``, which only warns (``warn``); True when the set is partial."""
    from trek.datasets.wild import IncompleteDataError, check_complete

    try:
        check_complete(bench)
    except IncompleteDataError as e:
        if not allow_partial:
            raise
        warn(f"warning: {e}")
        return True
    return False


def load_questions(which: str, data_dir: Path | None, allow_partial: bool = False,
                   warn: Callable[[str], None] = _warn) -> tuple[list[Question], list[Any], dict[str, Any]]:
    """The question set, its documents, and what ``run.json`` records of a partial set (see
    :func:`check_partial`)."""
    from trek.datasets import load_benchmark
    from trek.datasets.wild import WildBenchmark

    bench = load_benchmark(which, data_dir)
    partial: dict[str, Any] = {}
    if isinstance(bench, WildBenchmark) and check_partial(bench, allow_partial, warn):
        partial = {"partial_question_set": bench.counts()}
    # Mini's search corpus: its hand-written pages (generated timeline pages are Ctrl pool material)
    docs = getattr(bench, "corpus", None) or getattr(bench, "documents", []) or []
    return list(bench.questions), list(docs), partial


class _Corpus:
    """Mini's search corpus read again from its files when the page store takes it (a
    benchmark's pages are never all in memory); false when there is none."""

    def __init__(self, bench: Any):
        self.bench = bench

    def __bool__(self) -> bool:
        return self.bench.corpus_count > 0

    def __iter__(self) -> Iterator[Any]:
        return self.bench.documents(corpus=True)


def _question_source(settings: WildSettings, warn: Callable[[str], None]) -> tuple[Any, Any, dict[str, Any]]:
    """(questions, documents, partial) of a run. TrekBench-Mini is checked as a whole but not
    loaded (:func:`trek.datasets.mini.scan`): its questions are read again by offset whenever the
    run goes over them, and its pages go from the files into the page store. Wild (144 questions)
    is loaded by :func:`load_questions`."""
    if settings.questions == "mini":
        from trek.datasets import mini

        bench = mini.scan(settings.data_dir)
        return bench.questions.head(settings.limit), _Corpus(bench), {}
    qs, docs, partial = load_questions(settings.questions, settings.data_dir, settings.allow_partial, warn)
    return (qs[:settings.limit] if settings.limit is not None else qs), docs, partial


def _backend(rd: Any, settings: WildSettings, client: Any, endpoint: Callable[..., Any], proxy_url: str | None,
             docs: Iterable[Any]) -> tuple[Any, Any, Any, bool]:
    """(search backend, proxy search client or None, page store, fetch) of a run."""
    from trek.pages import PageStore
    from trek.search import make_backend
    from trek.search.base import FatalSearchError, SearchCache

    search = settings.search or "local"
    fetch = settings.fetch if settings.fetch is not None else search.strip() not in ("none", "", "local")
    store = PageStore(rd.pages, fetch=fetch, timeout=settings.fetch_timeout)
    if docs:
        store.add_documents(docs)
    if search.strip() == "local" and not any(True for _ in store.pages("corpus")):
        from trek.search.local import EMPTY_CORPUS

        raise FatalSearchError(EMPTY_CORPUS.format(store=store.path))
    search_client, proxy = None, {}  # proxy:MODEL: a client of its own, and --proxy-api
    if search.startswith("proxy:"):
        search_client = endpoint(Role("search-proxy", search.split(":", 1)[1], proxy_url),
                                 api_key=os.environ.get("TREK_SEARCH_API_KEY") or None)
        proxy["api"] = settings.proxy_api
    backend = make_backend(search, store=store, client=client, search_client=search_client,
                           cache=SearchCache(rd.search_cache), max_retries=settings.max_retries, **proxy)
    return backend, search_client, store, fetch


def run_wild(run_dir: str | os.PathLike[str], model: Role, settings: WildSettings, *,
             search_proxy_base_url: str | None = None, budget_usd: float | None = None,
             prompts_dir: str | os.PathLike[str] | None = None, progress: bool = True,
             proceed: Callable[[Any, Path], bool] = lambda estimate, ledger: True,
             announce: Callable[[Mapping[str, Any]], None] = lambda roles: None,
             warn: Callable[[str], None] = _warn, epoch: int = 1, record: Mapping[str, Any] | None = None) -> Any:
    """Answer the questions of ``settings`` with ``model`` into ``run_dir`` and return the
    :class:`~trek.answering.runner.RunSummary`, or ``None`` when ``proceed(estimate, ledger)`` says no
    (a dry run). ``search_proxy_base_url``: the proxy search model's endpoint (default: the
    model's). The model and the proxy share one cache, one price table and, on one server, one
    connection limit; ``budget_usd`` is the model's ceiling over every invocation. ``epoch``: the
    epoch ``run_dir`` holds (:mod:`trek.epochs`; its calls are cache entries of their own);
    ``record``: more settings for ``run.json``'s ``config`` (what ``trek retry`` re-runs)."""
    from trek import templates
    from trek.answering.dry_run import estimate_wild_run
    from trek.answering.runner import run_system
    from trek.limits import EndpointLimits
    from trek.runs import ANSWERS, RunDir

    settings = settings.checked()
    rd = RunDir(run_dir)
    with templates.prompts_folder(prompts_dir):
        rd.check_target("wild", option="--run")
        qs, docs, partial = _question_source(settings, warn)
        limits = EndpointLimits()

        def endpoint(role: Role, **kw: Any) -> Any:
            role = dataclasses.replace(role, max_connections=model.max_connections, prices=model.prices)
            return rd.client(role, timeout=settings.timeout, max_retries=settings.max_retries, limits=limits,
                             assume_output=settings.assume_output, **kw)

        client = endpoint(model, budget_usd=budget_usd)
        client.epoch = epoch
        backend, search_client, store, fetch = _backend(rd, settings, client, endpoint,
                                                        search_proxy_base_url or model.base_url, docs)
        del docs  # the store holds them now (a large benchmark's pages are not kept twice)
        announce({"evaluated": client, "search proxy": search_client})
        system = settings.system_settings(store)
        est = estimate_wild_run(qs, rd.path, client, backend, assume_rounds=settings.assume_rounds,
                                assume_output=settings.assume_output, **system)
        if not proceed(est, rd.ledger(ANSWERS)):
            return None
        run_config = {"question_set": settings.questions, "fetch": fetch, **partial, **(record or {})}
        if search_client is not None:
            run_config["search_endpoint"] = search_client.base_url
        return run_system(qs, rd.path, client, backend, progress=progress, run_config=run_config, **system)
