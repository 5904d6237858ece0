"""Estimates before spending: token counts, bounds that hold against a scripted run, cache hits
excluded, output ranges from cached replies, search fees, agentic assumptions, --dry-run."""

import json

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.llm import ChatRequest, LLMCache, LLMClient
from trek.llm.estimate import (
    Assumption,
    RecordingClient,
    content_text,
    count_chat_tokens,
    estimate_requests,
    is_openai_model,
)
from trek.llm.usage import Price, PriceTable
from trek.testing.fake_openai import FakeOpenAIServer
from trek.tokens import count_tokens

SCRIPT = [
    {"pattern": "short", "reply": "Paris."},
    {"pattern": "long", "reply": "The answer, after a careful look at every source that was found, is Paris in France."},
]
PRICES = PriceTable({"gpt-4o-mini": Price(input=1.0, output=4.0)}, {"tavily": 0.01})


def test_o200k_counts():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    # 3 priming + per message 3 + role + content
    msgs = [{"role": "user", "content": "hello world"}]
    assert count_chat_tokens(msgs) == 3 + 3 + count_tokens("user") + 2
    assert count_chat_tokens("hello world") == count_chat_tokens(msgs)  # Responses input string
    tools = [{"type": "function", "function": {"name": "web_search"}}]
    assert count_chat_tokens(msgs, tools) > count_chat_tokens(msgs)


def test_content_text_of_every_shape():
    assert content_text(None) == "" and content_text("a b") == "a b"
    assert content_text(["a", {"type": "input_text", "text": "b"}, {"type": "x", "output": "c"}, 7]) == "a b c"
    assert content_text({"k": 1}) == '{"k": 1}'


def test_openai_models():
    assert is_openai_model("gpt-5.4") and is_openai_model("o4-mini") and is_openai_model("openai/gpt-4o-mini")
    assert not is_openai_model("Qwen/Qwen3-8B") and not is_openai_model("gpt-oss-20b")


def _requests(n=6):
    return [ChatRequest(messages=[{"role": "user", "content": f"question {i}: give a {'short' if i % 2 else 'long'} answer"}],
                        params={"max_tokens": 40}) for i in range(n)]


def test_estimate_bounds_hold_for_a_scripted_run(tmp_path):
    with FakeOpenAIServer(script=SCRIPT, tokenizer="o200k_base") as srv:
        client = LLMClient("gpt-4o-mini", base_url=srv.base_url, api_key="sk-t", cache=tmp_path / "c.sqlite",
                           prices=PRICES, progress=False)
        est = estimate_requests(_requests(), client, label="t")
        res = client.map(_requests())
    assert all(r.ok for r in res)
    actual = client.usage
    assert est.calls == (6, 6) and est.cached_items == 0
    assert est.input_tokens == (actual.prompt_tokens, actual.prompt_tokens)  # exact for an OpenAI model
    assert est.output_tokens == (6, 6 * 40)
    assert est.output_tokens[0] <= actual.completion_tokens <= est.output_tokens[1]
    assert est.token_usd[0] <= client.spent_usd <= est.token_usd[1]
    # hand-worked dollars: input at $1/M, output 1..40 tokens at $4/M
    assert est.token_usd[0] == pytest.approx((actual.prompt_tokens * 1 + 6 * 4) / 1e6)
    assert est.token_usd[1] == pytest.approx((actual.prompt_tokens * 1 + 240 * 4) / 1e6)
    # the same requests again: all in the cache, nothing to pay
    again = estimate_requests(_requests(), client)
    assert again.calls == (0, 0) and again.cached_items == 6 and again.usd_high == 0
    # another sample of the same prompts: the cached replies give the output range
    other = estimate_requests([ChatRequest(messages=r.messages, params=r.params, sample=1) for r in _requests()], client)
    lengths = [r.usage.completion_tokens for r in res]
    assert other.calls == (6, 6)
    assert other.output_tokens == (3 * min(lengths[0::2]) + 3 * min(lengths[1::2]), 3 * max(lengths[0::2]) + 3 * max(lengths[1::2]))
    assert any("cached replies" in n for n in other.notes)


def test_batch_factor_halves_token_dollars(tmp_path):
    client = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", cache=None, prices=PRICES, progress=False)
    full = estimate_requests(_requests(), client)
    half = estimate_requests(_requests(), client, price_factor=0.5)
    assert half.token_usd == pytest.approx((full.token_usd[0] / 2, full.token_usd[1] / 2))


def test_agentic_assumption_and_search_fees():
    client = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", prices=PRICES, progress=False)
    req = ChatRequest(messages=[{"role": "user", "content": "hello world"}], params={"max_tokens": 10})
    first = count_chat_tokens(req.messages)
    a = Assumption.agentic(3, added_input=100, search_backend="tavily")
    est = estimate_requests([req, req], client, assumption=a)
    # per question: 1..3 calls; 3 calls send 3 * first + 100 * (0 + 1 + 2) tokens
    assert est.calls == (2, 6)
    assert est.input_tokens == (2 * first, 2 * (3 * first + 300))
    assert est.output_tokens == (2, 60)
    assert est.search_calls == (0, 4) and est.search_usd == pytest.approx((0, 0.04))
    assert "1 to 3 model calls" in est.describe()
    fixed = estimate_requests([req], client, assumption=Assumption.agentic(2, 50, "tavily", assumed=True))
    assert fixed.calls == (2, 2) and fixed.search_calls == (1, 1)


def test_other_models_get_a_band_and_unpriced_models_tokens_only():
    prices = PriceTable({"Qwen/Qwen3-8B": Price(input=0.5, output=1.0)})
    req = ChatRequest(messages=[{"role": "user", "content": "hello world " * 50}])
    n = count_chat_tokens(req.messages)
    priced = estimate_requests([req], LLMClient("Qwen/Qwen3-8B", base_url="http://127.0.0.1:9/v1", prices=prices,
                                                progress=False), assume_output=100)
    assert priced.input_tokens == (int(n * 0.8), round(n * 1.25 + 0.4999))
    assert any("approximation" in x for x in priced.notes)
    client = LLMClient("Qwen/Qwen3-8B", base_url="http://127.0.0.1:9/v1", prices=PRICES, progress=False)
    est = estimate_requests([req], client, assume_output=100)
    assert est.input_tokens[0] <= n * 0.8 and n * 1.25 <= est.input_tokens[1]  # bounds, not a count
    assert est.output_tokens == (1, 100)
    assert est.usd_high == 0 and any("no price" in x for x in est.notes)
    assert any("bounds from their length" in x for x in est.notes)


def test_no_price_no_tokenizer(monkeypatch):
    """A model without a price (or with a free input price) needs no token count: the estimate
    gives bounds from the length of each text and never calls the tokenizer."""
    import trek.llm.estimate as estimate

    def refuse(*a, **k):
        raise AssertionError("the tokenizer was called")

    monkeypatch.setattr(estimate, "count_chat_tokens", refuse)
    reqs = [ChatRequest(messages=[{"role": "system", "content": "Answer briefly."},
                                  {"role": "user", "content": f"question {i}: {'élan ' * i} what year?"}])
            for i in range(30)]
    free = PriceTable({"local-free": Price(input=0.0, output=0.0)})
    for model, prices in (("unpriced-model", PRICES), ("local-free", free)):
        client = LLMClient(model, base_url="http://127.0.0.1:9/v1", prices=prices, progress=False)
        est = estimate_requests(reqs, client)
        monkeypatch.undo()
        exact = sum(count_chat_tokens(r.messages) for r in reqs)
        monkeypatch.setattr(estimate, "count_chat_tokens", refuse)
        lo, hi = est.input_tokens
        assert lo <= 0.8 * exact and 1.25 * exact <= hi, (model, est.input_tokens, exact)
        assert est.usd_low == est.usd_high == 0


def test_a_large_run_counts_a_sample_and_says_so(monkeypatch):
    """Past EXACT_FIRST priced requests, every EXACT_EVERY-th is counted; the rest get the
    sample's bounds, which contain the exact total here (texts of one kind), and a note says so."""
    import trek.llm.estimate as estimate

    monkeypatch.setattr(estimate, "EXACT_FIRST", 5)
    monkeypatch.setattr(estimate, "EXACT_EVERY", 4)
    counted = []
    real = estimate.count_chat_tokens
    monkeypatch.setattr(estimate, "count_chat_tokens", lambda m, t=None: counted.append(1) or real(m, t))
    reqs = [ChatRequest(messages=[{"role": "user", "content": "word " * (5 + i % 7) + f"question {i}"}])
            for i in range(40)]
    client = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", prices=PRICES, progress=False)
    est = estimate_requests(reqs, client)
    assert len(counted) == 5 + sum(1 for i in range(5, 40) if i % 4 == 0)  # the first 5, then every 4th
    exact = sum(real(r.messages) for r in reqs)
    assert est.input_tokens[0] <= exact <= est.input_tokens[1] and est.input_tokens[0] < est.input_tokens[1]
    assert est.token_usd[0] <= (exact * 1.0 + 40 * 4.0) / 1e6
    note = next(n for n in est.notes if "sample" in n)
    assert f"a sample of {len(counted)} of the 40 priced requests" in note and "not a count" in note
    # below the threshold every request is counted: one figure, no sample
    monkeypatch.setattr(estimate, "EXACT_FIRST", 1000)
    whole = estimate_requests(reqs, client)
    assert whole.input_tokens == (exact, exact) and not any("sample" in n for n in whole.notes)


def test_recording_client_records_and_sends_nothing():
    real = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", progress=False)
    rec = RecordingClient(real)
    res = rec.chat([{"role": "user", "content": "hi"}], temperature=0)
    assert res.status == "pending" and rec.http_calls == 0
    api, body, sample = rec.recorded[0]
    assert api == "chat" and body["temperature"] == 0 and sample == 0
    assert rec.cache_request(api, body, 0) == real.cache_request(api, body, 0)  # same cache keys


def test_llm_run_dry_run_and_confirm(tmp_path, monkeypatch):
    reqs = tmp_path / "requests.jsonl"
    reqs.write_text("".join(json.dumps({"id": i, "messages": [{"role": "user", "content": f"q {i}"}], "max_tokens": 1000000})
                            + "\n" for i in range(3)))
    out = tmp_path / "out.jsonl"
    with FakeOpenAIServer() as srv:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-key")
        base = ["llm", "run", str(reqs), "--out", str(out), "--model", "gpt-4o", "--base-url", srv.base_url, "--no-progress"]
        r = CliRunner().invoke(app, [*base, "--dry-run"])
        assert r.exit_code == 0, r.output
        assert "3 calls" in r.output and "estimate:" in r.output
        assert srv.stats()["requests"] == 0 and not out.exists()
        # high estimate 3 * 1M output tokens at $10/M: above the default $5, no terminal -> refused
        r = CliRunner().invoke(app, base)
        assert r.exit_code == 2 and "--yes" in r.output and srv.stats()["requests"] == 0
        r = CliRunner().invoke(app, [*base, "--yes"])
        assert r.exit_code == 0, r.output
        assert srv.stats()["requests"] == 3
        assert "sk-secret-key" not in r.output


def test_cache_scan_ignores_other_prompts(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    client = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", cache=cache, prices=PRICES, progress=False)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "other"}]}
    cache.store("k", client.cache_request("chat", body, 0), {"choices": [], "usage": {"completion_tokens": 999}})
    est = estimate_requests(_requests(2), client)
    assert est.output_tokens == (2, 80)


def test_both_cache_scans_agree(tmp_path, monkeypatch):
    """The SQLite scan (``->``) and the Python fallback find the same cached outputs."""
    import trek.llm.estimate as est_mod

    cache = LLMCache(tmp_path / "c.sqlite")
    client = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", cache=cache, prices=PRICES, progress=False)
    msgs = [{"role": "user", "content": 'é "q" \n\t \\ ü 😀'}]
    for sample, n in ((0, 7), (1, 11)):
        cache.store(f"k{sample}", client.cache_request("chat", {"model": "gpt-4o-mini", "messages": msgs, "temperature": 1}, sample),
                    {"choices": [], "usage": {"completion_tokens": n}})
    wanted = {est_mod._wanted_id("chat", {"model": "gpt-4o-mini", "messages": msgs})}
    fast = est_mod._observed_outputs(cache, wanted)
    monkeypatch.setattr(est_mod, "_SCAN_SQL", "SELECT no_such_function(1)")
    slow = est_mod._observed_outputs(cache, wanted)
    assert {k: sorted(v) for k, v in fast.items()} == {k: sorted(v) for k, v in slow.items()}
    assert sorted(next(iter(fast.values()))) == [7, 11]
