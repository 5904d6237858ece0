"""TrekTrace's parts: declared tests, the questions they put to a role, and one case being traced.

A *test* (:class:`TraceTest`) is one object in one module: the retrieval test
(:mod:`trek.trace.evidence`), the query test (:mod:`trek.trace.queries`), the two probes
(:mod:`trek.trace.probes`), the stale-reference check (:mod:`trek.trace.stale`). Each declares

* its ``name`` (the key of ``TraceRecord.tests``) and ``version`` (stored in every record it helps
  make, part of the resume key: a record made under another version is traced again);
* ``needs``: the inputs of the case it reads (``gold_pages``, ``collection``, ``queries``, ...);
* ``questions``: the :class:`JudgeQuestion` s it asks (role, template, reply schema, reader);
* ``reads``: in words, how its result reads (the flag it sets and what ``True`` means);
* :meth:`TraceTest.run`: what it does with a :class:`CaseRun` (asks, records, sets its value).

Tests register themselves with the :func:`trace_test` decorator where they are defined; the order
they run in, and which result gates which test, is data (:data:`trek.trace.schedule.SCHEDULE`), and
so is the label rule (:data:`trek.trace.labels.C4`). :func:`trek.trace.pipeline.trace_case` is a
loop over the schedule. A new probe is one module with a decorated :class:`TraceTest` and an
:class:`~trek.trace.schedule.Entry` for it (``docs/architecture.md``, "Adding a TrekTrace test").

Who answers a question is the role's judge (:meth:`CaseRun.ask`, :class:`trek.judges.Judge`): a
model through :func:`~trek.trace.common.ask`, a judge that decides from annotations through the
question's declared decision (``JudgeQuestion.exact``), a cascade through each in turn; every answer is recorded as a
step, and one the judge could not decide skips its test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trek.answer_prompts import year_text
from trek.graders.common import join_answers
from trek.judges import UNDECIDED, JudgeRequest
from trek.pages import Page, normalize_url
from trek.templates import template_version
from trek.trace.common import NOT_GIVEN, ask, fetch_pages
from trek.trace.records import Step, TestRun

__all__ = [
    "JudgeQuestion",
    "TraceTest",
    "CaseRun",
    "Pending",
    "Undecided",
    "JUDGE_UNDECIDED",
    "trace_test",
    "registered_tests",
    "get_test",
    "UNREADABLE",
    "PROBE_UNREADABLE",
    "NO_GOLD_PAGE",
    "NO_RETRIEVED_TEXT",
    "NO_QUERIES_SEEN",
    "SOME_QUERIES_SEEN",
    "NO_RESULTS_SEEN",
    "GOLD_UNAVAILABLE",
    "needs_result",
    "reason_heading",
]

#: Why a test could not run (the reasons recorded in ``TraceRecord.tests``).
NO_GOLD_PAGE = "no gold page"
NO_RETRIEVED_TEXT = "no retrieved page text"
UNREADABLE = "judge reply unreadable"
PROBE_UNREADABLE = "probe reply unreadable"
JUDGE_UNDECIDED = "judge undecided"
NO_QUERIES_SEEN = "queries not recorded"
SOME_QUERIES_SEEN = "queries only partly recorded"
NO_RESULTS_SEEN = "results not recorded"
GOLD_UNAVAILABLE = "No gold page is available in the page store (or by fetching); nothing to test with."


def reason_heading(why: str) -> str:
    """A skip reason as counted in summaries, titles and captions: an undecided verdict's reason
    names the case's own values, so every one counts under ``judge undecided``."""
    return JUDGE_UNDECIDED if why.startswith(JUDGE_UNDECIDED) else why


def needs_result(test: str) -> str:
    """The reason a gated test is skipped when the test it waits on gave no result."""
    return f"needs the {test.replace('_', '-')} result"


@dataclass(frozen=True)
class JudgeQuestion:
    """One question a test puts to a role: a named template, its version, the reply's JSON schema
    and the reader that checks a reply (``ValueError`` re-asks)."""

    name: str
    role: str
    template: str
    prompt: str
    version: str
    schema: dict[str, Any]
    validate: Callable[[dict[str, Any]], dict[str, Any]]
    #: The exact judge's decision of this question: the name of its method in
    #: :class:`trek.trace.exact.ExactTrace`, called with the ``facts`` a test passes to
    #: :meth:`CaseRun.ask` (``None``: the exact judge cannot answer it; a model judge can)
    exact: str | None = None

    def versioned(self) -> str:
        """The template's version as recorded (an override in the prompts folder shows in it)."""
        return template_version(self.template, self.prompt, self.version)


class TraceTest:
    """One test of TrekTrace (see the module docstring); subclasses set the class attributes and
    :meth:`run`, and are registered with :func:`trace_test`."""

    name: ClassVar[str]
    version: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    questions: ClassVar[tuple[JudgeQuestion, ...]] = ()
    reads: ClassVar[str] = ""

    def enabled(self, config: Any) -> bool:
        """Whether this tracing run plays the test at all (an optional check says no by default)."""
        return True

    async def run(self, case: CaseRun) -> None:
        raise NotImplementedError


_TESTS: dict[str, TraceTest] = {}


def trace_test(cls: type[TraceTest]) -> type[TraceTest]:
    """Class decorator: register one instance of a :class:`TraceTest` under its ``name``.
    Registering another test under a name already taken is an error."""
    known = _TESTS.get(cls.name)
    if known is not None and type(known).__qualname__ != cls.__qualname__:
        raise ValueError(f"trace test {cls.name!r} is registered twice ({type(known).__qualname__}, "
                         f"{cls.__qualname__})")
    _TESTS[cls.name] = cls()
    return cls


def registered_tests() -> dict[str, TraceTest]:
    """Every registered test by name (those of the modules imported so far)."""
    return dict(_TESTS)


def get_test(name: str) -> TraceTest:
    try:
        return _TESTS[name]
    except KeyError:
        raise KeyError(f"no trace test {name!r} is registered (known: {', '.join(sorted(_TESTS))})") from None


class Undecided(Exception):
    """The judge could not decide a question (``step.error`` says why): the test that asked it is
    skipped with that reason (:func:`trek.trace.schedule.play`), so no label reads it."""

    def __init__(self, step: Step):
        super().__init__(step.error or f"step {step.name}: the judge could not decide")
        self.step = step

    @property
    def reason(self) -> str:
        return f"{JUDGE_UNDECIDED}: {self.step.error or self.step.name}"


class Pending(Exception):
    """A call failed after its retries (or the budget ran out): the case is written ``pending``."""

    def __init__(self, step: Step):
        super().__init__(step.error or f"step {step.name} failed")
        self.step = step


@dataclass
class CaseRun:
    """One case while it is traced: the record being filled, the tests' states and values, and the
    steps asked so far. Tests read the case through it and write their findings to ``rec``."""

    case: Any
    config: Any
    rec: dict[str, Any]
    tests: dict[str, TestRun] = field(default_factory=dict)
    values: dict[str, bool | None] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    audit_steps: list[Step] = field(default_factory=list)
    audit_values: dict[str, dict[str, Any]] = field(default_factory=dict)
    gold_pages: list[Page] = field(default_factory=list)

    def __post_init__(self) -> None:
        q = self.case.question
        self.q = q
        self.year = year_text(q) or NOT_GIVEN
        self.answers = join_answers(q.answers)
        self.gold_keys = [normalize_url(u) for u in q.gold_urls]
        self.coverage = self.case.trajectory.observed
        self.notes: list[str] = self.rec.setdefault("coverage_notes", [])

    async def begin(self) -> None:
        """Fetch what every test may read first (the gold pages)."""
        self.gold_pages = await fetch_pages(self.config.store, self.q.gold_urls)
        self.rec["gold_pages_available"] = any(p.available for p in self.gold_pages)

    def pages(self, pages: list[Page]) -> str:
        return self.config.pages(pages, self.gold_keys)

    def judge_fields(self, **more: Any) -> dict[str, Any]:
        """The case as every judge template shows it (question, year, references) plus ``more``."""
        return {"question": self.q.question, "effective_year": self.year, "answers": self.answers, **more}

    # -- test states -----------------------------------------------------------------------------
    def ran(self, name: str, value: bool | None, why: str = UNREADABLE) -> bool | None:
        """Record test ``name`` as run with ``value``; an unreadable judgment (``None``) is a
        skipped test, or under the ``paper`` policy an ``unknown`` value that ran."""
        if value is None and self.config.unknown == "incomplete":
            self.tests[name] = TestRun(state="skipped", reason=why)
        else:
            self.tests[name] = TestRun(state="ran", reason=None if value is not None else f"{why} (unknown, C.4)")
        self.values[name] = value
        return value

    def skip(self, name: str, reason: str) -> None:
        self.tests[name] = TestRun(state="skipped", reason=reason)
        self.values[name] = None

    def not_needed(self, name: str) -> None:
        self.tests[name] = TestRun(state="not_needed")
        self.values[name] = None

    # -- questions -------------------------------------------------------------------------------
    async def ask(self, question: JudgeQuestion, fields: dict[str, Any], *, name: str | None = None,
                  facts: tuple[Any, ...] | None = None, audit_fields: dict[str, Any] | None = None) -> Step:
        """Put ``question`` to its role's judge and record the step (``name`` replaces the
        question's step name). The judge answers through the judge protocol
        (:meth:`trek.judges.Judge.answer`): a model is asked the template, a judge that decides
        from annotations applies the question's declared decision (``question.exact``) to
        ``facts``, what the case gives it (the question, the pages, the answer checked). When
        the judge sent no request, an audit judge of that role is asked the same (``audit_fields``
        when its inputs differ; ``{}``: not asked). A step that stays pending stops the case
        (:class:`Pending`); an undecided one stops the test (:class:`Undecided`)."""
        config = self.config
        who = config.role(question.role)
        step_name = name or question.name

        prompted: list[Any] = []

        async def by_prompt(w: Any, use: dict[str, Any] | None = None) -> Step:
            prompted.append(w)
            return await ask(w, step_name, question.template, question.prompt, question.version, use or fields,
                             question.validate, config.budget, question.schema)

        exact = None if question.exact is None or facts is None else (
            lambda side: getattr(side, question.exact)(*facts))  # type: ignore[arg-type]
        step = await who.client.answer(who, JudgeRequest(question, step_name, fields, exact, by_prompt, self))
        # an audit judge is asked beside what a judge decided without a model (no prompt was sent)
        auditor = config.audit.get(question.role) if self.case.audit and not prompted else None
        if auditor is not None and (audit_fields is None or audit_fields):
            a = await by_prompt(auditor, audit_fields)
            self.audit_steps.append(a)
            if a.status == "ok":
                self.audit_values[step_name] = a.value
        self.steps.append(step)
        if step.status == "pending":
            raise Pending(step)
        if step.status == UNDECIDED:
            raise Undecided(step)
        return step
