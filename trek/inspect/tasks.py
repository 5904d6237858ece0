"""The tasks ``trek/wild``, ``trek/mini`` and ``trek/ctrl``.

Every sample is one Trek question: ``input`` is Trek's answer prompt for its dataset (the
effective year included, :mod:`trek.answer_prompts`), ``target`` the gold answers, ``id`` the
question id, and the metadata holds ``dataset``, ``effective_year``, ``gold_urls``,
``false_premise``, ``answers`` and the question as written (``trek: true`` marks a sample of
Trek's tasks, which ``trek import inspect-ai`` reads back into the same question).

* ``trek/wild``: TrekBench-Wild from the source datasets (``-T data_dir=...``, default
  ``$TREK_DATA_DIR``); ``-T search=native|tavily|local|none`` (``native``: inspect's
  ``web_search()`` with the provider's own search; ``local``: ``trek/search`` over ``-T
  pages=...``), ``-T datasets=freshqa,sealqa`` to choose, ``-T max_searches=N`` (at most N model
  turns that search, then one that answers: inspect's ``turn_limit``; default 10), ``-T allow_partial=true`` for a cut source file.
* ``trek/mini``: the bundled TrekBench-Mini, offline: ``trek/search`` over Mini's pages
  (``-T results=5``), graded by the exact judge (``-T judge=model`` for the ``grader`` role).
* ``trek/ctrl``: frozen contexts of a Ctrl build (``-T contexts=PATH -T condition=OO|MND|SAA|SBA|GOLD
  -T method=direct|rerank|filter|structured``), no tools: the method runs Trek's own code
  (:mod:`trek.rag`) with the evaluated model (``get_model()``).
"""

from __future__ import annotations

from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver, system_message, use_tools

from trek.answer_prompts import answer_prompt
from trek.inspect._names import name
from trek.inspect.scorers import grade
from trek.inspect.tools import search as trek_search
from trek.inspect.transcript import MINI_CORPUS
from trek.types import Question

__all__ = ["wild", "mini", "ctrl", "sample_of", "SEARCH_CHOICES", "SYSTEM_PROMPT"]

SEARCH_CHOICES = ("native", "tavily", "local", "none")
#: The system message of the search tasks (our wording).
SYSTEM_PROMPT = ("You answer questions about facts that change over time. Use the search tool to find current "
                 "evidence before answering; when you are done, reply with the final answer only.")


def sample_of(q: Question, **extra: Any) -> Sample:
    """The inspect sample of one Trek question (module docstring)."""
    meta = {"trek": True, "dataset": q.dataset, "question": q.question, "answers": list(q.answers),
            "effective_year": q.effective_year, "effective_year_raw": q.effective_year_raw,
            "gold_urls": list(q.gold_urls), "false_premise": q.false_premise, "split": q.split,
            "grader": q.grader, "question_metadata": dict(q.metadata), **extra}
    return Sample(id=q.id, input=answer_prompt(q), target=list(q.answers), metadata=meta)


def _csv(value: str | list[str] | None) -> list[str] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return [v.strip() for v in items if v.strip()]


def _limit(qs: list[Question], datasets: str | list[str] | None) -> list[Question]:
    wanted = _csv(datasets)
    if not wanted:
        return qs
    known = sorted({q.dataset for q in qs})
    unknown = [d for d in wanted if d not in known]
    if unknown:
        raise ValueError(f"datasets={','.join(unknown)}: not in the question set (datasets: {', '.join(known)})")
    return [q for q in qs if q.dataset in wanted]


def _search_tools(search: str, results: int, pages: str | None) -> list[Any]:
    if search not in SEARCH_CHOICES:
        raise ValueError(f"search must be one of {', '.join(SEARCH_CHOICES)}, not {search!r}")
    if search == "none":
        return []
    if search == "native":
        from inspect_ai.tool import web_search

        return [web_search()]
    return [trek_search(backend=search, results=results, pages=pages)]


def _solver(tools: list[Any]) -> list[Solver]:
    if not tools:
        return [generate()]
    return [system_message(SYSTEM_PROMPT), use_tools(*tools), generate()]


@task(name=name("wild"))
def wild(search: str = "native", datasets: str | list[str] | None = None, max_searches: int = 10,
         results: int = 5, pages: str | None = None, data_dir: str | None = None, judge: str = "model",
         allow_partial: bool = False) -> Task:
    """TrekBench-Wild (module docstring)."""
    from trek.datasets import load_benchmark

    bench = load_benchmark("wild", data_dir)
    if not allow_partial:  # fewer questions than the paper's TrekBench-Wild: an error unless allowed
        from trek.datasets.wild import check_complete

        check_complete(bench)
    qs = _limit(list(bench.questions), datasets)
    tools = _search_tools(search, results, pages)
    meta = {"results_per_search": results} if search == "local" else {}
    return Task(dataset=MemoryDataset([sample_of(q, **meta) for q in qs], name="trekbench-wild"),
                solver=_solver(tools), scorer=grade(judge=judge),
                **(_tool_budget(max_searches) if tools else {}))


@task(name=name("mini"))
def mini(results: int = 5, datasets: str | list[str] | None = None, max_searches: int = 10,
         judge: str = "oracle") -> Task:
    """TrekBench-Mini, offline (module docstring)."""
    from trek.datasets import load_benchmark

    qs = _limit(list(load_benchmark("mini", None).questions), datasets)
    samples = [sample_of(q, corpus=MINI_CORPUS, results_per_search=results) for q in qs]
    return Task(dataset=MemoryDataset(samples, name="trekbench-mini"),
                solver=_solver([trek_search(backend="local", results=results)]), scorer=grade(judge=judge),
                **_tool_budget(max_searches))


def _tool_budget(max_searches: int) -> dict[str, Any]:
    """The model-turn ceiling of one sample: ``max_searches`` turns that search, then the answer."""
    if max_searches < 1:
        raise ValueError(f"max_searches must be at least 1, not {max_searches}")
    return {"turn_limit": max_searches + 1}


# -- Ctrl ----------------------------------------------------------------------------------------
@solver(name=name("ctrl_method"))
def ctrl_method(method: str = "direct") -> Solver:
    """Answer from the sample's frozen context with Trek's method (:mod:`trek.rag`)."""
    from trek.rag import make_method

    runner = make_method(method)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from trek.contexts import Context
        from trek.inspect.models import InspectModelClient, inspect_model

        q = Question.model_validate(state.metadata["trek_question"])
        ctx = Context.model_validate(state.metadata["trek_context"])
        client = InspectModelClient(inspect_model(), role="evaluated")
        out = await runner.arun(q, ctx, client, {})
        if out.status != "ok":
            raise RuntimeError(f"{method}: {out.error or 'a model call failed'}")
        state.output = ModelOutput.from_content(model=str(state.model), content=out.final_answer or "")
        state.messages.append(state.output.message)
        state.metadata["method_details"] = out.details
        return state

    return solve


@task(name=name("ctrl"))
def ctrl(contexts: str, condition: str = "OO", method: str = "direct", questions: str | None = None,
         judge: str = "model") -> Task:
    """TrekBench-Ctrl on frozen contexts (module docstring)."""
    from trek.contexts import read_contexts
    from trek.rag import METHODS
    from trek.rag.context import load_ctrl_questions, questions_beside

    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    ctxs = [c for c in read_contexts(contexts) if c.condition == condition]
    if not ctxs:
        raise ValueError(f"{contexts}: no context of condition {condition!r}")
    qpath = questions or questions_beside(contexts)
    if qpath is None:
        raise ValueError(f"{contexts}: no questions.jsonl or pools.jsonl beside it; give -T questions=PATH")
    by_id = load_ctrl_questions(qpath)
    samples = []
    for c in ctxs:
        q = by_id.get(c.question_id)
        if q is None:
            raise ValueError(f"{contexts}: question {c.question_id!r} is not in {qpath}")
        samples.append(sample_of(q, condition=condition, method=method, trek_question=q.model_dump(mode="json"),
                                 trek_context=c.model_dump(mode="json")))
    return Task(dataset=MemoryDataset(samples, name=f"trekbench-ctrl-{condition}"), solver=[ctrl_method(method)],
                scorer=grade(judge=judge))
