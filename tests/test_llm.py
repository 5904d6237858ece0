"""The LLM layer against the fake OpenAI-compatible server (real HTTP on loopback)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import sqlite3
import time

import pytest
from aiohttp import web

from trek.llm import (
    ChatRequest,
    EndpointLimits,
    FatalLLMError,
    LLMCache,
    LLMClient,
    PriceTable,
    chat_json,
    parse_json_lenient,
    request_key,
)
from trek.llm.usage import Price
from trek.retry import retry_after
from trek.testing.fake_openai import FakeOpenAIServer

MSG = [{"role": "user", "content": "What is the capital of Atlantis?"}]


def client_for(srv, tmp_path, **kw):
    kw.setdefault("cache", LLMCache(tmp_path / "cache.sqlite"))
    kw.setdefault("progress", False)
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_cap", 0.2)
    return LLMClient("fake-model", base_url=srv.base_url, api_key="sk-test-key", **kw)


@pytest.fixture
def srv():
    with FakeOpenAIServer() as s:
        yield s


# -- cache key ------------------------------------------------------------------------------
def test_cache_key_ignores_transport_settings(tmp_path):
    a = LLMClient("m", base_url="http://h/v1", api_key="k1", timeout=5, max_retries=1, max_connections=2)
    b = LLMClient("m", base_url="http://h/v1/", api_key="k2", timeout=50, max_retries=9, max_connections=64)
    body = {"model": "m", "messages": MSG, "temperature": 0}
    assert request_key(a.cache_request("chat", body, 0)) == request_key(b.cache_request("chat", body, 0))
    # ...but anything that changes the output changes the key
    keys = {
        request_key(a.cache_request("chat", body, 0)),
        request_key(a.cache_request("chat", body, 1)),
        request_key(a.cache_request("chat", {**body, "temperature": 1}, 0)),
        request_key(a.cache_request("chat", {**body, "model": "m2"}, 0)),
        request_key(a.cache_request("chat", {**body, "tools": [{"type": "function"}]}, 0)),
        request_key(LLMClient("m", base_url="http://other/v1").cache_request("chat", body, 0)),
    }
    assert len(keys) == 6
    assert "k1" not in json.dumps(a.cache_request("chat", body, 0))


def test_second_identical_run_makes_no_http_request(srv, tmp_path):
    reqs = [ChatRequest(messages=[{"role": "user", "content": f"q{i}"}]) for i in range(20)]
    c1 = client_for(srv, tmp_path)
    first = c1.map(reqs)
    n_after_first = srv.stats()["requests"]
    assert n_after_first == 20 and all(r.ok and not r.cached for r in first)
    c2 = client_for(srv, tmp_path, cache=LLMCache(tmp_path / "cache.sqlite"))
    second = c2.map(reqs)
    assert srv.stats()["requests"] == n_after_first
    assert all(r.cached for r in second)
    assert [r.content for r in first] == [r.content for r in second]
    assert c2.http_calls == 0 and c2.cache_hits == 20


def test_identical_concurrent_requests_are_sent_once(srv, tmp_path):
    c = client_for(srv, tmp_path)
    res = c.map([ChatRequest(messages=MSG) for _ in range(8)])
    assert srv.stats()["requests"] == 1
    assert len({r.content for r in res}) == 1 and sum(not r.cached for r in res) == 1


def test_a_reply_is_committed_before_it_is_used(srv, tmp_path):
    # the writer thread groups commits; a reply still reaches its caller only once another
    # connection (another process, or this one after kill -9) can read it from the file
    path = tmp_path / "cache.sqlite"
    c = client_for(srv, tmp_path, cache=LLMCache(path), max_connections=16)
    unseen = []

    def check(i, res):
        conn = sqlite3.connect(path)
        if conn.execute("SELECT 1 FROM responses WHERE key = ?", (res.key,)).fetchone() is None:
            unseen.append(i)
        conn.close()

    res = asyncio.run(c.amap([ChatRequest(messages=[{"role": "user", "content": f"d{i}"}]) for i in range(48)],
                             on_result=check))
    assert all(r.ok and not r.cached for r in res) and unseen == []
    c.cache.close()


_KILLED_RUN = """
import sys
from trek.llm import ChatRequest, LLMCache, LLMClient
c = LLMClient("fake-model", base_url=sys.argv[1], api_key="k", max_connections=8, progress=False,
              cache=LLMCache(sys.argv[2]))
def shown(i, res):
    print(res.key, flush=True)
c.map([ChatRequest(messages=[{"role": "user", "content": f"k{i}"}]) for i in range(400)], on_result=shown)
"""


@pytest.mark.slow
def test_kill_9_never_loses_a_reply_that_was_used(tmp_path):
    import signal
    import subprocess
    import sys

    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer(latency=0.01) as s:
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, s.base_url, str(path)],
                                stdout=subprocess.PIPE, text=True)
        used = [proc.stdout.readline().strip() for _ in range(60)]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        answered = sum(s.stats()["ok_by_key"].values())
    assert answered < 400, "the kill should land before the end"
    conn = sqlite3.connect(path)
    stored = {k for (k,) in conn.execute("SELECT key FROM responses")}
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert set(used) <= stored  # every reply the run had used is in the file


def _writer(path: str, start: int, n: int) -> None:
    cache = LLMCache(path)
    for i in range(start, start + n):
        req = {"endpoint": "e", "api": "chat", "body": {"i": i}, "sample": 0}
        cache.store(request_key(req), req, {"choices": [{"message": {"content": str(i)}}]})
    cache.close()


@pytest.mark.slow
def test_concurrent_writer_processes_do_not_corrupt(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    LLMCache(path).close()
    # fork: the writers start at once (spawn would re-import the test module and openai in each)
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    procs = [ctx.Process(target=_writer, args=(path, k * 150, 300)) for k in range(4)]  # overlapping ranges
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = LLMCache(path)
    assert len(cache) == 750  # 0..749, duplicates ignored
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    req = {"endpoint": "e", "api": "chat", "body": {"i": 700}, "sample": 0}
    assert cache.lookup(request_key(req))["choices"][0]["message"]["content"] == "700"


# -- retries, pending, fatal ----------------------------------------------------------------
@pytest.mark.slow
def test_faults_are_retried_and_answers_match_fault_free_run(tmp_path):
    # every fault kind: 429 (Retry-After), 500, stalls past the client timeout, truncated bodies
    reqs = [ChatRequest(messages=[{"role": "user", "content": f"question {i}"}]) for i in range(160)]
    with FakeOpenAIServer() as clean:
        ref = client_for(clean, tmp_path, cache=None, max_connections=32).map(reqs)
    with FakeOpenAIServer(fault_rate=0.2, seed=7, stall_seconds=4.0, retry_after=0.05) as faulty:
        c = client_for(faulty, tmp_path, cache=LLMCache(tmp_path / "f.sqlite"), max_connections=32, timeout=3.0, max_retries=8)
        got = c.map(reqs)
        stats = faulty.stats()
    assert all(r.ok for r in got)
    assert [r.content for r in got] == [r.content for r in ref]
    assert sum(stats["faults"].values()) > 20 and all(stats["faults"].values())  # every kind happened
    assert all(v == 1 for v in stats["ok_by_key"].values())  # no request answered twice


async def _serve_chat(handler):
    """Serve ``POST /v1/chat/completions`` with ``handler`` on loopback: (runner, base URL)."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"


async def _flaky_app(fail_times: int, status: int, retry_after: str | None):
    state = {"n": 0}

    async def handler(request):
        state["n"] += 1
        if state["n"] <= fail_times:
            headers = {"Retry-After": retry_after} if retry_after else {}
            return web.json_response({"error": {"message": "slow down", "type": "x"}}, status=status, headers=headers)
        body = await request.json()
        return web.json_response({
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        })

    runner, url = await _serve_chat(handler)
    return runner, url, state


def test_retry_after_is_honoured(tmp_path):
    async def go():
        runner, url, state = await _flaky_app(1, 429, "0.25")
        try:
            c = LLMClient("m", base_url=url, api_key="k", backoff_base=0.001, backoff_cap=5, progress=False)
            t0 = time.monotonic()
            res = await c.achat(MSG)
            await c.aclose()
            return res, time.monotonic() - t0, state["n"]
        finally:
            await runner.cleanup()

    res, elapsed, n = asyncio.run(go())
    assert res.ok and res.content == "fine" and n == 2
    assert elapsed >= 0.25  # the backoff alone would wait a millisecond


def test_retry_after_parsing():
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({}) is None
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0


def test_persistent_failure_is_pending_not_an_answer(tmp_path):
    async def go():
        runner, url, state = await _flaky_app(100, 503, None)
        try:
            cache = LLMCache(tmp_path / "c.sqlite")
            c = LLMClient("m", base_url=url, api_key="k", max_retries=2, backoff_base=0.001, cache=cache, progress=False)
            r1 = await c.achat(MSG)
            n1 = state["n"]
            r2 = await c.achat(MSG)  # not cached: retried on the next run
            await c.aclose()
            return r1, r2, n1, state["n"], len(cache)
        finally:
            await runner.cleanup()

    r1, r2, n1, n2, cached = asyncio.run(go())
    assert r1.status == "pending" and r1.content is None and "503" in r1.error
    assert n1 == 3 and n2 == 6 and cached == 0
    assert r2.status == "pending"


def test_unfixable_4xx_fails_fast_without_leaking_key(tmp_path):
    secret = "sk-very-secret-123456"
    with FakeOpenAIServer(require_key="sk-the-right-one") as s:
        c = LLMClient("m", base_url=s.base_url, api_key=secret, progress=False, backoff_base=0.001)
        with pytest.raises(FatalLLMError) as e:
            c.chat(MSG)
        assert s.stats()["requests"] == 1  # no retry
    assert "401" in str(e.value) and secret not in str(e.value)
    assert secret not in repr(c)


# -- usage, cost, budget ----------------------------------------------------------------------
def test_usage_and_cost(srv, tmp_path):
    prices = PriceTable({"fake-model": Price(input=2.0, output=10.0, cached_input=1.0)})
    c = client_for(srv, tmp_path, prices=prices)
    r = c.chat(MSG)
    u = r.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0 and u.calls == 1
    assert u.cost_usd == pytest.approx((u.prompt_tokens * 2.0 + u.completion_tokens * 10.0) / 1e6)
    unknown = client_for(srv, tmp_path, prices=PriceTable({}))
    assert unknown.chat([{"role": "user", "content": "other"}]).usage.cost_usd is None


def test_price_table_prefix_and_user_file(tmp_path, monkeypatch):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"my-model": {"input": 1, "output": 3}}))
    monkeypatch.setenv("TREK_PRICES", str(f))
    t = PriceTable.load()
    assert t.get("my-model").output == 3.0
    assert t.get("gpt-4o-2024-08-06") is t.get("gpt-4o")
    assert t.get("gpt-4o-mini-2024") is t.get("gpt-4o-mini")
    f.write_text(json.dumps({"bad": {"input": "x", "output": 1}}))
    with pytest.raises(ValueError, match="'bad'"):
        PriceTable.load()


def test_budget_stops_new_calls(srv, tmp_path):
    # a real call costs a few dollars at these prices; its worst case (o200k prompt tokens x 1.25 for a
    # model with another tokenizer, plus max_tokens) ~ $13
    prices = PriceTable({"fake-model": Price(input=1e6, output=1e6)})
    c = client_for(srv, tmp_path, prices=prices, budget_usd=20.0, max_connections=1)
    res = c.map([ChatRequest(messages=[{"role": "user", "content": f"q{i}"}], params={"max_tokens": 1}) for i in range(10)])
    ok = [r for r in res if r.ok]
    pending = [r for r in res if not r.ok]
    assert ok and pending
    assert all("budget" in r.error for r in pending)
    assert c.spent_usd <= 20.0
    assert srv.stats()["requests"] == len(ok)


# -- structured outputs -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,value",
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 2}\n```', {"a": 2}),
        ('Sure! Here it is: {"a": 3} Hope that helps.', {"a": 3}),
        ("[1, 2]", [1, 2]),
        ('thinking {not json} then {"ok": true}', {"ok": True}),
        # a raw line break inside a string (strict JSON refuses it, and the inner [] would be taken)
        ('{"wrong_answer": "Theo\n", "replacements": []}', {"wrong_answer": "Theo\n", "replacements": []}),
        # one valid object whose string quotes a fence (the fence alone would give the inner [])
        ('{"answer": "like this:\n```json\n{\n  " ,"urls":[],"why":"x&#34;}\n```\nok" }',
         {"answer": "like this:\n```json\n{\n  ", "urls": [], "why": "x&#34;}\n```\nok"}),
    ],
)
def test_parse_json_lenient(text, value):
    assert parse_json_lenient(text) == value


@pytest.mark.parametrize("text", ["", "no json here", "{broken", None])
def test_parse_json_lenient_fails_clearly(text):
    with pytest.raises(ValueError):
        parse_json_lenient(text)


def test_structured_reask_then_ok(tmp_path):
    script = [
        {"pattern": "Send the answer again", "reply": '{"verdict": "yes"}'},
        {"pattern": "Give JSON", "reply": "I think the verdict is yes."},
    ]
    with FakeOpenAIServer(script=script) as s:
        c = client_for(s, tmp_path)
        res = chat_json(c, [{"role": "user", "content": "Give JSON"}], max_reasks=2)
    assert res.status == "ok" and res.value == {"verdict": "yes"} and res.attempts == 2
    assert res.raw_texts[0] == "I think the verdict is yes."


def test_structured_unparsed_after_cap(tmp_path):
    with FakeOpenAIServer(script=[{"any_pattern": ".", "reply": "never any json"}]) as s:
        c = client_for(s, tmp_path)
        res = chat_json(c, MSG, max_reasks=2)
        assert s.stats()["requests"] == 3
    assert res.status == "unparsed" and res.value is None
    assert res.raw_texts == ["never any json"] * 3


def test_structured_validation_failure_reasks(tmp_path):
    def need_key(v):
        if "answer" not in v:
            raise ValueError("missing 'answer'")
        return v

    with FakeOpenAIServer(script=[{"any_pattern": ".", "reply": '{"other": 1}'}]) as s:
        res = chat_json(client_for(s, tmp_path), MSG, validate=need_key, max_reasks=1)
    assert res.status == "unparsed" and "answer" in res.error and res.attempts == 2


def test_spent_text_says_when_no_price_is_known(srv, tmp_path):
    unknown = client_for(srv, tmp_path, prices=PriceTable({}))
    unknown.chat([{"role": "user", "content": "priceless"}])
    assert unknown.unpriced_calls == 1 and unknown.spent_text().startswith("$- ")
    priced = client_for(srv, tmp_path, prices=PriceTable({"fake-model": Price(input=1.0, output=1.0)}), cache=None)
    priced.chat([{"role": "user", "content": "priced"}])
    assert priced.unpriced_calls == 0 and priced.spent_text() == f"${priced.spent_usd:.4f}"


async def _counting_app(latency: float):
    """A chat endpoint that records the most requests it ever had in flight at once."""
    state = {"now": 0, "max": 0}

    async def handler(request):
        body = await request.json()
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(latency)
        state["now"] -= 1
        return web.json_response({
            "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
        })

    runner, url = await _serve_chat(handler)
    return runner, url, state


@pytest.mark.parametrize("shared", [True, False])
def test_connection_limit_is_shared_by_clients_given_one_registry(shared):
    # 2 clients x 4 distinct requests, limit 2 each: one EndpointLimits keeps the endpoint at 2
    # in flight; without it each client has its own limit (4 in flight).
    async def go():
        runner, url, state = await _counting_app(0.1)
        try:
            limits = EndpointLimits() if shared else None
            a = LLMClient("m", base_url=url, api_key="k", max_connections=2, progress=False, limits=limits)
            b = LLMClient("judge", base_url=url, api_key="k", max_connections=2, progress=False, limits=limits)
            res = await asyncio.gather(
                *[a.achat([{"role": "user", "content": f"a{i}"}]) for i in range(4)],
                *[b.achat([{"role": "user", "content": f"b{i}"}]) for i in range(4)],
            )
            await a.aclose()
            await b.aclose()
            return res, state["max"]
        finally:
            await runner.cleanup()

    res, most = asyncio.run(go())
    assert all(r.ok for r in res)
    assert most == (2 if shared else 4)


def test_a_registry_serves_successive_event_loops():
    limits = EndpointLimits()
    with FakeOpenAIServer() as s:
        c = LLMClient("m", base_url=s.base_url, api_key="k", max_connections=1, progress=False, limits=limits)
        for i in range(2):  # each map() runs in a fresh event loop
            assert all(r.ok for r in c.map([ChatRequest(messages=[{"role": "user", "content": f"{i}{j}"}]) for j in range(3)]))


# -- replies that are not answers, rejected parameters, transports ----------------------------
@pytest.mark.parametrize("choices,error", [
    ([], "no choices"),  # a 200 without choices
    ([{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": None}}], "no text"),
], ids=["no-choices", "null-text-without-tool-call"])
def test_a_200_that_is_not_an_answer_is_pending_and_not_cached(tmp_path, choices, error):
    async def go():
        async def handler(request):
            state["n"] += 1
            return web.json_response({"id": "c", "object": "chat.completion", "choices": choices})

        state = {"n": 0}
        runner, url = await _serve_chat(handler)
        try:
            cache = LLMCache(tmp_path / "c.sqlite")
            c = LLMClient("m", base_url=url, api_key="k", max_retries=1, backoff_base=0.001, cache=cache, progress=False)
            res = await c.achat(MSG)
            await c.aclose()
            return res, state["n"], len(cache)
        finally:
            await runner.cleanup()

    res, n, cached = asyncio.run(go())
    assert res.status == "pending" and error in res.error and res.content is None
    assert n == 2 and cached == 0  # retried once, never stored


def test_rejected_parameter_keeps_status_and_api_message(tmp_path):
    secret = "sk-secret-abcdef123456"
    msg = f"Unsupported value: 'temperature' does not support 0 with this model (key {secret})."
    script = [{"any_pattern": ".", "error": {"status": 400, "message": msg, "param": "temperature",
                                             "code": "unsupported_value"}}]
    with FakeOpenAIServer(script=script) as s:
        c = LLMClient("reasoner", base_url=s.base_url, api_key=secret, progress=False)
        with pytest.raises(FatalLLMError) as e:
            c.chat(MSG, temperature=0)
        assert s.stats()["requests"] == 1
    err = e.value
    assert err.status_code == 400 and err.param == "temperature"
    assert err.api_message.startswith("Unsupported value: 'temperature'") and secret not in err.api_message
    assert secret not in str(err) and "does not accept this parameter" in str(err)


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
def test_refused_connection_says_refused(transport):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    c = LLMClient("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0, progress=False,
                  transport=transport)
    with pytest.raises(FatalLLMError) as err:  # an endpoint that never answered stops the run
        c.chat(MSG)
    assert "refused" in str(err.value) and "timed out" not in str(err.value)


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
def test_transport_is_explicit(srv, transport, monkeypatch):
    monkeypatch.delenv("TREK_HTTP_TRANSPORT", raising=False)
    c = LLMClient("m", base_url=srv.base_url, api_key="k", progress=False, transport=transport)
    assert c.transport == transport and c.chat(MSG).ok
    monkeypatch.setenv("TREK_HTTP_TRANSPORT", transport)
    assert LLMClient("m").transport == transport


@pytest.mark.parametrize("env, expected", [(None, "aiohttp"), ("httpx", "httpx"), ("aiohttp", "aiohttp")])
def test_default_transport_is_aiohttp_and_httpx_the_fallback(srv, env, expected, monkeypatch):
    """A client that names no transport uses the SDK's aiohttp client; TREK_HTTP_TRANSPORT=httpx
    falls back to the SDK's own httpx client. The HTTP client actually handed to the SDK is checked."""
    import asyncio

    if env is None:
        monkeypatch.delenv("TREK_HTTP_TRANSPORT", raising=False)
    else:
        monkeypatch.setenv("TREK_HTTP_TRANSPORT", env)
    c = LLMClient("m", base_url=srv.base_url, api_key="k", progress=False)
    assert c.transport == expected

    async def go():
        res = await c.achat(MSG)
        http = c._state().sdks[0]._client
        await c.aclose()
        return res, http

    res, http = asyncio.run(go())
    assert res.ok
    import openai

    assert isinstance(http, openai.DefaultAioHttpClient) == (expected == "aiohttp"), type(http).__mro__


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="transport"):
        LLMClient("m", transport="curl")
    for budget in (float("nan"), -1.0):
        with pytest.raises(ValueError, match="budget"):
            LLMClient("m", budget_usd=budget)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_an_endpoint_that_never_answered_stops_the_call_soon_naming_its_role():
    import time

    from trek.errors import FatalLLMError, is_run_fatal

    client = LLMClient("m", base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_retries=6, progress=False,
                       unreachable_after=0.2, role="judge")
    start = time.monotonic()
    with pytest.raises(FatalLLMError, match=r"cannot reach the judge's endpoint http://127\.0\.0\.1:\d+/v1") as err:
        client.chat([{"role": "user", "content": "hi"}])
    assert time.monotonic() - start < 10  # six retries with backoff would take far longer
    assert is_run_fatal(err.value) and "--judge-base-url" in str(err.value)


@pytest.mark.parametrize(("role", "named"), [("evaluated", "the evaluated model's endpoint"),
                                             ("diagnostic-judge", "the diagnostic judge's endpoint")])
def test_an_unreachable_endpoint_names_its_role_in_words(role, named):
    from trek.errors import FatalLLMError

    client = LLMClient("m", base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_retries=6, progress=False,
                       unreachable_after=0.2, role=role)
    with pytest.raises(FatalLLMError, match=f"cannot reach {named} http"):
        client.chat([{"role": "user", "content": "hi"}])


def test_an_endpoint_that_answered_once_gets_the_usual_retries():
    from trek.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer() as srv:
        client = LLMClient("m", base_url=srv.base_url, max_retries=1, progress=False, unreachable_after=0.0,
                           backoff_base=0.01, backoff_cap=0.02)
        assert client.chat([{"role": "user", "content": "hi"}]).ok
        client.base_url = srv.base_url  # the same endpoint, now gone
    res = client.chat([{"role": "user", "content": "again"}])
    assert res.status == "pending" and "gave up after 2 attempts" in res.error


def test_replies_stored_in_one_pass_of_the_loop_reach_the_writer_in_one_hand_over(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    puts: list[int] = []

    async def main():
        await cache._astore("warm", "{}", {"n": -1})  # starts the writer thread
        real = cache._writer._queue

        class Counting:
            def put(self, item):
                puts.append(len(item) if item else 0)
                real.put(item)

            def __getattr__(self, name):
                return getattr(real, name)

        cache._writer._queue = Counting()
        await asyncio.gather(*(cache._astore(f"k{i}", "{}", {"n": i}) for i in range(100)))

    asyncio.run(main())
    assert puts == [100]  # one queue put (one wake of the writer) for the hundred replies
    assert [cache.lookup(f"k{i}") for i in (0, 99)] == [{"n": 0}, {"n": 99}]
    cache.close()
