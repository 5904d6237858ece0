"""The offline demo: real Trek runs on the bundled demo benchmark against a scripted fake model.

    python tests/demo/demo_runs.py [--out build/demo-runs]

A test fixture, not part of the ``trek`` package (the notebooks read the real recorded runs of
``make runs``; the tests use these scripted ones, whose outcomes are known in advance).
Everything in them is produced by the real pipeline (``run_system`` with the
no-search, search-then-read and agentic systems over the local BM25 index, then
``grade_run`` with each dataset's grader) talking over HTTP to
:class:`~trek.testing.fake_openai.FakeOpenAIServer`. Only the *model* is fake: a script that
decides, per question, which page the "model" opens and which answer it gives, so that the
runs show every kind of outcome (right answers, stale answers, answers taken from a newer
but irrelevant page). Its choices are a fixed function of the question's position, not of
any measured behaviour: the numbers are **demo data, never a result**.

The judge is scripted too: it accepts a response exactly equal to one of the references and
rejects anything else (FreshQA's exact-match step handles the equal ones before any judge
call).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from trek.datasets import mini
from trek.types import Document, Question

__all__ = ["DEMO_RUNS", "demo_script", "build_demo_runs"]

#: label -> (system, search backend or None, order in tables)
DEMO_RUNS: dict[str, tuple[str, str | None, int]] = {
    "demo-lm": ("no-search", None, 0),
    "demo-lm-read": ("search-then-read", "local", 1),
    "demo-lm-search": ("agentic", "local", 2),
}
MODEL = "demo-lm"
JUDGE = "demo-judge"

# Phrases that only the agentic system prompt / the search-then-read prompt contain.
_AGENTIC_MARK = r"You have two tools"
_READ_MARK = r"Here are web pages found for the question"


def _latest(docs: list[Document]) -> Document:
    dated = [d for d in docs if d.date is not None]
    return max(dated, key=lambda d: d.date) if dated else docs[0]


def _plan(i: int, q: Question, bench: mini.MiniBenchmark) -> dict[str, Any]:
    """What the scripted model does on question number ``i`` (a fixed, documented pattern)."""
    hand = [d for d in bench.documents_for(q.id) if not mini.is_generated(d)]  # the Wild corpus's pages
    gold = [d for d in hand if d.role == "gold"]
    outdated = [d for d in hand if d.role == "outdated"]
    relevance = [d for d in hand if d.role == "relevance"]
    right = q.answers[0]
    stale = _latest(outdated).supports_answer or "unknown"
    distractor = _latest(relevance)
    wrong_by_relevance = distractor.supports_answer or "unknown"
    opens_gold = i % 3 != 2
    return {
        # closed book: right on every fourth question, otherwise the latest stale answer
        "closed": right if i % 4 == 0 else stale,
        # search-then-read: right on every third question, otherwise the stale answer
        "read": right if i % 3 == 0 else stale,
        # agentic: opens the gold page on two questions in three, else the newest relevance page;
        # after reading gold it answers right except on every fifth question
        "open_url": gold[0].url if opens_gold else distractor.url,
        "agentic": right if opens_gold and i % 5 != 4 else wrong_by_relevance,
    }


def demo_script(questions: list[Question], bench: mini.MiniBenchmark) -> list[dict[str, Any]]:
    """Fake-server rules for the scripted model and judge (first match wins)."""
    sep = r" \| "
    # A response equal to one of the " | "-separated references (backreference to the pick).
    one_of = r"(?:[^\n]*" + sep + r")?([^\n|]+?)(?:" + sep + r"[^\n]*)?"
    rules: list[dict[str, Any]] = [
        {"model": JUDGE, "any_pattern": "Reference answer: " + one_of + r"\nCandidate answer: \1\n", "reply": "Yes"},
        {"model": JUDGE, "any_pattern": "Reference answer:", "reply": "No"},
        {"model": JUDGE, "any_pattern": "Gold target: " + one_of + r"\nPredicted answer: \1\n", "reply": "A"},
        {"model": JUDGE, "any_pattern": "Gold target:", "reply": "B"},
        {"model": JUDGE, "any_pattern": "evaluation: correct", "reply": "evaluation: incorrect"},
    ]
    for i, q in enumerate(questions):
        plan = _plan(i, q, bench)
        qtext = re.escape(q.question)
        agentic = rf"(?s){_AGENTIC_MARK}.*{qtext}"
        rules += [
            {"model": MODEL, "any_pattern": agentic, "tool_results": 0,
             "tool_calls": [{"name": "web_search", "arguments": {"query": q.question}}]},
            {"model": MODEL, "any_pattern": agentic, "tool_results": 1,
             "tool_calls": [{"name": "open_url", "arguments": {"url": plan["open_url"]}}]},
            {"model": MODEL, "any_pattern": agentic, "reply": plan["agentic"]},
            {"model": MODEL, "any_pattern": rf"(?s){_READ_MARK}.*{qtext}", "reply": plan["read"]},
            {"model": MODEL, "pattern": qtext, "reply": plan["closed"]},
        ]
    return rules


def build_demo_runs(out: str | Path, *, progress: bool = False) -> dict[str, Path]:
    """Run and grade every demo configuration into ``out/<label>/``; returns ``{label: dir}``.

    The folder is rebuilt from scratch so that it always reflects the current code.
    """
    from trek.answering.runner import run_system
    from trek.grading import grade_run
    from trek.llm import LLMCache, LLMClient
    from trek.pages import PageStore
    from trek.runs import update_meta
    from trek.search import make_backend
    from trek.testing.fake_openai import FakeOpenAIServer

    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    bench = mini.load()
    questions = bench.questions
    runs: dict[str, Path] = {}
    with FakeOpenAIServer(script=demo_script(questions, bench)) as srv:
        for label, (system, search, order) in DEMO_RUNS.items():
            run_dir = out / label
            cache = LLMCache(run_dir / "llm-cache.sqlite")
            client = LLMClient(MODEL, base_url=srv.base_url, api_key="demo", cache=cache, progress=progress)
            store = PageStore(run_dir / "pages.sqlite")
            store.add_documents(bench.corpus)
            backend = make_backend(search, store=store, cache=None) if search else None
            summary = run_system(
                questions, run_dir, client, backend, system=system if search else "agentic", progress=progress,
                store=store, run_config={"order": order, "demo": True, "label": label},
            )
            if getattr(summary, "pending", 0):
                raise RuntimeError(f"demo run {label}: {summary.pending} questions pending")
            judge = LLMClient(JUDGE, base_url=srv.base_url, api_key="demo", cache=cache, progress=progress)
            grade_run(run_dir, judge, progress=progress)
            update_meta(run_dir, config={"order": order, "demo": True, "label": label})
            runs[label] = run_dir
    return runs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="tests/demo/demo_runs.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="build/demo-runs", help="output folder [default: build/demo-runs]")
    a = ap.parse_args(argv)
    out = Path(a.out)
    runs = build_demo_runs(out)
    from trek.report.wild import wild_accuracy

    print(f"demo runs written to {out}:")
    print(wild_accuracy(runs).to_string())
    # the later stages, each in its own script beside this one
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from demo_trace import build_demo_trace

    build_demo_trace(out)
    print("demo runs traced (trace.jsonl)")


if __name__ == "__main__":
    main()
