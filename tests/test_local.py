"""The embedded local model, for real: llama.cpp's server with SmolLM2-135M answers two demo
questions with local search, judges them and traces the failures. Skips (saying why) when the
``local`` extra or the model package is not installed (``make local-model``)."""

from __future__ import annotations

import json

import pytest

from trek import runs
from trek.answering.runner import run_system
from trek.grading import grade_run
from trek.llm import LLMCache, LLMClient
from trek.local import LOCAL_ENDPOINT, MODEL_NAME, LocalModelUnavailable, find_model_file, server_available
from trek.pages import PageStore
from trek.search.local import LocalSearch
from trek.trace import RoleModel, trace_run


def _installed() -> str | None:
    if not server_available():
        return "llama-cpp-python[server] is not installed (make local-model)"
    try:
        find_model_file()
    except LocalModelUnavailable as e:
        return str(e)
    return None


pytestmark = [pytest.mark.local, pytest.mark.slow, pytest.mark.skipif(_installed() is not None, reason=str(_installed()))]


def test_two_questions_answered_graded_and_traced_by_the_local_model(tmp_path, mini):
    run_dir = tmp_path / "run"
    questions = mini.questions[:2]
    store = PageStore(run_dir / "pages.sqlite")
    store.add_documents(mini.corpus)
    cache = LLMCache(run_dir / "llm-cache.sqlite")

    def local() -> LLMClient:
        return LLMClient("local", cache=cache, progress=False, max_retries=1, timeout=600)

    summary = run_system(questions, run_dir, local(), LocalSearch(store), system="search-then-read",
                         progress=False, store=store, top_k=2, page_chars=1200)
    assert summary.total == 2 and summary.pending == 0, summary.describe()
    meta = runs.read_meta(run_dir)
    assert meta.model == MODEL_NAME and meta.endpoint == LOCAL_ENDPOINT  # no port in the record
    answers = runs.load_answers(run_dir)
    assert all(t.status in ("ok", "failed", "no_answer") for t in answers.values())
    assert any(t.search_calls and t.search_calls[0].results for t in answers.values())

    grades = grade_run(run_dir, local(), progress=False)
    assert {g.question_id for g in grades} <= {q.id for q in questions}
    assert all(g.judge_model == MODEL_NAME for g in grades)

    role = lambda name: RoleModel(name, local(), MODEL_NAME)  # noqa: E731
    report = trace_run(run_dir, diagnostic=role("diagnostic"), analysis=role("analysis"), progress=False)
    frame = runs.frame(run_dir)
    failed = int((~frame["correct"] & frame["outcome"].isin(["incorrect", "not_attempted"])).sum())
    trace_path = run_dir / runs.TRACE
    records = [json.loads(line) for line in trace_path.read_text().splitlines()] if trace_path.exists() else []
    assert len(records) == failed, report.describe()
    for r in records:
        assert r["status"] in ("done", "pending")
        assert set(r["labels"]) <= {"Pre-retrieval", "Retrieval", "Interpretation", "Distraction", "Randomness"}

    # answering again from scratch: every reply now comes from the cache
    (run_dir / runs.ANSWERS).unlink()
    calls_before = cache.misses
    run_system(questions, tmp_path / "run", local(), LocalSearch(store), system="search-then-read",
               progress=False, store=store, top_k=2, page_chars=1200)
    assert cache.misses == calls_before and len(runs.load_answers(run_dir)) == 2


def test_the_agentic_system_reads_its_forced_search_through_the_embedded_server(tmp_path, mini):
    """With first_search the model must call web_search; the server's chat format then shows it the
    results, and its second turn (a conversation with a tool call and a tool message) is accepted."""
    store = PageStore(tmp_path / "pages.sqlite")
    store.add_documents(mini.corpus)
    client = LLMClient("local", cache=LLMCache(tmp_path / "llm-cache.sqlite"), progress=False, max_retries=0,
                       timeout=600)
    summary = run_system(mini.questions[:1], tmp_path / "run", client, LocalSearch(store), system="agentic",
                         progress=False, store=store, max_rounds=1, results_per_search=2, page_chars=400,
                         first_search=True, params={"max_tokens": 96, "temperature": 0.0})
    assert summary.pending == 0 and summary.failed == 0, summary.describe()
    (t,) = runs.load_answers(tmp_path / "run").values()
    assert t.system["first_search"] is True and len(t.search_calls) == 1 and t.search_calls[0].results
    assert t.status in ("ok", "no_answer") and [m["role"] for m in t.messages][:4] == ["system", "user", "assistant", "tool"]
