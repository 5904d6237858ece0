"""Secrets inside a base URL (``user:token@host``, ``?key=``) reach the endpoint and nothing else:
not ``run.json``, the cache key, a log line or an error message."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.llm.client import LLMClient, endpoint_identity, url_secrets
from trek.testing.fake_openai import FakeOpenAIServer

TOKEN, QKEY = "tok-SECRET-4242", "qk-SECRET-7777"


def with_secrets(url: str) -> str:
    return url.replace("http://", f"http://alice:{TOKEN}@") + f"?api-version=2024-06-01&key={QKEY}"


@pytest.mark.parametrize("url, shown", [
    ("https://alice:pw-123456@api.example.com/v1", "https://api.example.com/v1"),
    ("https://api.example.com/v1?key=abc123", "https://api.example.com/v1?key=***"),
    ("https://h.example/v1?api-version=2024-06-01&access_token=zz99zz", "https://h.example/v1?api-version=2024-06-01&access_token=***"),
    ("https://h.example/v1?sig=s1gn4ture&x=1", "https://h.example/v1?sig=***&x=1"),
    ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1"),  # nothing to hide: unchanged
])
def test_endpoint_identity_drops_credentials(url, shown):
    assert endpoint_identity(url) == shown
    assert endpoint_identity(shown) == shown  # the identity of an identity is itself (cache keys agree)
    for secret in url_secrets(url):
        assert secret not in endpoint_identity(url)


def every_byte(folder: Path) -> bytes:
    out = b""
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            out += p.read_bytes()
            if p.suffix == ".sqlite":
                con = sqlite3.connect(p)
                for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                    out += repr(con.execute(f"SELECT * FROM {table}").fetchall()).encode()
                con.close()
    return out


def test_a_run_keeps_no_secret_of_its_base_url(tmp_path, monkeypatch):
    for var in ("TREK_CACHE", "TREK_SEARCH_CACHE", "TREK_PAGES", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    run = tmp_path / "run"
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["wild", "run", "--model", "m", "--base-url", with_secrets(srv.base_url), "--run",
                                     str(run), "--questions", "mini", "--search", "none", "--limit", "2",
                                     "--no-progress"])
        assert r.exit_code == 0, r.output
        assert srv.stats()["requests"] == 2  # the URL with its credentials reached the endpoint
    meta = (run / "run.json").read_text()
    assert "api-version=2024-06-01&key=***" in meta
    stored = every_byte(run)
    for secret in (TOKEN, QKEY):
        assert secret.encode() not in stored and secret not in r.output


def test_errors_name_the_endpoint_without_its_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key")
    with FakeOpenAIServer(require_key="right") as srv:
        r = CliRunner().invoke(app, ["llm", "run", str(_requests(tmp_path)), "--out", str(tmp_path / "o.jsonl"),
                                     "--model", "m", "--base-url", with_secrets(srv.base_url), "--no-progress"])
    assert r.exit_code == 2 and "401 from" in r.output, r.output
    assert TOKEN not in r.output and QKEY not in r.output and "key=***" in " ".join(r.output.split())
    from trek.errors import FatalLLMError

    client = LLMClient("m", base_url=with_secrets("http://127.0.0.1:9/v1"), max_retries=0, progress=False,
                       unreachable_after=0.01)
    with pytest.raises(FatalLLMError) as e:  # nothing listens there: the connection error names the endpoint
        client.chat([{"role": "user", "content": "hi"}])
    assert "127.0.0.1:9" in str(e.value) and TOKEN not in str(e.value) and QKEY not in str(e.value)
    assert TOKEN not in repr(client) and QKEY not in repr(client)


def _requests(tmp_path: Path) -> Path:
    p = tmp_path / "req.jsonl"
    p.write_text('{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n')
    return p


def test_the_rerank_scorer_shows_no_secret():
    from trek.rag.rerank import HTTPScorer

    s = HTTPScorer("r", with_secrets("http://127.0.0.1:9/v1"))
    assert TOKEN not in s.name and QKEY not in s.name and TOKEN not in s.base_url


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_url_credentials_go_as_basic_auth_on_either_transport(transport):
    """``user:token@`` in the base URL reaches the endpoint as HTTP Basic auth (what httpx makes of
    it), on aiohttp too, which refuses credentials in a URL beside an Authorization header."""
    import base64

    from _servers import LoopbackApp
    from aiohttp import web

    seen: list[tuple[str, str]] = []

    async def chat(request):
        seen.append((request.headers.get("Authorization", ""), request.query_string))
        return web.json_response({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "ok"}}]})

    with LoopbackApp({"/v1/chat/completions": chat}) as srv:
        c = LLMClient("m", base_url=with_secrets(srv.base_url), api_key="k", progress=False, transport=transport)
        assert c.chat([{"role": "user", "content": "hi"}]).ok
    assert seen == [("Basic " + base64.b64encode(f"alice:{TOKEN}".encode()).decode(), f"api-version=2024-06-01&key={QKEY}")]
