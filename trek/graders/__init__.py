"""Dataset graders: each benchmark's judging protocol (paper §3.2 and appendix B.5).

One module per dataset, each with its judge prompt (our wording), the parser of the judge's
reply, a ``VERSION`` and one grading function:

* :mod:`trek.graders.freshqa` — deterministic match of normalized answers, then an
  ``evaluation: correct/incorrect`` judge (template ``grader.freshqa``);
* :mod:`trek.graders.infodeepseek` — Yes/No judge, with a separate template for questions
  annotated ``false_premise`` (templates ``grader.infodeepseek`` and
  ``grader.infodeepseek_false_premise``);
* :mod:`trek.graders.sealqa` — A/B/C judge (correct / incorrect / not attempted); only A
  earns credit (template ``grader.sealqa``);
* :mod:`trek.graders.generic` — a correct / incorrect / not attempted judge for any other
  dataset (template ``grader.generic``);
* :mod:`trek.graders.exact` — no judge: the verdict read from the annotations of an annotated
  benchmark (TrekBench-Mini, Ctrl contexts built from it), with each dataset's outcomes; used
  when the judge is the exact one (``--judge oracle``, :class:`trek.exact.ExactJudge`).

Which grader a question gets: the one named by :func:`using` for the ``with`` block (``trek
grade --grader``), else the question's own ``grader`` field, else its ``dataset``'s.

Entry points, dispatching on ``question.dataset``:

* :func:`grade` — synchronous, usable in scripts and notebooks;
* :func:`agrade` — the same as a coroutine;
* :func:`agrade_many` — many ``(question, response)`` pairs at once, as concurrent as the
  judge client's ``max_connections`` allows, results in input order.

Settings passed as keywords go to every judge call: any request parameter (``temperature``,
``seed``, ``reasoning_effort``, ``max_completion_tokens``, ...; none is sent unless given, so a
reasoning-model judge works with its defaults), ``model`` (default: the client's model) and
``max_reasks`` (how often an unreadable verdict is asked for again, default 2).
:func:`~trek.graders.common.parse_judge_params` reads such parameters from ``KEY=VALUE`` flags.

Each judge reply is read by :mod:`trek.graders.verdict`: the *final* verdict counts, a negated
label never gives credit, and a reply that cannot be read safely stays unreadable. The judge model and these settings are
recorded in every :class:`~trek.types.Grade`, with the grader's name and version and the raw
judge replies. A reply that stays unreadable gives the outcome ``unparsed``; a judge call that
fails gives ``pending``; neither is ever counted as correct or incorrect.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from types import ModuleType
from typing import Any

from trek.aio import fan_out
from trek.graders import common as _common
from trek.graders import freshqa, generic, infodeepseek, sealqa  # noqa: F401  (each registers itself)
from trek.graders.common import DEFAULT_MAX_REASKS, JudgeConfig
from trek.llm.client import LLMClient, run_sync
from trek.types import Grade, Question

__all__ = [
    "DEFAULT_MAX_REASKS",
    "GRADERS",
    "JudgeConfig",
    "agrade",
    "agrade_many",
    "grade",
    "grader_for",
    "grader_version",
    "with_own_grader",
    "using",
    "freshqa",
    "generic",
    "infodeepseek",
    "sealqa",
]

#: Grader modules by name: one per source dataset (the name used in ``Question.dataset``) and
#: ``generic`` for any other question set. Each registers itself where it is defined
#: (:func:`~trek.graders.common.register_grader`); importing them above lists them.
GRADERS: dict[str, ModuleType] = _common.GRADERS

_forced: ContextVar[str | None] = ContextVar("trek_grader", default=None)


@contextlib.contextmanager
def using(name: str | None) -> Iterator[None]:
    """Grade every question with the grader ``name`` inside the ``with`` block (``None``: each
    question's own). Unknown names raise ``ValueError`` at once."""
    if name is not None and name not in GRADERS:
        raise ValueError(f"no grader named {name!r} (graders: {', '.join(sorted(GRADERS))})")
    token = _forced.set(name)
    try:
        yield
    finally:
        _forced.reset(token)


def grader_for(question: Question) -> ModuleType:
    """The grader module of ``question`` (see the module docstring for the order);
    ``ValueError`` for a question that has none."""
    name = _forced.get() or question.grader or question.dataset
    mod = GRADERS.get(name)
    if mod is None:
        what = f"grader {name!r}" if (_forced.get() or question.grader) else f"no grader for dataset {name!r}"
        raise ValueError(
            f"question {question.id!r}: {what} (graders exist for {', '.join(sorted(GRADERS))}; "
            f"use the generic judge with `trek grade --grader generic`)"
        )
    return mod


def with_own_grader(question: Question) -> Question:
    """``question`` with the grader it gets when read from a file: one of a dataset without a grader
    of its own (``custom``, which `trek import` writes, or any other name) and no ``grader`` field
    is graded by the generic judge (``grader="generic"``)."""
    if question.grader is None and question.dataset not in GRADERS:
        return question.model_copy(update={"grader": "generic"})
    return question


def grader_version(question: Question) -> str:
    """The version a grade of ``question`` would carry now (template overrides included)."""
    return grader_for(question).grader_version(question)


async def agrade(question: Question, response: str | None, judge: LLMClient, **settings: Any) -> Grade:
    """Grade one response to ``question`` with its dataset's protocol, through the judge's own
    :meth:`~trek.llm.client.LLMClient.agrade_with`: a model is asked with the grader's prompt; the
    exact judge (``--judge oracle``) decides from the annotations (the same dataset's outcomes)."""
    return await judge.agrade_with(question, response, grader_for(question), protocol=_forced.get(), **settings)


def grade(question: Question, response: str | None, judge: LLMClient, **settings: Any) -> Grade:
    """Synchronous :func:`agrade`; also works inside a notebook's running event loop."""
    grader_for(question)  # fail fast, before any event loop is started

    async def _run() -> Grade:
        try:
            return await agrade(question, response, judge, **settings)
        finally:
            await judge.aclose()

    return run_sync(_run())


async def agrade_many(
    pairs: Iterable[tuple[Question, str | None]],
    judge: LLMClient,
    progress: bool = True,
    *,
    on_result: Callable[[int, Grade], None] | None = None,
    desc: str = "grade",
    **settings: Any,
) -> list[Grade]:
    """Grade many ``(question, response)`` pairs concurrently; grades come back in input order.

    Concurrency is bounded by the judge client (``max_connections``). ``on_result(index,
    grade)`` is called as each grade is ready. Every question's dataset is checked before any
    call is made.
    """
    items = list(pairs)
    for q, _ in items:
        grader_for(q)
    counts: dict[str, int] = {}

    async def one(item: tuple[Question, str | None]) -> Grade:
        g = await agrade(item[0], item[1], judge, **settings)
        counts[g.outcome] = counts.get(g.outcome, 0) + 1
        return g

    return await fan_out(
        items,
        one,
        desc=desc,
        unit="q",
        progress=progress,
        postfix=lambda: " ".join(f"{k}={v}" for k, v in sorted(counts.items())),
        on_result=on_result,
    )
