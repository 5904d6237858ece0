"""The exact judge as a judge kind: ``--judge exact`` (or ``oracle``) in every command that takes a judge.

:class:`ExactJudge` answers the judge protocol (:class:`trek.judges.Judge`) from annotations and
sends no request: grades by :mod:`trek.graders.exact`, TrekTrace's judge questions by
:mod:`trek.trace.exact`. Where its rules cannot be sure, a grade is ``undecided`` and a trace step
has status ``undecided``, with the reason; ``--judge exact,MODEL`` hands exactly those to a model
(:class:`trek.judges.CascadeJudge`). Every record it decides names ``oracle`` and the exact
version, so a reader can tell an exact verdict from an LLM's. It is registered through the
``trek.judges`` entry point, so the registry knows it without any import by name.

Its annotations are fixed when given; otherwise :meth:`ExactJudge.bind` loads those of the run
being judged (:func:`trek.annotations.for_run`: TrekBench-Mini, plus the run's Ctrl contexts).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trek.annotations import Annotations, for_run, from_mini
from trek.graders.exact import DEFAULT_RULE, GRADER, RULES
from trek.graders.exact import VERSION as GRADER_VERSION
from trek.judges import JudgeRequest, NoCallJudge, judge_kind
from trek.types import Grade, Question

__all__ = ["ORACLE", "EXACT", "ENDPOINT", "ExactJudge"]

#: The names that select the exact judge in every command (``--judge exact``; ``oracle`` is the
#: name its records carry, kept for the runs and scripts that use it).
EXACT = "exact"
ORACLE = "oracle"
#: The endpoint the exact judge's records name (no server is behind it).
ENDPOINT = "exact://annotations"


@judge_kind(EXACT, ORACLE)
class ExactJudge(NoCallJudge):
    """A judge that decides from annotations and never makes a model call (see the module doc).

    ``annotations``: fixed annotations (default: those of each run, :meth:`bind`); ``contexts``: a
    Ctrl ``contexts.jsonl`` whose documents add to Mini's; ``rule``: how a response's named
    answers decide (:data:`trek.graders.exact.RULES`)."""

    def __init__(self, annotations: Annotations | None = None, *, contexts: str | os.PathLike[str] | None = None,
                 rule: str = DEFAULT_RULE, role: str | None = None):
        if rule not in RULES:
            raise ValueError(f"exact grading rule must be one of {', '.join(RULES)}, not {rule!r}")
        super().__init__(ORACLE, endpoint=ENDPOINT, role=role)
        self.rule = rule
        self.contexts = contexts
        self._fixed = annotations
        self.annotations: Annotations | None = annotations
        self.bound: Path | None = None
        self._trace: Any = None

    def bind(self, run_dir: str | os.PathLike[str]) -> Annotations:
        """The annotations for judging ``run_dir`` (loaded once per run; fixed ones when given)."""
        if self._fixed is not None:
            return self._fixed
        rd = Path(run_dir).resolve()
        if self.annotations is None or self.bound != rd:
            self._mini = getattr(self, "_mini", None) or from_mini()  # Mini is read once per judge
            self._memo: dict[Any, Annotations] = getattr(self, "_memo", {})
            self.annotations = for_run(rd, contexts=self.contexts, mini=self._mini, memo=self._memo)
            self.bound = rd
        return self.annotations

    def current(self) -> Annotations:
        """The bound annotations (TrekBench-Mini's when no run was bound)."""
        if self.annotations is None:
            self.annotations = from_mini()
        return self.annotations

    def grade(self, question: Question, response: str | None, protocol: str | None = None) -> Grade:
        """The exact grade of one response (:func:`trek.graders.exact.exact_grade`; outcome
        ``undecided`` where its rules cannot be sure)."""
        from trek.graders.exact import exact_grade

        ann = self.current()
        return exact_grade(question, response, ann.competing(question), rule=self.rule, source=ann.source,
                           protocol=protocol)

    def settings(self) -> dict[str, Any]:
        """What decides this judge's verdicts besides the annotations (part of resume keys)."""
        return {"exact": GRADER_VERSION, "rule": self.rule}

    # -- grading (trek.judges.Judge) ---------------------------------------------------------------
    async def agrade_with(self, question: Question, response: str | None, grader: Any, *,
                          protocol: str | None = None, **settings: Any) -> Grade:
        """The exact grade (the dataset's outcomes; ``grader`` and ``settings`` do not apply)."""
        return self.grade(question, response, protocol=protocol)

    def grade_basis(self, question: Question) -> dict[str, Any]:
        return {"judge": self.settings(), "annotations": self.current().fingerprint(question)}

    def decided_by(self) -> tuple[str, str]:
        return GRADER, GRADER_VERSION

    def prepare(self, run_dir: Any, questions: Any) -> None:
        """Refuse a question without annotations (:class:`~trek.annotations.MissingAnnotation`)."""
        ann = self.bind(run_dir)
        for q in questions:
            ann.question(q)

    # -- TrekTrace's judge questions (trek.judges.Judge) -------------------------------------------
    def begin_trace(self, run_dir: Any, store: Any, cases: Any, roles: Any, *, check_stale: bool) -> None:
        """Bind the run's annotations and refuse, before any call, what they cannot decide
        (:meth:`trek.trace.exact.ExactTrace.check`)."""
        from trek.trace.exact import for_trace

        self._trace = for_trace(self, store, run_dir, roles)
        self._trace.check(cases, diagnostic="diagnostic" in roles, analysis="analysis" in roles, stale=check_stale)

    def trace_basis(self, question: Question) -> Any:
        return self._side().fingerprint(question)

    def trace_settings(self) -> dict[str, Any]:
        from trek.trace.exact import VERSION

        return {"exact": [VERSION, self.rule]}

    def trace_versions(self) -> dict[str, str]:
        from trek.trace.exact import VERSION

        return {"exact": VERSION}

    async def answer(self, who: Any, request: JudgeRequest) -> Any:
        """The step of ``request`` decided from the annotations (status ``undecided``, with the
        reason in ``error``, where they cannot support a verdict)."""
        if request.facts is None:
            raise ValueError(f"TrekTrace question {request.question.name!r} declares no exact decision: the exact "
                             "judge cannot answer it (use a model judge for this role)")
        value, detail = request.facts(self._side())
        return self._side().step(request.step, who, value, detail)

    def _side(self) -> Any:
        if self._trace is None:
            raise RuntimeError("the exact judge was asked a TrekTrace question before begin_trace bound a run")
        return self._trace

