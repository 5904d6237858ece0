"""TrekTrace inputs (paper appendix C.1) and the URL identity test of C.2.

For every failed answer of a run (:func:`select_cases`) a :class:`TraceInput` holds the
question (text, reference answers, gold URLs, effective year), the original prediction, every
recorded query, and the retrieved-URL collection: the result URLs of every recorded search call
and every opened URL, in order, with exact duplicates removed (first occurrence kept). Only the
run files are read, through :mod:`trek.runs`.
"""

from __future__ import annotations

import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from trek import runs
from trek.pages import normalize_url
from trek.trace.records import UrlMatch
from trek.types import Grade, Question, Trajectory
from trek.urls import unique_urls

__all__ = [
    "FAILED_OUTCOMES",
    "TraceInput",
    "Selection",
    "retrieved_collection",
    "recorded_queries",
    "url_matches",
    "noise_context",
    "select_cases",
]

#: Grade outcomes that count as a failure to trace (``unparsed`` and ``pending`` are skipped).
FAILED_OUTCOMES: tuple[str, ...] = ("incorrect", "not_attempted")


def retrieved_collection(t: Trajectory) -> list[str]:
    """Every search call's result URLs, then ``retrieved_urls`` and the opened URLs, in order,
    exact string duplicates removed keeping the first occurrence."""
    urls = [r.url for call in t.search_calls for r in call.results]
    return unique_urls([*urls, *t.retrieved_urls, *t.opened_urls])


def recorded_queries(t: Trajectory) -> list[str]:
    """The queries of every recorded search call, in order (repeats kept)."""
    return [c.query for c in t.search_calls if c.query.strip()]


def url_matches(gold_urls: Sequence[str], collection: Sequence[str]) -> list[UrlMatch]:
    """For each gold URL, the first retrieved URL with the same identity (:func:`normalize_url`)."""
    by_key: dict[str, str] = {}
    for u in collection:
        by_key.setdefault(normalize_url(u), u)
    return [UrlMatch(gold_url=g, matched_url=by_key.get(normalize_url(g))) for g in gold_urls]


def noise_context(collection: Sequence[str], gold_urls: Sequence[str], *, equivalent: bool = False) -> list[str]:
    """The gold-plus-noise context (paper §3.1): the retrieved collection as it is when it holds the
    gold evidence or its equivalent (``equivalent``: the evidence test found it on other pages);
    otherwise the collection followed by the gold URLs whose identity is not in it."""
    if equivalent:
        return list(collection)
    keys = {normalize_url(u) for u in collection}
    extra = []
    for g in gold_urls:
        k = normalize_url(g)
        if k not in keys:
            keys.add(k)
            extra.append(g)
    return [*collection, *extra]


@dataclass
class TraceInput:
    """One failed case of a run, ready to trace."""

    question: Question
    trajectory: Trajectory
    grade: Grade
    queries: list[str] = field(default_factory=list)
    collection: list[str] = field(default_factory=list)
    #: An audit judge is asked beside the exact judge for this case (``trace_run(audit=...)``).
    audit: bool = False

    @classmethod
    def build(cls, question: Question, trajectory: Trajectory, grade: Grade) -> TraceInput:
        return cls(
            question=question,
            trajectory=trajectory,
            grade=grade,
            queries=recorded_queries(trajectory),
            collection=retrieved_collection(trajectory),
        )

    @property
    def question_id(self) -> str:
        return self.question.id

    @property
    def prediction(self) -> str | None:
        return self.trajectory.final_answer


@dataclass
class Selection:
    """The cases to trace and how many questions were left out, by reason.

    ``cases`` is a re-readable source (:class:`trek.stage.Reread`): each pass over it reads every
    case's question, answer and grade again by offset, so a large run's cases are never all in
    memory; ``len(cases)`` is their number. ``audit(i)`` says whether case ``i`` (selection order)
    is marked for the audit judges (:attr:`TraceInput.audit`)."""

    cases: Any
    skipped: Counter[str]
    total: int
    audit: Callable[[int], bool] = field(default=lambda i: False)

    def describe(self) -> str:
        parts = [f"{len(self.cases)} failed case(s) of {self.total} question(s)"]
        if self.skipped:
            parts.append("not traced: " + ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())))
        return "; ".join(parts)


def select_cases(
    run_dir: str | os.PathLike[str], outcomes: Sequence[str] = FAILED_OUTCOMES
) -> Selection:
    """The run's failed cases (grade outcome in ``outcomes``), in question order.

    Left out and counted: ``correct`` answers, ``unparsed`` and ``pending`` grades, questions
    that are ``ungraded`` or whose answer is ``pending``/``missing``, and failures without gold
    URLs (``no_gold_urls``: nothing to test retrieval or probe with).

    A Ctrl run's retrieved collection is its context's documents (:mod:`trek.trace.ctrl`).
    """
    from trek.stage import Reread
    from trek.trace.ctrl import ctrl_pages

    ctrl = ctrl_pages(run_dir)

    # the questions, grades and answers are indexed, not loaded (per question where its lines are,
    # the grade's outcome and whether the answer is pending); a case is built when a pass over
    # the selection reaches it, from its lines read again, with a slim copy of its trajectory and
    # grade (what tracing reads)
    ids, questions = runs.index_questions(run_dir)
    kinds: dict[str, int] = {}

    def outcome_code(g: Grade) -> int:
        if g.outcome not in kinds:
            if len(kinds) >= 254:  # pragma: no cover - Grade.outcome is one of a few literals
                raise ValueError(f"too many grade outcomes: {sorted(kinds)}")
            kinds[g.outcome] = len(kinds)
        return kinds[g.outcome]

    grades = runs.index_records(run_dir, runs.GRADES, Grade, ids, tag=outcome_code)
    answers = runs.index_records(run_dir, runs.ANSWERS, Trajectory, ids,
                                 tag=lambda t: 1 if t.status == "pending" else 0)
    names = {v: k for k, v in kinds.items()}
    wanted = {kinds[o] for o in outcomes if o in kinds}
    skipped: Counter[str] = Counter()
    chosen = array("q")
    with questions.reader() as read_q:
        for n in range(len(questions)):
            st, g = answers.tags[n], grades.tags[n]
            if st == 255:
                skipped["missing_answer"] += 1
            elif st == 1:
                skipped["pending_answer"] += 1
            elif g == 255:
                skipped["ungraded"] += 1
            elif g not in wanted:
                skipped[names[g]] += 1
            elif not read_q(n).gold_urls:
                skipped["no_gold_urls"] += 1
            else:
                chosen.append(n)
    del ids

    def read_cases() -> Iterator[TraceInput]:
        # of an answer, tracing reads the slim fields and what its queries and collection come from
        with questions.reader() as read_q, \
                answers.reader(runs.answer_fields("search_calls", "retrieved_urls", "opened_urls")) as read_a:
            for n in chosen:
                t = read_a(n)
                q = read_q(n)
                case = TraceInput.build(q, t, Grade.model_construct(question_id=q.id, outcome=names[grades.tags[n]]))
                if ctrl is not None:
                    case.collection = ctrl.collection(q.id)
                case.trajectory = runs.slim_answer(t)
                del t
                yield case

    selection = Selection(cases=None, skipped=skipped, total=len(questions))

    def marked() -> Iterator[TraceInput]:
        for i, case in enumerate(read_cases()):
            case.audit = selection.audit(i)
            yield case

    selection.cases = Reread(marked, len(chosen))
    return selection
