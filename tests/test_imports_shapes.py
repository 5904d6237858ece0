"""Shapes of real trace exports, written small for these tests (no framework's text): answers
left JSON-encoded in outputs, runs ending on a tool call, the Langfuse SDK's and MLflow's span
attributes, positional tool arguments, tool runs written as start/finish/success event spans
(BeeAI), and what the coverage note says when content is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _otel_traces import kv, write_jsonl

from trek import runs
from trek.imports import ImportFailure, import_run
from trek.imports.spans import answer_text

BASE = 1_764_000_000_000_000_000
QS_TEXT = "How many lanes does the new Harbor Bridge have?"
HITS = {"results": [{"url": "https://harbor-city.example/bridge-opening", "title": "Bridge opens", "snippet": "six"}]}


def _questions(tmp_path: Path) -> Path:
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"id": "q1", "question": QS_TEXT, "answers": ["six"]}) + "\n")
    return p


def _span(name: str, sid: str, parent: str | None, t: int, attrs: dict, tid: str = "ab" * 16) -> dict:
    s = {"traceId": tid, "spanId": sid, "name": name, "startTimeUnixNano": str(BASE + t * 1000),
         "endTimeUnixNano": str(BASE + t * 1000 + 500), "attributes": [kv(k, v) for k, v in attrs.items()]}
    if parent:
        s["parentSpanId"] = parent
    return s


def _import(tmp_path: Path, span_list: list[dict], **kw) -> runs.Trajectory:  # type: ignore[name-defined]
    tmp_path.mkdir(parents=True, exist_ok=True)
    f = write_jsonl(tmp_path / "t.jsonl", [{"resourceSpans": [{"scopeSpans": [{"spans": span_list}]}]}])
    import_run("otlp", [f], tmp_path / "run", questions=_questions(tmp_path), **kw)
    (t,) = runs.load_answers(tmp_path / "run").values()
    return t


# -- answers decoded fully ---------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "want"), [
    ('"Six lanes."', "Six lanes."),  # a JSON string literal
    (json.dumps(json.dumps({"output": "Six lanes."})), "Six lanes."),  # a document encoded twice
    (json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": "Six lanes."}]), "Six lanes."),
    (json.dumps({"messages": [  # a LangChain message state: the last AI message
        {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "HumanMessage"], "kwargs": {"content": "q"}},
        {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"],
         "kwargs": {"content": "", "tool_calls": [{"name": "web_search", "args": {"query": "x"}, "id": "c1"}]}},
        {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "ToolMessage"],
         "kwargs": {"content": "result", "tool_call_id": "c1"}},
        {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"],
         "kwargs": {"content": "Six lanes."}}]}), "Six lanes."),
    (json.dumps({"sdk_http_response": {"headers": {"x": "y"}}, "candidates": [  # Gemini / Vertex
        {"content": {"role": "model", "parts": [{"text": "thinking", "thought": True}, {"text": "Six lanes."}]}}]}),
     "Six lanes."),
    (json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": "s", "arguments": {}}]},
                 {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c", "response": "r"}]},
                 {"role": "assistant", "parts": [{"type": "text", "content": "Six lanes."}]}]), "Six lanes."),
    ('{"answer": "six", "rationale": "the opening report says so"}', "six"),
    (json.dumps({"response": {"comment": "The bridge has six lanes.", "status": "ok", "items": []}}),
     "The bridge has six lanes."),
    # the model's own JSON text inside a message stays as it is
    (json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": '{"answer": "6"}'}]}]), '{"answer": "6"}'),
    # ends on tool calls: no answer
    (json.dumps([{"toolCallId": "c1", "toolName": "getWeather", "input": '{"location": "x"}'}]), None),
    (json.dumps([{"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "c", "function": {"name": "web_search", "arguments": "{}"}}]}]), None),
])
def test_answers_are_decoded_fully_and_a_tool_call_is_no_answer(value, want):
    assert answer_text(value) == want


def test_a_run_ending_on_a_tool_call_has_no_answer_and_its_status_says_so(tmp_path):
    llm = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "web_search",
                                          "arguments": {"query": "Harbor Bridge"}}]}])}
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search", "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": '{"query": "Harbor Bridge"}', "gen_ai.tool.call.result": json.dumps(HITS)}
    root = {"gen_ai.operation.name": "invoke_agent", "question_id": "q1"}
    t = _import(tmp_path, [_span("agent", "01" * 8, None, 0, root), _span("chat", "02" * 8, "01" * 8, 1, llm),
                           _span("tool", "03" * 8, "01" * 8, 2, tool)])
    assert t.status == "no_answer" and t.final_answer is None
    assert "ends on a tool call (web_search)" in t.error
    assert [c.query for c in t.search_calls] == ["Harbor Bridge"]


# -- Langfuse SDK and MLflow attributes -----------------------------------------------------------------
def _sdk_trace(dialect: str, positional: bool = True, tools: bool = True, n_args: int = 1) -> list[dict]:
    args = [QS_TEXT] if n_args == 1 else [QS_TEXT, 3]
    if dialect == "langfuse":
        gen_in = {"messages": [{"role": "user", "content": QS_TEXT}]}
        if tools:
            gen_in["tools"] = [{"type": "function", "function": {"name": "web_search", "parameters": {
                "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}}}]
        tool_in = {"args": ["Harbor Bridge lanes", 3][:n_args], "kwargs": {}} if positional else {"query": "Harbor Bridge lanes"}
        return [
            _span("agent", "01" * 8, None, 0, {"langfuse.observation.type": "agent",
                                               "langfuse.observation.input": json.dumps({"args": args, "kwargs": {}}),
                                               "langfuse.observation.output": "It has six lanes."}),
            _span("gen", "02" * 8, "01" * 8, 1, {
                "langfuse.observation.type": "generation", "langfuse.observation.input": json.dumps(gen_in),
                "langfuse.observation.model.name": "m-1",
                "langfuse.observation.output": json.dumps({"role": "assistant", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": "{}"}}]}),
                "langfuse.observation.usage_details": json.dumps({"prompt_tokens": 21, "completion_tokens": 7,
                                                                  "completion_tokens_details": {"reasoning_tokens": 0}})}),
            _span("web_search", "03" * 8, "01" * 8, 2, {"langfuse.observation.type": "tool",
                                                        "langfuse.observation.input": json.dumps(tool_in),
                                                        "langfuse.observation.output": json.dumps(HITS)})]
    return [  # MLflow, as Span.to_otel_proto writes it: structures, not JSON text
        _span("agent", "01" * 8, None, 0, {"mlflow.spanType": "AGENT", "mlflow.spanInputs": {"question": QS_TEXT},
                                           "mlflow.spanOutputs": "It has six lanes."}),
        _span("Completions", "02" * 8, "01" * 8, 1, {
            "mlflow.spanType": '"CHAT_MODEL"', "mlflow.llm.model": "m-1",
            "mlflow.spanInputs": {"messages": [{"role": "user", "content": QS_TEXT}]},
            "mlflow.spanOutputs": {"choices": [{"message": {"role": "assistant", "content": "It has six lanes."}}]},
            "mlflow.chat.tokenUsage": {"input_tokens": 21, "output_tokens": 7}}),
        _span("web_search", "03" * 8, "01" * 8, 2, {"mlflow.spanType": "TOOL", "mlflow.spanFunctionName": "web_search",
                                                    "mlflow.spanInputs": {"query": "Harbor Bridge lanes"},
                                                    "mlflow.spanOutputs": HITS})]


@pytest.mark.parametrize("dialect", ["langfuse", "mlflow"])
def test_the_langfuse_sdk_and_mlflow_attributes_are_read_and_the_question_matched_by_its_text(tmp_path, dialect):
    t = _import(tmp_path, _sdk_trace(dialect))
    assert t.question_id == "q1" and t.status == "ok" and t.final_answer == "It has six lanes."
    assert [c.query for c in t.search_calls] == ["Harbor Bridge lanes"]
    assert [r.url for r in t.search_calls[0].results] == ["https://harbor-city.example/bridge-opening"]
    assert (t.usage.prompt_tokens, t.usage.completion_tokens, t.model) == (21, 7, "m-1")
    assert t.coverage.queries == "all" and not any("capture" in n for n in t.coverage.notes)


def test_a_positional_argument_is_the_query_when_the_tool_has_one_or_the_note_says_why_not(tmp_path):
    # the model was offered the tool: its parameters name the positions
    t = _import(tmp_path / "a", _sdk_trace("langfuse", n_args=2))
    assert [c.query for c in t.search_calls] == ["Harbor Bridge lanes"]
    # no definition, one positional argument: it is the query
    t = _import(tmp_path / "b", _sdk_trace("langfuse", tools=False))
    assert [c.query for c in t.search_calls] == ["Harbor Bridge lanes"]
    # no definition and two positional arguments: which one is the query is not known, and the note says so
    t = _import(tmp_path / "c", _sdk_trace("langfuse", tools=False, n_args=2))
    assert [c.query for c in t.search_calls] == [""] and t.coverage.queries == "none"
    assert any("2 positional argument(s) and the trace does not define the tool's parameters" in n
               for n in t.coverage.notes)


def test_the_coverage_note_names_what_is_missing_and_says_capture_is_off_only_when_it_is(tmp_path):
    other = [_span("agent", "01" * 8, None, 0, {"openinference.span.kind": "AGENT", "question_id": "q1",
                                                "acme.prompt_text": "What the agent was asked, in full detail"})]
    t = _import(tmp_path / "a", other)
    (note,) = [n for n in t.coverage.notes if "convention" in n]
    assert "acme.prompt_text" in note and "capture" not in note
    bare = [_span("agent", "01" * 8, None, 0, {"openinference.span.kind": "AGENT", "question_id": "q1"})]
    t = _import(tmp_path / "b", bare)
    assert any("content capture is off" in n for n in t.coverage.notes) and t.coverage.queries == "none"


# -- BeeAI: one tool run as start / finish / success spans ------------------------------------------------
def _beeai(run: str = "12", error: bool = False) -> list[dict]:
    base = "tool.search.wikipedia"
    parent = "0a" * 8
    ok = {"target": f"{base}.{'error' if error else 'success'}", "openinference.span.kind": "TOOL",
          "tool.parameters": '{"query":"Harbor Bridge","full_text":false}'}
    if error:
        ok["error"] = "the page service is down"
    else:
        ok["output.value"] = json.dumps([{"title": "Harbor Bridge", "description": "A bridge with six lanes.",
                                          "url": "https://en.wikipedia.org/wiki/Harbor_Bridge"}])
    return [
        _span("main", "01" * 8, None, 0, {"openinference.span.kind": "AGENT", "question_id": "q1",
                                          "output.value": "{'role': 'assistant', 'text': 'It has six lanes.'}"}),
        _span("agent.react.update", parent, "01" * 8, 1, {"openinference.span.kind": "AGENT"}),
        _span(f"{base}.start-{run}", "02" * 8, parent, 2, {"target": f"{base}.start", "openinference.span.kind": "TOOL",
                                                           "tool.parameters": '{"query":"Harbor Bridge","full_text":false}'}),
        _span(f"{base}.finish-{run}", "03" * 8, parent, 5, {"target": f"{base}.finish", "openinference.span.kind": "TOOL"}),
        _span(f"{base}.{'error' if error else 'success'}-{run}", "04" * 8, parent, 5, ok)]


def test_the_start_finish_and_success_spans_of_one_tool_run_are_one_call(tmp_path):
    t = _import(tmp_path / "a", _beeai())
    assert [(c.query, [r.url for r in c.results]) for c in t.search_calls] == [
        ("Harbor Bridge", ["https://en.wikipedia.org/wiki/Harbor_Bridge"])]
    assert t.final_answer == "It has six lanes."  # a Python-literal output, decoded
    assert any("3 event spans of one run" in n for n in t.coverage.notes)
    t = _import(tmp_path / "b", _beeai(error=True))
    (call,) = t.search_calls
    assert call.query == "Harbor Bridge" and call.error == "the page service is down" and call.results == []


# -- the real fixtures matched by their question text (Mini's questions), whatever the order ---------------
REAL = Path(__file__).resolve().parents[2] / "shared" / "real-traces"
MINI = Path(__file__).resolve().parents[1] / "data" / "mini" / "questions.jsonl"


@pytest.mark.skipif(not REAL.is_dir(), reason=f"no real traces in {REAL}")
@pytest.mark.parametrize("stem", ["otlp-openinference-openai-2026-12-03", "otlp-genai-openai-v2-2026-12-03",
                                  "otlp-langfuse-sdk-openai-2026-12-03", "otlp-mlflow-tracing-openai-2026-12-03"])
def test_real_otlp_traces_match_mini_questions_by_text_in_any_order(tmp_path, stem):
    want = json.loads((REAL / f"{stem}.expected.json").read_text())["traces"]
    lines = (REAL / f"{stem}.jsonl").read_text().splitlines()
    f = tmp_path / "reversed.jsonl"
    f.write_text("\n".join(reversed(lines)) + "\n")  # newest first
    report = import_run("otlp", [f], tmp_path / "run", questions=MINI)
    got = runs.load_answers(tmp_path / "run")
    assert sorted(got) == ["mini:01", "mini:02"] and report.unmatched == 34
    for qid, w in zip(["mini:01", "mini:02"], want, strict=True):
        assert got[qid].final_answer == w["answer_contains"]
        assert [c.query for c in got[qid].search_calls] == w["queries"]
    with pytest.raises(ImportFailure, match="--in-order matches one trace to each question"):
        import_run("otlp", [f], tmp_path / "run2", questions=MINI, in_order=True)


# -- bad input on the span path ------------------------------------------------------------------------------
BAD_COUNTS = [("lots", {"stringValue": "lots"}), ("true", {"boolValue": True}), ("12.7", {"doubleValue": 12.7}),
              ("-5", {"intValue": "-5"}), ("1e400", {"stringValue": "1e400"}), ("Infinity", {"doubleValue": "Infinity"}),
              ("10^40", {"intValue": str(10**40)}), ("nan", {"stringValue": "nan"}), ("array", {"arrayValue": {
                  "values": [{"intValue": "1"}]}})]


def _chat(usage_value: dict) -> list[dict]:
    s = _span("chat", "02" * 8, None, 1, {"gen_ai.operation.name": "chat", "question_id": "q1",
                                         "gen_ai.output.messages": json.dumps(
                                             [{"role": "assistant", "parts": [{"type": "text", "content": "six"}]}])})
    s["attributes"].append({"key": "gen_ai.usage.input_tokens", "value": usage_value})
    return [s]


@pytest.mark.parametrize(("label", "value"), BAD_COUNTS, ids=[b[0] for b in BAD_COUNTS])
def test_bad_usage_values_are_refused_naming_the_field(tmp_path, label, value):
    tmp_path.mkdir(exist_ok=True)
    f = write_jsonl(tmp_path / "t.jsonl", [{"resourceSpans": [{"scopeSpans": [{"spans": _chat(value)}]}]}])
    with pytest.raises(ImportFailure, match=r"t\.jsonl, line 1: field 'gen_ai\.usage\.input_tokens': expected a "
                                            r"(non-negative whole number|whole number of at most)") as e:
        import_run("otlp", [f], tmp_path / "run", questions=_questions(tmp_path))
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()
    # the same in a Langfuse export's usageDetails, through the command line: exit 2, one line, no traceback
    raw = {"lots": "lots", "true": True, "12.7": 12.7, "-5": -5, "1e400": "1e400", "Infinity": "Infinity",
           "10^40": 10**40, "nan": "nan", "array": [1]}[label]
    export = {"trace": {"id": "t1", "metadata": {"question_id": "q1"}, "output": "six"},
              "observations": [{"id": "o1", "type": "GENERATION", "name": "g", "usageDetails": {"input": raw}}]}
    lf = tmp_path / "lf.json"
    lf.write_text(json.dumps(export))
    from typer.testing import CliRunner

    from trek.cli import app

    r = CliRunner().invoke(app, ["import", "langfuse", str(lf), "--questions", str(_questions(tmp_path)), "--out",
                                 str(tmp_path / "run2")])
    assert r.exit_code == 2 and "field 'usageDetails.input'" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "run2").exists()


def test_json_text_nested_100000_deep_is_a_clear_error(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search", "question_id": "q1",
            "gen_ai.tool.call.arguments": deep}
    tmp_path.mkdir(exist_ok=True)
    f = write_jsonl(tmp_path / "t.jsonl", [{"resourceSpans": [{"scopeSpans": [{"spans": [
        _span("web_search", "03" * 8, None, 2, tool)]}]}]}])
    with pytest.raises(ImportFailure, match=r"field 'gen_ai\.tool\.call\.arguments': holds JSON nested deeper than "
                                            r"200 arrays or objects: refused"):
        import_run("otlp", [f], tmp_path / "run", questions=_questions(tmp_path))
    # an attribute name of 100,000 parts is refused too (no RecursionError building the messages)
    s = _span("llm", "04" * 8, None, 1, {"openinference.span.kind": "LLM", "question_id": "q1",
                                         "llm.output_messages." + ".".join(["0"] * 100_000): "x"})
    f = write_jsonl(tmp_path / "k.jsonl", [{"resourceSpans": [{"scopeSpans": [{"spans": [s]}]}]}])
    with pytest.raises(ImportFailure, match=r"an attribute name of more than 200 parts: refused"):
        import_run("otlp", [f], tmp_path / "run", questions=_questions(tmp_path))


def test_the_page_spool_keeps_what_page_rows_keeps():
    import random

    from trek.imports.common import PageSpool, PageText, page_rows

    rng = random.Random(7)
    urls = [f"https://p{i}.example/x" for i in range(6)] + ["HTTPS://p1.example/x", "javascript:alert(1)"]
    pages = [PageText(url=rng.choice(urls), kind=rng.choice(["full", "snippet", "snippet", "encrypted"]),
                      text=rng.choice(["", "a", "b", "a ", "long text " * 3]), title=rng.choice(["", "T"]),
                      date=rng.choice([None, "2025-01-02"])) for _ in range(300)]
    spool = PageSpool()
    try:
        for i in range(0, 300, 7):
            spool.add(pages[i:i + 7])
        got = [(p.url, p.key, p.text, p.status, p.source, p.title, p.date) for p in spool.rows()]
    finally:
        spool.close()
    assert not spool.path.exists()
    want = [(p.url, p.key, p.text, p.status, p.source, p.title, p.date) for p in page_rows(pages)]
    assert got == want and len(want) >= 5


def test_a_zip_bomb_member_is_refused_from_its_first_bytes(tmp_path):
    import zipfile

    log = tmp_path / "bomb.eval"
    with zipfile.ZipFile(log, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", json.dumps({"eval": {"task": "t"}}))
        z.writestr("samples/s1_epoch_1.json", json.dumps({"id": "s1", "input": "q", "target": "a", "messages": [],
                                                          "pad": " " * (8 << 20)}))  # 8 MiB from about 8 KB
    assert log.stat().st_size < 64 << 10
    with pytest.raises(ImportFailure, match=r"bomb\.eval: member samples/s1_epoch_1\.json: inflates more than 200 "
                                            r"times .*decompression bomb"):
        import_run("inspect-ai", [log], tmp_path / "run")
    assert not (tmp_path / "run").exists()
