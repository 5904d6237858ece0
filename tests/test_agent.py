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
        "page_chars": 10000,
        "hints": False,
        "corpus": store.fingerprint(),
    }
    assert traj.prompt_version == "answer-2;systems-2"
    roles = [m["role"] for m in traj.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert traj.messages[1]["content"] == answer_prompt(q)
    assert traj.messages[3]["content"] == format_search_results(traj.search_calls[0])
    page_text = traj.messages[5]["content"]
    assert page_text.startswith(f"URL: {gold}") and "Dana Okafor" in page_text
    assert traj.messages[2]["tool_calls"][0]["function"]["name"] == "web_search"
    # every call in order, with its round, cache flag and page status
    steps = [(s.kind, s.round, s.tool, s.cached) for s in traj.steps]
    assert steps == [("search", 1, "web_search", False), ("open", 2, "open_url", True), ("answer", 3, None, False)]
    search, opened, answer = traj.steps
    assert search.query == "Brackwater Lane club head coach" and search.search_index == 0
    assert search.result_urls == traj.retrieved_urls and search.call_id == traj.messages[2]["tool_calls"][0]["id"]
    assert opened.url == gold and opened.page_status == "ok" and opened.page_source == "corpus"
    assert opened.shown_chars == len(page_text)
    assert traj.search_calls[0].round == 1 and traj.search_calls[0].cached is False


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
        SearchCall(query="anything", backend="ratelimited", error=traj.search_calls[0].error, round=1, cached=False)
    ]
    assert [(s.kind, s.error) for s in traj.steps] == [("search", traj.search_calls[0].error)]
    assert traj.search_calls[0].error and traj.retrieved_urls == []


def test_pending_model_call_gives_pending_trajectory(tmp_path, store, mini):
    with FakeOpenAIServer(script=[{"error": {"status": 503, "message": "overloaded"}}]) as srv:
        traj = run(
            SearchSystem(make_client(srv.base_url, tmp_path, max_retries=1), LocalSearch(store), store),
            mini.questions[0],
        )
    assert traj.status == "pending" and traj.final_answer is None and "model call failed" in traj.error


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "Incorrect API key provided"),
        (403, "You are not allowed to sample from this model"),
        (404, "The model `no-such-model` does not exist"),
        (400, "Unsupported parameter: 'temperature' is not supported with this model."),
        (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
    ],
)
def test_errors_that_doom_every_question_raise(tmp_path, store, mini, status, message):
    with (
        FakeOpenAIServer(script=[{"error": {"status": status, "message": message}}]) as srv,
        pytest.raises(FatalLLMError),
    ):
        run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store), mini.questions[0])


def test_context_length_400_fails_this_question_only(tmp_path, store, mini):
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "coach"}}]},
        {
            "error": {
                "status": 400,
                "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
                "code": "context_length_exceeded",
            }
        },
    ]
    with FakeOpenAIServer(script=script) as srv:
        traj = run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store), mini.questions[0])
    assert traj.status == "failed" and traj.final_answer is None
    assert traj.error.startswith("model call rejected: 400") and "maximum context length" in traj.error
    # what happened before the failure is kept
    assert [c.query for c in traj.search_calls] == ["coach"] and traj.retrieved_urls
    assert [s.kind for s in traj.steps] == ["search"]


class Refuses(SearchBackend):
    name = "refuses"

    async def _search_once(self, query, k):
        from trek.search.base import RejectedSearchError

        raise RejectedSearchError("400 from search: query is too long")


def test_rejected_search_query_fails_this_question_only(tmp_path, store, mini):
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "x" * 500}}]},
        {"reply": "never"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        backend = Refuses(max_retries=3)
        traj = run(SearchSystem(make_client(srv.base_url, tmp_path), backend, store), mini.questions[0])
    assert backend.attempts == 1  # no retry for a refused query
    assert traj.status == "failed" and traj.final_answer is None and "query is too long" in traj.error
    assert traj.search_calls[0].error and traj.steps[0].error


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
    assert traj.prompt_version == "answer-2"
    assert [(s.kind, s.round) for s in traj.steps] == [("answer", 1)]


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
    assert traj.retrieved_urls == [
        *[s["url"] for s in body["output"][1]["action"]["sources"]],
        "https://www.quellbridge-post.com/news/2023/10/riverside-line-extension-opens",
    ]
    assert not any("utm_source" in u for u in traj.retrieved_urls)
    assert [c.action for c in traj.search_calls] == [0, 2, 2]
    assert traj.search_calls[1].results == traj.search_calls[2].results != []
    assert [s.kind for s in traj.steps] == ["search", "open", "search", "search", "open", "answer"]
    assert all(s.round == 1 for s in traj.steps)
    assert [m["role"] for m in req["input"]] == ["user"]  # no system advice by default
    assert traj.opened_urls == ["https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open"]
    assert traj.usage.prompt_tokens == 10235 and traj.usage.reasoning_tokens == 576
    assert traj.system["native_search"] is True and traj.system["search"] == "openai"
    assert any(m.get("type") == "web_search_call" for m in traj.messages)


# -- prompts carry no advice unless asked -----------------------------------------------------------------
ADVICE = ("publication date", "outdated", "in conflict", "sources")


def all_prompt_text(traj) -> str:
    return "\n".join(str(m.get("content") or "") for m in traj.messages if m.get("role") in ("system", "user"))


@pytest.mark.parametrize("system", ["agentic", "search-then-read"])
def test_prompts_give_no_evidence_advice_by_default_and_hints_add_it(tmp_path, store, mini, system):
    script = [
        {"tool_results": 0, "any_pattern": "You have two tools", "tool_calls": [{"name": "web_search", "arguments": {"query": "q"}}]},
        {"reply": "an answer"},
    ]
    q = mini.questions[0]
    with FakeOpenAIServer(script=script) as srv:
        plain = run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store,
                                 SystemConfig(system=system)), q)
        hinted = run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store,
                                  SystemConfig(system=system, hints=True)), q)
    text = all_prompt_text(plain).lower()
    assert not any(a in text for a in ADVICE), text
    assert plain.system["hints"] is False and "hints" not in plain.prompt_version
    assert all(a in all_prompt_text(hinted).lower() for a in ("publication dates", "outdated", "in conflict"))
    assert hinted.system["hints"] is True and hinted.prompt_version.endswith(";hints-1")


def test_native_search_hints_are_a_system_message(tmp_path, mini):
    body = json.loads((FIX / "openai_responses_web_search.json").read_text())
    with RecordedResponses(body) as srv:
        client = make_client(srv.base_url, tmp_path)
        traj = run(SearchSystem(client, OpenAISearch(client), None, SystemConfig(hints=True)), mini.questions[2])
        req = srv.requests[0]
    assert [m["role"] for m in req["input"]] == ["system", "user"]
    assert "publication dates" in req["input"][0]["content"]
    assert traj.system["hints"] is True


def test_first_search_requires_a_search_call_on_the_first_round_only(tmp_path, store, mini):
    from trek.search.agent import FIRST_SEARCH_CHOICE

    assert FIRST_SEARCH_CHOICE == {"type": "function", "function": {"name": "web_search"}}
    # a model that answers at once unless the request names the search tool (as the embedded one does)
    script = [
        {"tool_choice": FIRST_SEARCH_CHOICE, "tool_calls": [{"name": "web_search", "arguments": {"query": "q"}}]},
        {"tool_choice": None, "reply": "an answer"},
    ]
    q = mini.questions[0]
    with FakeOpenAIServer(script=script) as srv:
        free = run(SearchSystem(make_client(srv.base_url, tmp_path / "a"), LocalSearch(store), store), q)
        forced = run(SearchSystem(make_client(srv.base_url, tmp_path / "b"), LocalSearch(store), store,
                                  SystemConfig(first_search=True)), q)
        assert srv.stats()["requests"] == 3
    assert free.search_calls == [] and free.final_answer == "an answer" and "first_search" not in free.system
    assert [c.query for c in forced.search_calls] == ["q"] and forced.final_answer == "an answer"
    assert forced.system["first_search"] is True
    bodies = cached_bodies(tmp_path / "b" / "llm.sqlite")
    assert [b.get("tool_choice") for b in bodies] == [FIRST_SEARCH_CHOICE, None]
    # the tool-calling turn goes back without a null content (llama.cpp's server rejects one)
    echoed = bodies[1]["messages"][2]
    assert echoed["role"] == "assistant" and "content" not in echoed and echoed["tool_calls"]


def test_first_search_is_for_the_agentic_system_with_function_tools(tmp_path, store):
    client = make_client("http://127.0.0.1:9/v1", tmp_path)
    with pytest.raises(ValueError, match="agentic system"):
        SearchSystem(client, LocalSearch(store), store, SystemConfig(system="search-then-read", first_search=True))
    with pytest.raises(ValueError, match="native search"):
        SearchSystem(client, OpenAISearch(client), None, SystemConfig(first_search=True))


def test_hints_make_no_sense_without_search(tmp_path):
    with pytest.raises(ValueError, match="no-search"):
        SearchSystem(make_client("http://127.0.0.1:9/v1", tmp_path), None, None, SystemConfig(hints=True))


# -- recording ----------------------------------------------------------------------------------------
def test_tool_call_after_the_final_round_is_no_answer_not_empty(tmp_path, store, mini):
    script = [{"tool_calls": [{"name": "web_search", "arguments": {"query": "tram line stations"}}]}]
    with FakeOpenAIServer(script=script) as srv:
        traj = run(
            SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store, SystemConfig(max_rounds=1)),
            mini.questions[2],
        )
        assert srv.stats()["requests"] == 2
    assert traj.status == "no_answer" and traj.final_answer is None
    assert "after the final round" in traj.error
    assert [(s.kind, s.round) for s in traj.steps] == [("search", 1), ("answer", 2)]
    assert traj.steps[-1].error and traj.messages[-1]["tool_calls"]


def test_opened_urls_are_in_retrieved_urls(tmp_path, store, mini):
    gold = mini.questions[0].gold_urls[0]
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "zzzz unrelated words"}}]},
        {"tool_results": 1, "tool_calls": [{"name": "open_url", "arguments": {"url": gold}}]},
        {"tool_results": 2, "tool_calls": [{"name": "open_url", "arguments": {"url": "https://not.stored.example/x"}}]},
        {"tool_results": 3, "reply": "Dana Okafor"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        traj = run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store), store), mini.questions[0])
    found = traj.search_calls[0].results
    assert gold not in [r.url for r in found]
    assert traj.retrieved_urls == [*[r.url for r in found], gold, "https://not.stored.example/x"]
    missing = traj.steps[2]
    assert (missing.kind, missing.page_status, missing.page_source, missing.cached) == ("open", "missing", "none", None)


class ModelMediated(SearchBackend):
    """A backend whose searches cost model tokens, like proxy:MODEL."""

    name = "mediated"

    async def _search_once(self, query, k):
        from trek.types import Usage

        hit = SearchResult(url="https://news.example/a", title="A", snippet="s")
        return [hit], Usage(prompt_tokens=100, completion_tokens=20, calls=1, cost_usd=0.5)


def test_search_model_usage_counts_in_the_trajectory(tmp_path, mini):
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "a"}}]},
        {"tool_results": 1, "tool_calls": [{"name": "web_search", "arguments": {"query": "b"}}]},
        {"tool_results": 2, "reply": "x"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        client = make_client(srv.base_url, tmp_path)
        traj = run(SearchSystem(client, ModelMediated(), PageStore()), mini.questions[0])
        model_usage = client.usage
    assert traj.search_usage.prompt_tokens == 200 and traj.search_usage.calls == 2
    assert traj.search_usage.cost_usd == pytest.approx(1.0)
    assert traj.usage.calls == 3 + 2
    assert traj.usage.prompt_tokens == model_usage.prompt_tokens + 200


def test_a_second_run_records_cache_hits(tmp_path, store, mini):
    from trek.search.base import SearchCache

    gold = mini.questions[0].gold_urls[0]
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "coach"}}]},
        {"tool_results": 1, "tool_calls": [{"name": "open_url", "arguments": {"url": gold}}]},
        {"tool_results": 2, "reply": "Dana Okafor"},
    ]
    cache = SearchCache(tmp_path / "search.sqlite")
    with FakeOpenAIServer(script=script) as srv:
        first = run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store, cache=cache), store),
                    mini.questions[0])
        again = run(SearchSystem(make_client(srv.base_url, tmp_path), LocalSearch(store, cache=cache), store),
                    mini.questions[0])
    assert [s.cached for s in first.steps] == [False, True, False]
    assert [s.cached for s in again.steps] == [True, True, True]
    assert again.search_calls[0].cached is True


def test_page_chars_sets_what_the_agent_sees(tmp_path, mini):
    long_page = "word " * 5000  # 25,000 characters
    store = PageStore()
    from trek.types import Document

    store.add_documents([Document(id="d", url="https://long.example/p", text=long_page)])
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "open_url", "arguments": {"url": "https://long.example/p"}}]},
        {"tool_results": 1, "reply": "x"},
    ]
    shown = {}
    for chars in (None, 1000):
        cfg = SystemConfig() if chars is None else SystemConfig(page_chars=chars)
        with FakeOpenAIServer(script=script) as srv:
            traj = run(SearchSystem(make_client(srv.base_url, tmp_path / str(chars)), Fixed([]), store, cfg), mini.questions[0])
        shown[chars] = traj.messages[3]["content"]
        assert traj.system["page_chars"] == (chars or 10_000)
    assert "the first 10,000 of 25,000 characters" in shown[None]
    assert "the first 1,000 of 25,000 characters" in shown[1000]


def test_open_url_fetches_the_live_page_through_the_store(tmp_path, mini):
    import httpx

    html = "<html><head><title>Coach news</title></head><body><p>Dana Okafor was named coach.</p></body></html>"
    log = []

    def handler(request):
        log.append(str(request.url))
        return httpx.Response(200, text=html, headers={"content-type": "text/html"})

    store = PageStore(tmp_path / "pages.sqlite", fetch=True, transport=httpx.MockTransport(handler))
    url = "https://news.example/coach?id=1"
    script = [
        {"tool_results": 0, "tool_calls": [{"name": "open_url", "arguments": {"url": url}}]},
        {"tool_results": 1, "tool_calls": [{"name": "open_url", "arguments": {"url": url}}]},
        {"tool_results": 2, "reply": "Dana Okafor"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        traj = run(SearchSystem(make_client(srv.base_url, tmp_path), Fixed([]), store), mini.questions[0])
    assert log == [url]  # fetched once, then served from the store
    opens = [s for s in traj.steps if s.kind == "open"]
    assert [(s.page_status, s.page_source, s.cached) for s in opens] == [("ok", "fetch", False), ("ok", "fetch", True)]
    assert "Dana Okafor was named coach." in traj.messages[3]["content"]
    assert traj.retrieved_urls == [url] and traj.opened_urls == [url]
