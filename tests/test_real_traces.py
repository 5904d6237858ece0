"""Real traces exported from agent frameworks, kept outside the project (never committed): each
``NAME.json``/``NAME.jsonl`` in ``$TREK_REAL_TRACES`` (default ``../shared/real-traces`` beside the
repository, where the reference datasets are kept) with a
``NAME.expected.json`` beside it, written by whoever exported the trace from what the framework's
run showed::

    {"format": "langfuse" | "otlp", "search_tools": ["get_weather"] (optional),
     "traces": [{"queries": [...], "result_urls": [[...], ...], "answer_contains": "..."}, ...]}

one entry per trace in file order (traces are matched to them in that order, with the explicit
order flag). Skipped when the folder or its files are absent.

The answer is checked strictly: it holds ``answer_contains``; it is never JSON-wrapped (not a
JSON string literal, and not a JSON document unless the expected text is one); where the
expectation is the whole answer (:data:`WHOLE`, from SOURCES.md beside the fixtures) it is equal
to it after whitespace normalisation, and an empty expectation means the run has no answer."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from trek import runs
from trek.imports import import_run

FOLDER = Path(os.environ.get("TREK_REAL_TRACES", Path(__file__).resolve().parents[2] / "shared" / "real-traces"))
CASES = sorted(p for p in FOLDER.glob("*.expected.json")) if FOLDER.is_dir() else []

# Known to fail (strict, so that a fix shows as XPASS and the mark has to go with it): none now.
KNOWN_FAILING: set[str] = set()

# The fixtures whose ``answer_contains`` is the whole answer (SOURCES.md gives it so), and the whole
# answer of those whose expectation is a part but whose whole answer SOURCES.md states.
WHOLE = {"autogen-2025-06-06", "koog-2025-08-26", "microsoft-agent-2025-12-17", "otlp-genai-openai-v2-2026-12-03",
         "otlp-langfuse-sdk-openai-2026-12-03", "otlp-mlflow-tracing-openai-2026-12-03",
         "otlp-openinference-openai-2026-12-03", "vercel-aisdk-2025-11-17"}
WHOLE_ANSWER = {"google-adk-2025-08-28": "Hello Langfuse 👋!"}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _json_wrapped(answer: str, expected: str) -> bool:
    """Whether ``answer`` is still JSON: a string literal, or a document when the expected text is none."""
    try:
        value = json.loads(answer)
    except ValueError:
        return False
    if isinstance(value, str):
        return True
    return isinstance(value, (dict, list)) and not expected.lstrip().startswith(("{", "["))


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
    # traces are matched in file order (asked for explicitly; a key no real trace holds)
    import_run(want["format"], [data], out, questions=qs, search_tools=want.get("search_tools"),
               question_key="trek.real_trace_order", in_order=True)
    got = runs.load_answers(out)
    for i, w in enumerate(want["traces"], start=1):
        t = got[f"q{i}"]
        assert [c.query for c in t.search_calls] == w["queries"]
        assert [[r.url for r in c.results] for c in t.search_calls] == w["result_urls"]
        answer, expected = t.final_answer or "", w["answer_contains"]
        assert expected in answer
        assert not _json_wrapped(answer, expected), answer[:200]
        if stem in WHOLE:
            assert _norm(answer) == _norm(expected)
            assert (t.status == "ok") == bool(expected), (t.status, t.error)
        if stem in WHOLE_ANSWER:
            assert _norm(answer) == _norm(WHOLE_ANSWER[stem])
        if expected.lstrip().startswith(("{", "[")):  # the model's own JSON text, whole and unchanged
            assert isinstance(json.loads(answer), dict) and answer.startswith(expected)
