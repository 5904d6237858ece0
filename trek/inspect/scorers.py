"""The scorers ``trek/grade`` and ``trek/trektrace``.

Both read the sample as ``trek import inspect-ai`` does (:mod:`trek.inspect.transcript`), so they
score a live ``inspect eval`` and an old log under ``inspect score`` alike.

``trek/grade`` grades the answer with its dataset's protocol (:mod:`trek.graders`) through the
``grader`` model role (``judge=oracle``: Trek's exact judge on annotated data, TrekBench-Mini).
Value ``C``/``I``/``N`` (correct, incorrect, not attempted); an unreadable verdict or a failed
judge call is ``Score.unscored(reason="grader_failed")``, never a wrong answer.

``trek/trektrace`` runs TrekTrace (:func:`trek.trace.pipeline.trace_case`, the code ``trek trace``
runs) on the sample: it grades inline as ``trek/grade`` does, and traces a wrong answer with the
``diagnostic`` role (retrieval side: key evidence, evidence match), the ``analysis`` role (query
adequacy, probe verdicts; default: the ``grader`` role, then ``diagnostic``) and the evaluated model
(``get_model()``) for the gold-only and gold-plus-noise probes. Its value is a dict of 0/1 keys
(:data:`KEYS`); a correct answer is ``correct: 1`` with no label; a case whose needed tests could
not all run, or that cannot be traced (no gold URLs, no reference, a missing gold page), is
``Score.unscored(reason=...)``, its coverage in the metadata; never a label by elimination.
The metadata holds the Trek grade and trace record (``trek_grade``, ``trek_trace``) that
``trek import inspect-ai`` carries into a run's ``grades.jsonl`` and ``trace.jsonl``.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    NOANSWER,
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    accuracy,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState

from trek.inspect._names import name
from trek.inspect.models import InspectModelClient, inspect_model, role_model
from trek.inspect.transcript import SampleView, sample_dict, sample_store, view_of
from trek.trace.labels import LABELS
from trek.types import Grade

__all__ = ["grade", "trektrace", "trektrace_metrics", "KEYS", "LABEL_KEYS", "GRADE_VALUES"]

#: The value keys of a trek/trektrace score: one per TrekTrace label, then ``correct``.
LABEL_KEYS: dict[str, str] = {lab: lab.lower().replace("-", "_") for lab in LABELS}
KEYS: tuple[str, ...] = (*LABEL_KEYS.values(), "correct")
#: The trek/grade value of each Trek grade outcome.
GRADE_VALUES = {"correct": CORRECT, "incorrect": INCORRECT, "not_attempted": NOANSWER}


def _task_name() -> str | None:
    try:
        from inspect_ai.log._samples import sample_active

        active = sample_active()
        return str(active.task) if active is not None and getattr(active, "task", None) else None
    except Exception:  # noqa: BLE001 - a private helper of inspect; the name only labels the dataset
        return None


def _view(state: TaskState, target: Target) -> SampleView:
    return view_of(sample_dict(state, target), _task_name(), str(state.model), f"sample {state.sample_id!r}")


def _spec(judge: str | list[str] | None) -> str | None:
    """A judge as ``-S judge=...`` gives it: inspect reads ``exact,model`` as a list."""
    return ",".join(map(str, judge)) if isinstance(judge, list | tuple) else judge


def _check_judge(judge: str) -> None:
    from trek.judges import known_kinds, parse_spec

    if not all(what == "kind" or name == "model" for what, name in parse_spec(judge)):
        raise ValueError(f"judge must be model, a judge kind ({', '.join(known_kinds())}) or a cascade of them "
                         f"(exact,model), not {judge!r}")


_ANNOTATIONS: Any = None


def _mini_annotations() -> Any:
    """TrekBench-Mini's annotations, read once per process (the exact judge's)."""
    global _ANNOTATIONS
    if _ANNOTATIONS is None:
        from trek.annotations import from_mini

        _ANNOTATIONS = from_mini()
    return _ANNOTATIONS


def _judge_client(judge: str, role: str, fallback: tuple[str, ...] = ()) -> Any:
    """The judge ``judge`` names, from :func:`trek.roles.make_judge` as in the CLI: the exact judge
    (``oracle``, on Mini's annotations) or the inspect model of ``role`` (``model``)."""
    from trek.roles import Role, make_judge

    def model(_: Any) -> Any:
        return InspectModelClient(inspect_model(role, fallback=fallback), role=role)

    return make_judge(Role("judge", judge), model, annotations=_mini_annotations())  # Mini is read once a process


async def _grade(view: SampleView, client: Any) -> Grade:
    from trek.graders import agrade

    return await agrade(view.question, view.trajectory.final_answer, client)


def _unscored(reason: str, explanation: str, **metadata: Any) -> Score:
    return Score.unscored(reason=reason, explanation=explanation, metadata=metadata or None)


# -- trek/grade ------------------------------------------------------------------------------------
@scorer(metrics=[accuracy(), stderr()], name=name("grade"))
def grade(judge: str | list[str] = "model") -> Scorer:
    """Grade the answer with its dataset's protocol (module docstring). ``judge``: ``model`` (the
    ``grader`` model role, else the evaluated model) or ``oracle`` (the exact judge)."""
    judge = _spec(judge) or "model"
    _check_judge(judge)

    async def score(state: TaskState, target: Target) -> Score:
        from trek.annotations import MissingAnnotation
        from trek.imports.common import ImportFailure

        try:
            view = _view(state, target)
            g = await _grade(view, _judge_client(judge, "grader"))
        except (ImportFailure, MissingAnnotation, ValueError) as e:
            return _unscored("scoring_failed", str(e))
        meta = {"outcome": g.outcome, "dataset": view.question.dataset, "trek_grade": g.model_dump(mode="json")}
        if g.outcome not in GRADE_VALUES:
            return _unscored("grader_failed", f"the grade is {g.outcome}: {g.error or 'verdict unreadable'}"
                             + (" (a cascade judge=exact,model grades it)" if g.outcome == "undecided" else ""),
                             answer=view.trajectory.final_answer, **meta)
        return Score(value=GRADE_VALUES[g.outcome], answer=view.trajectory.final_answer,
                     explanation=f"{g.outcome.replace('_', ' ')} ({g.grader} grader, {g.judge_model or g.method})",
                     metadata=meta)

    return score


# -- metrics ---------------------------------------------------------------------------------------
def _shares(scores: list[SampleScore]) -> dict[str, float]:
    vals = [s.score.value for s in scores if isinstance(s.score.value, dict)]
    failed = [v for v in vals if not v.get("correct")]
    out: dict[str, float] = {}
    for key in LABEL_KEYS.values():
        out[key] = sum(bool(v.get(key)) for v in failed) / len(failed) if failed else math.nan
    out["traced"] = float(len(failed))
    out["correct"] = float(len(vals) - len(failed))
    return out


@metric(name=name("trektrace_metrics"))
def trektrace_metrics() -> Metric:
    """Each label's share of the traced failures (multi-label: shares need not sum to 1), the
    counts of traced failures and correct answers, overall and per dataset (``DATASET/KEY``).
    Unscored (incomplete, untraceable) samples are not passed to metrics by inspect: it counts
    them as the scorer's ``unscored_samples``."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        out = _shares(scores)
        groups: dict[str, list[SampleScore]] = {}
        for s in scores:
            ds = (s.score.metadata or {}).get("dataset") or (s.sample_metadata or {}).get("dataset")
            groups.setdefault(str(ds or "unknown"), []).append(s)
        if len(groups) > 1:
            for ds, items in sorted(groups.items()):
                out.update({f"{ds}/{k}": v for k, v in _shares(items).items()})
        return out

    return compute


def label_counts(scores: list[Score]) -> Counter[str]:
    """How many scores carry each label key (helper for reports and tests)."""
    return Counter(k for s in scores if isinstance(s.value, dict) for k, v in s.value.items() if v and k != "correct")



# -- trek/trektrace --------------------------------------------------------------------------------
def _explain(rec: Any) -> str:
    """Two or three sentences on why the labels were given."""
    if rec.evidence_retrieved is True:
        first = f"The gold evidence was retrieved ({rec.retrieval_basis})."
    elif rec.evidence_retrieved is False:
        why = rec.evidence_reason or rec.retrieval_basis or ""
        q = {True: " The queries aimed at it.", False: " The queries did not aim at it."}.get(rec.query_adequate, "")
        first = f"The gold evidence was not retrieved{': ' + why if why else ''}.{q}".replace("..", ".")
    else:
        first = "Whether the gold evidence was retrieved is not known."
    if rec.gold_only_correct is False:
        second = f"From the gold pages alone the model still answered wrongly ({rec.gold_only_answer!r})."
    elif rec.gold_only_correct is True and rec.noise_was_run:
        second = (f"From the gold pages alone it answered right ({rec.gold_only_answer!r}); with its retrieved pages "
                  f"added it answered {'right' if rec.noise_correct else 'wrongly'} ({rec.noise_answer!r}).")
    elif rec.gold_only_correct is True:
        second = f"From the gold pages alone it answered right ({rec.gold_only_answer!r})."
    else:
        second = ""
    labels = ", ".join(rec.labels) or "no label"
    return " ".join(s for s in (first, second, f"Labels: {labels}.") if s)


def _trace_meta(rec: Any) -> dict[str, Any]:
    return {
        "flags": rec.flags,
        "matched_urls": {m.gold_url: m.matched_url for m in rec.url_matches},
        "equivalent_urls": list(rec.equivalent_urls),
        "key_evidence": rec.key_evidence,
        "retrieved_key_evidence": rec.retrieved_key_evidence,
        "evidence_reason": rec.evidence_reason,
        "query_adequate": rec.query_adequate,
        "query_assessment": rec.query_reason,
        "gold_only_answer": rec.gold_only_answer,
        "gold_only_correct": rec.gold_only_correct,
        "noise_answer": rec.noise_answer,
        "noise_correct": rec.noise_correct,
        "tests": {k: t.model_dump(mode="json", exclude_none=True) for k, t in rec.tests.items()},
        "coverage": rec.coverage.model_dump(mode="json") if rec.coverage is not None else "full",
    }


def _open_store(pages: str | None, fetch: bool) -> Any:
    if pages is None:
        return None
    from trek.pages import PageStore

    p = Path(pages)
    from trek import runs

    path = p / runs.PAGES if p.is_dir() else p
    if not path.exists():
        raise ValueError(f"pages={pages}: no page store there (a pages.sqlite file, or a folder holding one)")
    return PageStore(path, fetch=fetch)


@scorer(metrics=[trektrace_metrics()], name=name("trektrace"))
def trektrace(
    judge: str | list[str] = "model",
    grade_judge: str | list[str] | None = None,
    pages: str | None = None,
    fetch: bool = False,
    unknown: str = "incomplete",
) -> Scorer:
    """TrekTrace on the sample's transcript (module docstring).

    ``judge``: ``model`` (the ``diagnostic`` and ``analysis`` roles) or ``oracle`` (the exact judge
    decides the judge steps from TrekBench-Mini's annotations; the probes stay the evaluated
    model's). ``grade_judge``: the judge of the inline grade (default: ``judge``; ``model`` is the
    ``grader`` role). ``pages``: a page store (``pages.sqlite`` or a run folder holding one) for
    the gold pages the transcript does not carry; ``fetch``: fetch the rest live.
    ``unknown``: TrekTrace's policy for an unreadable judgment.
    """
    from trek.trace.pipeline import UNKNOWN_POLICIES

    judge, grade_judge = _spec(judge) or "model", _spec(grade_judge)
    _check_judge(judge)
    _check_judge(grade_judge or judge)
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown must be one of {', '.join(UNKNOWN_POLICIES)}, not {unknown!r}")
    base = _open_store(pages, fetch)

    async def score(state: TaskState, target: Target) -> Score:
        from trek.annotations import MissingAnnotation
        from trek.imports.common import ImportFailure

        try:
            view = _view(state, target)
        except ImportFailure as e:
            return _unscored("scoring_failed", f"the transcript cannot be traced: {e}")
        q = view.question
        if not q.gold_urls:
            return _unscored("scoring_failed", "the sample has no gold URLs (metadata gold_urls): TrekTrace has "
                             "nothing to test retrieval or probe with; no label is given", dataset=q.dataset)
        if view.trajectory.status == "pending":
            return _unscored("scoring_failed", "the sample's answer is pending", dataset=q.dataset)
        try:
            g = await _grade(view, _judge_client(grade_judge or judge, "grader", ("analysis",)))
        except (MissingAnnotation, ValueError) as e:
            return _unscored("scoring_failed", str(e), dataset=q.dataset)
        meta: dict[str, Any] = {"dataset": q.dataset, "outcome": g.outcome, "trek_grade": g.model_dump(mode="json")}
        if g.outcome == "correct":
            return Score(value={**dict.fromkeys(KEYS, 0), "correct": 1}, answer=view.trajectory.final_answer,
                         explanation="The answer is correct: nothing to attribute.", metadata=meta)
        if g.outcome not in ("incorrect", "not_attempted"):
            return _unscored("grader_failed", f"the inline grade is {g.outcome} ({g.error or 'verdict unreadable'}): "
                             "the case is not traced", answer=view.trajectory.final_answer, **meta)
        try:
            rec = await _trace(view, g, judge, base, fetch, unknown)
        except (MissingAnnotation, ValueError) as e:
            return _unscored("scoring_failed", str(e), answer=view.trajectory.final_answer, **meta)
        meta.update(_trace_meta(rec), trek_trace=rec.model_dump(mode="json"))
        if rec.status != "done":
            why = "; ".join(f"{k}: {v}" for k, v in rec.skipped.items()) or rec.error or rec.status
            return _unscored("scoring_failed", f"TrekTrace could not run every test this case needs ({why}); "
                             "no label is given", answer=view.trajectory.final_answer, **meta)
        value = {key: int(lab in rec.labels) for lab, key in LABEL_KEYS.items()}
        return Score(value={**value, "correct": 0}, answer=view.trajectory.final_answer, explanation=_explain(rec),
                     metadata=meta)

    return score


async def _trace(view: SampleView, g: Grade, judge: str, base: Any, fetch: bool, unknown: str) -> Any:
    from trek.trace.inputs import TraceInput
    from trek.trace.pipeline import TraceConfig, begin_judges, trace_case

    store = sample_store(view, base, fetch=fetch)
    try:
        evaluated = role_model("evaluated", inspect_model())
        diagnostic = _judge_role(judge, "diagnostic", ("grader",))
        analysis = _judge_role(judge, "analysis", ("grader", "diagnostic"))
        config = TraceConfig(diagnostic, analysis, evaluated, store, unknown=unknown)
        case = TraceInput.build(view.question, view.trajectory, g)
        # each judge prepares as in `trek trace` (the exact judge binds its annotations and refuses
        # what they cannot decide; the rank diagnostic is not taken: a transcript names no index)
        begin_judges(Path("."), config, [case])
        return await trace_case(case, config)
    finally:
        store.close()


def _judge_role(judge: str, role: str, fallback: tuple[str, ...]) -> Any:
    """The TrekTrace judge role ``role`` played by ``judge`` (a kind, ``model``: the inspect model
    of ``role``, or a cascade of them), as :func:`trek.roles.make_judge` builds it for the CLI."""
    from trek.trace.common import RoleModel

    client = _judge_client(judge, role, fallback)
    return RoleModel(role, client, str(client.model or role))


