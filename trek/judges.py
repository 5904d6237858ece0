"""Judges as parts: the protocol every judge answers, the registry of judge kinds, and the cascade.

A *judge* plays a judge role of a command (``--judge``, ``--diagnostic-judge``,
``--analysis-judge``): it grades answers with a dataset's protocol and answers TrekTrace's judge
questions (key evidence, evidence match, query adequacy, probe answer check, stale reference).
Every judge answers the same :class:`Judge` protocol, so no stage asks which kind it holds:

* a **model judge** is an :class:`~trek.llm.client.LLMClient` (:data:`ModelJudge`): it is sent the
  question's prompt and its reply is read;
* the **exact judge** (``trek.exact.ExactJudge``, kind ``exact``, also spelled ``oracle``)
  decides from the annotations of an annotated benchmark, and says ``undecided``, with its
  reason, where its rules cannot be sure;
* a **cascade** (:class:`CascadeJudge`, ``--judge exact,MODEL``) asks its judges in order and
  hands a question on only when the judge before said ``undecided``; every record names the judge
  that decided;
* any other kind registers itself with :func:`judge_kind` in one file.

**Naming a judge.** A judge role's value is a comma-separated list of judges (one judge, or a
cascade). Each item is a registered kind (``exact``), ``kind:NAME`` (a kind that must be
registered: an unknown one is an error naming the known kinds, never a model name), or a model
name (``gpt-4o``, ``model:NAME`` to say so outright). The registry is complete at the first
lookup: the built-in kinds and installed packages' come from the ``trek.judges`` entry points, and
the ``.py`` files named in ``$TREK_JUDGES`` (comma-separated) are run too, so a kind defined in one
file works in every command with no other edit.

**Undecided.** A judge that cannot support a verdict returns the grade outcome ``undecided``, or
a trace step whose status is ``undecided``; the ``error`` field (or the decision in ``judge_raw``)
says which rule could not decide and why. It is never counted as correct or incorrect, and a
TrekTrace test with such a step is skipped (the case stays ``incomplete``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ENTRY_POINTS",
    "ENV_MODULES",
    "UNDECIDED",
    "Judge",
    "JudgeRequest",
    "CascadeJudge",
    "UnknownJudgeKind",
    "judge_kind",
    "known_kinds",
    "kind_of",
    "parse_spec",
    "make_judge",
]

#: The entry-point group judge kinds are registered under (pyproject ``[project.entry-points]``).
ENTRY_POINTS = "trek.judges"
#: ``.py`` files run before the first lookup (comma-separated), each may register judge kinds.
ENV_MODULES = "TREK_JUDGES"
#: Trek's own judge kinds, as ``pyproject.toml`` declares them under :data:`ENTRY_POINTS`.
BUILTIN = {"exact": "trek.exact:ExactJudge"}
#: The grade outcome and trace step status of a question a judge could not decide.
UNDECIDED = "undecided"


class UnknownJudgeKind(ValueError):
    """A judge named as a kind that no module registered (the message names the known kinds)."""


@dataclasses.dataclass
class JudgeRequest:
    """One TrekTrace judge question put to a judge role.

    ``question``: the declared question (:class:`trek.trace.parts.JudgeQuestion`: name, role,
    template, schema, reader); ``step``: the step's name in the record; ``fields``: what its
    template shows; ``facts``: the question's declared exact decision (``question.exact``)
    applied to what the case gives it, a function of the judge's trace context returning
    ``(value, detail)`` (the exact judge calls it), or ``None`` where the question declares none; ``by_prompt(who)``: asks role model ``who`` (a model judge) with the template and
    returns the :class:`~trek.trace.records.Step`."""

    question: Any
    step: str
    fields: dict[str, Any]
    facts: Callable[[Any], tuple[dict[str, Any], dict[str, Any]]] | None
    by_prompt: Callable[[Any], Awaitable[Any]]
    case: Any = None


@runtime_checkable
class Judge(Protocol):
    """What every judge answers (see the module docstring). Besides these, a judge has the
    bookkeeping of a client (``model``, ``base_url``, ``prices``, ``cache``, ``aclose``...):
    :class:`trek.exact.ExactJudge` shows the least a kind that makes no call needs."""

    #: Whether the judge sends model requests (a judge that sends none needs no cache, price,
    #: batch or estimate).
    makes_calls: bool
    #: Whether it decides some questions without a model (an audit judge can be asked beside those).
    answers_without_model: bool

    def with_recorder(self, make: Callable[[Any], Any]) -> Any:
        """This judge for an estimate: each part that calls a model replaced by ``make(part)`` (a
        recording client), the parts that decide alone kept."""

    async def agrade_with(self, question: Any, response: str | None, grader: Any, *, protocol: str | None = None,
                          **settings: Any) -> Any:
        """The :class:`~trek.types.Grade` of ``response`` with ``grader``'s protocol (outcome
        ``undecided`` when the judge cannot support a verdict)."""

    def grade_basis(self, question: Any) -> dict[str, Any] | None:
        """What decides the grade besides the response, when it is not the grader's prompt."""

    def decided_by(self) -> tuple[str, str] | None:
        """``(grader, version)`` recorded on every grade, or ``None`` (the question's own grader)."""

    def prepare(self, run_dir: Any, questions: Iterable[Any]) -> None:
        """Refuse, before any grade, questions this judge cannot judge."""

    def begin_trace(self, run_dir: Any, store: Any, cases: Sequence[Any], roles: Sequence[str], *,
                    check_stale: bool) -> None:
        """Prepare to answer TrekTrace's questions of ``cases`` for judge ``roles`` (refuse what it
        cannot answer, before any call)."""

    def trace_basis(self, question: Any) -> Any:
        """What decides this judge's trace answers for ``question`` besides the prompt (part of
        the resume key; ``None``: nothing)."""

    def trace_settings(self) -> dict[str, Any]:
        """This judge's settings that change trace records (part of the resume key)."""

    def trace_versions(self) -> dict[str, str]:
        """The versions of this judge's own rules, recorded with every trace record (``{}``: none)."""

    async def answer(self, who: Any, request: JudgeRequest) -> Any:
        """The :class:`~trek.trace.records.Step` answering ``request`` for role model ``who``."""


def _model_judge() -> type:
    from trek.llm.client import LLMClient

    return LLMClient


def __getattr__(name: str) -> Any:
    if name == "ModelJudge":  # a model judge is an LLM client: it answers the protocol by prompt
        return _model_judge()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- the registry ------------------------------------------------------------------------------
_KINDS: dict[str, type] = {}
_complete = False


def judge_kind(*names: str) -> Callable[[type], type]:
    """Class decorator: register a judge class as the kind ``names`` (the first is its name).
    Registering another class under a name already taken is an error."""
    if not names:
        raise ValueError("judge_kind needs at least one name")

    def register(cls: type) -> type:
        for name in names:
            known = _KINDS.get(name)
            if known is not None and known.__qualname__ != cls.__qualname__:
                raise ValueError(f"judge kind {name!r} is registered twice ({known.__qualname__}, {cls.__qualname__})")
            _KINDS[name] = cls
        cls.kind = names[0]  # type: ignore[attr-defined]
        return cls
    return register


def _import_env_modules() -> None:
    """Run each ``.py`` file ``$TREK_JUDGES`` names (comma-separated); an installed package
    registers its kinds through the entry points instead."""
    for item in filter(None, (s.strip() for s in os.environ.get(ENV_MODULES, "").split(","))):
        path = Path(item)
        if path.suffix != ".py" or not path.is_file():
            raise UnknownJudgeKind(f"${ENV_MODULES}: {item!r} is not a .py file (name the file that registers the "
                                   f"judge kind; an installed package uses the {ENTRY_POINTS!r} entry points)")
        try:
            spec = importlib.util.spec_from_file_location(f"trek_judges_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise ImportError("not a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001  the user's file: say which and why
            raise UnknownJudgeKind(f"${ENV_MODULES}: cannot load {item}: {type(e).__name__}: {e}") from None


def _fill() -> None:
    """Load every judge kind: the ``trek.judges`` entry points, then ``$TREK_JUDGES``."""
    global _complete
    if _complete:
        return
    from importlib.metadata import EntryPoint, entry_points

    found = list(entry_points(group=ENTRY_POINTS))
    named = {ep.name for ep in found}
    # the built-in kinds, also when Trek runs from a source tree that pip never installed
    found += [EntryPoint(name, value, ENTRY_POINTS) for name, value in BUILTIN.items() if name not in named]
    for ep in found:
        try:
            ep.load()  # the class registers itself with @judge_kind where it is defined
        except Exception as e:  # noqa: BLE001
            raise UnknownJudgeKind(f"judge kind entry point {ep.name!r} ({ep.value}) cannot be loaded: "
                                   f"{type(e).__name__}: {e}") from None
    _import_env_modules()
    _complete = True


def known_kinds() -> list[str]:
    """Every registered kind name (the registry completed first)."""
    _fill()
    return sorted(_KINDS)


def kind_of(name: str) -> type | None:
    """The class registered as kind ``name`` (``None``: no such kind; the registry completed first)."""
    _fill()
    return _KINDS.get(name)


def parse_spec(spec: str) -> list[tuple[str, str]]:
    """The judges a judge role's value names, in order, as ``("kind", NAME)`` or ``("model",
    NAME)`` (see the module docstring); an empty item or an unknown ``kind:`` is an error."""
    items = [s.strip() for s in str(spec).split(",")]
    if not all(items):
        raise ValueError(f"judge {spec!r}: an empty name in the list (e.g. --judge exact,gpt-4o)")
    out: list[tuple[str, str]] = []
    for item in items:
        prefix, sep, rest = item.partition(":")
        if sep and prefix == "kind":
            if kind_of(rest) is None:
                raise UnknownJudgeKind(f"judge {item!r}: no judge kind {rest!r} is registered (known kinds: "
                                       f"{', '.join(known_kinds())}; a kind registers with @judge_kind in a module "
                                       f"named by the {ENTRY_POINTS!r} entry points or ${ENV_MODULES})")
            out.append(("kind", rest))
        elif sep and prefix == "model":
            out.append(("model", rest))
        elif kind_of(item) is not None:
            out.append(("kind", item))
        else:
            out.append(("model", item))
    if len(out) > 1 and len({n for _, n in out}) < len(out):
        raise ValueError(f"judge {spec!r}: a judge is named twice in the cascade")
    return out


def make_judge(role: Any, make: Callable[[Any], Any], **options: Any) -> Any:
    """The judge that plays ``role`` (a :class:`~trek.roles.Role`): the kind or model its value
    names (:func:`parse_spec`), or a :class:`CascadeJudge` of several. A kind is built with the
    ``options`` its constructor takes (``rule``, ``contexts``, ``annotations`` for the exact
    judge); a model with ``make(role)`` (``RunDir.client``). ``None`` for a role without a model."""
    if not role.model:
        return None
    judges = []
    for what, name in parse_spec(role.model):
        if what == "kind":
            cls = _KINDS[name]
            judges.append(cls(**_accepted(cls, {**options, "role": getattr(role, "label", None)})))
        else:
            judges.append(make(role.with_model(name)) if hasattr(role, "with_model") else make(role))
    return judges[0] if len(judges) == 1 else CascadeJudge(judges)


def _params(cls: type) -> set[str]:
    import inspect

    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return {"*"}
    return set(sig.parameters)


def _accepted(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    names = _params(cls)
    return dict(options) if "*" in names else {k: v for k, v in options.items() if k in names}


# -- the cascade -------------------------------------------------------------------------------
class CascadeJudge:
    """Judges asked in order (``--judge exact,MODEL``): the first answers what it can, and only a
    question it left ``undecided`` goes to the next. A grade or step is the deciding judge's own
    record (its model names who decided) with ``cascade`` beside it: each judge asked and what it
    said. The cascade's bookkeeping (``model``, ``prices``, ``cache``...) is its last judge's, the
    one that makes calls in ``exact,MODEL``."""

    def __init__(self, judges: Sequence[Any]):
        if len(judges) < 2:
            raise ValueError("a cascade needs two judges or more")
        self.judges = list(judges)
        self.makes_calls = any(j.makes_calls for j in self.judges)
        self.answers_without_model = any(j.answers_without_model for j in self.judges)
        self.model = ",".join(str(getattr(j, "model", "?")) for j in self.judges)

    def __getattr__(self, name: str) -> Any:  # bookkeeping: the calling judge's (see the class doc)
        if name.startswith("__") or name == "judges":
            raise AttributeError(name)
        return getattr(self.judges[-1], name)

    @property
    def cache(self) -> Any:
        return next((j.cache for j in self.judges if j.makes_calls), None)

    @cache.setter
    def cache(self, value: Any) -> None:  # a stage lends its response cache to the judges that call
        for j in self.judges:
            if j.makes_calls:
                j.cache = value

    @property
    def http_calls(self) -> int:
        return sum(j.http_calls for j in self.judges)

    @property
    def cache_hits(self) -> int:
        return sum(j.cache_hits for j in self.judges)

    @property
    def spent_usd(self) -> float:
        return sum(j.spent_usd for j in self.judges)

    # -- grading ---------------------------------------------------------------------------------
    async def agrade_with(self, question: Any, response: str | None, grader: Any, *, protocol: str | None = None,
                          **settings: Any) -> Any:
        said: list[dict[str, Any]] = []
        grade = None
        for judge in self.judges:
            grade = await judge.agrade_with(question, response, grader, protocol=protocol, **settings)
            said.append({"judge": grade.judge_model or getattr(judge, "model", None), "outcome": grade.outcome})
            if grade.outcome != UNDECIDED:
                break
        assert grade is not None
        return grade.model_copy(update={"judge_settings": {**grade.judge_settings, "cascade": said}})

    def with_recorder(self, make: Callable[[Any], Any]) -> CascadeJudge:
        return CascadeJudge([j.with_recorder(make) for j in self.judges])

    def grade_basis(self, question: Any) -> dict[str, Any] | None:
        bases = [j.grade_basis(question) for j in self.judges]
        return None if all(b is None for b in bases) else {"cascade": bases}

    def decided_by(self) -> tuple[str, str] | None:
        return None  # the deciding judge's grade names its own grader

    def prepare(self, run_dir: Any, questions: Iterable[Any]) -> None:
        items = list(questions)
        for j in self.judges:
            j.prepare(run_dir, items)

    def settings(self) -> dict[str, Any]:
        return {"cascade": [getattr(j, "settings", dict)() if hasattr(j, "settings") else {} for j in self.judges]}

    # -- tracing ---------------------------------------------------------------------------------
    def begin_trace(self, run_dir: Any, store: Any, cases: Sequence[Any], roles: Sequence[str], *,
                    check_stale: bool) -> None:
        for j in self.judges:
            j.begin_trace(run_dir, store, cases, roles, check_stale=check_stale)

    def trace_basis(self, question: Any) -> Any:
        bases = [j.trace_basis(question) for j in self.judges]
        return None if all(b is None for b in bases) else bases

    def trace_settings(self) -> dict[str, Any]:
        return {"cascade": [j.trace_settings() for j in self.judges]}

    def trace_versions(self) -> dict[str, str]:
        return {k: v for j in self.judges for k, v in j.trace_versions().items()}

    async def answer(self, who: Any, request: JudgeRequest) -> Any:
        said: list[dict[str, Any]] = []
        step = None
        for judge in self.judges:
            member = dataclasses.replace(who, client=judge, model=str(getattr(judge, "model", who.model)),
                                         params=dict(who.params) if judge.makes_calls else {})
            step = await judge.answer(member, request)
            said.append({"judge": step.model, "status": step.status})
            if step.status != UNDECIDED:
                break
        assert step is not None
        return step.model_copy(update={"cascade": said}) if "cascade" in type(step).model_fields else step

    async def aclose(self) -> None:
        for j in self.judges:
            await j.aclose()


# -- a judge that makes no call ----------------------------------------------------------------
class NoCallJudge:
    """The bookkeeping of a judge kind that sends no model request (the exact judge, a judge that
    reads a person's verdicts): no cache, no price, no spend, nothing to close. A subclass sets
    ``model`` (what its records name) and answers the :class:`Judge` methods it needs; the
    defaults here decide nothing (a grade or trace question it does not override is an error
    naming the kind, never a silent verdict)."""

    makes_calls = False
    answers_without_model = True
    kind = "no-call"

    def __init__(self, model: str, *, endpoint: str = "", role: str | None = None):
        from trek.llm.usage import PriceTable

        self.model = model
        self.base_url = endpoint or f"{model}://"
        self.role = role
        self.prices = PriceTable({})
        self.cache: Any = None
        self.http_calls = 0
        self.cache_hits = 0
        self.spent_usd = 0.0
        self.assume_output = 0
        self.max_connections = 64
        self.request_base_url = self.base_url
        self.ledger: Any = None
        self.budget_usd: float | None = None
        self.unpriced_calls = 0
        self.progress = False
        self.json_schema_replies = False
        self.max_retries = 0
        self.timeout: float | None = None
        self.usage: Any = None
        from trek.types import Usage

        self.usage = Usage()

    def settings(self) -> dict[str, Any]:
        return {}

    def with_recorder(self, make: Callable[[Any], Any]) -> Any:
        return self  # nothing to record: it sends nothing

    async def agrade_with(self, question: Any, response: str | None, grader: Any, *, protocol: str | None = None,
                          **settings: Any) -> Any:
        raise NotImplementedError(f"judge kind {self.kind!r} does not grade answers")

    def grade_basis(self, question: Any) -> dict[str, Any] | None:
        return {"judge": [self.kind, self.settings()]}

    def decided_by(self) -> tuple[str, str] | None:
        return None

    def prepare(self, run_dir: Any, questions: Iterable[Any]) -> None:
        return None

    def begin_trace(self, run_dir: Any, store: Any, cases: Sequence[Any], roles: Sequence[str], *,
                    check_stale: bool) -> None:
        return None

    def trace_basis(self, question: Any) -> Any:
        return None

    def trace_settings(self) -> dict[str, Any]:
        return {self.kind: self.settings()}

    def trace_versions(self) -> dict[str, str]:
        return {}

    async def answer(self, who: Any, request: JudgeRequest) -> Any:
        raise NotImplementedError(f"judge kind {self.kind!r} does not answer TrekTrace's question "
                                  f"{request.question.name!r}")

    async def aclose(self) -> None:
        return None
