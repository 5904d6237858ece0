"""The Batch API path: submit, stop, resume polling, partial failure -> pending, replies in the
response cache under the live request's key, nothing submitted twice, a second run makes no call."""

import json

import pytest
from typer.testing import CliRunner

from trek.aio import run_sync
from trek.cli import app
from trek.llm import ChatRequest, LLMCache, LLMClient
from trek.llm.cache import request_key
from trek.llm.estimate import RecordingClient, request_body
from trek.llm.ledger import read_ledger
from trek.llm.openai_batch import submit_and_collect as _submit
from trek.llm.usage import Price, PriceTable
from trek.runs import BATCH_STATE
from trek.testing.fake_openai import FakeOpenAIServer

PRICES = PriceTable({"gpt-4o-mini": Price(input=1.0, output=4.0)})


def submit_and_collect(*args, **kw):
    return _submit(*args, state_file=BATCH_STATE, **kw)


def _client(srv, tmp_path):
    return LLMClient("gpt-4o-mini", base_url=srv.base_url, api_key="sk-batch-secret", cache=LLMCache(tmp_path / "c.sqlite"),
                     prices=PRICES, progress=False)


def _reqs(client, n=5):
    rs = [ChatRequest(messages=[{"role": "user", "content": f"batch question {i}"}], params={"max_tokens": 20}) for i in range(n)]
    return rs, [("chat", request_body(client, r), r.sample) for r in rs]


def test_fake_server_batch_wire_format(tmp_path):
    import openai

    with FakeOpenAIServer(batch_delay=0.0) as srv:
        sdk = openai.OpenAI(base_url=srv.base_url, api_key="k")
        line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}
        f = sdk.files.create(file=("in.jsonl", json.dumps(line).encode() + b"\n"), purpose="batch")
        b = sdk.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        assert b.status == "validating" and b.request_counts.total == 1
        b = sdk.batches.retrieve(b.id)
        assert b.status == "completed" and b.error_file_id is None
        out = json.loads(sdk.files.content(b.output_file_id).text)
        assert set(out) == {"id", "custom_id", "response", "error"} and out["custom_id"] == "a"
        assert out["response"]["status_code"] == 200 and out["response"]["body"]["object"] == "chat.completion"
        assert out["response"]["request_id"] and out["error"] is None


def test_lifecycle_submit_stop_resume_partial_failure_cache(tmp_path):
    state = tmp_path / "run"
    with FakeOpenAIServer(batch_delay=0.3) as srv:
        client = _client(srv, tmp_path)
        rs, reqs = _reqs(client)
        fail_key = request_key(client.cache_request(*reqs[2]))
        srv.batch_fail = [fail_key]
        # 1. submit, then stop without waiting (as a killed process would)
        first = run_sync(submit_and_collect(reqs, client, state, wait=False, progress=False))
        assert first.submitted == 5 and first.loaded == 0 and first.waiting == 5
        recorded = json.loads((state / BATCH_STATE).read_text())
        batch_id = recorded["batches"][0]["id"]
        assert batch_id.startswith("batch_") and recorded["batches"][0]["input_file_id"].startswith("file-")
        assert "sk-batch-secret" not in (state / BATCH_STATE).read_text()
        lines = [json.loads(x) for x in (state / recorded["batches"][0]["request_file"]).read_text().splitlines()]
        assert {x["url"] for x in lines} == {"/v1/chat/completions"} and lines[0]["body"]["max_tokens"] == 20
        # 2. a new process: resumes polling the recorded batch, submits nothing again
        client2 = _client(srv, tmp_path)
        second = run_sync(submit_and_collect(reqs, client2, state, poll_seconds=0.05, progress=False))
        assert second.resumed == [batch_id] and second.submitted == 0 and second.in_running_batches == 5
        assert second.loaded == 4 and second.failed == 1 and second.waiting == 0
        # the provider's reason, from the batch's error file, for the item it did not answer
        assert second.failures == {fail_key: f"500: The server had an error processing your request. (batch {batch_id})"}
        assert "The server had an error processing your request." in second.describe()
        assert json.loads((state / BATCH_STATE).read_text())["batches"][0]["failures"] == {
            fail_key: "500: The server had an error processing your request."}
        assert srv.stats()["batches"] == 1 and srv.stats()["requests"] == 0  # no live call at all
        # 3. replies are cache hits for the live client, keyed as it keys them; the failed one is pending
        replay = RecordingClient(client2, use_cache=True)
        res = replay.map(rs)
        assert [r.status for r in res] == ["ok", "ok", "pending", "ok", "ok"]
        assert all(r.cached for i, r in enumerate(res) if i != 2) and len(replay.recorded) == 1
        full = PRICES.cost("gpt-4o-mini", res[0].usage)
        assert res[0].usage.cost_usd == pytest.approx(full * 0.5)  # the batch discount is recorded
        assert second.cost_usd == pytest.approx(sum(r.usage.cost_usd for r in res if r.ok))
        # 4. the next run re-submits only the failed item
        srv.batch_fail = None
        third = run_sync(submit_and_collect(reqs, client2, state, poll_seconds=0.05, progress=False))
        assert third.submitted == 1 and third.already_cached == 4 and third.loaded == 1
        # 5. and then there is nothing left: no batch, no call
        fourth = run_sync(submit_and_collect(reqs, client2, state, poll_seconds=0.05, progress=False))
        assert fourth.submitted == 0 and fourth.already_cached == 5 and fourth.batch_ids == []
        assert srv.stats()["batches"] == 2 and srv.stats()["requests"] == 0
        live = client2.map(rs)
        assert client2.http_calls == 0 and all(r.cached for r in live)


def test_expired_batch_leaves_the_rest_pending(tmp_path):
    with FakeOpenAIServer(batch_expire=True) as srv:
        client = _client(srv, tmp_path)
        _, reqs = _reqs(client, 4)
        run = run_sync(submit_and_collect(reqs, client, tmp_path / "s", poll_seconds=0.01, progress=False))
        assert run.loaded == 2 and run.failed == 2
        assert len(run.failures) == 2 and all(r.startswith("batch_expired: This request could not be executed")
                                              for r in run.failures.values())
        state = json.loads((tmp_path / "s" / BATCH_STATE).read_text())
        assert state["batches"][0]["status"] == "expired" and state["batches"][0]["loaded"]


def test_state_of_another_endpoint_is_refused(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / BATCH_STATE).write_text(json.dumps({"endpoint": "http://elsewhere/v1", "batches": []}))
    client = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", cache=LLMCache(tmp_path / "c.sqlite"), progress=False)
    with pytest.raises(ValueError, match="elsewhere"):
        run_sync(submit_and_collect([], client, tmp_path / "s", progress=False))


def _batch_args(tmp_path, n: int, base_url: str) -> tuple[list[str], object]:
    """A requests file of ``n`` requests and the `trek llm run --batch` arguments for it: (args, out)."""
    reqs = tmp_path / "requests.jsonl"
    reqs.write_text("".join(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"q {i}"}], "max_tokens": 10})
                            + "\n" for i in range(n)))
    out = tmp_path / "out.jsonl"
    return ["llm", "run", str(reqs), "--out", str(out), "--model", "gpt-4o-mini", "--base-url", base_url,
            "--no-progress", "--batch", "--batch-poll", "0.05"], out


def test_llm_run_batch_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-key")
    with FakeOpenAIServer(batch_delay=0.1) as srv:
        args, out = _batch_args(tmp_path, 4, srv.base_url)
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert [x["status"] for x in lines] == ["ok"] * 4 and all(x["cached"] for x in lines)
        assert (tmp_path / ".out.jsonl.batches" / BATCH_STATE).exists()
        spent = read_ledger(tmp_path / ".out.jsonl.spend")
        assert spent == pytest.approx(sum(x["usage"]["cost_usd"] for x in lines)) and spent > 0
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        assert srv.stats()["batches"] == 1 and srv.stats()["requests"] == 0
        assert "sk-secret-key" not in r.output
        assert read_ledger(tmp_path / ".out.jsonl.spend") == pytest.approx(spent)  # loaded once, counted once


def test_a_batch_created_but_not_recorded_is_adopted_not_resubmitted(tmp_path):
    state = tmp_path / "s"
    with FakeOpenAIServer(batch_delay=0.2) as srv:
        client = _client(srv, tmp_path)
        _, reqs = _reqs(client, 3)
        run_sync(submit_and_collect(reqs, client, state, wait=False, progress=False))
        # as if killed right after batches.create returned, before its id was written down
        recorded = json.loads((state / BATCH_STATE).read_text())
        made = recorded["batches"][0]["id"]
        recorded["batches"][0]["id"] = None
        (state / BATCH_STATE).write_text(json.dumps(recorded))
        run = run_sync(submit_and_collect(reqs, client, state, poll_seconds=0.05, progress=False))
        assert run.submitted == 0 and run.loaded == 3 and run.batch_ids == [made]
        assert srv.stats()["batches"] == 1


def test_no_wait_still_loads_batches_already_done(tmp_path):
    with FakeOpenAIServer() as srv:  # no delay: done at the first look
        client = _client(srv, tmp_path)
        _, reqs = _reqs(client, 2)
        run = run_sync(submit_and_collect(reqs, client, tmp_path / "s", wait=False, progress=False))
        assert run.submitted == 2 and run.loaded == 2 and run.waiting == 0


def test_llm_run_batch_pending_item_says_the_providers_reason(tmp_path, monkeypatch):
    reqs = tmp_path / "requests.jsonl"
    reqs.write_text("".join(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"q {i}"}], "max_tokens": 10})
                            + "\n" for i in range(3)))
    out = tmp_path / "out.jsonl"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-key")
    with FakeOpenAIServer(batch_delay=0.05) as srv:
        client = LLMClient("gpt-4o-mini", base_url=srv.base_url)
        body = request_body(client, ChatRequest(messages=[{"role": "user", "content": "q 1"}], params={"max_tokens": 10}))
        srv.batch_fail = [request_key(client.cache_request("chat", body, 0))]
        r = CliRunner().invoke(app, ["llm", "run", str(reqs), "--out", str(out), "--model", "gpt-4o-mini",
                                     "--base-url", srv.base_url, "--no-progress", "--batch", "--batch-poll", "0.05"])
    lines = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert [lines[f"r{i}"]["status"] for i in range(3)] == ["ok", "pending", "ok"], r.output
    assert "500: The server had an error processing your request." in lines["r1"]["error"]
    assert "sk-secret-key" not in out.read_text()


def test_a_batch_api_step_retries_through_the_one_policy_with_jitter_and_retry_after(monkeypatch):
    # a step (upload, create, poll, download) that meets 429s waits at least what Retry-After
    # says, else a jittered exponential delay; after its retries the last error is raised
    import asyncio

    import httpx
    import openai

    from trek.llm import openai_batch as ob

    slept: list[float] = []

    async def no_sleep(s):
        slept.append(s)

    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    request = httpx.Request("GET", "http://batch.invalid/v1/batches/b1")

    def limited(after: str | None) -> openai.RateLimitError:
        headers = {"retry-after": after} if after is not None else {}
        return openai.RateLimitError("slow down", response=httpx.Response(429, headers=headers, request=request),
                                     body=None)

    errors = [limited("7"), limited(None), openai.APIConnectionError(request=request)]

    async def step():
        if errors:
            raise errors.pop(0)
        return "retrieved"

    assert asyncio.run(ob._retrying(step)) == "retrieved"
    assert slept[0] >= 7.0  # the service's Retry-After
    assert ob.BACKOFF_BASE - 1e-9 <= slept[1] <= 2 * ob.BACKOFF_BASE  # attempt 2: uniform in [d/2, d], d = 2 * base
    assert 2 * ob.BACKOFF_BASE <= slept[2] <= 4 * ob.BACKOFF_BASE and len(slept) == 3
    # jitter: the same failures do not wait the same each time
    runs = []
    for _ in range(5):
        slept.clear()
        errors[:] = [limited(None), limited(None)]
        asyncio.run(ob._retrying(step))
        runs.append(tuple(slept))
    assert len(set(runs)) > 1
    slept.clear()
    errors[:] = [limited(None)] * (ob.STEP_RETRIES + 1)
    with pytest.raises(openai.RateLimitError):
        asyncio.run(ob._retrying(step))
    assert len(slept) == ob.STEP_RETRIES


def test_a_second_batch_run_on_the_same_out_is_refused_before_it_uploads(tmp_path, monkeypatch):
    from trek.batch import _locked

    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    with FakeOpenAIServer(batch_delay=0.0) as srv:
        args, out = _batch_args(tmp_path, 3, srv.base_url)
        with _locked(out):  # as if another `trek llm run` were writing it
            r = CliRunner().invoke(app, args)
            assert r.exit_code != 0 and "another run is writing" in r.output, r.output
            assert srv.stats()["files"] == 0 and srv.stats()["batches"] == 0  # nothing uploaded, nothing paid
        r = CliRunner().invoke(app, args)  # the lock goes with its holder
        assert r.exit_code == 0, r.output
        assert srv.stats()["batches"] == 1


@pytest.mark.slow  # tracemalloc slows every allocation
def test_submit_and_load_do_not_hold_the_request_or_result_files(tmp_path):
    """The upload is read from the open file, the replies are matched to their requests by offset,
    and the result file is downloaded to disk: the client's peak stays far below the request file."""
    import subprocess
    import sys
    import tracemalloc

    # the fake server in its own process, so that only the client's allocations are traced
    srv = subprocess.Popen([sys.executable, "-m", "trek.testing.fake_openai", "--port", "0"], stdout=subprocess.PIPE,
                           text=True)
    try:
        base_url = srv.stdout.readline().strip().rsplit(" ", 1)[-1]
        client = LLMClient("gpt-4o-mini", base_url=base_url, api_key="sk-x", cache=LLMCache(tmp_path / "c.sqlite"),
                           prices=PRICES, progress=False)
        rs = [ChatRequest(messages=[{"role": "user", "content": f"long request {i} " + "w " * 15_000}])
              for i in range(600)]
        reqs = [("chat", request_body(client, r), r.sample) for r in rs]
        tracemalloc.start()
        try:
            run = run_sync(submit_and_collect(reqs, client, tmp_path / "s", poll_seconds=0.05, progress=False))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        srv.kill()
        srv.wait(10)
    assert run.submitted == 600 and run.loaded == 600 and run.failed == 0
    size = sum(p.stat().st_size for p in (tmp_path / "s").glob("batch-*.jsonl"))
    assert size > 16_000_000
    # what stays is the modules imported on the way and one request at a time
    assert peak < size / 4, f"the Batch API path peaked at {peak / 1e6:.1f} MB for {size / 1e6:.0f} MB of requests"
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted([BATCH_STATE, "batch-0001.jsonl"])  # no download left
