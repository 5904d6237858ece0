"""Pieces shared by the dataset graders: judge settings, the ask/re-ask loop, Grade assembly.

A grader module holds its judge prompt, the parser for the judge's reply and one grading
function. Everything else lives here:

* :class:`JudgeConfig` turns the ``**settings`` of a grading call into the request parameters
  (``temperature`` 0 unless set; ``seed`` and other sampling parameters when given) and the
  number of re-asks allowed for an unreadable verdict (``max_reasks``, default 2);
* :func:`ask_judge` sends the prompt, parses the reply and, when the reply cannot be parsed,
  continues the same conversation with a short request for the bare verdict, at most
  ``max_reasks`` times. A call that fails after the client's retries ends the loop with the
  outcome ``pending``; a reply still unreadable after the last re-ask gives ``unparsed``.
  Neither is ever turned into a grade;
* :func:`make_grade` fills a :class:`~trek.types.Grade` with the grader's name and version,
  the judge model and settings, every raw judge reply and the summed token usage.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trek.llm.client import LLMClient
from trek.types import Grade, Question, Usage

__all__ = [
    "DEFAULT_MAX_REASKS",
    "JudgeConfig",
    "JudgeReply",
    "ask_judge",
    "is_empty_response",
    "join_answers",
    "make_grade",
    "strip_markup",
]

#: How many times an unreadable verdict is asked for again before the grade is ``unparsed``.
DEFAULT_MAX_REASKS = 2

#: Separator between several acceptable reference answers in a judge prompt.
ANSWER_SEPARATOR = " | "


@dataclass(frozen=True)
class JudgeConfig:
    """The judge model, the parameters sent with every judge call, and the re-ask cap."""

    model: str
    params: dict[str, Any] = field(default_factory=dict)
    max_reasks: int = DEFAULT_MAX_REASKS

    @classmethod
    def from_settings(cls, judge: LLMClient, settings: Mapping[str, Any]) -> JudgeConfig:
        """Read ``model``, ``max_reasks`` and sampling parameters from a grading call's settings.

        ``temperature`` defaults to 0; parameters set to ``None`` (e.g. ``seed=None``) are left
        out of the request.
        """
        s = dict(settings)
        model = s.pop("model", None) or judge.model
        if not model:
            raise ValueError("no judge model: pass model=... or create the judge LLMClient with a model")
        max_reasks = s.pop("max_reasks", DEFAULT_MAX_REASKS)
        if isinstance(max_reasks, bool) or not isinstance(max_reasks, int) or max_reasks < 0:
            raise ValueError(f"max_reasks must be a non-negative integer, got {max_reasks!r}")
        params = {"temperature": 0, **s}
        params = {k: v for k, v in params.items() if v is not None}
        return cls(model=str(model), params=params, max_reasks=max_reasks)

    def recorded(self) -> dict[str, Any]:
        """What goes into ``Grade.judge_settings``: the request parameters and the re-ask cap."""
        return {**self.params, "max_reasks": self.max_reasks}


@dataclass
class JudgeReply:
    """Result of :func:`ask_judge`.

    ``status`` is ``ok`` (``verdict`` holds the parsed verdict), ``unparsed`` (no reply could be
    read, ``verdict`` is ``None``) or ``pending`` (a call failed; ``error`` says why).
    """

    status: str
    verdict: str | None = None
    raw: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None


async def ask_judge(
    judge: LLMClient,
    prompt: str,
    parse: Callable[[str], str | None],
    reask: str,
    config: JudgeConfig,
) -> JudgeReply:
    """Ask the judge ``prompt``; re-ask with ``reask`` while the reply cannot be parsed.

    Each re-ask sends the whole conversation so far (the prompt, every earlier reply and every
    earlier re-ask) followed by ``reask`` as a new user message. At most ``config.max_reasks``
    re-asks are made, so at most ``1 + max_reasks`` calls.
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    out = JudgeReply(status="unparsed")
    for attempt in range(config.max_reasks + 1):
        if attempt:
            messages = [*messages, {"role": "user", "content": reask}]
        res = await judge.achat(messages, model=config.model, **config.params)
        out.usage = out.usage + res.usage
        if not res.ok:
            out.status = "pending"
            out.error = res.error or "judge call failed"
            return out
        text = res.content or ""
        out.raw.append(text)
        verdict = parse(text)
        if verdict is not None:
            out.status = "ok"
            out.verdict = verdict
            return out
        messages = [*messages, {"role": "assistant", "content": text}]
    out.error = f"judge reply could not be read after {config.max_reasks} re-ask(s)"
    return out


def make_grade(
    question: Question,
    response: str | None,
    *,
    outcome: str,
    method: str,
    grader: str,
    grader_version: str,
    config: JudgeConfig,
    reply: JudgeReply | None = None,
) -> Grade:
    """Assemble the Grade record; ``reply`` carries the judge's raw output, usage and error."""
    return Grade(
        question_id=question.id,
        dataset=question.dataset,
        response=response,
        outcome=outcome,  # type: ignore[arg-type]
        method=method,  # type: ignore[arg-type]
        grader=grader,
        grader_version=grader_version,
        judge_model=config.model,
        judge_settings=config.recorded(),
        judge_raw=list(reply.raw) if reply else [],
        error=reply.error if reply else None,
        usage=reply.usage if reply else Usage(),
    )


def is_empty_response(response: str | None) -> bool:
    """True for ``None`` or a response holding only whitespace (graded without a judge call)."""
    return response is None or not response.strip()


def join_answers(answers: list[str]) -> str:
    """The reference answers as one prompt field, separated by `` | ``."""
    return ANSWER_SEPARATOR.join(a.strip() for a in answers)


_MARKUP = re.compile(r"[*_`#>~]+")


def strip_markup(text: str | None) -> str:
    """Drop markdown emphasis, code and heading marks (``**A**`` -> ``A``) and trim."""
    return _MARKUP.sub(" ", text or "").strip()
