"""Provider replies read the same way whether they come as a provider log (``trek import
openai-responses``, ``chat-completions``, ``gemini``) or as the ``output.value`` of an
OpenInference model span (``trek import otlp`` / ``langfuse``): hosted web search with sources,
opened pages and citations; xAI's ``arguments``; Perplexity's ``citations`` and
``search_results``; URLs with spaces. The replies are in tests/fixtures/replies (see its
SOURCES.md). No network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _otel_traces import kv, langfuse_export, request

from trek import runs
from trek.imports import import_run, parse_mapping
from trek.imports.schema import validate_run
from trek.types import Trajectory

EX = Path(__file__).resolve().parents[1] / "examples"
REPLIES = Path(__file__).resolve().parent / "fixtures" / "replies"
QS = EX / "questions.csv"
MAP = parse_mapping("id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year")


def reply(name: str) -> dict:
    return json.loads((REPLIES / name).read_text())


def imported(fmt: str, f: Path, out: Path) -> Trajectory:
    import_run(fmt, [f], out, questions=QS, mapping=MAP, in_order=fmt in ("otlp", "langfuse"))
    assert validate_run(out) == []
    answers = runs.load_answers(out)
    return answers["lake-1"] if "lake-1" in answers else next(iter(answers.values()))


def as_log(tmp_path: Path, fmt: str, name: str) -> Trajectory:
    f = tmp_path / f"{name}.log.json"
    f.write_text(json.dumps([{"question_id": "lake-2", "record": reply(name)}]))
    return imported(fmt, f, tmp_path / f"log-{name}")


def oi_trace(obj: dict, hosted_as_tool_calls: bool = True, answer: str | None = None) -> dict:
    """An OpenInference trace of one agent run: an AGENT root and one LLM span whose
    ``output.value`` is the provider reply, with output messages as the OpenAI instrumentation
    writes them for a Responses reply (each hosted ``web_search_call`` item as a tool call of
    that name, without arguments)."""
    llm = {"openinference.span.kind": "LLM", "llm.model_name": obj.get("model") or "m",
           "input.value": json.dumps({"input": "How many lanes does the new Harbor Bridge have?"}),
           "input.mime_type": "application/json",
           "output.value": json.dumps(obj), "output.mime_type": "application/json",
           "llm.output_messages.0.message.role": "assistant"}
    if answer:
        llm["llm.output_messages.0.message.content"] = answer
    if hosted_as_tool_calls:
        for i, item in enumerate(x for x in obj.get("output", []) if x.get("type") == "web_search_call"):
            llm[f"llm.output_messages.0.message.tool_calls.{i}.tool_call.id"] = item["id"]
            llm[f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function.name"] = "web_search_call"
    root = {"traceId": "a" * 32, "spanId": "r" * 16, "name": "agent", "startTimeUnixNano": "1",
            "endTimeUnixNano": "100", "attributes": [kv("openinference.span.kind", "AGENT"),
                                                     kv("question_id", "lake-2"),
                                                     kv("input.value", "How many lanes does the new Harbor Bridge have?")]}
    span = {"traceId": "a" * 32, "spanId": "1" * 16, "parentSpanId": "r" * 16, "name": "Response",
            "startTimeUnixNano": "10", "endTimeUnixNano": "50", "attributes": [kv(k, v) for k, v in llm.items()]}
    return request([root, span])


def as_trace(tmp_path: Path, name: str, fmt: str = "otlp", **kw) -> Trajectory:
    req = oi_trace(reply(name), **kw)
    f = tmp_path / f"{name}.{fmt}.json"
    f.write_text(json.dumps(req if fmt == "otlp" else langfuse_export(
        req, trace={"metadata": {"question_id": "lake-2"}})))
    return imported(fmt, f, tmp_path / f"{fmt}-{name}")


def facts(t: Trajectory) -> dict:
    """What the independent check compares: answer, queries, result URLs, opened and cited pages."""
    return {"answer": t.final_answer, "queries": [c.query for c in t.search_calls],
            "results": [[r.url for r in c.results] for c in t.search_calls],
            "opened": t.opened_urls, "cited": [c.url for c in t.citations]}


# -- a Responses reply with hosted web search ------------------------------------------------------------
RESP = reply("responses-web-search.json")
SOURCES = [s["url"].replace("?utm_source=openai", "") for s in RESP["output"][1]["action"]["sources"]]
CITED = [a["url"].replace("?utm_source=openai", "") for a in RESP["output"][4]["content"][0]["annotations"]]


def test_a_responses_log_reads_the_query_16_sources_the_opened_page_and_7_citations(tmp_path):
    t = as_log(tmp_path, "openai-responses", "responses-web-search.json")
    assert facts(t) == {"answer": RESP["output"][4]["content"][0]["text"],
                        "queries": ["Harbor Bridge number of lanes opening 2025"], "results": [SOURCES],
                        "opened": ["https://harbor-city.example/bridge-opening"], "cited": CITED}
    assert len(SOURCES) == 16 and len(CITED) == 7


@pytest.mark.parametrize("fmt", ["otlp", "langfuse"])
def test_an_openinference_span_of_that_reply_reads_the_same_and_not_web_search_call_tool_calls(tmp_path, fmt):
    direct = as_log(tmp_path, "openai-responses", "responses-web-search.json")
    t = as_trace(tmp_path, "responses-web-search.json", fmt, answer=RESP["output"][4]["content"][0]["text"])
    assert facts(t) == facts(direct)
    assert all(c.query for c in t.search_calls)  # no empty-query search per web_search_call item
    assert not [s for s in t.steps if s.tool == "web_search_call"]
    assert [(s.kind, s.tool) for s in t.steps if s.kind != "answer"] == [
        ("search", "web_search"), ("open", "open_page"), ("open", "find_in_page")]
    assert t.coverage.queries == "all" and t.coverage.results == "all"
    assert not any("not in the trace" in n for n in t.coverage.notes), t.coverage.notes


def test_the_answer_comes_from_the_reply_when_the_span_shows_no_message_text(tmp_path):
    t = as_trace(tmp_path, "responses-web-search.json")
    assert t.final_answer == RESP["output"][4]["content"][0]["text"]


def test_a_reply_object_trek_does_not_read_is_said_to_be_in_the_trace_but_not_read(tmp_path):
    obj = {"kind": "mystery-provider", "payload": {"hits": ["https://harbor-city.example/bridge-opening"]},
           "output": "Six lanes."}
    req = oi_trace(obj, hosted_as_tool_calls=False, answer="Six lanes.")
    # one tool call named like a search, with no arguments: its query is somewhere unread
    span = req["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    span["attributes"] += [kv("llm.output_messages.0.message.tool_calls.0.tool_call.id", "c1"),
                           kv("llm.output_messages.0.message.tool_calls.0.tool_call.function.name", "web_search")]
    f = tmp_path / "mystery.json"
    f.write_text(json.dumps(req))
    t = imported("otlp", f, tmp_path / "mystery")
    notes = " ".join(t.coverage.notes)
    assert "in the trace but not read" in notes and "not a Responses, Chat Completions or Gemini reply" in notes
    assert t.coverage.queries == "none"
    assert "carry no query in the trace" not in notes  # it may be there: not claimed absent


# -- xAI: the query in arguments ---------------------------------------------------------------------------
def test_xai_web_search_query_and_opened_page_are_read_from_arguments(tmp_path):
    t = as_log(tmp_path, "openai-responses", "xai-responses-arguments.json")
    assert facts(t) == {"answer": "Six lanes.", "queries": ["Harbor Bridge lanes"], "results": [[]],
                        "opened": ["https://harbor-city.example/bridge-opening"],
                        "cited": ["https://harbor-city.example/bridge-opening",
                                  "https://bridge-watch.example/harbor-opening"]}
    assert t.coverage.queries == "all" and t.coverage.results == "cited_only"
    assert not any("carry no query" in n for n in t.coverage.notes)
    assert facts(as_trace(tmp_path, "xai-responses-arguments.json", answer="Six lanes.")) == facts(t)


# -- Perplexity: citations and search_results --------------------------------------------------------------
PPLX = reply("perplexity-sonar.json")


def test_perplexity_citations_and_search_results_are_kept(tmp_path):
    t = as_log(tmp_path, "chat-completions", "perplexity-sonar.json")
    assert [c.url for c in t.citations] == PPLX["citations"] and len(t.citations) == 7
    assert [c.title for c in t.citations] == [r["title"] for r in PPLX["search_results"]]
    assert [[r.url for r in c.results] for c in t.search_calls] == [[r["url"] for r in PPLX["search_results"]]]
    assert t.coverage.results == "all" and t.coverage.queries == "none"
    assert not any("no results beyond the cited pages" in n for n in t.coverage.notes)
    assert any("not its queries" in n for n in t.coverage.notes)
    assert set(PPLX["citations"]) <= set(t.retrieved_urls)
    only_cites = {k: v for k, v in PPLX.items() if k != "search_results"}
    f = tmp_path / "cites-only.json"
    f.write_text(json.dumps([{"question_id": "lake-2", "record": only_cites}]))
    t2 = imported("chat-completions", f, tmp_path / "cites-only")
    assert [c.url for c in t2.citations] == PPLX["citations"] and t2.coverage.results == "cited_only"
    assert facts(as_trace(tmp_path, "perplexity-sonar.json", hosted_as_tool_calls=False,
                          answer=PPLX["choices"][0]["message"]["content"])) == facts(t)


# -- Gemini: a grounding URL with spaces -------------------------------------------------------------------
def test_a_gemini_grounding_url_with_spaces_is_kept_percent_encoded_and_noted_once(tmp_path):
    t = as_log(tmp_path, "gemini", "gemini-grounding-space.json")
    enc = "https://harbor-city.example/bridge%20opening%20notes"
    assert [c.url for c in t.citations] == [enc, "https://bridge-watch.example/harbor-opening"]
    assert enc in t.retrieved_urls
    assert not any("left out" in n for n in t.coverage.notes)
    assert facts(as_trace(tmp_path, "gemini-grounding-space.json", hosted_as_tool_calls=False,
                          answer="Six lanes.")) == facts(t)


def test_a_bad_link_is_noted_once_however_often_it_appears(tmp_path):
    gem = reply("gemini-grounding-space.json")
    gem["candidates"][0]["groundingMetadata"]["groundingChunks"][0]["web"]["uri"] = "javascript:alert(1)"
    f = tmp_path / "bad.json"
    f.write_text(json.dumps([{"question_id": "lake-2", "record": gem}]))
    t = imported("gemini", f, tmp_path / "bad")
    assert any("left out 1 link(s)" in n for n in t.coverage.notes), t.coverage.notes


def test_an_agent_loop_turn_that_ends_on_a_function_call_is_read_too(tmp_path):
    """Two model spans of one agent loop: the first reply searches and calls a function (no
    message item), the second answers. Both replies are read."""
    first = {"id": "resp_turn1", "object": "response", "status": "completed", "model": "gpt-5",
             "output": [{"id": "ws_a", "type": "web_search_call", "status": "completed",
                         "action": {"type": "search", "query": "Harbor Bridge lanes",
                                    "sources": [{"type": "url", "url": "https://harbor-city.example/news/01"}]}},
                        {"id": "fc_a", "type": "function_call", "call_id": "call_1", "name": "lookup",
                         "arguments": "{\"topic\": \"bridge\"}"}]}
    second = {**RESP, "id": "resp_turn2"}
    req = oi_trace(first, answer=None)
    span2 = json.loads(json.dumps(oi_trace(second, answer=None)["resourceSpans"][0]["scopeSpans"][0]["spans"][1]))
    span2["spanId"], span2["startTimeUnixNano"], span2["endTimeUnixNano"] = "2" * 16, "60", "90"
    req["resourceSpans"][0]["scopeSpans"][0]["spans"].append(span2)
    f = tmp_path / "loop.json"
    f.write_text(json.dumps(req))
    t = imported("otlp", f, tmp_path / "loop")
    assert [(c.query, c.round) for c in t.search_calls] == [
        ("Harbor Bridge lanes", 1), ("Harbor Bridge number of lanes opening 2025", 2)]
    assert t.final_answer == RESP["output"][4]["content"][0]["text"]
    assert not any("could not be read" in n for n in t.coverage.notes), t.coverage.notes
