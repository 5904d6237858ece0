"""Endpoint pools: one role served by several replicas (``--base-url URL1,URL2``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.llm import ChatRequest, LLMCache, LLMClient
from trek.llm.client import POOL_CACHE_ENDPOINT, split_base_urls
from trek.testing.fake_openai import FakeOpenAIServer

runner = CliRunner()


def refusing_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


def requests(n: int, tag: str = "q") -> list[ChatRequest]:
    return [ChatRequest([{"role": "user", "content": f"pool {tag} {i}"}]) for i in range(n)]


def pool_client(urls: list[str], tmp_path: Path, **kw) -> LLMClient:
    kw.setdefault("progress", False)
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_cap", 0.1)
    return LLMClient("fake-model", base_url=",".join(urls), api_key="sk-test", **kw)


@pytest.mark.slow
def test_requests_are_spread_over_the_replicas_by_load(tmp_path):
    with FakeOpenAIServer(latency=0.01) as a, FakeOpenAIServer(latency=0.01) as b:
        c = pool_client([a.base_url, b.base_url], tmp_path, max_connections=8)
        res = c.map(requests(400))
        assert all(r.ok for r in res)
        na, nb = a.stats()["requests"], b.stats()["requests"]
        assert na + nb == 400 and 100 <= na <= 300 and 100 <= nb <= 300
        assert [r["served"] for r in c.endpoint_report()] == [na, nb]


@pytest.mark.slow
def test_a_replica_that_refuses_connections_is_taken_out_and_the_others_serve(tmp_path):
    dead = refusing_url()
    with FakeOpenAIServer(latency=0.005) as a:
        c = pool_client([a.base_url, dead], tmp_path, max_connections=8)
        res = c.map(requests(400))
        assert [r.status for r in res] == ["ok"] * 400
        assert a.stats()["requests"] == 400
        good, bad = c.endpoint_report()
        assert good["served"] == 400 and bad["served"] == 0 and bad["taken_out"] >= 1
        assert "taken out" in c.endpoint_summary() and dead in c.endpoint_summary()


def test_a_replica_failing_in_a_row_is_taken_out(tmp_path):
    with FakeOpenAIServer() as a, FakeOpenAIServer(fault_rate=1.0, fault_types=["500"]) as broken:
        c = pool_client([broken.base_url, a.base_url], tmp_path, max_connections=1, pool_failures=2,
                        pool_cooldown=60.0)
        res = c.map(requests(20))
        assert all(r.ok for r in res)
        bad = c.endpoint_report()[0]
        # taken out after two failures in a row, then out of service for the rest of the run
        assert bad["taken_out"] == 1 and bad["errors"] == 2 and broken.stats()["requests"] == 2


def test_replicas_share_cache_entries_whatever_their_urls(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b, FakeOpenAIServer() as c:
        first = pool_client([a.base_url, b.base_url], tmp_path, cache=LLMCache(cache))
        assert all(r.ok and not r.cached for r in first.map(requests(10)))
        second = pool_client([c.base_url, b.base_url], tmp_path, cache=LLMCache(cache))
        again = second.map(requests(10))
        assert all(r.cached for r in again) and c.stats()["requests"] == 0
    body = {"model": "fake-model", "messages": []}
    assert first.cache_request("chat", body, 0)["endpoint"] == POOL_CACHE_ENDPOINT
    # one URL keeps its own identity in the key, as before pools existed
    assert LLMClient("m", base_url="http://h/v1").cache_request("chat", body, 0)["endpoint"] == "http://h/v1"


@pytest.mark.parametrize("given, problem", [("http://a/v1,,http://b/v1", "empty entry"),
                                             ("http://a/v1, http://a/v1/", "given twice")])
def test_bad_pools_are_refused_with_the_reason(given, problem):
    with pytest.raises(ValueError, match=problem):
        split_base_urls(given)


def test_the_pool_shows_without_its_credentials():
    c = LLMClient("m", base_url="http://u:s3cret-pw@a/v1,http://b/v1?api_key=zz-secret-1", api_key="k")
    assert "s3cret-pw" not in c.base_url + c.endpoint_summary() + repr(c)
    assert "zz-secret-1" not in c.base_url + c.endpoint_summary()
    assert c.base_url == "http://a/v1,http://b/v1?api_key=***"


@pytest.mark.slow
def test_trek_llm_run_over_a_pool_reports_each_replica(tmp_path):
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    req.write_text("".join(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"q {i}"}]}) + "\n"
                           for i in range(400)))
    dead = refusing_url()
    with FakeOpenAIServer(latency=0.002) as a:
        r = runner.invoke(app, ["llm", "run", str(req), "--out", str(out), "--base-url", f"{a.base_url},{dead}",
                                "--model", "fm", "--no-progress", "--max-connections", "16"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert a.stats()["requests"] == 400
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 400 and {x["status"] for x in rows} == {"ok"}
    flat = " ".join(r.output.split())  # the console wraps long lines
    assert "endpoint pool:" in flat and f"{dead}: 0 served" in flat and "taken out" in flat
