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
* **query adequacy** (analysis), a plausibility reading of the recorded queries as appendix C.2
  asks, never a new search: :func:`trek.query_targets.assess` over the question's annotated
  targets (entity, or for a multi-hop question the bridge entity; the attribute; the time window;
  the competing names). The verdict depends on no rank and no depth. Beside it, as a named
  diagnostic that decides nothing, the record keeps ``retrievable``: when the run searched the
  local index, the best rank at which any recorded query brings up a gold page there (within
  :data:`DIAGNOSTIC_DEPTH`), so a depth sweep can be tabulated
  (:func:`trek.report.trace.query_rank_sweep`);
* **gold-only and gold-plus-noise verdicts** (analysis): the exact grader's rule
  (:func:`trek.graders.exact.decide`) on the probe's answer, correct or not;
* **stale reference** (diagnostic): a page of the question itself (gold or outdated) dated after
  its latest gold page, whose fact holds by the effective year, states an answer the grader does
  not accept.

The evaluated model's probes stay the model's. :meth:`ExactTrace.check` refuses, before any call,
a run the annotations cannot answer for, naming what is missing: a question that is not annotated,
retrieved pages that are not annotated pages (a web run), a question without query targets, or a
page store whose corpus is not the one the run searched (the rank diagnostic only: a run on another index or an imported run is
traced without it). Every step it answers is recorded with model ``oracle``, template
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
from trek.graders.exact import DEFAULT_RULE, decide
from trek.graders.exact import VERSION as GRADER_VERSION
from trek.judges import UNDECIDED
from trek.pages import PageStore, normalize_url
from trek.query_targets import RULE as TARGETS_RULE
from trek.query_targets import adequate_queries, assess
from trek.trace.records import Step
from trek.types import Question

__all__ = ["VERSION", "ANSWER_KINDS", "answer_kind", "ExactTrace", "exact_step", "decided", "DIAGNOSTIC_DEPTH"]

# Version history: exact-trace-1 first release (also names the exact grader's version it uses);
# exact-trace-2 query adequacy within a deeper cut-off than the system's (adequacy_depth);
# exact-trace-3 query adequacy by plausibility over annotated targets (trek.query_targets), the
# rank kept as a diagnostic only.
VERSION = f"exact-trace-3+{GRADER_VERSION}+{TARGETS_RULE}"
#: How deep the rank diagnostic looks for a gold page (it decides nothing).
DIAGNOSTIC_DEPTH = 50
#: Roles of pages that never count as evidence for the reference (older answers, neighbouring questions).
NOT_EVIDENCE = ("outdated", "relevance", "fabrication")


@dataclass
class ExactTrace:
    """The exact judge's side of one tracing run: the annotations (and the local index, for the
    rank diagnostic)."""

    annotations: Annotations
    store: PageStore
    run_dir: Path
    rule: str = DEFAULT_RULE
    #: The judge roles the exact judge plays in this run (``diagnostic``, ``analysis``).
    roles: frozenset[str] = frozenset({"diagnostic", "analysis"})
    _index: Any = field(default=None, repr=False)
    _local: str | None = field(default=None, repr=False)

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
        if analysis:
            for case in cases:
                if case.queries:
                    self.annotations.query_targets(case.question)

    def searched_locally(self) -> str | None:
        """``None`` when the run searched the local index over this page store's corpus (the rank
        diagnostic can then be taken), else why not (recorded with the diagnostic)."""
        if self._local is None:
            meta = runs.read_meta(self.run_dir)
            system = meta.config.get("system") if meta is not None else None
            if not isinstance(system, dict) or system.get("search") != "local":
                how = system.get("search") if isinstance(system, dict) else None
                self._local = ("the run did not record its search backend" if how is None
                               else f"the run searched with {how}, not the local index")
            elif system.get("corpus") and system.get("corpus") != self.store.fingerprint():
                self._local = f"the run searched corpus {system.get('corpus')}, not this page store's"
            else:
                self._local = ""
        return self._local or None

    def index(self) -> Any:
        """The local BM25 index over the page store's corpus (for the rank diagnostic)."""
        if self._index is None:
            from trek.search.local import LocalSearch

            self._index = LocalSearch(self.store, cache=None)
        return self._index

    # -- the steps -------------------------------------------------------------------------------
    def fingerprint(self, q: Question) -> list[Any]:
        return [self.rule, self.annotations.fingerprint(q)]

    def _accepts(self, q: Question, answer: str | None) -> bool | None:
        """Whether the exact grader accepts an annotated answer (``None``: it cannot decide)."""
        d = decide(q, answer, self.annotations.competing(q), rule=self.rule)
        return None if d.outcome == UNDECIDED else d.correct

    def supports(self, q: Question, page: AnnotatedPage | None) -> bool | None:
        """Whether an annotated page counts as evidence for ``q``'s reference (module docstring;
        ``None``: the grader cannot decide whether its annotated answer is the reference)."""
        if page is None or page.question_id != q.id:
            return False
        if page.role == "gold":
            return True
        return False if page.role in NOT_EVIDENCE else self._accepts(q, page.answer)

    def key_evidence(self, q: Question, missing: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        pages = [p for u in missing if (p := self.annotations.page(u)) is not None]
        answers = list(dict.fromkeys(p.answer for p in pages if p.answer)) or list(q.answers[:1])
        text = f"The gold page(s) are annotated as supporting: {' | '.join(answers)}."
        return {"key_evidence": text, "gold_evidence_urls": list(missing)}, {"gold_pages": [p.doc_id for p in pages]}

    def evidence_match(self, q: Question, collection: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        judged = [(u, p, self.supports(q, p)) for u in collection for p in (self.annotations.page(u),)]
        found = [(u, p) for u, p, ok in judged if ok]
        unsure = [p for _, p, ok in judged if ok is None and p is not None]
        if unsure and not found:
            why = ("evidence match: the exact grader cannot decide whether the answer annotated on "
                   + ", ".join(f"{p.doc_id} ({p.answer!r})" for p in unsure) + " is the reference")
            return {"evidence_match": None, "reason": why}, {"undecided": why, "unsure": [p.doc_id for p in unsure]}
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
        value, detail = assess(self.annotations.query_targets(q), queries)
        detail["retrievable"] = self.retrievable(q, queries)
        if value.get("query_adequate") is None:  # the rule could not decide (trek.query_targets)
            detail["undecided"] = detail.get("undecided") or f"query adequacy: {value.get('reason') or 'undecided'}"
        return value, detail

    def repair_queries(self, q: Question) -> tuple[dict[str, Any], dict[str, Any]]:
        """Adequate queries for ``trek trace verify`` (:func:`trek.query_targets.adequate_queries`
        over the question's targets); undecided when the question has no targets or the rule does
        not read the queries as adequate."""
        try:
            targets = self.annotations.query_targets(q)
        except MissingAnnotation as e:
            why = f"repair queries: {e}"
            return {"queries": [], "reason": why}, {"undecided": why}
        queries = adequate_queries(targets)
        value, detail = assess(targets, queries)
        if value.get("query_adequate") is not True:
            why = f"repair queries: the targets' own queries are not read as adequate ({value.get('reason')})"
            return {"queries": queries, "reason": why}, {"undecided": why}
        return {"queries": queries, "reason": f"Queries built from the annotated query targets ({TARGETS_RULE})."}, \
            {"assessment": detail}

    def retrievable(self, q: Question, queries: Sequence[str]) -> dict[str, Any]:
        """The rank diagnostic ("gold page retrievable by the recorded queries at depth d"): the
        best rank of a gold page over the recorded queries on the local index, within
        :data:`DIAGNOSTIC_DEPTH` (``best_rank`` ``None``: not within it). It decides nothing."""
        why = self.searched_locally()
        if why is not None:
            return {"depth": DIAGNOSTIC_DEPTH, "best_rank": None, "not_taken": why}
        gold = {normalize_url(p.url) for p in self.annotations.question(q) if p.role == "gold" and p.url}
        gold |= {normalize_url(u) for u in q.gold_urls}
        best: dict[str, Any] | None = None
        for query in dict.fromkeys(queries):
            for rank, (page, _) in enumerate(self.index().rank(query, DIAGNOSTIC_DEPTH), start=1):
                if normalize_url(page.url) in gold:
                    if best is None or rank < best["rank"]:
                        best = {"query": query, "rank": rank, "url": page.url}
                    break
        return {"depth": DIAGNOSTIC_DEPTH, "best_rank": best["rank"] if best else None, "best": best}

    def verdict(self, q: Question, candidate: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        d = decide(q, candidate, self.annotations.competing(q), rule=self.rule)
        detail = {**json.loads(d.to_json()), "answer_kind": answer_kind(d, candidate)}
        if d.outcome == UNDECIDED:
            why = getattr(d, "undecided", None) or d.explain()
            return {"correct": None, "reason": why}, {**detail, "undecided": f"probe answer check: {why}"}
        return {"correct": d.correct, "reason": d.explain()}, detail

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
            accepted = self._accepts(q, p.answer)
            if accepted is None:
                why = (f"stale reference: the exact grader cannot decide whether {p.doc_id}'s answer "
                       f"{p.answer!r} is the reference")
                return {"supports_reference": None, "reason": why}, {"undecided": why}
            if not accepted:
                newer.append(p)
        if newer:
            reason = "Newer page(s) of the question state another answer: " + ", ".join(
                f"{p.doc_id} ({p.date}: {p.answer})" for p in newer)
        else:
            reason = f"No page of the question dated after its latest gold page ({latest}) states another answer."
        return {"supports_reference": not newer, "reason": reason}, {"newer": [p.doc_id for p in newer]}


#: What a probe answer the exact judge graded names (:func:`answer_kind`), wrong kinds last.
ANSWER_KINDS = ("reference", "competing", "unannotated", "no answer")


def answer_kind(d: Any, candidate: str | None) -> str:
    """What a graded answer names: ``reference`` (graded correct), ``competing`` (an annotated
    answer that is not acceptable: an older value, a neighbouring question's, a fabrication),
    ``no answer`` (declines, or says nothing) or ``unannotated`` (something no page states)."""
    if d.correct:
        return "reference"
    if any(n not in d.acceptable for n in d.named) or any(n not in d.acceptable for n in d.committed):
        return "competing"
    if d.abstained or not (candidate or "").strip():
        return "no answer"
    return "unannotated"


#: The model name the exact judge's records carry (``Step.model``, ``Grade.judge_model``).
RECORDED_MODEL = "oracle"
#: The template name of every step the exact judge answers is this prefix and the step's name.
TEMPLATE_PREFIX = "exact."


def decided(step: Step) -> bool:
    """Whether a recorded step was decided by the exact judge (its records name model ``oracle``)."""
    return step.model == RECORDED_MODEL and step.status == "ok"


def exact_undecided(step: Step) -> bool:
    """Whether a recorded step is one the exact judge left undecided (``error`` says why)."""
    return step.model == RECORDED_MODEL and step.status == UNDECIDED


def exact_step(name: str, role: str, endpoint: str, model: str, value: dict[str, Any], detail: dict[str, Any]) -> Step:
    """The record of one step the exact judge answered: ``ok``, or ``undecided`` when ``detail``
    says why its rules could not decide (then ``error`` holds that reason); never unreadable,
    never pending."""
    why = detail.get("undecided")
    return Step(name=name, role=role, model=model, endpoint=endpoint, template=f"{TEMPLATE_PREFIX}{name}",  # type: ignore[arg-type]
                version=VERSION, status=UNDECIDED if why else "ok", value=value, error=why or None,
                raw=[json.dumps(detail, ensure_ascii=False, sort_keys=True, default=str)])


def for_trace(judge: Any, store: PageStore, run_dir: str | os.PathLike[str],
              roles: Sequence[str] = ("diagnostic", "analysis")) -> ExactTrace:
    """The :class:`ExactTrace` of an :class:`~trek.exact.ExactJudge` for one run, playing ``roles``."""
    return ExactTrace(judge.bind(run_dir), store, Path(run_dir), rule=judge.rule,
                      roles=frozenset(roles))
