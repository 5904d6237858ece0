"""The exact judge as a role: ``--judge oracle`` in every command that takes a judge.

:class:`ExactJudge` stands where a judge's :class:`~trek.llm.client.LLMClient` stands (model name
:data:`ORACLE`, endpoint :data:`ENDPOINT`), so grading, TrekTrace and Ctrl runs take it through
the same options and code paths as an LLM judge. It never sends a request (its calls raise): the
stages that meet it decide from the annotations instead (:mod:`trek.graders.exact` for grades,
:mod:`trek.trace.exact` for TrekTrace's judge steps), and every record it decides names
``oracle`` and the exact version, so a reader can tell an exact verdict from an LLM's.

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
from trek.llm.client import LLMClient, LLMResult
from trek.roles import judge_kind
from trek.types import Grade, Question

__all__ = ["ORACLE", "ENDPOINT", "ExactJudge", "is_exact", "judge_client"]

#: The judge name that selects the exact judge in every command (``--judge oracle``).
ORACLE = "oracle"
#: The endpoint the exact judge's records name (no server is behind it).
ENDPOINT = "exact://annotations"


@judge_kind(ORACLE)
class ExactJudge(LLMClient):
    """A judge that decides from annotations and never makes a model call (see the module doc).

    ``annotations``: fixed annotations (default: those of each run, :meth:`bind`); ``contexts``: a
    Ctrl ``contexts.jsonl`` whose documents add to Mini's; ``rule``: how a response's named
    answers decide (:data:`trek.graders.exact.RULES`)."""

    def __init__(self, annotations: Annotations | None = None, *, contexts: str | os.PathLike[str] | None = None,
                 rule: str = DEFAULT_RULE, role: str | None = None):
        if rule not in RULES:
            raise ValueError(f"exact grading rule must be one of {', '.join(RULES)}, not {rule!r}")
        super().__init__(ORACLE, base_url=ENDPOINT, api_key="exact", progress=False, max_retries=0,
                         max_connections=64, role=role)
        self.rule = rule
        self.contexts = contexts
        self._fixed = annotations
        self.annotations: Annotations | None = annotations
        self.bound: Path | None = None

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
        """The exact grade of one response (:func:`trek.graders.exact.exact_grade`)."""
        from trek.graders.exact import exact_grade

        ann = self.current()
        return exact_grade(question, response, ann.competing(question), rule=self.rule, source=ann.source,
                           protocol=protocol)

    def settings(self) -> dict[str, Any]:
        """What decides this judge's verdicts besides the annotations (part of resume keys)."""
        return {"exact": GRADER_VERSION, "rule": self.rule}

    # -- the judge interface (trek.llm.client.LLMClient), answered from the annotations ------------
    makes_calls = False

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

    async def _call(self, api: str, model: str, body: dict[str, Any], sample: int) -> LLMResult:
        raise RuntimeError("the exact judge (oracle) makes no model call; a stage asked it for one")


def is_exact(client: Any) -> bool:
    """True for the exact judge (an :class:`ExactJudge`)."""
    return isinstance(client, ExactJudge)


def judge_client(model: str | None, make: Any, **exact: Any) -> Any:
    """``ExactJudge(**exact)`` when ``model`` is :data:`ORACLE`, else ``make(model)`` (an LLM
    client); ``None`` for no model."""
    if model is None:
        return None
    return ExactJudge(**exact) if model == ORACLE else make(model)
