"""Two toy judge kinds, each declared in this one file through the public registration API only
(``trek.judges.judge_kind``): importing the file is all it takes for every command to know them.

* ``toy`` decides by a plain rule (its grades say ``method: exact``, decided without a model): an answer is right when it contains the first reference
  answer; evidence is never matched, queries are always adequate, references never stale;
* ``abstainer`` decides nothing: every grade and every TrekTrace question is ``undecided``.
"""

from __future__ import annotations

from typing import Any

from trek.judges import UNDECIDED, JudgeRequest, NoCallJudge, judge_kind
from trek.trace.records import Step
from trek.types import Grade, Question, Usage

GRADER = "toy-rule"


def _contains(answer: str | None, references: list[str]) -> bool:
    return bool(answer and references and references[0].lower() in answer.lower())


@judge_kind("toy")
class ToyJudge(NoCallJudge):
    def __init__(self, role: str | None = None):
        super().__init__("toy", endpoint="toy://rule", role=role)

    def _grade(self, question: Question, response: str | None, outcome: str) -> Grade:
        return Grade(question_id=question.id, dataset=question.dataset, response=response, outcome=outcome,  # type: ignore[arg-type]
                     method="exact", grader=GRADER, grader_version="toy-1", judge_model=self.model, usage=Usage())

    async def agrade_with(self, question: Question, response: str | None, grader: Any, *, protocol: str | None = None,
                          **settings: Any) -> Grade:
        return self._grade(question, response, "correct" if _contains(response, question.answers) else "incorrect")

    def _value(self, request: JudgeRequest) -> dict[str, Any]:
        q = request.case.q
        return {
            "key_evidence": {"key_evidence": f"the reference {q.answers[0]}", "gold_evidence_urls": []},
            "evidence_match": {"evidence_match": False, "retrieved_key_evidence": "", "equivalent_urls": [],
                               "reason": "toy: never matched"},
            "query_adequacy": {"query_adequate": True, "reason": "toy: always adequate"},
            "grade": {"correct": _contains(request.fields.get("candidate"), list(q.answers)), "reason": "toy rule"},
            "stale_reference": {"supports_reference": True, "reason": "toy: never stale"},
        }[request.question.name]

    def _step(self, who: Any, request: JudgeRequest, status: str, value: dict[str, Any], error: str | None = None):
        return Step(name=request.step, role=who.role, model=self.model, endpoint=self.base_url,
                    template=f"toy.{request.question.name}", version="toy-1", status=status, value=value,  # type: ignore[arg-type]
                    error=error)

    async def answer(self, who: Any, request: JudgeRequest) -> Step:
        return self._step(who, request, "ok", request.question.validate(self._value(request)))


@judge_kind("abstainer")
class Abstainer(ToyJudge):
    def __init__(self, role: str | None = None):
        NoCallJudge.__init__(self, "abstainer", endpoint="toy://abstain", role=role)

    async def agrade_with(self, question: Question, response: str | None, grader: Any, *, protocol: str | None = None,
                          **settings: Any) -> Grade:
        g = self._grade(question, response, UNDECIDED)
        return g.model_copy(update={"judge_raw": ["abstainer: never sure"]})

    async def answer(self, who: Any, request: JudgeRequest) -> Step:
        return self._step(who, request, UNDECIDED, {}, error=f"abstainer: not sure about {request.question.name}")
