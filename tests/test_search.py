"""Search backends: local BM25, caching, retries, and the Tavily / DuckDuckGo / OpenAI / proxy
adapters against recorded replies in their real wire shapes (no network: MockTransport, a stand-in
``ddgs`` module and loopback HTTP servers)."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from pathlib import Path

import httpx
import pytest
from _servers import RecordedResponses

from trek.llm import LLMCache, LLMClient
from trek.search import (
    FatalSearchError,
    RejectedSearchError,
    SearchBackend,
    SearchCache,
    SearchUnavailable,
    TransientSearchError,
    make_backend,
)
from trek.search.duckduckgo import DuckDuckGoSearch
from trek.search.local import LocalSearch
from trek.search.openai_search import INCLUDE_SOURCES, OpenAISearch, parse_web_search_output
from trek.search.proxy import ProxySearch, validate_results
from trek.search.tavily import TavilySearch
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import SearchResult

FIX = Path(__file__).parent / "fixtures" / "search"
KEY = "tvly-secret-test-key-0123456789"


def fixture(name: str):
    return json.loads((FIX / name).read_text(encoding="utf-8"))


FAST = {"backoff_base": 0.01, "backoff_cap": 0.05}


def call_closing(backend, query, k):
    """``backend.acall`` on a fresh loop, closing the backend's HTTP clients afterwards."""

    async def go():
        try:
            return await backend.acall(query, k)
        finally:
            await backend.aclose()

    return asyncio.run(go())


# -- local BM25 -------------------------------------------------------------------------------------
def test_local_search_finds_gold_pages_offline_and_is_deterministic(store, mini):
    backend = LocalSearch(store)
    q = mini.questions[0]
    first = backend.search(q.question, 10)
    assert 0 < len(first) <= 10
    assert set(q.gold_urls) & {r.url for r in first}
    assert all(isinstance(r, SearchResult) and r.snippet for r in first)
    again = LocalSearch(store).search(q.question, 10)
    assert [r.model_dump() for r in again] == [r.model_dump() for r in first]
    assert backend.search("zzzz qqqq", 5) == []
    assert backend.search("the of and", 5) == []  # only stop words


def test_local_search_dates_come_from_the_documents(store, mini):
    dated = {d.url: d.date.isoformat() for d in mini.documents if d.date}
    for r in LocalSearch(store).search("head coach appointed", 10):
        assert r.date == dated.get(r.url)


def test_search_cache_serves_repeats_without_running_the_backend(tmp_path, store, mini):
    cache = SearchCache(tmp_path / "search.sqlite")
    backend = LocalSearch(store, cache=cache)
    out1 = asyncio.run(backend.acall(mini.questions[1].question, 5))
    out2 = asyncio.run(backend.acall(mini.questions[1].question, 5))
    assert not out1.cached and out2.cached
    assert out1.call == out2.call and out1.call.backend == "local"
    assert backend.attempts == 1 and backend.cache_hits == 1
    # k is part of the key; so is the corpus
    asyncio.run(backend.acall(mini.questions[1].question, 3))
    assert backend.attempts == 2
    reopened = LocalSearch(store, cache=SearchCache(tmp_path / "search.sqlite"))
    assert asyncio.run(reopened.acall(mini.questions[1].question, 5)).cached


# -- retries, unavailable ------------------------------------------------------------------------------
class Flaky(SearchBackend):
    name = "flaky"

    def __init__(self, failures: int, exc=TransientSearchError, **kw):
        super().__init__(**kw)
        self.failures_left = failures
        self.exc = exc

    async def _search_once(self, query, k):
        if self.failures_left:
            self.failures_left -= 1
            raise self.exc("429 rate limited") if self.exc is TransientSearchError else self.exc()
        return [SearchResult(url=f"https://example.com/{query}")]


def test_transient_errors_are_retried_then_succeed():
    b = Flaky(3, max_retries=4, **FAST)
    assert [r.url for r in b.search("x")] == ["https://example.com/x"]
    assert b.attempts == 4


def test_timeouts_are_retried():
    b = Flaky(2, exc=TimeoutError, max_retries=4, **FAST)
    assert b.search("y")[0].url == "https://example.com/y"


def test_search_that_keeps_failing_raises_unavailable_with_the_failed_call(tmp_path):
    cache = SearchCache(tmp_path / "s.sqlite")
    b = Flaky(100, max_retries=2, cache=cache, **FAST)
    with pytest.raises(SearchUnavailable) as info:
        asyncio.run(b.acall("q"))
    assert b.attempts == 3
    call = info.value.call
    assert call is not None and call.query == "q" and call.backend == "flaky" and call.results == []
    assert "after 3 attempts" in call.error and "429" in call.error
    assert len(cache) == 0  # failures are never cached


# -- Tavily ----------------------------------------------------------------------------------------------
def tavily_transport(responses, log):
    """Reply with ``responses`` in turn (the last one repeats)."""

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        r = responses[min(len(log), len(responses)) - 1]
        if isinstance(r, Exception):
            raise r
        return r

    return httpx.MockTransport(handler)


def test_tavily_parses_recorded_reply_and_sends_the_documented_request(tmp_path):
    log: list[httpx.Request] = []
    t = tavily_transport([httpx.Response(200, json=fixture("tavily_search.json"))], log)
    cache = SearchCache(tmp_path / "s.sqlite")
    b = TavilySearch(api_key=KEY, transport=t, cache=cache, **FAST)
    out = asyncio.run(b.acall("Harrowmere Rovers head coach 2024", 5))
    assert [r.url for r in out.results] == [x["url"] for x in fixture("tavily_search.json")["results"]]
    assert out.results[0].title.startswith("Dana Okafor appointed")
    assert out.results[0].snippet.startswith("Harrowmere Rovers are pleased")
    assert out.results[0].date is None
    req = log[0]
    assert req.method == "POST" and req.url.path == "/search" and req.url.host == "api.tavily.com"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(req.content)
    assert body["query"] == "Harrowmere Rovers head coach 2024" and body["max_results"] == 5
    assert "api_key" not in body
    # cached: no second request; the key is nowhere in the cache or the record
    asyncio.run(b.acall("Harrowmere Rovers head coach 2024", 5))
    assert len(log) == 1
    assert KEY.encode() not in (tmp_path / "s.sqlite").read_bytes()
    wal = tmp_path / "s.sqlite-wal"
    assert not wal.exists() or KEY.encode() not in wal.read_bytes()
    assert KEY not in out.call.model_dump_json() and KEY not in repr(b)


def test_tavily_news_results_keep_published_date():
    t = tavily_transport([httpx.Response(200, json=fixture("tavily_search_news.json"))], [])
    res = TavilySearch(api_key=KEY, topic="news", transport=t).search("Veltaro chief executive", 5)
    assert res[0].date == "Mon, 16 Jun 2025 08:30:00 GMT"


def test_tavily_rate_limit_and_timeouts_are_retried():
    log: list = []
    t = tavily_transport(
        [
            httpx.Response(429, json=fixture("tavily_error_429.json"), headers={"retry-after": "0"}),
            httpx.ConnectTimeout("timed out"),
            httpx.Response(502, text="bad gateway"),
            httpx.Response(200, json=fixture("tavily_search.json")),
        ],
        log,
    )
    res = TavilySearch(api_key=KEY, transport=t, max_retries=4, **FAST).search("q", 3)
    assert len(log) == 4 and len(res) == 3


def test_tavily_that_keeps_failing_is_unavailable():
    t = tavily_transport([httpx.Response(503, text="unavailable")], log := [])
    b = TavilySearch(api_key=KEY, transport=t, max_retries=2, **FAST)
    with pytest.raises(SearchUnavailable, match="503"):
        b.search("q")
    assert len(log) == 3


def test_tavily_bad_key_is_fatal_and_the_key_never_shows():
    def echo(request: httpx.Request) -> httpx.Response:  # a server that echoes the header back
        return httpx.Response(
            401, json={"detail": {"error": f"bad token {request.headers['authorization']}"}}
        )

    b = TavilySearch(api_key=KEY, transport=httpx.MockTransport(echo), **FAST)
    with pytest.raises(FatalSearchError) as info:
        b.search("q")
    assert "401" in str(info.value) and KEY not in str(info.value)


@pytest.mark.parametrize("status", [400, 422])
def test_tavily_refused_query_fails_that_query_only(status):
    body = {"detail": {"error": "Query is too long. Max query length is 400 characters."}}
    log: list = []
    t = tavily_transport([httpx.Response(status, json=body)], log)
    b = TavilySearch(api_key=KEY, transport=t, max_retries=3, **FAST)
    with pytest.raises(RejectedSearchError, match="too long") as info:
        b.search("x" * 500)
    assert len(log) == 1 and info.value.call is not None and info.value.call.error
    assert not isinstance(info.value, FatalSearchError)


def test_tavily_needs_a_key(monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(FatalSearchError, match="TAVILY_API_KEY"):
        TavilySearch()
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    assert "tavily" in make_backend("tavily").name


# -- DuckDuckGo (a stand-in ddgs module with the real interface) --------------------------------------
def install_fake_ddgs(monkeypatch, behaviour, newer=False):
    mod = types.ModuleType("ddgs")
    exc = types.ModuleType("ddgs.exceptions")

    class DDGSException(Exception):
        pass

    class RatelimitException(DDGSException):
        pass

    class TimeoutException(DDGSException):
        pass

    exc.DDGSException, exc.RatelimitException, exc.TimeoutException = (
        DDGSException,
        RatelimitException,
        TimeoutException,
    )
    calls: list = []

    class DDGS:
        def __init__(self, proxy=None, timeout=None, verify=True):
            self.timeout = timeout

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return None

        def text(self, query, **kw):
            calls.append((query, kw))
            return behaviour(len(calls), exc)

        if newer:  # recent ddgs releases name the count ``num_results``

            def _search(self, category, query, *, num_results=None, **kw):
                raise AssertionError("not called")

    mod.DDGS, mod.exceptions = DDGS, exc
    monkeypatch.setitem(sys.modules, "ddgs", mod)
    monkeypatch.setitem(sys.modules, "ddgs.exceptions", exc)
    return calls


def test_duckduckgo_parses_recorded_text_results(monkeypatch):
    calls = install_fake_ddgs(monkeypatch, lambda n, exc: fixture("ddgs_text.json"))
    res = DuckDuckGoSearch().search("Quellbridge airport tram stations", 2)
    assert [r.url for r in res] == [x["href"] for x in fixture("ddgs_text.json")[:2]]
    assert res[0].title.startswith("Quellbridge tram") and res[0].snippet.startswith("Two new stops")
    query, kw = calls[0]
    assert query == "Quellbridge airport tram stations" and kw["max_results"] == 2 and kw["region"] == "us-en"


def test_duckduckgo_passes_num_results_to_newer_ddgs(monkeypatch):
    calls = install_fake_ddgs(monkeypatch, lambda n, exc: fixture("ddgs_text.json"), newer=True)
    assert len(DuckDuckGoSearch().search("q", 2)) == 2
    assert calls[0][1]["num_results"] == 2 and "max_results" not in calls[0][1]


def test_duckduckgo_rate_limit_is_retried_and_no_results_is_empty(monkeypatch):
    def behaviour(n, exc):
        if n == 1:
            raise exc.RatelimitException("202 Ratelimit")
        if n == 2:
            raise exc.TimeoutException("timed out")
        return fixture("ddgs_text.json")

    install_fake_ddgs(monkeypatch, behaviour)
    b = DuckDuckGoSearch(max_retries=3, **FAST)
    assert len(b.search("q", 5)) == 3 and b.attempts == 3

    def nothing(n, exc):
        raise exc.DDGSException("No results found.")

    install_fake_ddgs(monkeypatch, nothing)
    assert DuckDuckGoSearch().search("q", 5) == []


def test_duckduckgo_without_the_package_is_fatal(monkeypatch):
    monkeypatch.setitem(sys.modules, "ddgs", None)
    with pytest.raises(FatalSearchError, match="pip install ddgs"):
        DuckDuckGoSearch().search("q")


# -- OpenAI Responses web search ------------------------------------------------------------------------
def test_parse_web_search_output_reads_actions_sources_and_citations():
    trace = parse_web_search_output(fixture("openai_responses_web_search.json"))
    assert [c.query for c in trace.searches] == [
        "Quellbridge Airport tram line stations",
        "Tideway line number of stops 2024",
        "QTA Tideway line stops list",
    ]
    assert [r.url for r in trace.searches[0].results] == [
        "https://www.flyquellbridge.com/to-and-from/tram",
        "https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open",
        "https://www.quellbridge-post.com/news/2012/09/tideway-line-opens",
    ]
    # the "api" source has no URL; every query of a multi-query action carries the action's sources
    second = [
        "https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open",
        "https://www.quellbridge-post.com/news/2023/10/riverside-line-extension-opens",
    ]
    assert [r.url for r in trace.searches[1].results] == second
    assert [r.url for r in trace.searches[2].results] == second
    assert [c.action for c in trace.searches] == [0, 2, 2]
    assert all(c.round == 1 for c in trace.searches)
    assert trace.searches[0].results[0].title == "Tram - Quellbridge Airport"  # from the citation
    assert trace.opened == ["https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open"]
    # OpenAI's tracking parameter is stripped from cited URLs, so the citation is the same page
    assert [c.url for c in trace.citations] == [
        "https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open",
        "https://www.flyquellbridge.com/to-and-from/tram",
    ]
    assert trace.answer.startswith("14")
    assert trace.retrieved_urls() == [
        "https://www.flyquellbridge.com/to-and-from/tram",
        "https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open",
        "https://www.quellbridge-post.com/news/2012/09/tideway-line-opens",
        "https://www.quellbridge-post.com/news/2023/10/riverside-line-extension-opens",
    ]
    # every action in order, as steps
    assert [(s.kind, s.tool) for s in trace.steps] == [
        ("search", "web_search"),
        ("open", "open_page"),
        ("search", "web_search"),
        ("search", "web_search"),
        ("open", "find_in_page"),
    ]
    assert trace.steps[4].query == "stops" and trace.steps[3].search_index == 2


def test_only_the_openai_tracking_parameter_is_stripped():
    body = {
        "output": [
            {
                "type": "web_search_call",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": "q",
                    "sources": [{"type": "url", "url": "https://a.example/x?utm_source=openai"}],
                },
            },
            {"type": "web_search_call", "status": "completed",
             "action": {"type": "open_page", "url": "https://b.example/only-opened?utm_source=openai"}},
            {
                "type": "message",
                "content": [
                    {
                        "type": "output_text",
                        "text": "A",
                        "annotations": [
                            {"type": "url_citation", "url": "https://a.example/x?id=1&utm_source=openai#s"},
                            {"type": "url_citation", "url": "https://c.example/?utm_source=newsletter"},
                            {"type": "url_citation", "url": "https://d.example/?utm_source=openai&utm_medium=x"},
                        ],
                    }
                ],
            },
        ]
    }
    trace = parse_web_search_output(body)
    assert trace.retrieved_urls() == [
        "https://a.example/x",
        "https://b.example/only-opened",  # an opened page is retrieved too
        "https://a.example/x?id=1#s",
        "https://c.example/?utm_source=newsletter",
        "https://d.example/?utm_medium=x",
    ]


def test_openai_backend_against_recorded_reply(tmp_path):
    with RecordedResponses(fixture("openai_responses_web_search.json")) as srv:
        client = LLMClient(
            "gpt-5",
            base_url=srv.base_url,
            api_key="sk-test-openai-key",
            cache=LLMCache(tmp_path / "llm.sqlite"),
            progress=False,
        )
        b = OpenAISearch(client, cache=SearchCache(tmp_path / "s.sqlite"))
        out = call_closing(b, "tram stations Quellbridge", 3)
        assert [r.url for r in out.results] == parse_web_search_output(
            fixture("openai_responses_web_search.json")
        ).retrieved_urls()[:3]
        assert out.usage.prompt_tokens == 10235 and out.usage.calls == 1
        req = srv.requests[0]
        assert req["tools"] == [{"type": "web_search"}] and req["include"] == INCLUDE_SOURCES
        assert "tram stations Quellbridge" in req["input"]
        b.search("tram stations Quellbridge", 3)
        assert len(srv.requests) == 1  # cached


# -- proxy (model-mediated search) --------------------------------------------------------------------
PROXY_REPLY = json.dumps(
    [
        {
            "url": "https://www.qta-transit.com/news/2023/09/harbour-gate-saltmarket-open",
            "title": "New stops",
            "snippet": "Two new stops opened.",
            "date": "2023-09-18",
        },
        {
            "url": "https://www.flyquellbridge.com/to-and-from/tram",
            "title": "Tram",
            "snippet": "",
            "date": None,
        },
    ]
)


def proxy_client(srv, tmp_path, model="search-model"):
    return LLMClient(
        model,
        base_url=srv.base_url,
        api_key="sk-test",
        cache=LLMCache(tmp_path / "llm.sqlite"),
        progress=False,
        backoff_base=0.01,
        backoff_cap=0.05,
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_proxy_returns_the_listed_results(tmp_path, api):
    script = [{"any_pattern": "web search service", "reply": "```json\n" + PROXY_REPLY + "\n```"}]
    with FakeOpenAIServer(script=script) as srv:
        b = make_backend("proxy:search-model", search_client=proxy_client(srv, tmp_path), api=api)
        assert b.name == "proxy:search-model"
        out = call_closing(b, "Quellbridge tram stops", 5)
        assert [r.url for r in out.results] == [x["url"] for x in json.loads(PROXY_REPLY)]
        assert out.results[0].date == "2023-09-18" and out.results[1].date is None
        assert out.usage.calls == 1 and srv.stats()["requests"] == 1


def test_proxy_unreadable_reply_is_reasked_then_unavailable(tmp_path):
    with FakeOpenAIServer(script=[{"reply": "The tram line has 14 stations."}]) as srv:
        b = ProxySearch(proxy_client(srv, tmp_path), "search-model", max_reasks=2)
        with pytest.raises(SearchUnavailable, match="could not be read"):
            b.search("q")
        assert srv.stats()["requests"] == 3


def test_proxy_failed_model_call_is_unavailable(tmp_path):
    with FakeOpenAIServer(script=[{"error": {"status": 500, "message": "boom"}}]) as srv:
        client = LLMClient(
            "m",
            base_url=srv.base_url,
            api_key="sk-test",
            progress=False,
            max_retries=1,
            backoff_base=0.01,
            backoff_cap=0.02,
        )
        with pytest.raises(SearchUnavailable, match="proxy model call failed"):
            ProxySearch(client, "m").search("q")


def test_validate_results_shapes():
    assert validate_results({"results": [{"url": "https://a.example"}]}, 5)[0].url == "https://a.example"
    assert validate_results([], 5) == []
    with pytest.raises(ValueError):
        validate_results([{"title": "no url"}], 5)
    with pytest.raises(ValueError):
        validate_results("just text", 5)


def test_make_backend_names(store):
    assert make_backend("none") is None
    assert isinstance(make_backend("local", store=store), LocalSearch)
    assert isinstance(make_backend("duckduckgo"), DuckDuckGoSearch)
    with pytest.raises(ValueError, match="unknown search backend"):
        make_backend("bing")
    with pytest.raises(ValueError):
        make_backend("local")


def _brute_force(store):
    """What the local backend must return: a function of (query, k) scoring every corpus page with
    a fresh ``bm25s`` index (``get_scores``, the whole corpus), sorted by score, ties by page key,
    positive scores only."""
    import bm25s

    pages = list(store.pages("corpus"))
    index = bm25s.BM25(k1=1.5, b=0.75)
    index.index(bm25s.tokenize([f"{p.title}\n{p.text}" for p in pages], stopwords="en", show_progress=False),
                show_progress=False)

    def ranking(query: str, k: int) -> list[tuple[str, float]]:
        q = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        ids = index.get_tokens_ids(q)
        scores = index.get_scores(ids) if ids else [0.0] * len(pages)
        brute = sorted(range(len(pages)), key=lambda i: (-float(scores[i]), pages[i].key))
        return [(pages[i].url, float(scores[i])) for i in brute[:k] if float(scores[i]) > 0.0]

    return ranking


@pytest.mark.parametrize("k", [1, 3, 7, 40])
def test_local_ranking_equals_a_full_sort_of_the_corpus_ties_included(k):
    from trek.pages import PageStore
    from trek.types import Document

    store = PageStore()
    words = ["harbour", "ferry", "timetable", "council", "bridge", "toll"]
    # repeated texts under different URLs give equal scores: ties are broken by the page key
    docs = [Document(id=f"d{i}", url=f"https://ex.example/{(i * 7) % 31}/{i}", title="",
                     text=" ".join(words[j % len(words)] for j in range(i % 4, i % 4 + 3)) + " news")
            for i in range(31)]
    store.add_documents(docs)
    backend, brute = LocalSearch(store), _brute_force(store)
    for query in ("harbour ferry", "toll bridge council", "timetable"):
        assert [(p.url, s) for p, s in backend.rank(query, k)] == brute(query, k)
        positive = [s for _, s in brute(query, 100)]
        assert len(set(positive)) < len(positive)  # the corpus holds ties for every query


@pytest.mark.parametrize("seed", range(6))
def test_local_ranking_equals_full_scoring_on_random_corpora(seed):
    """Scoring only the pages that hold a query token gives exactly the ranking (pages, order,
    float scores) of scoring every page: random texts over a small vocabulary (many ties, pages
    without any query token), queries with repeated, unknown and stop words, titles, several k."""
    import random

    from trek.pages import PageStore
    from trek.types import Document

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(rng.randint(5, 40))]
    store = PageStore()
    texts = [" ".join(rng.choices(vocab, k=rng.randint(1, 12))) for _ in range(rng.randint(20, 60))]
    docs = [Document(id=f"d{i}", url=f"https://r{seed}.example/{rng.randrange(10**6)}/{i}",
                     title=rng.choice(["", rng.choice(vocab)]), text=rng.choice(texts) if rng.random() < 0.4 else t)
            for i, t in enumerate(texts * 3)]
    store.add_documents(docs)
    backend, brute = LocalSearch(store), _brute_force(store)
    queries = [" ".join(rng.choices(vocab + ["the", "of", "unknownword"], k=rng.randint(1, 6))) for _ in range(25)]
    queries += ["the of and", "nothingmatches", f"{vocab[0]} {vocab[0]} {vocab[0]}"]
    for query in queries:
        for k in (1, 2, 5, 1000):
            assert [(p.url, s) for p, s in backend.rank(query, k)] == brute(query, k), (query, k)


def test_local_search_returns_the_stored_pages_and_follows_corpus_changes():
    from trek.pages import PageStore
    from trek.types import Document

    store = PageStore()
    store.add_documents([Document(id="a", url="https://a.example/x", title="Ferry", text="ferry timetable", date="2024-05-01"),
                         Document(id="b", url="https://b.example/y", title="Toll", text="bridge toll")])
    backend = LocalSearch(store)
    (page, score), = backend.rank("ferry", 5)
    assert (page.url, page.title, page.text, page.date, page.source) == ("https://a.example/x", "Ferry",
                                                                          "ferry timetable", "2024-05-01", "corpus")
    assert score > 0
    store.add_documents([Document(id="c", url="https://c.example/z", title="", text="ferry ferry ferry")])
    assert [p.url for p, _ in backend.rank("ferry", 5)] == ["https://c.example/z", "https://a.example/x"]
