"""Rate-limit pacing: header parsing, the pacer's arithmetic, and a paced run against the fake
server's request limit (counts of 429s from ``/_stats``; no timed assertions)."""

import json
import urllib.request

import pytest

from trek.limits import RatePacer, StartLimits, format_reset, parse_reset
from trek.llm import ChatRequest, LLMClient
from trek.testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5", 0.5), ("7.66s", 7.66),
     ("250us", 0.00025), (None, None), ("", None), ("soon", None), ("5x", None), ("-1", None)],
)
def test_parse_reset(text, seconds):
    got = parse_reset(text)
    assert got == pytest.approx(seconds) if seconds is not None else got is None


@pytest.mark.parametrize("seconds", [0.0, 0.0205, 0.999, 1.0, 1.25, 59.5, 360.0, 3723.5])
def test_format_reset_round_trips(seconds):
    assert parse_reset(format_reset(seconds)) == pytest.approx(seconds, abs=1e-4)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


H = {"x-ratelimit-limit-requests": "10"}


def _hdr(remaining, reset):
    return {**H, "x-ratelimit-remaining-requests": str(remaining), "x-ratelimit-reset-requests": reset}


def test_pacer_spreads_requests_at_the_refill_rate():
    clock = Clock()
    p = RatePacer(clock)
    assert p.reserve() == 0.0 and p.pace() == ""  # no headers: no pacing
    first = p.send()
    # limit 10, "2" left (really 2 to 3), full again in 0.75 s: the rate is within
    # [7 / 0.75, 8 / 0.75] = [9.33, 10.67], taken as the middle, 10 per second
    p.observe(_hdr(2, "750ms"), first)
    assert p.requests.rate == pytest.approx(10.0)
    waits = [p.reserve() for _ in range(5)]
    # two fit now, then one every 0.1 s
    assert waits == pytest.approx([0.0, 0.0, 0.1, 0.2, 0.3])
    assert p.pace() == "pace=10 req/s"
    # half a second later all five are sent; the reply to the second of them says 3 are left:
    # it counts the three sent up to it, the other three are still to subtract
    clock.t += 0.5
    tickets = [p.send() for _ in range(5)]
    p.observe(_hdr(3, "650ms"), tickets[1])  # bounds [9.23, 10.77]: the rate stays 10
    assert p.requests.rate == pytest.approx(10.0)
    assert p.requests.available(clock.t) == pytest.approx(3 - 3)
    assert p.reserve() == pytest.approx(0.1)


def test_replies_out_of_order_and_sends_out_of_order():
    clock = Clock()
    p = RatePacer(clock)
    for _ in range(4):
        p.reserve()
    t = [p.send() for _ in range(4)]
    p.observe(_hdr(2, "800ms"), t[3])
    assert p.requests.available(clock.t) == pytest.approx(2)
    # a reply to an earlier request arrives late, saying 5 were left then: 3 sent after it
    p.observe(_hdr(5, "500ms"), t[0])
    assert p.requests.available(clock.t) == pytest.approx(2)
    # reserved A then B, but B goes out first: B's reply has not counted A
    p.reserve()
    p.reserve()
    b = p.send()
    p.observe(_hdr(1, "900ms"), b)
    assert p.requests.available(clock.t) == pytest.approx(1 - 1)


def test_a_429_did_not_count_its_own_request():
    clock = Clock()
    p = RatePacer(clock)
    for _ in range(3):
        p.reserve()
    t = [p.send() for _ in range(3)]
    p.observe(_hdr(0, "1s"), t[2], counted=False)
    assert p.requests.available(clock.t) == pytest.approx(-1)  # the third is to be sent again
    p.observe(_hdr(0, "1s"), t[2])
    assert p.requests.available(clock.t) == pytest.approx(0)


def test_pacer_without_a_limit_header_waits_for_the_reset():
    clock = Clock()
    p = RatePacer(clock)
    p.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"})
    assert p.reserve() == pytest.approx(1.5)


def test_pacer_tokens_bucket():
    clock = Clock()
    p = RatePacer(clock)
    # 100 of 1000 left, full in 9 s: the rate is within [899 / 9, 900 / 9] = [99.89, 100]
    p.observe({"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "100",
               "x-ratelimit-reset-tokens": "9s"})
    assert p.tokens.rate == pytest.approx(99.94, abs=0.01)
    assert p.reserve(80) == 0.0
    assert p.reserve(70) == pytest.approx(50 / p.tokens.rate)


def test_fake_server_sends_rate_limit_headers_and_429s_beyond_the_limit():
    with FakeOpenAIServer(rate_limit=(3, 60.0)) as srv:
        statuses, headers = [], []
        for i in range(4):
            req = urllib.request.Request(
                srv.base_url + "/chat/completions",
                data=json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}).encode(),
                headers={"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(req) as r:
                    statuses.append(r.status)
                    headers.append(dict(r.headers))
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
                headers.append(dict(e.headers))
        assert statuses == [200, 200, 200, 429]
        assert [h["x-ratelimit-remaining-requests"] for h in headers] == ["2", "1", "0", "0"]
        assert headers[0]["x-ratelimit-limit-requests"] == "3"
        assert 19.0 < parse_reset(headers[0]["x-ratelimit-reset-requests"]) <= 20.0  # one request = 20 s
        assert int(headers[3]["Retry-After"]) >= 1
        assert srv.stats()["rate_limited"] == 1
        assert srv.stats()["admitted"] == {"requests": 3} and srv.stats()["admitted_span_s"] >= 0


def _run(srv, n, tmp_path, max_connections=8):
    client = LLMClient("gpt-4o-mini", base_url=srv.base_url, api_key="sk-test", max_connections=max_connections,
                       cache=tmp_path / "c.sqlite", progress=False, max_retries=8, backoff_base=0.05)
    res = client.map([ChatRequest(messages=[{"role": "user", "content": f"paced {i}"}]) for i in range(n)])
    return client, res


@pytest.mark.slow
def test_paced_run_gets_no_429s(tmp_path):
    # 10 requests per 0.5 s (20/s), 40 requests from 8 connections: unpaced, most would be 429s.
    with FakeOpenAIServer(rate_limit=(10, 0.5), latency=0.01) as srv:
        client, res = _run(srv, 40, tmp_path)
        stats = srv.stats()
    assert all(r.ok for r in res)
    assert stats["rate_limited"] <= 2  # at most the first burst, before any header arrived
    assert sum(stats["ok_by_key"].values()) == 40
    assert client.limits.pacer(client.base_url).paced > 0  # it did slow down


@pytest.mark.slow
def test_unpaced_client_would_hit_the_limit(tmp_path, monkeypatch):
    # The same run with the pacer switched off: the limit is real and the pacing is what avoids it.
    monkeypatch.setattr(RatePacer, "reserve", lambda self, tokens=0.0: 0.0)
    with FakeOpenAIServer(rate_limit=(10, 0.5), latency=0.01) as srv:
        _, res = _run(srv, 40, tmp_path)
        stats = srv.stats()
    assert all(r.ok for r in res)
    assert stats["rate_limited"] > 5


def _token_run(srv, n, tmp_path, **kw):
    client = LLMClient("gpt-4o-mini", base_url=srv.base_url, api_key="sk-test", max_connections=16,
                       cache=tmp_path / "t.sqlite", progress=False, max_retries=8, backoff_base=0.05, **kw)
    # ~100 tokens each as the server counts them (2 words + max_tokens): 20 fit in one bucket
    res = client.map([ChatRequest(messages=[{"role": "user", "content": f"tokens {i}"}], params={"max_tokens": 98})
                      for i in range(n)])
    return client, res


def test_token_limit_is_paced_from_a_cold_start(tmp_path):
    # 2,000 tokens refilling every 0.25 s (8,000 tokens/s); 160 requests of 100 tokens from 16
    # connections, starting cold: the requests queued behind the first 16 reserve their tokens
    # when they are sent, so only the first burst can meet the limit unannounced.
    with FakeOpenAIServer(token_limit=(2000, 0.25), latency=0.02) as srv:
        client, res = _token_run(srv, 160, tmp_path)
        stats = srv.stats()
    assert all(r.ok for r in res)
    assert sum(stats["ok_by_key"].values()) == 160
    assert stats["rate_limited"] <= 1  # <= 1 % of 160: none past the first reply
    pacer = client.limits.pacer(client.base_url)
    assert pacer.paced > 0  # it did slow down
    assert pacer.tokens.sent >= 160 * 100  # every request sent counted its tokens (the estimate is >= the server's count)
    # a pacer that stalls plans a wait longer than the limit needs: at most 16 requests (~110
    # tokens each, as the client estimates) reserved ahead of one, plus a full bucket, at 8,000
    # tokens/s is under 0.5 s. The planned waits follow from the server's headers, not from how
    # fast this machine is; the throughput itself is a benchmark (benchmarks/paced_run.py
    # --token-limit), since under load the client cannot keep up with any rate
    assert 0 < pacer.longest_wait <= 1.0, pacer.longest_wait
    # the rate the server let through, on its own clock, beyond the first full bucket
    rate = (stats["admitted"]["tokens"] - 2000) / stats["admitted_span_s"]
    assert rate <= 1.05 * 8000


def test_start_limits_pace_the_first_burst_until_a_reply_tells_the_real_ones():
    clock = Clock()
    p = RatePacer(clock, start=StartLimits(tokens=600, window_s=60))  # 600 a minute: 10 tokens/s
    assert p.assuming and p.limited
    assert [p.reserve(250), p.reserve(250)] == [0.0, 0.0]  # a full bucket at the start
    assert p.reserve(250) == pytest.approx(15.0)  # 100 left, 150 short at 10 tokens/s
    assert p.reserve(10_000) == pytest.approx((600 + 150) / 10)  # larger than the bucket: waits for a full one
    basis = p.basis
    p.observe({"x-ratelimit-limit-tokens": "100000", "x-ratelimit-remaining-tokens": "99000",
               "x-ratelimit-reset-tokens": "600ms"}, (1.0, 250.0, 250.0))
    assert not p.assuming and p.basis == basis + 1 and p.tokens.limit == 100000


def test_a_reply_without_headers_ends_the_start_limits():
    clock = Clock()
    p = RatePacer(clock, start=StartLimits(requests=2, tokens=100))
    p.reserve(80)
    t = p.send(80)
    assert p.reserve(80) > 0
    p.observe({"content-type": "application/json"}, t)  # a server that says nothing of its limits
    assert not p.assuming and not p.limited
    assert p.reserve(10_000) == 0.0


def test_a_wait_planned_on_an_assumed_limit_is_planned_again_when_a_reply_arrives():
    import asyncio

    async def go():
        p = RatePacer(start=StartLimits(tokens=100, window_s=600))  # 1 token every 6 s
        first = await p.acquire(100)
        waiter = asyncio.create_task(p.acquire(100))  # would wait ~600 s on the assumption
        await asyncio.sleep(0.1)
        assert not waiter.done()
        p.observe({"x-ratelimit-limit-tokens": "1000000", "x-ratelimit-remaining-tokens": "999900",
                   "x-ratelimit-reset-tokens": "6ms"}, first)
        await asyncio.wait_for(waiter, 5)  # released by the real limit, not after the assumed wait
        return p

    p = asyncio.run(go())
    assert p.tokens.sent == 200


@pytest.mark.slow
def test_start_limits_keep_a_first_burst_wider_than_the_limit_from_429s(tmp_path):
    # 1,000 tokens per 0.25 s: the first 16 requests of ~100 tokens do not fit. Told to start
    # from a limit no larger than the real one, the client sends only what fits until the first
    # reply; assuming nothing, the first burst meets 429s (retried). (A server starved of CPU
    # can count a paced burst late, hence the margin of 2.)
    limited = {}
    for start in (StartLimits(tokens=1000, window_s=0.25), None):
        with FakeOpenAIServer(token_limit=(1000, 0.25), latency=0.02) as srv:
            client, res = _token_run(srv, 64, tmp_path / str(start is None), start_limits=start)
            limited[start is None] = srv.stats()["rate_limited"]
        assert all(r.ok for r in res)
    assert limited[False] <= 2 and limited[True] >= 4
