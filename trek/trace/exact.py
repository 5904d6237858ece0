"""TrekTrace's judge steps decided exactly from the annotations (``--judge oracle``).

When a judge role of a trace is the exact judge (:class:`trek.exact.ExactJudge`), each of its
steps is answered from the annotations of TrekBench-Mini (and of Ctrl contexts built from it),
in the same value shape the LLM judge's reply would have, so the schedule, the flags, the labels
and the test records stay TrekTrace's own:

* **key evidence** (diagnostic): the answer the missing gold pages are annotated to support;
* **evidence match** (diagnostic): a retrieved page is annotated as supporting the reference: a
  gold page of the question, or another annotated page of the question that is neither an older
  nor a neighbouring question's page (role ``outdated``/``relevance``/``fabrication``) and whose
  annotated answer the exact grader accepts;
* **query adequacy** (analysis), made operational on a closed corpus and independent of what the
  system itself retrieved: some recorded query, searched on the same local BM25 index, ranks a
  gold page of the question within the first :func:`adequacy_depth` results — at least
  :data:`ADEQUACY_DEPTH` (a first page of results a searcher would read) and at least twice the
  system's own result depth (``top_k`` for search-then-read, ``results_per_search`` for agentic
  search, from the run's ``run.json``); ``query_depth`` replaces it. A query that ranks the gold
  page below the system's depth but within this cut-off is adequate although the system did not
  read the page: the TrekTrace label Retrieval (at the system's own depth adequacy would always
  equal retrieval, and Retrieval could never be given);
* **gold-only and gold-plus-noise verdicts** (analysis): the exact grader's rule
  (:func:`trek.graders.exact.decide`) on the probe's answer, correct or not;
* **stale reference** (diagnostic): a page of the question itself (gold or outdated) dated after
  its latest gold page, whose fact holds by the effective year, states an answer the grader does
  not accept.

The evaluated model's probes stay the model's. :meth:`ExactTrace.check` refuses, before any call,
a run the annotations cannot answer for, naming what is missing: a question that is not annotated,
retrieved pages that are not annotated pages (a web run), a run that did not search the local
index or whose result depth ``run.json`` does not give, or a page store whose corpus is not the
one the run searched. Every step it answers is recorded with model ``oracle``, template
``exact.<step>`` and version :data:`VERSION`; it is never unreadable, so every test it plays runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs
from trek.annotations import AnnotatedPage, Annotations, MissingAnnotation
from trek.exact import ORACLE
from trek.graders.exact import DEFAULT_RULE, decide
from trek.graders.exact import VERSION as GRADER_VERSION
from trek.pages import PageStore, normalize_url
from trek.trace.records import Step
from trek.types import Question

__all__ = ["VERSION", "ExactTrace", "exact_step", "decided", "DEPTH_KEYS", "ADEQUACY_DEPTH", "ADEQUACY_FACTOR", "adequacy_depth"]

# Version history: exact-trace-1 first release (also names the exact grader's version it uses);
# exact-trace-2 query adequacy within a deeper cut-off than the system's (adequacy_depth).
VERSION = f"exact-trace-2+{GRADER_VERSION}"
#: The least depth within which a recorded query must rank a gold page to be adequate.
ADEQUACY_DEPTH = 10
#: ... and at least this multiple of the system's own result depth.
ADEQUACY_FACTOR = 2
#: The run.json system key that holds each system's result depth.
DEPTH_KEYS = {"search-then-read": "top_k", "agentic": "results_per_search"}
#: Roles of pages that never count as evidence for the reference (older answers, neighbouring questions).
NOT_EVIDENCE = ("outdated", "relevance", "fabrication")


def adequacy_depth(system_depth: int) -> int:
    """The cut-off of the exact query test for a system that read ``system_depth`` results per
    query: the larger of :data:`ADEQUACY_DEPTH` and :data:`ADEQUACY_FACTOR` times it (always deeper
    than the system's own, so an adequate query can still miss the evidence)."""
    return max(ADEQUACY_DEPTH, ADEQUACY_FACTOR * system_depth)


@dataclass
class ExactTrace:
    """The exact judge's side of one tracing run: annotations, the local index and the depth."""

    annotations: Annotations
    store: PageStore
    run_dir: Path
    rule: str = DEFAULT_RULE
    query_depth: int | None = None
    #: The judge roles the exact judge plays in this run (``diagnostic``, ``analysis``).
    roles: frozenset[str] = frozenset({"diagnostic", "analysis"})
    _index: Any = field(default=None, repr=False)
    _depth: int | None = field(default=None, repr=False)

    def plays(self, role: str) -> bool:
        """Whether the exact judge answers role ``role``'s questions."""
        return role in self.roles

    def step(self, name: str, who: Any, value: dict[str, Any], detail: dict[str, Any]) -> Step:
        """The record of step ``name`` decided for role model ``who``."""
        return exact_step(name, who.role, who.endpoint, who.model, value, detail)

    # -- checks before any call ------------------------------------------------------------------
    def check(self, cases: Sequence[Any], *, diagnostic: bool, analysis: bool, stale: bool) -> None:
        """Refuse (:class:`~trek.annotations.MissingAnnotation`) what the annotations cannot decide."""
        for case in cases:
            q = case.question
            self.annotations.question(q)
            if diagnostic and stale:
                self.annotations.gold(q)
            if diagnostic:
                unknown = self.annotations.unknown_urls(case.collection)
                if unknown:
                    raise MissingAnnotation(
                        f"{self.run_dir}: question {q.id!r}: {len(unknown)} retrieved page(s) are not annotated pages "
                        f"(e.g. {unknown[0]}); the exact judge decides evidence only for runs whose pages are "
                        f"annotated ({self.annotations.source})")
        if analysis and any(case.queries for case in cases):
            if self.query_depth is None:
                self.system_depth()
            self.index()

    def depth(self) -> int:
        """The query test's cut-off: ``query_depth`` when set, else :func:`adequacy_depth` of the
        system's result depth."""
        if self.query_depth is not None:
            return self.query_depth
        return adequacy_depth(self.system_depth())

    def system_depth(self) -> int:
        """The system's own result depth per query (``run.json``)."""
        if self._depth is None:
            meta = runs.read_meta(self.run_dir)
            system = meta.config.get("system") if meta is not None else None
            where = self.run_dir / runs.META
            if not isinstance(system, dict):
                raise MissingAnnotation(f"{where}: no 'config.system': the exact query test needs the system's "
                                        "search backend and result depth")
            if system.get("search") != "local":
                raise MissingAnnotation(
                    f"{where}: the run searched with {system.get('search')!r}, not the local index: the exact query "
                    "test re-runs queries on a closed corpus only")
            key = DEPTH_KEYS.get(str(system.get("system")))
            value = system.get(key) if key else None
            if not isinstance(value, int) or value < 1:
                raise MissingAnnotation(f"{where}: 'config.system.{key or 'top_k/results_per_search'}' (the result "
                                        f"depth of {system.get('system')!r}) is missing")
            self._depth = value
        return self._depth

    def index(self) -> Any:
        """The local BM25 index over the page store's corpus (checked against the run's corpus)."""
        if self._index is None:
            from trek.search.local import LocalSearch

            meta = runs.read_meta(self.run_dir)
            system = meta.config.get("system") if meta is not None else None
            want = system.get("corpus") if isinstance(system, dict) else None
            have = self.store.fingerprint()
            if want and want != have:
                raise MissingAnnotation(
                    f"{self.run_dir / runs.META}: the run searched the corpus {want}, but the page store holds "
                    f"corpus {have}: the exact query test needs the same local index")
            self._index = LocalSearch(self.store, cache=None)
        return self._index

    # -- the steps -------------------------------------------------------------------------------
    def fingerprint(self, q: Question) -> list[Any]:
        return [self.rule, self.query_depth, self.annotations.fingerprint(q)]

    def _accepts(self, q: Question, answer: str | None) -> bool:
        return decide(q, answer, self.annotations.competing(q), rule=self.rule).correct

    def supports(self, q: Question, page: AnnotatedPage | None) -> bool:
        """Whether an annotated page counts as evidence for ``q``'s reference (module docstring)."""
        if page is None or page.question_id != q.id:
            return False
        if page.role == "gold":
            return True
        return page.role not in NOT_EVIDENCE and self._accepts(q, page.answer)

    def key_evidence(self, q: Question, missing: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        pages = [p for u in missing if (p := self.annotations.page(u)) is not None]
        answers = list(dict.fromkeys(p.answer for p in pages if p.answer)) or list(q.answers[:1])
        text = f"The gold page(s) are annotated as supporting: {' | '.join(answers)}."
        return {"key_evidence": text, "gold_evidence_urls": list(missing)}, {"gold_pages": [p.doc_id for p in pages]}

    def evidence_match(self, q: Question, collection: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        found = [(u, p) for u in collection if self.supports(q, p := self.annotations.page(u))]
        urls = [u for u, _ in found]
        if found:
            reason = "Retrieved page(s) annotated as supporting the reference: " + ", ".join(
                f"{p.doc_id} ({p.role})" for _, p in found)
        else:
            reason = "No retrieved page is annotated as supporting the reference."
        value = {"evidence_match": bool(found), "retrieved_key_evidence": " | ".join(
            dict.fromkeys(p.answer or "" for _, p in found)), "equivalent_urls": urls, "reason": reason}
        return value, {"supporting": [p.doc_id for _, p in found]}

    def query_adequacy(self, q: Question, queries: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        depth = self.depth()
        gold = {normalize_url(p.url) for p in self.annotations.question(q) if p.role == "gold" and p.url}
        gold |= {normalize_url(u) for u in q.gold_urls}
        hits: list[dict[str, Any]] = []
        for query in dict.fromkeys(queries):
            ranked = [p.url for p, _ in self.index().rank(query, depth)]
            for rank, url in enumerate(ranked, start=1):
                if normalize_url(url) in gold:
                    hits.append({"query": query, "rank": rank, "url": url})
                    break
        if hits:
            h = min(hits, key=lambda x: x["rank"])
            reason = f"The query {h['query']!r} ranks a gold page at {h['rank']} of {depth} on the local index."
        else:
            reason = f"No recorded query ranks a gold page within the top {depth} of the local index."
        return {"query_adequate": bool(hits), "reason": reason}, {"depth": depth, "hits": hits}

    def verdict(self, q: Question, candidate: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        d = decide(q, candidate, self.annotations.competing(q), rule=self.rule)
        return {"correct": d.correct, "reason": d.explain()}, json.loads(d.to_json())

    def stale(self, q: Question) -> tuple[dict[str, Any], dict[str, Any]]:
        gold = self.annotations.gold(q)
        latest = max(p.date for p in gold if p.date is not None)
        newer = []
        for p in self.annotations.question(q):
            if p.role not in ("gold", "outdated") or p.date is None or p.date <= latest:
                continue
            holds = p.valid_from or p.date
            if q.effective_year is not None and holds.year > q.effective_year:
                continue  # a later change: the reference still holds for its year
            if not self._accepts(q, p.answer):
                newer.append(p)
        if newer:
            reason = "Newer page(s) of the question state another answer: " + ", ".join(
                f"{p.doc_id} ({p.date}: {p.answer})" for p in newer)
        else:
            reason = f"No page of the question dated after its latest gold page ({latest}) states another answer."
        return {"supports_reference": not newer, "reason": reason}, {"newer": [p.doc_id for p in newer]}


def decided(step: Step) -> bool:
    """Whether a recorded step was decided by the exact judge (its records name model ``oracle``)."""
    return step.model == ORACLE


def exact_step(name: str, role: str, endpoint: str, model: str, value: dict[str, Any], detail: dict[str, Any]) -> Step:
    """The record of one step the exact judge answered (never unreadable, never pending)."""
    return Step(name=name, role=role, model=model, endpoint=endpoint, template=f"exact.{name}",  # type: ignore[arg-type]
                version=VERSION, status="ok", value=value,
                raw=[json.dumps(detail, ensure_ascii=False, sort_keys=True, default=str)])


def for_trace(judge: Any, store: PageStore, run_dir: str | os.PathLike[str], query_depth: int | None = None,
              roles: Sequence[str] = ("diagnostic", "analysis")) -> ExactTrace:
    """The :class:`ExactTrace` of an :class:`~trek.exact.ExactJudge` for one run, playing ``roles``."""
    return ExactTrace(judge.bind(run_dir), store, Path(run_dir), rule=judge.rule, query_depth=query_depth,
                      roles=frozenset(roles))
