"""The systems (agentic, search-then-read, no-search, native OpenAI search) against the fake
OpenAI server and a loopback server replaying a recorded Responses body."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from _servers import RecordedResponses

from trek.answer_prompts import answer_prompt
from trek.llm import FatalLLMError, LLMCache, LLMClient
from trek.pages import PageStore
from trek.search.agent import SearchSystem, SystemConfig, format_search_results
from trek.search.base import SearchBackend, TransientSearchError
from trek.search.local import LocalSearch
from trek.search.openai_search import INCLUDE_SOURCES, OpenAISearch
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Question, SearchCall, SearchResult

FIX = Path(__file__).parent / "fixtures" / "search"


def make_client(base_url, tmp_path, **kw):
    kw.setdefault("cache", LLMCache(tmp_path / "llm.sqlite"))
    return LLMClient(
        "fake-model",
        base_url=base_url,
        api_key="sk-test-key",
        progress=False,
        backoff_base=0.01,
        backoff_cap=0.05,
        **kw,
    )


def run(system: SearchSystem, q: Question):
    async def go():
        try:
            return await system.arun(q)
        finally:
            await system.client.aclose()

    return asyncio.run(go())


def cached_bodies(path: Path) -> list[dict]:
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT request FROM responses ORDER BY created_at").fetchall()
    return [json.loads(r[0])["body"] for r in rows]


def test_agentic_calls_both_tools_and_records_everything(tmp_path, store, mini):
    q = mini.questions[0]
    gold = q.gold_urls[0]
    script = [
        {
            "tool_results": 0,
            "tool_calls": [{"name": "web_search", "arguments": {"query": "Brackwater Lane club head coach"}}],
        },
        {"tool_results": 1, "tool_calls": [{"name": "open_url", "arguments": {"url": gold}}]},
        {"tool_results": 2, "reply": "  Dana Okafor\n"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        backend = LocalSearch(store)
        traj = run(SearchSystem(make_client(srv.base_url, tmp_path), backend, store), q)
        assert srv.stats()["requests"] == 3
    expected = backend.search("Brackwater Lane club head coach", 5)
    assert traj.status == "ok" and traj.error is None and traj.final_answer == "Dana Okafor"
    assert [c.query for c in traj.search_calls] == ["Brackwater Lane club head coach"]
    assert traj.search_calls[0].backend == "local"
    assert traj.retrieved_urls == [r.url for r in expected]
    assert traj.opened_urls == [gold]
    assert traj.usage.calls == 3 and traj.usage.prompt_tokens > 0
    assert traj.system == {
        "system": "agentic",
        "search": "local",
        "effort": None,
        "max_rounds": 8,
        "results_per_search": 5,
        "page_chars": 3500,
        "corpus": store.fingerprint(),
    }
    assert traj.prompt_version.startswith("answer-1;systems-1")
    roles = [m["role"] for m in traj.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert traj.messages[1]["content"] == answer_prompt(q)
    assert traj.messages[3]["content"] == format_search_results(traj.search_calls[0])
    page_text = traj.messages[5]["content"]
    assert page_text.startswith(f"URL: {gold}") and "Dana Okafor" in page_text
    assert traj.messages[2]["tool_calls"][0]["function"]["name"] == "web_search"


def test_agentic_forces_an_answer_after_max_rounds(tmp_path, store, mini):
    script = [
        {"pattern": "cannot call any more tools", "reply": "forced answer"},
        {"tool_calls": [{"name": "web_search", "arguments": {"query": "tram line stations"}}]},
    ]
    with FakeOpenAIServer(script=script) as srv:
        client = make_client(srv.base_url, tmp_path)
        traj = run(
            SearchSystem(client, LocalSearch(store), store, SystemConfig(max_rounds=2, effort="high")),
            mini.questions[2],
        )
        assert srv.stats()["requests"] == 3
    assert traj.final_answer == "forced answer" and traj.status == "ok"
    assert [c.query for c in traj.search_calls] == ["tram line stations"] * 2
    assert traj.system["max_rounds"] == 2 and traj.system["effort"] == "high"
    bodies = cached_bodies(tmp_path / "llm.sqlite")
    assert all(b["reasoning_effort"] == "high" for b in bodies)
    assert "tool_choice" not in bodies[0] and bodies[-1]["tool_choice"] == "none"
    assert bodies[-1]["tools"][0]["function"]["name"] == "web_search"


def test_agentic_survives_bad_tool_calls(tmp_path, store, mini):
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "open_url", "arguments": "{not json"}]},
        {"tool_results": 1, "tool_calls": [{"name": "calculator", "arguments": {"x": 1}}]},
        {
            "tool_results": 2,
            "tool_calls": [{"name": "open_url", "arguments": {"url": "https://missing.example/p"}}],
        },
        {"tool_results": 3, "reply": "done"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        traj = run(
            SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store), mini.questions[0]
        )
    tools = [m["content"] for m in traj.messages if m["role"] == "tool"]
    assert tools[0].startswith("Error: the tool arguments were not valid JSON")
    assert "no tool named 'calculator'" in tools[1]
    assert "unavailable" in tools[2].lower()
    assert traj.final_answer == "done" and traj.opened_urls == ["https://missing.example/p"]


class Fixed(SearchBackend):
    name = "fixed"

    def __init__(self, results, **kw):
        super().__init__(**kw)
        self.results = results

    async def _search_once(self, query, k):
        return self.results[:k]


def test_unavailable_page_falls_back_to_the_search_snippet(tmp_path, mini):
    hit = SearchResult(
        url="https://elsewhere.example/a", title="A", snippet="The answer is 42.", date="2024-01-01"
    )
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "q"}}]},
        {
            "tool_results": 1,
            "tool_calls": [{"name": "open_url", "arguments": {"url": "http://elsewhere.example/a/"}}],
        },
        {"tool_results": 2, "reply": "42"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        traj = run(
            SearchSystem(make_client(srv.base_url, tmp_path), Fixed([hit]), PageStore()), mini.questions[0]
        )
    tool = [m["content"] for m in traj.messages if m["role"] == "tool"][1]
    assert "unavailable" in tool.lower() and "The answer is 42." in tool


class AlwaysRateLimited(SearchBackend):
    name = "ratelimited"

    async def _search_once(self, query, k):
        raise TransientSearchError("429 rate limited")


def test_question_whose_search_keeps_failing_is_pending_not_answered(tmp_path, store, mini):
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "anything"}}]},
        {"reply": "should never be used"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        backend = AlwaysRateLimited(max_retries=2, backoff_base=0.01, backoff_cap=0.02)
        traj = run(SearchSystem(make_client(srv.base_url, tmp_path), backend, store), mini.questions[0])
        assert srv.stats()["requests"] == 1
    assert backend.attempts == 3
    assert traj.status == "pending" and traj.final_answer is None
    assert traj.error.startswith("search failed") and "429" in traj.error
    assert traj.search_calls == [
        SearchCall(query="anything", backend="ratelimited", error=traj.search_calls[0].error)
    ]
    assert traj.search_calls[0].error and traj.retrieved_urls == []


def test_pending_model_call_gives_pending_trajectory(tmp_path, store, mini):
    with FakeOpenAIServer(script=[{"error": {"status": 503, "message": "overloaded"}}]) as srv:
        traj = run(
            SearchSystem(make_client(srv.base_url, tmp_path, max_retries=1), LocalSearch(store), store),
            mini.questions[0],
        )
    assert traj.status == "pending" and traj.final_answer is None and "model call failed" in traj.error


def test_fatal_model_error_raises(tmp_path, store, mini):
    with (
        FakeOpenAIServer(script=[{"error": {"status": 400, "message": "bad request"}}]) as srv,
        pytest.raises(FatalLLMError),
    ):
        run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store), mini.questions[0])


def test_search_then_read_reads_top_pages_once(tmp_path, store, mini):
    q = mini.questions[1]
    script = [{"pattern": r"\[Document 1\]", "reply": "Answer from pages"}, {"reply": "no documents seen"}]
    with FakeOpenAIServer(script=script) as srv:
        backend = LocalSearch(store)
        sys_ = SearchSystem(
            make_client(srv.base_url, tmp_path),
            backend,
            store,
            SystemConfig(system="search-then-read", top_k=3),
        )
        traj = run(sys_, q)
        assert srv.stats()["requests"] == 1
    top = backend.search(q.question, 3)
    assert traj.final_answer == "Answer from pages"
    assert [c.query for c in traj.search_calls] == [q.question]
    assert traj.retrieved_urls == [r.url for r in top] == traj.opened_urls
    assert traj.system["system"] == "search-then-read" and traj.system["top_k"] == 3
    prompt = traj.messages[0]["content"]
    assert prompt.count("[Document ") == 3 and prompt.endswith(answer_prompt(q))


def test_no_search_uses_the_answer_prompt_alone(tmp_path, mini):
    q = mini.questions[0]
    with FakeOpenAIServer(script=[{"reply": "Someone"}]) as srv:
        traj = run(SearchSystem(make_client(srv.base_url, tmp_path), None), q)
    assert traj.final_answer == "Someone" and traj.search_calls == [] and traj.retrieved_urls == []
    assert traj.system == {"system": "no-search", "search": "none", "effort": None}
    assert traj.messages[0] == {"role": "user", "content": answer_prompt(q)}
    assert traj.prompt_version == "answer-1"


# -- native OpenAI web search -------------------------------------------------------------------------
def test_native_openai_search_records_actions_and_urls(tmp_path, mini):
    body = json.loads((FIX / "openai_responses_web_search.json").read_text())
    q = mini.questions[2]
    with RecordedResponses(body) as srv:
        client = make_client(srv.base_url, tmp_path)
        traj = run(SearchSystem(client, OpenAISearch(client), None, SystemConfig(effort="high")), q)
        req = srv.requests[0]
    assert req["tools"] == [{"type": "web_search"}] and req["include"] == INCLUDE_SOURCES
    assert req["reasoning"] == {"effort": "high"}
    assert req["input"][-1] == {"role": "user", "content": answer_prompt(q)}
    assert traj.status == "ok" and traj.final_answer.startswith("14")
    assert [c.query for c in traj.search_calls] == [
        "Quellbridge Airport tram line stations",
        "Tideway line number of stops 2024",
        "QTA Tideway line stops list",
    ]
    assert all(c.backend == "openai" for c in traj.search_calls)
    assert traj.retrieved_urls[:3] == [s["url"] for s in body["output"][1]["action"]["sources"]]
    assert traj.retrieved_urls[-1].endswith("?utm_source=openai")
    assert traj.opened_urls == ["https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open"]
    assert traj.usage.prompt_tokens == 10235 and traj.usage.reasoning_tokens == 576
    assert traj.system["native_search"] is True and traj.system["search"] == "openai"
    assert any(m.get("type") == "web_search_call" for m in traj.messages)
