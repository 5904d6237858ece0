"""trek import otlp / langfuse on traces written for these tests (tests/_otel_traces.py): every
field the importers read, in both OTLP dialects and as Langfuse exports; content capture off,
parallel tool calls, nested agents, retries, tool errors, search-tool patterns, question
matching, result parsing, and malformed input. No network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _otel_traces import Run, Tool, Turn, kv, langfuse_export, request, spans, write_jsonl
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.imports import ImportFailure, import_run, parse_mapping
from trek.imports.schema import validate_run
from trek.imports.tool_results import WIKIPEDIA, parse_result
from trek.pages import PageStore
from trek.types import Trajectory

EX = Path(__file__).resolve().parents[1] / "examples"
QS = EX / "questions.csv"
MAP = parse_mapping("id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year")
DIALECTS = ("genai", "openinference")
HITS = [{"title": "Harbor Bridge plans", "url": "https://harbor-city.example/old-plans", "snippet": "four lanes"},
        {"title": "Bridge opens", "url": "https://harbor-city.example/bridge-opening", "snippet": "six lanes"}]


def imported(fmt: str, files: list[Path], out: Path, **kw) -> list[Trajectory]:
    kw.setdefault("questions", QS)
    kw.setdefault("mapping", MAP)
    import_run(fmt, files, out, **kw)
    assert validate_run(out) == []
    return list(runs.load_answers(out).values())


def one(tmp_path: Path, run: Run, dialect: str = "genai", fmt: str = "otlp", **kw) -> Trajectory:
    """Import ``run`` alone (as lake-2) and return its trajectory."""
    run.question_id = run.question_id or "lake-2"
    tmp_path.mkdir(parents=True, exist_ok=True)
    req = request(spans(run, dialect))
    if fmt == "otlp":
        f = tmp_path / f"{run.name}.{dialect}.json"
        f.write_text(json.dumps(req))
    else:
        f = tmp_path / f"{run.name}.{dialect}.langfuse.json"
        f.write_text(json.dumps(langfuse_export(req, attributes=kw.pop("attributes", True),
                                                trace={"metadata": {"question_id": run.question_id}})))
    (t,) = imported(fmt, [f], tmp_path / f"run-{run.name}-{dialect}-{fmt}", **kw)
    return t


def shape(t: Trajectory) -> dict:
    return t.model_dump(exclude={"created_at", "source", "system"})


def bridge(name: str = "bridge", **kw) -> Run:
    return Run(name, [
        Turn(tools=[Tool("web_search", {"query": "Harbor Bridge lanes"}, HITS, call_id="c1"),
                    Tool("get_weather", {"city": "Harbor City"}, {"temp": 12}, call_id="c2")]),
        Turn(tools=[Tool("fetch_page", {"url": "https://harbor-city.example/bridge-opening"},
                         "The new Harbor Bridge opened with six lanes.", call_id="c3")]),
        Turn(text="It has six lanes.")], **kw)


# -- one run, every way of writing it ------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["otlp", "langfuse"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_run_with_a_search_a_tool_and_an_opened_page(tmp_path, dialect, fmt):
    t = one(tmp_path, bridge(), dialect, fmt)
    assert t.question_id == "lake-2" and t.status == "ok" and t.final_answer == "It has six lanes."
    assert [(c.query, c.backend, c.round, [r.url for r in c.results]) for c in t.search_calls] == [
        ("Harbor Bridge lanes", "web_search", 1, [h["url"] for h in HITS])]
    assert t.search_calls[0].results[0].title == "Harbor Bridge plans"
    assert t.search_calls[0].results[0].snippet == "four lanes"
    assert [(s.kind, s.round, s.tool, s.call_id) for s in t.steps] == [
        ("search", 1, "web_search", "c1"), ("tool", 1, "get_weather", "c2"), ("open", 2, "fetch_page", "c3"),
        ("answer", 3, None, None)]
    assert t.opened_urls == ["https://harbor-city.example/bridge-opening"]
    assert t.retrieved_urls == [h["url"] for h in HITS]
    assert t.model == "gpt-4.1-mini-2025-04-14"
    assert (t.usage.prompt_tokens, t.usage.completion_tokens, t.usage.calls) == (300, 60, 3)
    assert t.coverage.model_dump(exclude={"notes"}) == {"queries": "all", "results": "all", "page_text": "snippet",
                                                        "url_identity": "urls"}
    assert t.source.format == fmt and len(t.source.record_id) == 32
    assert t.details["trace"]["trace_id"] == t.source.record_id and len(t.details["trace"]["root_span_id"]) == 16
    store = PageStore(tmp_path / f"run-bridge-{dialect}-{fmt}" / "pages.sqlite")
    try:
        opened = store.get("https://harbor-city.example/bridge-opening")
        assert opened.text == "The new Harbor Bridge opened with six lanes." and opened.source == "log"
        assert store.get("https://harbor-city.example/old-plans").text == "four lanes"
    finally:
        store.close()


def test_both_dialects_and_both_exports_give_the_same_trajectory(tmp_path):
    got = []
    for dialect in DIALECTS:
        for fmt, attrs in (("otlp", True), ("langfuse", True), ("langfuse", False)):
            run = Run("nested", [Turn(tools=[Tool("research_agent", {"task": "lanes"}, "six", call_id="a1",
                                                  agent=bridge(name="inner"))]),
                                 Turn(text="Six lanes.")])
            got.append(shape(one(tmp_path / f"{dialect}-{fmt}-{attrs}", run, dialect, fmt, attributes=attrs)
                             if fmt == "langfuse" else one(tmp_path / f"{dialect}-{fmt}", run, dialect, fmt)))
    with_ids = [got[0], got[1], got[3], got[4]]  # OTLP, and Langfuse keeping the OTel attributes
    assert all(g == got[0] for g in with_ids)
    # a Langfuse export made without OpenTelemetry has no tool call ids; the rest is the same
    for g in got:
        for s in g["steps"]:
            s["call_id"] = None
    assert all(g == got[0] for g in got)
    # the nested agent's calls count; the agent called as a tool ("research_agent" matches
    # *search*) is a tool step, not a search; the root's answer is the answer
    assert [(s["kind"], s["tool"]) for s in got[0]["steps"]] == [
        ("tool", "research_agent"), ("search", "web_search"), ("tool", "get_weather"), ("open", "fetch_page"),
        ("answer", None)]
    assert got[0]["final_answer"] == "Six lanes."


def test_the_example_traces_import_the_same_in_all_three_files(tmp_path):
    a = imported("otlp", [EX / "otlp-genai.jsonl"], tmp_path / "a")
    b = imported("otlp", [EX / "otlp-openinference.json"], tmp_path / "b")
    c = imported("langfuse", [EX / "langfuse.jsonl"], tmp_path / "c")
    assert [shape(t) for t in a] == [shape(t) for t in b] == [shape(t) for t in c]
    lake2 = next(t for t in c if t.question_id == "lake-2")
    assert any("tried 2 times" in n for n in lake2.coverage.notes)  # a retried search
    lake3 = next(t for t in c if t.question_id == "lake-3")
    assert lake3.search_calls[0].backend == "sports_archive"  # a retrieval span, whatever its name


# -- what a trace can show -----------------------------------------------------------------------------
@pytest.mark.parametrize("dialect", DIALECTS)
def test_parallel_calls_share_a_round_and_keep_their_order(tmp_path, dialect):
    run = Run("par", [Turn(tools=[Tool("web_search", {"query": "a"}, HITS[:1], call_id="p1"),
                                  Tool("news_search", {"q": "b"}, HITS[1:], call_id="p2")]),
                      Turn(tools=[Tool("web_search", {"query": "c"}, [], call_id="p3")]),
                      Turn(text="done")])
    t = one(tmp_path, run, dialect)
    assert [(c.query, c.round, c.backend) for c in t.search_calls] == [("a", 1, "web_search"), ("b", 1, "news_search"),
                                                                       ("c", 2, "web_search")]
    assert t.search_calls[2].results == [] and t.coverage.results == "all"  # recorded, and empty


@pytest.mark.parametrize("dialect", DIALECTS)
def test_retries_of_one_call_and_a_tool_error(tmp_path, dialect):
    run = Run("retry", [Turn(tools=[Tool("web_search", {"query": "lanes"}, HITS, call_id="r1", retries=2),
                                    Tool("web_search", {"query": "bridge"}, None, call_id="r2", error="HTTP 429")]),
                        Turn(text="four")])
    t = one(tmp_path, run, dialect)
    assert [(c.query, c.error, len(c.results)) for c in t.search_calls] == [("lanes", None, 2), ("bridge", "HTTP 429", 0)]
    assert any("'r1' was tried 3 times" in n for n in t.coverage.notes)
    assert t.steps[1].error == "HTTP 429"
    # the failed call returned nothing, and that is recorded: the results are complete
    assert t.coverage.results == "all"


def test_results_recorded_for_some_searches_only_are_a_lower_bound(tmp_path):
    run = Run("half", [Turn(tools=[Tool("web_search", {"query": "a"}, HITS, call_id="h1"),
                                   Tool("web_search", {"query": "b"}, None, call_id="h2")]), Turn(text="four")])
    t = one(tmp_path, run)
    assert [len(c.results) for c in t.search_calls] == [2, 0]
    assert t.coverage.results == "cited_only" and any("1 of 2 search(es)" in n for n in t.coverage.notes)


def test_retries_without_call_ids(tmp_path):
    run = Run("retry-noid", [Turn(tools=[Tool("web_search", {"query": "lanes"}, HITS, retries=1)]), Turn(text="x")])
    t = one(tmp_path, run, "openinference")
    assert [c.query for c in t.search_calls] == ["lanes"] and t.search_calls[0].error is None


@pytest.mark.parametrize("fmt", ["otlp", "langfuse"])
def test_content_capture_off_is_said_and_queries_are_not_claimed(tmp_path, fmt):
    run = Run("dark", [Turn(tools=[Tool("web_search", {"query": "lanes"}, HITS, call_id="d1")]), Turn(text="four")],
              content=False)
    run.question_id = "lake-2"
    req = request(spans(run, "genai"))
    if fmt == "otlp":
        f = write_jsonl(tmp_path / "dark.jsonl", [req])
    else:
        export = langfuse_export(req, trace={"output": "The Harbor Bridge has four lanes."})
        f = write_jsonl(tmp_path / "dark.jsonl", [export])
    (t,) = imported(fmt, [f], tmp_path / "r")
    assert t.coverage.queries == "none" and t.coverage.results == "none"
    assert any("no content" in n for n in t.coverage.notes)
    assert [c.query for c in t.search_calls] == [""] and t.search_calls[0].results == []
    if fmt == "otlp":  # nothing says what the agent answered
        assert t.status == "failed" and "no final answer" in t.error
    else:  # the application set the trace's output
        assert t.status == "ok" and t.final_answer == "The Harbor Bridge has four lanes."


def test_weather_and_joke_tools_are_not_searches_unless_named(tmp_path):
    run = Run("weather", [Turn(tools=[Tool("get_weather", {"city": "Oslo"}, "rain", call_id="w1"),
                                      Tool("tell_joke", {}, "a joke", call_id="w2")]), Turn(text="Rain.")])
    t = one(tmp_path, run)
    assert t.search_calls == [] and [s.kind for s in t.steps] == ["tool", "tool", "answer"]
    assert t.coverage.queries == "all"
    t2 = one(tmp_path / "named", run, search_tools=["get_*"])
    assert [(c.query, c.backend) for c in t2.search_calls] == [("Oslo", "get_weather")]
    assert [s.kind for s in t2.steps] == ["search", "tool", "answer"]


def test_retrieval_documents_in_both_dialects(tmp_path):
    docs = [{"id": "doc-1", "score": 0.9, "content": "x" * 2500,
             "metadata": {"url": "https://harbor-city.example/bridge-opening", "title": "Opening"}},
            {"id": "https://harbor-city.example/old-plans", "score": 0.5, "content": "four lanes"}]
    for dialect in DIALECTS:
        run = Run("rag", [Turn(tools=[Tool("kb", {"query": "lanes"}, docs, retrieval=True)]), Turn(text="six")])
        t = one(tmp_path / dialect, run, dialect)
        assert [(c.query, [r.url for r in c.results]) for c in t.search_calls] == [
            ("lanes", ["https://harbor-city.example/bridge-opening", "https://harbor-city.example/old-plans"])]
        assert t.search_calls[0].results[0].title == "Opening"
        assert t.coverage.page_text == "snippet" and t.coverage.url_identity == "urls"
    only_ids = Run("ids", [Turn(tools=[Tool("kb", {"query": "q"}, [{"id": "doc-7", "score": 1.0}], retrieval=True)]),
                          Turn(text="six")])
    t = one(tmp_path / "ids", only_ids)
    assert t.retrieved_urls == ["doc-7"] and t.coverage.url_identity == "document_ids"


# -- messages instead of tool spans ----------------------------------------------------------------------
def _span(sid, name, attrs, start, parent="r" * 16, events=None, tid="a" * 32):
    s = {"traceId": tid, "spanId": sid, "parentSpanId": parent, "name": name, "startTimeUnixNano": str(start),
         "endTimeUnixNano": str(start + 5), "attributes": [kv(k, v) for k, v in attrs.items()]}
    if events:
        s["events"] = events
    return s


def _lone(tmp_path: Path, span_list: list[dict]) -> Trajectory:
    root = {"traceId": "a" * 32, "spanId": "r" * 16, "name": "agent", "startTimeUnixNano": "1",
            "endTimeUnixNano": "100", "attributes": [kv("question_id", "lake-2")]}
    tmp_path.mkdir(parents=True, exist_ok=True)
    f = tmp_path / "m.json"
    f.write_text(json.dumps(request([root, *span_list])))
    (t,) = imported("otlp", [f], tmp_path / "r")
    return t


def test_genai_messages_tool_calls_and_a_provider_native_search(tmp_path):
    out1 = [{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "m1", "name": "web_search", "arguments": {"query": "lanes"}},
        {"type": "server_tool_call", "id": "s1", "name": "web_search",
         "server_tool_call": {"type": "web_search", "action": {"query": "bridge six lanes"}}},
        {"type": "server_tool_call_response", "id": "s1", "server_tool_call_response": {
            "type": "web_search", "results": [{"url": "https://harbor-city.example/bridge-opening", "title": "T"}]}}]}]
    in2 = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "m1", "response": json.dumps(HITS)}]}]
    out2 = [{"role": "assistant", "parts": [{"type": "text", "content": "Six lanes."}]}]
    t = _lone(tmp_path, [
        _span("1" * 16, "chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(out1)}, 10),
        _span("2" * 16, "chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(in2),
                                 "gen_ai.output.messages": json.dumps(out2)}, 20)])
    assert [(c.query, c.round, [r.url for r in c.results]) for c in t.search_calls] == [
        ("lanes", 1, [h["url"] for h in HITS]), ("bridge six lanes", 1, ["https://harbor-city.example/bridge-opening"])]
    assert t.final_answer == "Six lanes."


def test_openinference_messages_and_older_genai_events(tmp_path):
    llm1 = {"openinference.span.kind": "LLM", "llm.model_name": "m-1",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "t1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "duckduckgo_search",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"query": "lanes"}'}
    llm2 = {"openinference.span.kind": "LLM", "llm.model_name": "m-1",
            "llm.input_messages.0.message.role": "tool", "llm.input_messages.0.message.tool_call_id": "t1",
            "llm.input_messages.0.message.content": "snippet: Four lanes planned, title: Plans, "
                                                    "link: https://harbor-city.example/old-plans, snippet: Six lanes "
                                                    "open, title: Opening, link: https://harbor-city.example/bridge-opening",
            "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Six."}
    t = _lone(tmp_path / "oi", [_span("1" * 16, "llm", llm1, 10), _span("2" * 16, "llm", llm2, 20)])
    assert [(c.query, [(r.url, r.title, r.snippet) for r in c.results]) for c in t.search_calls] == [
        ("lanes", [("https://harbor-city.example/old-plans", "Plans", "Four lanes planned"),
                   ("https://harbor-city.example/bridge-opening", "Opening", "Six lanes open")])]
    assert t.final_answer == "Six." and t.model == "m-1"
    event = {"timeUnixNano": "21", "name": "gen_ai.content.completion",
             "attributes": [kv("gen_ai.completion", json.dumps([{"role": "assistant", "content": "Four."}]))]}
    prompt = {"timeUnixNano": "20", "name": "gen_ai.content.prompt",
              "attributes": [kv("gen_ai.prompt", json.dumps([{"role": "user", "content": "How many lanes?"}]))]}
    t = _lone(tmp_path / "old", [_span("3" * 16, "chat", {"gen_ai.operation.name": "chat",
                                                          "gen_ai.request.model": "m-2"}, 20, events=[prompt, event])])
    assert t.final_answer == "Four." and t.model == "m-2" and t.search_calls == []


def test_result_parsing_json_text_and_wikipedia():
    ddg = parse_result(json.dumps([{"title": "A", "href": "https://a.example/1", "body": "alpha"}]))
    assert [(r.url, r.title, r.snippet) for r in ddg.results] == [("https://a.example/1", "A", "alpha")]
    tav = parse_result({"results": [{"url": "https://b.example/", "title": "B", "content": "short",
                                     "raw_content": "y" * 3000}]})
    assert [p.kind for p in tav.pages] == ["full"] and tav.results[0].snippet == "short"
    brave = parse_result({"web": {"results": [{"url": "https://c.example/x", "title": "C", "description": "d"}]}})
    assert brave.results[0].url == "https://c.example/x"
    msg = parse_result({"content": json.dumps({"organic": [{"link": "https://d.example/"}]}), "type": "tool",
                        "id": "run-1"})
    assert [r.url for r in msg.results] == ["https://d.example/"]
    text = parse_result("See https://e.example/a, and https://e.example/b.")
    assert [r.url for r in text.results] == ["https://e.example/a", "https://e.example/b"] and text.how
    wiki = parse_result("Page: Harbor Bridge\nSummary: A bridge with six lanes.\n\nPage: Harbor City\nSummary: A city.",
                        "wikipedia")
    assert [(r.url, r.snippet) for r in wiki.results] == [(WIKIPEDIA + "Harbor_Bridge", "A bridge with six lanes."),
                                                          (WIKIPEDIA + "Harbor_City", "A city.")]
    assert parse_result("No good search result found").results == []


# -- questions --------------------------------------------------------------------------------------------
def test_questions_by_key_in_attributes_metadata_and_tags_else_in_order(tmp_path):
    runs_ = [bridge(name=f"b{i}") for i in range(3)]
    reqs = [request(spans(r, "genai")) for r in runs_]
    # no ids and no question text: refused, unless the order is asked for
    f = write_jsonl(tmp_path / "plain.jsonl", reqs)
    with pytest.raises(ImportFailure, match=r"plain\.jsonl, line 1 \(trace [0-9a-f]{32}\): names no question id and "
                                            r"holds the text of no question .*--in-order"):
        imported("otlp", [f], tmp_path / "a")
    assert [t.question_id for t in imported("otlp", [f], tmp_path / "a", in_order=True)] == ["lake-1", "lake-2",
                                                                                            "lake-3"]
    # a resource attribute under another key
    keyed = [request(spans(r, "genai"), resource={"case": q}) for r, q in zip(runs_, ["lake-3", "lake-1", "lake-2"],
                                                                             strict=True)]
    f = write_jsonl(tmp_path / "keyed.jsonl", keyed)
    got = imported("otlp", [f], tmp_path / "b", question_key="case")
    assert sorted((t.question_id, t.source.record) for t in got) == [("lake-1", 2), ("lake-2", 3), ("lake-3", 1)]
    # Langfuse: trace metadata, then tags
    exports = [langfuse_export(reqs[0], trace={"metadata": {"question_id": "lake-3"}}),
               langfuse_export(reqs[1], trace={"tags": ["prod", "question_id:lake-1"]}),
               langfuse_export(reqs[2], trace={"metadata": {"question_id": "lake-2"}})]
    f = write_jsonl(tmp_path / "lf.jsonl", exports)
    got = imported("langfuse", [f], tmp_path / "c")
    assert sorted((t.question_id, t.source.record) for t in got) == [("lake-1", 2), ("lake-2", 3), ("lake-3", 1)]


def test_spans_of_one_trace_over_several_lines_and_files(tmp_path):
    s = spans(bridge(question_id="lake-2"), "genai")
    a = write_jsonl(tmp_path / "a.jsonl", [request(s[:2]), request(s[2:4])])
    b = write_jsonl(tmp_path / "b.jsonl", [request(s[4:])])
    (t,) = imported("otlp", [a, b], tmp_path / "r")
    (ref,) = imported("otlp", [write_jsonl(tmp_path / "c.jsonl", [request(s)])], tmp_path / "r2")
    assert shape(t) == shape(ref)


# -- malformed input --------------------------------------------------------------------------------------
def _bad(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(("fmt", "name", "text", "match"), [
    ("otlp", "cut.json", '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab"', "truncated"),
    ("otlp", "empty.jsonl", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}) + "\n",
     r"empty\.jsonl, line 1: the request holds no span"),
    ("otlp", "other.json", json.dumps({"trace": {}, "observations": []}), "not an OTLP ExportTraceServiceRequest"),
    ("otlp", "noid.json", json.dumps(request([{"name": "x", "spanId": "1" * 16}])), "no 'traceId' or 'spanId'"),
    ("langfuse", "noobs.json", json.dumps({"trace": {"id": "t1"}}), "the export has no 'observations'"),
    ("langfuse", "cut.jsonl", json.dumps({"trace": {"id": "t1"}, "observations": [{"id": "o"}]}) + "\n{\"trace\":",
     r"cut\.jsonl, line 2"),
    ("langfuse", "otlp.json", json.dumps(request([])), "not a Langfuse trace export"),
    ("langfuse", "twice.jsonl", (json.dumps({"trace": {"id": "t1"}, "observations": [{"id": "o"}]}) + "\n") * 2,
     "trace 't1' again"),
])
def test_malformed_traces_name_file_and_record_and_write_nothing(tmp_path, fmt, name, text, match):
    f = _bad(tmp_path, name, text)
    with pytest.raises(ImportFailure, match=match) as e:
        import_run(fmt, [f], tmp_path / "run", questions=QS, mapping=MAP)
    assert str(f) in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no staging folder left either


def test_the_command_line_exits_2_with_one_line_and_no_run(tmp_path):
    f = _bad(tmp_path, "cut.json", '{"resourceSpans": [')
    r = CliRunner().invoke(app, ["import", "otlp", str(f), "--questions", str(QS), "--map",
                                 "id=qid,question=text,answers=gold,gold_urls=sources", "--out", str(tmp_path / "r")])
    assert r.exit_code == 2 and str(f) in r.output and "Traceback" not in r.output
    assert not (tmp_path / "r").exists()
    r = CliRunner().invoke(app, ["import", "zipkin", str(f), "--questions", str(QS), "--out", str(tmp_path / "r")])
    assert r.exit_code == 2 and "unknown format 'zipkin'" in r.output and "otlp" in r.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("tool", "args", "result", "urls"), [
    # LangChain's DuckDuckGoSearchResults through OpenInference: a Python-literal input, a ToolMessage output
    ("duckduckgo_results_json", "{'query': 'Harbor Bridge lanes'}",
     {"content": "snippet: Six lanes open, title: Opening, link: https://harbor-city.example/bridge-opening",
      "type": "tool", "name": "duckduckgo_results_json", "tool_call_id": "x", "id": "run-1"},
     ["https://harbor-city.example/bridge-opening"]),
    # BeeAI's tools are named for the engine alone
    ("Wikipedia", {"query": "Harbor Bridge"},
     {"results": [{"title": "Harbor Bridge", "description": "A bridge.", "url": "https://en.wikipedia.org/wiki/HB"}]},
     ["https://en.wikipedia.org/wiki/HB"]),
    ("DuckDuckGo", {"query": "Harbor Bridge"}, [{"title": "T", "url": "https://harbor-city.example/old-plans"}],
     ["https://harbor-city.example/old-plans"]),
    # LangChain's WikipediaQueryRun: text naming no URL
    ("wikipedia", "Harbor Bridge", "Page: Harbor Bridge\nSummary: Six lanes.", [WIKIPEDIA + "Harbor_Bridge"]),
])
def test_framework_search_tools_are_searches_by_default(tmp_path, tool, args, result, urls):
    s = spans(Run("fw", [Turn(tools=[Tool(tool, {"query": "placeholder"}, "x", call_id="f1")]), Turn(text="six")],
                  question_id="lake-2"), "openinference")
    for span in s:
        for a in span["attributes"]:
            if a["key"] == "input.value" and span["name"] == tool:
                a["value"] = {"stringValue": args if isinstance(args, str) else json.dumps(args)}
            if a["key"] == "output.value" and span["name"] == tool:
                a["value"] = {"stringValue": json.dumps(result) if not isinstance(result, str) else result}
    f = tmp_path / "fw.json"
    f.write_text(json.dumps(request(s)))
    (t,) = imported("otlp", [f], tmp_path / "r")
    assert [c.backend for c in t.search_calls] == [tool]
    assert t.search_calls[0].query in ("Harbor Bridge lanes", "Harbor Bridge")
    assert [r.url for r in t.search_calls[0].results] == urls


def test_traces_that_do_not_match_the_questions_say_how_to_name_them(tmp_path):
    reqs = [request(spans(bridge(name=f"n{i}"), "genai")) for i in range(2)]
    f = write_jsonl(tmp_path / "two.jsonl", reqs)
    with pytest.raises(ImportFailure, match=r"2 trace\(s\) but 3 question\(s\) in .*questions\.csv: --in-order"):
        import_run("otlp", [f], tmp_path / "r", questions=QS, mapping=MAP, in_order=True)
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [reqs[0], request(spans(bridge(name="n3", question_id="lake-1"),
                                                                           "genai"))])
    with pytest.raises(ImportFailure, match=r"mixed\.jsonl, line 1: a trace naming no question among traces naming "
                                            r"one .*--in-order"):
        import_run("otlp", [mixed], tmp_path / "r", questions=QS, mapping=MAP, in_order=True)
    with pytest.raises(ImportFailure, match=r"'lake-9' is not a question of .*questions\.csv"):
        import_run("otlp", [write_jsonl(tmp_path / "nine.jsonl", [request(spans(bridge(name="n9", question_id="lake-9"),
                                                                                  "genai"))])],
                   tmp_path / "r", questions=QS, mapping=MAP)
    assert not (tmp_path / "r").exists()


QUESTIONS = {"lake-1": "Who won the Lakeside Marathon in 2025?", "lake-2": "How many lanes does the new Harbor Bridge have?",
             "lake-3": "Which team won the 2025 Riverbend Cup?"}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fmt", ["otlp", "langfuse"])
def test_traces_are_matched_by_their_question_text_whatever_their_order(tmp_path, dialect, fmt):
    # newest first (as Phoenix returns them), a wrapped question, one question without a trace, one trace with an id
    asked = [("lake-3", f"Please answer: {QUESTIONS['lake-3']}"), ("lake-1", "  who won the LAKESIDE marathon in 2025? ")]
    reqs = [request(spans(bridge(name=f"t{q}", question=text), dialect)) for q, text in asked]
    if fmt == "langfuse":
        reqs = [langfuse_export(r) for r in reqs]
    f = write_jsonl(tmp_path / "t.jsonl", reqs)
    report = import_run(fmt, [f], tmp_path / "r", questions=QS, mapping=MAP)
    got = runs.load_answers(tmp_path / "r")
    assert {q: t.source.record for q, t in got.items()} == {"lake-1": 2, "lake-3": 1}
    assert list(runs.load_questions(tmp_path / "r")) == ["lake-1", "lake-3"]  # in questions-file order
    assert report.unmatched == 1 and "1 question(s) of" in report.describe()
    assert validate_run(tmp_path / "r") == []


def test_two_traces_of_one_question_text_or_of_several_are_refused(tmp_path):
    same = [request(spans(bridge(name=f"s{i}", question=QUESTIONS["lake-2"]), "genai")) for i in range(2)]
    with pytest.raises(ImportFailure, match=r"same\.jsonl, line 2 \(trace \w+\) and .*same\.jsonl, line 1 \(trace "
                                            r"\w+\) both ask question 'lake-2' .*one trace per question"):
        import_run("otlp", [write_jsonl(tmp_path / "same.jsonl", same)], tmp_path / "r", questions=QS, mapping=MAP)
    both = request(spans(bridge(name="b", question=QUESTIONS["lake-1"] + " Also: " + QUESTIONS["lake-3"]), "genai"))
    with pytest.raises(ImportFailure, match=r"holds the text of several questions of .* \(lake-1, lake-3\)"):
        import_run("otlp", [write_jsonl(tmp_path / "both.jsonl", [both])], tmp_path / "r", questions=QS, mapping=MAP)
    # named ids decide over the text
    named = [request(spans(bridge(name=f"n{i}", question=QUESTIONS["lake-2"], question_id=q), "genai"))
             for i, q in enumerate(["lake-1", "lake-2"])]
    imported("otlp", [write_jsonl(tmp_path / "named.jsonl", named)], tmp_path / "r")
    assert sorted(runs.load_answers(tmp_path / "r")) == ["lake-1", "lake-2"]


def test_a_legacy_langfuse_span_named_like_a_search_is_one(tmp_path):
    export = {"trace": {"id": "lf-1", "output": "Six lanes.", "metadata": {"question_id": "lake-2"}}, "observations": [
        {"id": "o1", "type": "SPAN", "name": "AgentExecutor", "startTime": "2026-01-01T00:00:00Z", "input": "q"},
        {"id": "o2", "type": "GENERATION", "name": "ChatOpenAI", "parentObservationId": "o1", "model": "m-3",
         "startTime": "2026-01-01T00:00:01Z", "output": {"role": "assistant", "content": "",
                                                         "tool_calls": [{"id": "t", "function": {"name": "web_search"}}]}},
        {"id": "o3", "type": "SPAN", "name": "web_search", "parentObservationId": "o1",
         "startTime": "2026-01-01T00:00:02Z", "input": "Harbor Bridge lanes", "output": json.dumps(HITS)},
        {"id": "o4", "type": "SPAN", "name": "search_planner", "parentObservationId": "o1",
         "startTime": "2026-01-01T00:00:03Z", "input": "plan"}]}
    # o4 has an input but a child: not a tool
    export["observations"].append({"id": "o5", "type": "SPAN", "name": "inner", "parentObservationId": "o4",
                                   "startTime": "2026-01-01T00:00:04Z"})
    f = write_jsonl(tmp_path / "legacy.jsonl", [export])
    (t,) = imported("langfuse", [f], tmp_path / "r")
    assert [(c.query, c.backend, len(c.results)) for c in t.search_calls] == [("Harbor Bridge lanes", "web_search", 2)]
    assert t.final_answer == "Six lanes." and t.model == "m-3" and t.source.record_id == "lf-1"


def test_openllmetry_spans_and_base64_ids(tmp_path):
    import base64

    tid = base64.b64encode(bytes.fromhex("ab" * 16)).decode()
    root = {"traceId": tid, "spanId": base64.b64encode(b"r" * 8).decode(), "name": "agent.workflow",
            "startTimeUnixNano": "1", "endTimeUnixNano": "100",
            "attributes": [kv("traceloop.span.kind", "workflow"), kv("question_id", "lake-2")]}
    parent = root["spanId"]
    llm = {"traceId": tid, "spanId": "1" * 16, "parentSpanId": parent, "name": "openai.chat",
           "startTimeUnixNano": "10", "endTimeUnixNano": "20",
           "attributes": [kv("llm.request.type", "chat"), kv("gen_ai.response.model", "m-4"),
                          kv("gen_ai.completion.0.role", "assistant"), kv("gen_ai.completion.0.content", "")]}
    tool = {"traceId": tid, "spanId": "2" * 16, "parentSpanId": parent, "name": "web_search.tool",
            "startTimeUnixNano": "30", "endTimeUnixNano": "40",
            "attributes": [kv("traceloop.span.kind", "tool"), kv("traceloop.entity.name", "web_search"),
                           kv("traceloop.entity.input", json.dumps({"args": [], "kwargs": {"query": "lanes"}})),
                           kv("traceloop.entity.output", json.dumps(HITS))]}
    llm2 = {**llm, "spanId": "3" * 16, "startTimeUnixNano": "50", "endTimeUnixNano": "60",
            "attributes": [kv("llm.request.type", "chat"), kv("gen_ai.response.model", "m-4"),
                           kv("gen_ai.completion.0.role", "assistant"), kv("gen_ai.completion.0.content", "Six.")]}
    f = tmp_path / "tl.json"
    f.write_text(json.dumps(request([root, llm, tool, llm2])))
    (t,) = imported("otlp", [f], tmp_path / "r")
    assert t.source.record_id == "ab" * 16 and t.details["trace"]["root_span_id"] == (b"r" * 8).hex()
    assert [(c.query, c.round, len(c.results)) for c in t.search_calls] == [("lanes", 1, 2)]
    assert t.final_answer == "Six." and t.model == "m-4" and t.usage.calls == 2
