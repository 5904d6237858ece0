"""``trek wild run`` end to end, offline: the bundled demo benchmark, local BM25 search and the fake
OpenAI server scripted to call both tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.answering.runner import run_system
from trek.cli.run import app
from trek.datasets.mini import load as load_mini
from trek.llm import LLMCache, LLMClient
from trek.pages import PageStore
from trek.search.base import SearchBackend, TransientSearchError
from trek.search.local import LocalSearch
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Question, RunMeta, Trajectory, read_jsonl

API_KEY = "sk-test-secret-key-that-must-not-leak"
QUERY = "Harrowmere Rovers head coach"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "TREK_SEARCH_CACHE", "TREK_PAGES", "OPENAI_BASE_URL", "TREK_SEARCH_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)


@pytest.fixture(scope="module")
def mini():
    return load_mini()


def both_tools_script(url: str) -> list[dict]:
    return [
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": QUERY}}]},
        {"tool_results": 1, "tool_calls": [{"name": "open_url", "arguments": {"url": url}}]},
        {"tool_results": 2, "reply": "Dana Okafor"},
    ]


def invoke(*args: str):
    result = CliRunner().invoke(app, ["run", *args])
    return result


def test_cli_end_to_end_on_the_demo_benchmark(tmp_path, mini):
    gold = mini.questions[0].gold_urls[0]
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(script=both_tools_script(gold)) as srv:
        args = [
            "--model",
            "fake-model",
            "--base-url",
            srv.base_url,
            "--search",
            "local",
            "--questions",
            "mini",
            "--run",
            str(run_dir),
            "--no-progress",
            "--max-connections",
            "4",
        ]
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        n_q = len(mini.questions)
        first_requests = srv.stats()["requests"]
        assert first_requests == 3 * n_q

        # the files
        qs = read_jsonl(run_dir / "questions.jsonl", Question)
        assert [q.id for q in qs] == [q.id for q in mini.questions]
        trajs = read_jsonl(run_dir / "answers.jsonl", Trajectory)
        assert [t.question_id for t in trajs] == [q.id for q in mini.questions]
        store = PageStore(run_dir / "pages.sqlite")
        found = [r.url for r in LocalSearch(store).search(QUERY, 5)]
        expected = found + ([gold] if gold not in found else [])  # the opened page counts too
        for t in trajs:
            assert t.status == "ok" and t.final_answer == "Dana Okafor"
            assert [c.query for c in t.search_calls] == [QUERY]
            assert t.retrieved_urls == expected
            assert t.opened_urls == [gold]
            assert t.model == "fake-model" and t.usage.calls == 3
            assert t.system["system"] == "agentic" and t.system["search"] == "local"
        meta = RunMeta.model_validate_json((run_dir / "run.json").read_text())
        assert meta.kind == "wild" and meta.model == "fake-model" and meta.endpoint == srv.base_url
        assert meta.config["system"]["max_rounds"] == 8 and meta.config["question_set"] == "mini"
        assert meta.prompt_versions["answer+system"].startswith("answer-2;systems-2")
        assert meta.config["fetch"] is False  # local search reads the frozen corpus only
        assert meta.config["system"]["page_chars"] == 10_000 and meta.config["system"]["hints"] is False
        for f in run_dir.iterdir():
            assert API_KEY.encode() not in f.read_bytes(), f

        # re-running: everything is done, nothing is sent
        before = (run_dir / "answers.jsonl").read_text()
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert srv.stats()["requests"] == first_requests
        assert (run_dir / "answers.jsonl").read_text() == before

        # re-running from scratch with the same caches: answered again, still no HTTP request
        (run_dir / "answers.jsonl").unlink()
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert srv.stats()["requests"] == first_requests
        again = read_jsonl(run_dir / "answers.jsonl", Trajectory)
        def strip(t):
            d = t.model_dump(exclude={"created_at", "usage"})
            for rec in [*d["search_calls"], *d["steps"]]:
                rec.pop("cached")
            return d

        assert [strip(t) for t in again] == [strip(t) for t in trajs]
        assert all(t.usage.cached_calls == 3 for t in again)
        assert all(s.cached for t in again for s in t.steps)  # every call came from a cache
        assert any(t.steps[0].cached is False for t in trajs)  # the first run searched for real


def test_cli_rejects_a_different_config_in_the_same_run_dir(tmp_path, mini):
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(script=[{"reply": "x"}]) as srv:
        base = [
            "--model",
            "fake-model",
            "--base-url",
            srv.base_url,
            "--questions",
            "mini",
            "--limit",
            "2",
            "--run",
            str(run_dir),
            "--no-progress",
        ]
        assert invoke(*base, "--search", "none").exit_code == 0
        result = invoke(*base, "--search", "local")
        assert result.exit_code == 2 and "new --run" in result.output


def test_cli_search_then_read_and_no_search(tmp_path, mini):
    with FakeOpenAIServer(script=[{"reply": "an answer"}]) as srv:
        base = [
            "--model",
            "fake-model",
            "--base-url",
            srv.base_url,
            "--questions",
            "mini",
            "--limit",
            "3",
            "--no-progress",
        ]
        r = invoke(
            *base,
            "--search",
            "local",
            "--system",
            "search-then-read",
            "--top-k",
            "2",
            "--run",
            str(tmp_path / "a"),
        )
        assert r.exit_code == 0, r.output
        t = read_jsonl(tmp_path / "a" / "answers.jsonl", Trajectory)
        assert len(t) == 3 and all(len(x.search_calls) == 1 and len(x.retrieved_urls) == 2 for x in t)
        r = invoke(*base, "--search", "none", "--effort", "low", "--run", str(tmp_path / "b"))
        assert r.exit_code == 0, r.output
        t = read_jsonl(tmp_path / "b" / "answers.jsonl", Trajectory)
        assert all(x.system == {"system": "no-search", "search": "none", "effort": "low"} for x in t)
        assert srv.stats()["requests"] == 6


def test_cli_bad_options(tmp_path):
    assert invoke("--model", "m", "--run", str(tmp_path / "r"), "--system", "magic").exit_code == 2
    assert invoke("--model", "m", "--run", str(tmp_path / "r"), "--effort", "extreme").exit_code == 2
    r = invoke("--model", "m", "--run", str(tmp_path / "r"), "--questions", "mini", "--search", "bing")
    assert r.exit_code == 2 and "unknown search backend" in r.output


class FailsUntilFixed(SearchBackend):
    """Rate limited while ``broken`` is true, then serves the local index."""

    name = "sometimes"

    def __init__(self, inner: LocalSearch, **kw):
        super().__init__(**kw)
        self.inner = inner
        self.broken = True

    async def _search_once(self, query, k):
        if self.broken:
            raise TransientSearchError("429 rate limited")
        return await self.inner._search_once(query, k)


def test_pending_questions_are_retried_on_the_next_run(tmp_path, mini):
    gold = mini.questions[0].gold_urls[0]
    run_dir = tmp_path / "run"
    qs = mini.questions[:4]
    store = PageStore()
    store.add_documents(mini.documents)
    backend = FailsUntilFixed(LocalSearch(store), max_retries=1, backoff_base=0.01, backoff_cap=0.02)
    with FakeOpenAIServer(script=both_tools_script(gold)) as srv:

        def client():
            return LLMClient(
                "fake-model",
                base_url=srv.base_url,
                cache=LLMCache(run_dir / "llm-cache.sqlite"),
                progress=False,
            )

        s1 = run_system(qs, run_dir, client(), backend, store=store, progress=False)
        assert (s1.ok, s1.pending) == (0, 4)
        t1 = read_jsonl(run_dir / "answers.jsonl", Trajectory)
        assert all(
            t.status == "pending" and t.final_answer is None and "search failed" in t.error for t in t1
        )
        assert all(t.search_calls[0].error for t in t1)

        backend.broken = False
        s2 = run_system(qs, run_dir, client(), backend, store=store, progress=False)
        assert (s2.ok, s2.pending, s2.skipped) == (4, 0, 0)
        t2 = read_jsonl(run_dir / "answers.jsonl", Trajectory)
        assert all(t.status == "ok" and t.final_answer == "Dana Okafor" for t in t2)
        assert all(t.opened_urls == [gold] and t.retrieved_urls for t in t2)

        s3 = run_system(qs, run_dir, client(), backend, store=store, progress=False)
        assert (s3.ok, s3.skipped, s3.usage.calls) == (4, 4, 0)


def test_cli_exit_code_3_when_questions_stay_pending(tmp_path):
    with FakeOpenAIServer(script=[{"error": {"status": 503, "message": "overloaded"}}]) as srv:
        r = invoke(
            "--model",
            "fake-model",
            "--base-url",
            srv.base_url,
            "--questions",
            "mini",
            "--limit",
            "2",
            "--search",
            "none",
            "--max-retries",
            "0",
            "--run",
            str(tmp_path / "r"),
            "--no-progress",
        )
    assert r.exit_code == 3, r.output
    trajs = read_jsonl(tmp_path / "r" / "answers.jsonl", Trajectory)
    assert all(t.status == "pending" and t.final_answer is None for t in trajs)
    assert API_KEY not in Path(tmp_path / "r" / "answers.jsonl").read_text()
    last = json.loads((tmp_path / "r" / "run.json").read_text())["config"]["last_invocation"]
    assert last["model_calls"] == 0 and last["search_calls"] == 0  # failed calls have no usage


def base_args(srv, run_dir, *extra):
    return [
        "--model", "fake-model", "--base-url", srv.base_url, "--questions", "mini",
        "--run", str(run_dir), "--no-progress", "--max-retries", "0", *extra,
    ]


def test_one_questions_rejected_call_fails_it_and_the_run_goes_on(tmp_path, mini):
    doomed = mini.questions[1]
    script = [
        {
            "pattern": doomed.question.split("?")[0][:40],
            "error": {"status": 400, "message": "maximum context length is 4096 tokens", "code": "context_length_exceeded"},
        },
        {"reply": "an answer"},
    ]
    run_dir = tmp_path / "r"
    with FakeOpenAIServer(script=script) as srv:
        r = invoke(*base_args(srv, run_dir, "--search", "none", "--limit", "3"))
        assert r.exit_code == 4, r.output
        assert "1 failed" in r.output and "maximum context length" in r.output
        trajs = {t.question_id: t for t in read_jsonl(run_dir / "answers.jsonl", Trajectory)}
        assert trajs[doomed.id].status == "failed" and trajs[doomed.id].final_answer is None
        assert "400" in trajs[doomed.id].error
        assert [t.status for qid, t in trajs.items() if qid != doomed.id] == ["ok", "ok"]
        # a re-run tries the failed question again, not the answered ones
        before = srv.stats()["requests"]
        assert invoke(*base_args(srv, run_dir, "--search", "none", "--limit", "3")).exit_code == 4
        assert srv.stats()["requests"] == before + 1


@pytest.mark.parametrize("status", [401, 404])
def test_errors_that_doom_every_question_stop_the_run(tmp_path, status):
    script = [{"error": {"status": status, "message": "no such key or model"}}]
    with FakeOpenAIServer(script=script) as srv:
        r = invoke(*base_args(srv, tmp_path / "r", "--search", "none", "--limit", "3"))
    assert r.exit_code == 2 and str(status) in r.output


def test_no_answer_is_counted_and_kept_on_resume(tmp_path, mini):
    store = PageStore()
    store.add_documents(mini.documents)
    script = [{"tool_calls": [{"name": "web_search", "arguments": {"query": QUERY}}]}]
    with FakeOpenAIServer(script=script) as srv:

        def client():
            return LLMClient("fake-model", base_url=srv.base_url, progress=False,
                             cache=LLMCache(tmp_path / "llm.sqlite"))

        s1 = run_system(mini.questions[:2], tmp_path / "r", client(), LocalSearch(store), store=store,
                      max_rounds=1, progress=False)
        assert (s1.ok, s1.no_answer, s1.pending, s1.failed) == (0, 2, 0, 0)
        assert "2 without an answer" in s1.describe()
        trajs = read_jsonl(tmp_path / "r" / "answers.jsonl", Trajectory)
        assert all(t.status == "no_answer" and t.final_answer is None for t in trajs)
        s2 = run_system(mini.questions[:2], tmp_path / "r", client(), LocalSearch(store), store=store,
                      max_rounds=1, progress=False)
        assert (s2.skipped, s2.usage.calls) == (2, 0)


PROXY_REPLY = json.dumps([{"url": "https://news.example/coach", "title": "Coach", "snippet": "s", "date": None}])


@pytest.mark.parametrize(("flag", "expected"), [(None, True), ("--no-fetch", False)])
def test_web_backends_fetch_pages_by_default(tmp_path, flag, expected):
    script = [
        {"model": "proxy-model", "reply": PROXY_REPLY, "usage": {"prompt_tokens": 50, "completion_tokens": 10}},
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": QUERY}}]},
        {"reply": "Dana Okafor"},
    ]
    run_dir = tmp_path / "r"
    with FakeOpenAIServer(script=script) as srv:
        extra = ["--search", "proxy:proxy-model", "--limit", "1", "--hints", "--page-chars", "2000"]
        r = invoke(*base_args(srv, run_dir, *extra, *([flag] if flag else [])))
        assert r.exit_code == 0, r.output
    meta = RunMeta.model_validate_json((run_dir / "run.json").read_text())
    assert meta.config["fetch"] is expected
    assert meta.config["system"]["hints"] is True and meta.config["system"]["page_chars"] == 2000
    assert meta.prompt_versions["answer+system"].endswith(";hints-1")
    (t,) = read_jsonl(run_dir / "answers.jsonl", Trajectory)
    assert t.retrieved_urls == ["https://news.example/coach"]
    # the proxy model's tokens are part of the question's usage
    assert t.search_usage.prompt_tokens == 50 and t.usage.prompt_tokens > 50
    assert t.usage.calls == 3 and t.search_usage.calls == 1


@pytest.mark.parametrize("flag", ["--search-proxy-base-url", "--search-base-url"])
def test_the_search_proxy_endpoint_is_its_role_flag_and_the_old_one_still_works(tmp_path, flag):
    script = [
        {"model": "proxy-model", "reply": PROXY_REPLY},
        {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": QUERY}}]},
        {"reply": "Dana Okafor"},
    ]
    run_dir = tmp_path / "r"
    with FakeOpenAIServer(script=script) as proxy, FakeOpenAIServer(script=script) as srv:
        r = invoke(*base_args(srv, run_dir, "--search", "proxy:proxy-model", "--limit", "1", "--no-fetch",
                              flag, proxy.base_url))
        assert r.exit_code == 0, r.output
        assert proxy.stats()["requests"] == 1 and srv.stats()["requests"] == 2
    assert f"search proxy proxy-model @ {proxy.base_url}" in " ".join(r.output.split())
    assert ("notice: --search-base-url is the old spelling of --search-proxy-base-url" in r.output) == (
        flag == "--search-base-url")
    meta = RunMeta.model_validate_json((run_dir / "run.json").read_text())
    assert meta.config["search_endpoint"] == proxy.base_url
    both = invoke(*base_args(srv, tmp_path / "r2", "--search", "proxy:proxy-model", "--search-base-url", "http://a/v1",
                             "--search-proxy-base-url", "http://b/v1"))
    assert both.exit_code == 2 and "give only --search-proxy-base-url" in both.output


def test_a_tally_counts_only_what_the_client_did_since_it_watched(tmp_path):
    from trek.runs import Tally, new_meta
    from trek.types import Usage

    client = LLMClient("m", base_url="http://127.0.0.1:9/v1", cache=None, progress=False)
    client.usage, client.spent_usd, client.http_calls = Usage(calls=5, prompt_tokens=50, cost_usd=1.0), 1.0, 4
    tally = Tally()
    tally.watch(client)
    client.usage += Usage(calls=2, cached_calls=1, prompt_tokens=30, completion_tokens=7, cost_usd=0.25)
    client.spent_usd, client.http_calls = 1.25, 5
    assert tally.dollars() == "$0.2500"
    tally.settle()
    assert (tally.usage.calls, tally.usage.prompt_tokens, tally.http_calls, tally.spent_usd) == (2, 30, 1, 0.25)
    assert tally.model_line() == ("model: 2 calls (1 from cache, 1 HTTP requests), 30 prompt + 7 completion tokens, "
                                  "spent $0.2500")
    client.unpriced_calls += 1  # a call without a price since the watch, and no dollars
    tally.watch(client)
    client.unpriced_calls += 1
    tally.settle()
    assert tally.spent_text == "$- (model not in the price table)"
    meta = new_meta(tmp_path / "r", "wild", client, None, config={"a": 1})
    assert (meta.run_id, meta.model, meta.endpoint, meta.config) == ("r", "m", client.base_url, {"a": 1})
    assert new_meta(tmp_path / "r", "wild", client, meta.model_copy(update={"created_at": "then"})).created_at == "then"


def test_wild_questions_need_a_search_backend_chosen(tmp_path):
    r = invoke("--model", "m", "--run", str(tmp_path / "r"), "--questions", "wild")
    assert r.exit_code == 2 and "--search" in r.output
    assert not (tmp_path / "r").exists()


def test_local_search_over_an_empty_corpus_stops_before_any_call(tmp_path, monkeypatch):
    from trek.answering import wild

    q = Question(id="w1", dataset="freshqa", question="Who leads?", answers=["A"])
    monkeypatch.setattr(wild, "load_questions", lambda which, data_dir, allow_partial, warn: ([q], [], {}))
    with FakeOpenAIServer() as srv:
        r = invoke("--model", "m", "--base-url", srv.base_url, "--run", str(tmp_path / "r"), "--questions", "wild",
                   "--search", "local", "--no-progress")
        assert srv.stats()["requests"] == 0
    assert r.exit_code == 2 and "local search index is empty" in r.output and "trek pages add" in r.output


def test_the_local_backend_refuses_an_empty_index():
    import asyncio

    from trek.search.base import FatalSearchError

    with pytest.raises(FatalSearchError, match="index is empty"):
        asyncio.run(LocalSearch(PageStore())._search_once("anything", 3))
