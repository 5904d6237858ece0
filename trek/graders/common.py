"""Pieces shared by the dataset graders: judge settings, the ask/re-ask loop, Grade assembly.

A grader module holds its judge prompt, the parser for the judge's reply and one grading
function. Everything else lives here:

* :class:`JudgeConfig` turns the ``**settings`` of a grading call into the request parameters
  and the number of re-asks allowed for an unreadable verdict (``max_reasks``, default 2).
  Only the parameters the caller set are sent: no ``temperature`` or other sampling parameter
  is added by default, because reasoning models (the paper's judge is one) reject them and the
  paper's judge runs with the provider's defaults;
* :func:`parse_judge_params` reads ``--judge-param KEY=VALUE`` flags into such settings, and
  :func:`explain_unsupported_parameter` turns a provider's "unsupported parameter/value" 400
  into a message that names the flag to change;
* :func:`ask_judge` sends the prompt, parses the reply and, when the reply cannot be parsed,
  continues the same conversation with a short request for the bare verdict, at most
  ``max_reasks`` times. A call that fails after the client's retries ends the loop with the
  outcome ``pending``; a reply still unreadable after the last re-ask gives ``unparsed``.
  Neither is ever turned into a grade;
* :class:`Judge` holds one dataset's protocol (templates, prompt fields, verdict parser,
  outcomes) and grades with it;
* :func:`make_grade` fills a :class:`~trek.types.Grade` with the grader's name and version,
  the judge model and settings, every raw judge reply and the summed token usage.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trek.llm.client import LLMClient
from trek.llm.structured import json_reply_format, object_schema
from trek.roles import JUDGE_PARAM_FLAG, parse_judge_params
from trek.templates import render, template_version
from trek.types import Grade, Question, Usage

__all__ = [
    "DEFAULT_MAX_REASKS",
    "GRADER_EXPORTS",
    "GRADERS",
    "register_grader",
    "JUDGE_PARAM_FLAG",
    "Judge",
    "JudgeConfig",
    "JudgeReply",
    "ask_judge",
    "explain_unsupported_parameter",
    "parse_judge_params",
    "is_empty_response",
    "join_answers",
    "make_grade",
    "strip_markup",
]

#: The names every grader module defines (its ``__all__`` adds its own parser and tables).
GRADER_EXPORTS = [
    "GRADER", "TEMPLATE", "VERSION", "JUDGE_PROMPT", "REASK", "SCHEME", "JUDGE",
    "grader_version", "judge_prompt", "agrade",
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
        """Read ``model``, ``max_reasks`` and request parameters from a grading call's settings.

        Every other setting is sent with each judge call as given; nothing is added. In
        particular there is no default ``temperature``: the endpoint's default applies unless
        the caller sets one. Parameters set to ``None`` (e.g. ``seed=None``) are left out.
        """
        s = dict(settings)
        model = s.pop("model", None) or judge.model
        if not model:
            raise ValueError("no judge model: pass model=... or create the judge LLMClient with a model")
        max_reasks = s.pop("max_reasks", DEFAULT_MAX_REASKS)
        if isinstance(max_reasks, bool) or not isinstance(max_reasks, int) or max_reasks < 0:
            raise ValueError(f"max_reasks must be a non-negative integer, got {max_reasks!r}")
        params = {k: v for k, v in s.items() if v is not None}
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


#: The sample index of the judge calls made in this context (0: the usual one). ``trek grade
#: --regrade`` grades again with sample 1, so a judge fixed behind the same endpoint and model is
#: asked afresh instead of replaying its cached replies (the index is part of the cache key only).
FRESH_SAMPLE: contextvars.ContextVar[int] = contextvars.ContextVar("trek_judge_sample", default=0)


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
        sample = {"sample": n} if (n := FRESH_SAMPLE.get()) else {}
        res = await judge.achat(messages, model=config.model, **sample, **config.params)
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


#: Every grader module by its ``GRADER`` name, filled by :func:`register_grader` where each
#: grader is defined (the grader modules are listed by importing them in ``trek/graders/__init__.py``).
GRADERS: dict[str, Any] = {}


def register_grader(module: str, judge: Judge) -> tuple[Any, Any, Any]:
    """Register the grader module ``module`` (its ``__name__``) under ``judge.grader`` and return
    the module's ``grader_version``, ``judge_prompt`` and ``agrade`` (the judge's bound methods).
    Another module under a name already taken is an error."""
    import sys

    known = GRADERS.get(judge.grader)
    if known is not None and known.__name__ != module:
        raise ValueError(f"grader {judge.grader!r} is registered twice ({known.__name__}, {module})")
    GRADERS[judge.grader] = sys.modules[module]
    return judge.grader_version, judge.judge_prompt, judge.agrade


@dataclass(frozen=True)
class Judge:
    """One dataset's judging protocol; its bound methods are the grader module's
    ``grader_version``, ``judge_prompt`` and ``agrade``.

    ``template(question)`` gives the ``(template name, built-in text)`` the question is judged
    with, ``fields(question, response)`` the prompt fields (the response already stripped).
    The grading steps: an empty response gets ``empty`` without a call; an ``exact`` match
    (when given) is correct without a call; otherwise the judge is asked (with re-asks), its
    verdict mapped through ``outcome``; pending and unparsed stay as they are.
    """

    grader: str
    version: str
    template: Callable[[Question | None], tuple[str, str]]
    fields: Callable[[Question, str], dict[str, str]]
    parse: Callable[[str], str | None]
    reask: str
    outcome: Callable[[str], str]
    empty: str = "incorrect"
    exact: Callable[[Question, str], bool] | None = None
    #: The verdict labels; an endpoint that constrains replies to a JSON schema (the embedded
    #: local model) is asked for ``{"verdict": <one of them>}``, which the parser reads.
    labels: tuple[str, ...] = ()

    def grader_version(self, question: Question | None = None) -> str:
        """``version``, or ``version+override.<hash>`` when the question's template is overridden."""
        return template_version(*self.template(question), self.version)

    def judge_prompt(self, question: Question, response: str) -> str:
        """The judge prompt for one response (the override's text when there is one)."""
        return render(*self.template(question), **self.fields(question, response.strip()))

    async def agrade(self, question: Question, response: str | None, judge: LLMClient, **settings: Any) -> Grade:
        """Grade one response (see the class docstring for the steps)."""
        config = JudgeConfig.from_settings(judge, settings)
        if self.labels and judge.json_schema_replies and "response_format" not in config.params:
            config = replace(config, params={**config.params, "response_format": verdict_format(self.labels)})
        common = {"grader": self.grader, "grader_version": self.grader_version(question), "config": config}
        if is_empty_response(response):
            return make_grade(question, response, outcome=self.empty, method="none", **common)
        assert response is not None
        if self.exact is not None and self.exact(question, response):
            return make_grade(question, response, outcome="correct", method="exact", **common)
        reply = await ask_judge(judge, self.judge_prompt(question, response), self.parse, self.reask, config)
        result = self.outcome(str(reply.verdict)) if reply.status == "ok" else reply.status
        return make_grade(question, response, outcome=result, method="judge", reply=reply, **common)


def verdict_format(labels: Sequence[str]) -> dict[str, Any]:
    """A ``response_format`` that constrains the reply to ``{"verdict": <one of labels>}``."""
    return json_reply_format(object_schema({"verdict": {"type": "string", "enum": list(labels)}}))


def is_empty_response(response: str | None) -> bool:
    """True for ``None`` or a response holding only whitespace (graded without a judge call)."""
    return response is None or not response.strip()


def case_fields(q: Question, response: str | None) -> dict[str, Any]:
    """The prompt fields of a judge that reads the question, its effective year, the references
    and the response (FreshQA's and the generic judge's templates)."""
    from trek.answer_prompts import year_text

    return {"question": q.question, "effective_year": year_text(q) or "not given",
            "answers": join_answers(q.answers), "response": response}


def join_answers(answers: list[str]) -> str:
    """The reference answers as one prompt field, separated by `` | ``."""
    return ANSWER_SEPARATOR.join(a.strip() for a in answers)


_MARKUP = re.compile(r"[*_`#>~]+")


def strip_markup(text: str | None) -> str:
    """Drop markdown emphasis, code and heading marks (``**A**`` -> ``A``) and trim."""
    return _MARKUP.sub(" ", text or "").strip()


# -- judge parameters from the command line: trek.roles parses them ---------------------------

# Provider error messages, matched without regard to case.
_UNSUPPORTED_PARAMETER = re.compile(
    r"(?i)Unsupported parameter:\s*'(?P<param>[^']+)'[^.]*\.(?:\s*Use\s+'(?P<instead>[^']+)'\s+instead)?"
)
_UNSUPPORTED_VALUE = re.compile(
    r"(?i)Unsupported value:\s*'(?P<param>[^']+)'\s+does not support\s+(?P<value>.+?)\s+with this model\."
    r"(?P<rest>[^\"}]*)"
)
_UNRECOGNIZED = re.compile(
    r"(?i)(?:Unrecognized request argument supplied|Unknown parameter|unexpected keyword argument)"
    r":?\s*'?(?P<param>[A-Za-z_][\w.]*)'?"
)
_DEFAULT_ONLY = re.compile(r"(?i)Only the default \((?P<default>[^)]*)\) value is supported")
_SUPPORTED_VALUES = re.compile(r"(?i)Supported values are:?\s*(?P<values>[^.]+)")


def explain_unsupported_parameter(
    message: str | None,
    flag: str = JUDGE_PARAM_FLAG,
    *,
    sources: Mapping[str, str] | None = None,
) -> str | None:
    """A user-facing explanation of an "unsupported parameter/value" rejection, or ``None``.

    ``message`` is the error text of a rejected request (the provider's message, possibly
    inside a longer error string). Recognized: OpenAI's ``Unsupported parameter: 'X' is not
    supported with this model.`` (with an optional ``Use 'Y' instead.``), ``Unsupported value:
    'X' does not support V with this model. ...`` (only the default allowed, or a list of
    supported values) and ``Unrecognized request argument supplied: X``. The explanation names
    the flag that sets the parameter: ``flag`` (``--judge-param``) unless ``sources`` maps the
    parameter to another option (e.g. ``{"seed": "--seed"}``). Any other message gives ``None``.
    """
    if not message:
        return None
    sources = sources or {}
    m = _UNSUPPORTED_VALUE.search(message)
    if m:
        param, value, rest = m.group("param"), m.group("value").strip(), m.group("rest") or ""
        source = sources.get(param)
        where = f"the value set with {source}" if source else f"{flag} {param}={value.strip(chr(39))}"
        d = _DEFAULT_ONLY.search(rest)
        if d:
            return (
                f"the judge model accepts only the default value ({d.group('default')}) of {param!r}; "
                f"remove {where}, so the parameter is not sent"
            )
        v = _SUPPORTED_VALUES.search(rest)
        if v:
            choices = ", ".join(x.strip(" '\"") for x in re.split(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", v.group("values")) if x.strip(" '\""))
            return (
                f"the judge model does not accept {param}={value}; change {where} to one of: {choices}"
                f" (or drop it to use the model's default)"
            )
        return f"the judge model does not accept {param}={value}; change or drop {where}"
    m = _UNSUPPORTED_PARAMETER.search(message) or _UNRECOGNIZED.search(message)
    if m:
        param = m.group("param")
        source = sources.get(param)
        where = source if source else f"{flag} {param}=..."
        text = f"the judge model does not accept the parameter {param!r}; remove {where}"
        instead = m.groupdict().get("instead")
        if instead:
            text += f" and use {sources.get(instead) or f'{flag} {instead}=N'} instead"
        return text
    return None
