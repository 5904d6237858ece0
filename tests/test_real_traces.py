"""Real traces exported from agent frameworks, kept outside the project (never committed): each
``NAME.json``/``NAME.jsonl`` in ``$TREK_REAL_TRACES`` (default ``../shared/real-traces`` beside the
repository, where the reference datasets are kept) with a
``NAME.expected.json`` beside it, written by whoever exported the trace from what the framework's
run showed::

    {"format": "langfuse" | "otlp", "search_tools": ["get_weather"] (optional),
     "traces": [{"queries": [...], "result_urls": [[...], ...], "answer_contains": "..."}, ...]}

one entry per trace in file order (traces are matched to them in that order). Skipped when the folder or its files are absent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trek import runs
from trek.imports import import_run

FOLDER = Path(os.environ.get("TREK_REAL_TRACES", Path(__file__).resolve().parents[2] / "shared" / "real-traces"))
CASES = sorted(p for p in FOLDER.glob("*.expected.json")) if FOLDER.is_dir() else []

# Known to fail today (the traces issue: JSON-encoded answers, Gemini/Vertex ``candidates``,
# LangChain message states, Langfuse-SDK and MLflow span attributes). Strict, so that a fix shows
# as XPASS and the mark has to go with it.
KNOWN_FAILING = {
    "csharp-agent-with-gemini-2026-03-09", "google-gemini-2025-08-01", "langgraph-js-2025-10-30",
    "otlp-langfuse-sdk-openai-2026-12-03", "otlp-mlflow-tracing-openai-2026-12-03",
    "pydantic-ai-with-gemini-2025-12-24", "vertex-ai-2025-08-01",
}


def _case(path: Path):
    stem = path.name[: -len(".expected.json")]
    marks = [pytest.mark.xfail(strict=True, reason="known to fail: the traces issue")] if stem in KNOWN_FAILING else []
    return pytest.param(path, id=path.name, marks=marks)


@pytest.mark.skipif(not CASES, reason=f"no real traces with expectations in {FOLDER}")
@pytest.mark.parametrize("expected", [_case(p) for p in CASES])
def test_a_real_trace_imports_its_queries_result_urls_and_answer(tmp_path, expected):
    want = json.loads(expected.read_text(encoding="utf-8"))
    stem = expected.name[: -len(".expected.json")]
    (data,) = [p for p in FOLDER.glob(stem + ".json*") if p != expected]
    qs = tmp_path / "questions.jsonl"
    qs.write_text("".join(json.dumps({"id": f"q{i}", "question": "?", "answers": ["?"]}) + "\n"
                          for i in range(1, len(want["traces"]) + 1)))
    out = tmp_path / "run"
    # traces are matched in file order (a key no real trace holds), whatever question ids they name
    import_run(want["format"], [data], out, questions=qs, search_tools=want.get("search_tools"),
               question_key="trek.real_trace_order")
    got = runs.load_answers(out)
    for i, w in enumerate(want["traces"], start=1):
        t = got[f"q{i}"]
        assert [c.query for c in t.search_calls] == w["queries"]
        assert [[r.url for r in c.results] for c in t.search_calls] == w["result_urls"]
        assert w["answer_contains"] in (t.final_answer or "")
