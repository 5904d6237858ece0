"""Tests for the fake OpenAI-compatible server in ``trek.testing.fake_openai``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion

from trek.testing.fake_openai import FAULT_TYPES, FakeOpenAIServer, load_script, request_key

REPO_ROOT = Path(__file__).resolve().parents[1]
MODEL = "gpt-4o-mini"
HELLO = [{"role": "user", "content": "hello there, fake model"}]

SCRIPT = [
    {
        "pattern": "weather",
        "tool_results": 0,
        "tool_calls": [
            {"name": "web_search", "arguments": {"query": "weather in Oslo"}},
            {"name": "clock", "arguments": {}},
        ],
    },
    {"tool_results": 2, "reply": "Two results seen; last was: {last}"},
    {"model": "broken-model", "error": {"status": 404, "message": "model does not exist"}},
    {
        "any_pattern": "(?i)secret",
        "reply": "classified",
        "usage": {"prompt_tokens": 111, "completion_tokens": 7},
    },
]


def _client(srv: FakeOpenAIServer, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="sk-test", max_retries=0, **kw)


def _chat_body(messages, model: str = MODEL) -> dict:
    return {"model": model, "messages": messages}


@pytest.fixture(scope="module")
def srv():
    with FakeOpenAIServer(script=SCRIPT) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_stats(request):
    if "srv" in request.fixturenames:
        request.getfixturevalue("srv").reset_stats()


# --------------------------------------------------------------------------- basics


def test_request_key_matches_documented_recipe():
    blob = json.dumps(HELLO, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert request_key(HELLO) == hashlib.sha256(blob.encode("utf-8")).hexdigest()
    # key order inside a message must not matter
    assert request_key([{"content": "a", "role": "user"}]) == request_key([{"role": "user", "content": "a"}])
    assert request_key([{"role": "user", "content": "a"}]) != request_key([{"role": "user", "content": "b"}])


def test_base_url_and_port(srv):
    assert srv.port > 0
    assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"


def test_default_reply_shape_and_determinism(srv):
    client = _client(srv)
    first = client.chat.completions.create(model=MODEL, messages=HELLO)
    second = client.chat.completions.create(model=MODEL, messages=HELLO)
    assert isinstance(first, ChatCompletion)
    assert first.object == "chat.completion"
    assert first.model == MODEL
    choice = first.choices[0]
    assert choice.index == 0
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "fake answer " + request_key(HELLO)[:12]
    assert choice.message.tool_calls is None
    assert second.choices[0].message.content == choice.message.content
    usage = first.usage
    assert usage is not None
    assert usage.prompt_tokens == len(HELLO[0]["content"].split())
    assert usage.completion_tokens == 3
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert usage.completion_tokens_details.reasoning_tokens == 0
    assert second.usage == usage

    other = client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "bye"}]
    )
    assert other.model == "gpt-4.1-mini"
    assert other.choices[0].message.content != choice.message.content


def test_same_reply_from_an_independent_server(srv):
    with FakeOpenAIServer(seed=99) as other:
        a = httpx.post(srv.base_url + "/chat/completions", json=_chat_body(HELLO)).json()
        b = httpx.post(other.base_url + "/chat/completions", json=_chat_body(HELLO)).json()
    assert a["choices"] == b["choices"]
    assert a["usage"] == b["usage"]
    assert a["id"] == b["id"]


def test_paths_without_v1_prefix(srv):
    root = f"http://127.0.0.1:{srv.port}"
    with_prefix = httpx.post(srv.base_url + "/chat/completions", json=_chat_body(HELLO)).json()
    without = httpx.post(root + "/chat/completions", json=_chat_body(HELLO)).json()
    assert without["choices"] == with_prefix["choices"]
    assert httpx.get(root + "/models").json()["object"] == "list"
    assert (
        httpx.post(root + "/responses", json={"model": MODEL, "input": "hi"}).json()["object"] == "response"
    )


def test_models_endpoint(srv):
    models = _client(srv).models.list()
    ids = [m.id for m in models.data]
    assert MODEL in ids
    assert all(m.object == "model" for m in models.data)
    raw = httpx.get(srv.base_url + "/models").json()
    assert raw["object"] == "list"
    assert {"id", "object", "created", "owned_by"} <= set(raw["data"][0])


def test_responses_endpoint_parsed_by_sdk(srv):
    resp = _client(srv).responses.create(model=MODEL, input="what is new today")
    assert resp.object == "response"
    assert resp.status == "completed"
    assert resp.model == MODEL
    assert resp.output_text == "fake answer " + request_key("what is new today")[:12]
    item = resp.output[0]
    assert item.type == "message"
    assert item.role == "assistant"
    assert item.content[0].type == "output_text"
    assert resp.usage.input_tokens == 4
    assert resp.usage.output_tokens == 3
    assert resp.usage.total_tokens == 7
    assert resp.usage.input_tokens_details.cached_tokens == 0
    assert resp.usage.output_tokens_details.reasoning_tokens == 0
    key = request_key("what is new today")
    assert srv.stats()["ok_by_key"] == {key: 1}


def test_responses_tool_calls_from_script(srv):
    resp = _client(srv).responses.create(
        model=MODEL, input=[{"role": "user", "content": "weather tomorrow?"}]
    )
    calls = [o for o in resp.output if o.type == "function_call"]
    assert [c.name for c in calls] == ["web_search", "clock"]
    assert json.loads(calls[0].arguments) == {"query": "weather in Oslo"}
    assert calls[0].call_id.startswith("call_")


# --------------------------------------------------------------------------- scripts


def test_script_tool_calls_parsed_by_sdk(srv):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "weather in Oslo?"}]
    first = _client(srv).chat.completions.create(model=MODEL, messages=messages)
    again = _client(srv).chat.completions.create(model=MODEL, messages=messages)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["web_search", "clock"]
    assert all(c.type == "function" and c.id.startswith("call_") for c in calls)
    assert json.loads(calls[0].function.arguments) == {"query": "weather in Oslo"}
    assert json.loads(calls[1].function.arguments) == {}
    assert len({c.id for c in calls}) == 2
    assert [c.id for c in again.choices[0].message.tool_calls] == [c.id for c in calls]


def test_script_tool_results_matching(srv):
    client = _client(srv)
    base = [{"role": "user", "content": "weather in Oslo?"}]
    turn1 = client.chat.completions.create(model=MODEL, messages=base)
    calls = turn1.choices[0].message.tool_calls
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [c.model_dump(exclude_none=True) for c in calls],
    }
    one_result = [*base, assistant, {"role": "tool", "tool_call_id": calls[0].id, "content": "rainy, 7C"}]
    # one tool result: first rule needs 0, second needs 2 -> default reply
    turn2 = client.chat.completions.create(model=MODEL, messages=one_result)
    assert turn2.choices[0].message.content == "fake answer " + request_key(one_result)[:12]

    two_results = [*one_result, {"role": "tool", "tool_call_id": calls[1].id, "content": "09:15"}]
    turn3 = client.chat.completions.create(model=MODEL, messages=two_results)
    assert turn3.choices[0].finish_reason == "stop"
    assert turn3.choices[0].message.content == "Two results seen; last was: 09:15"


def test_script_model_error_and_usage_override(srv):
    client = _client(srv)
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="broken-model", messages=HELLO)
    assert err.value.status_code == 404
    assert err.value.body["message"] == "model does not exist"

    secret = [{"role": "system", "content": "The SECRET is 42"}, {"role": "user", "content": "tell me"}]
    reply = client.chat.completions.create(model=MODEL, messages=secret)
    assert reply.choices[0].message.content == "classified"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (
        111,
        7,
        118,
    )
    # pattern only looks at the last message, any_pattern at all of them
    assert srv.stats()["ok_by_key"] == {request_key(secret): 1}


def test_script_from_file_and_last_substitution(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"pattern": "^echo", "reply": "you said <{last}>"}]), encoding="utf-8")
    with FakeOpenAIServer(script=str(path)) as server:
        out = _client(server).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "echo {braces} ok"}]
        )
    assert out.choices[0].message.content == "you said <echo {braces} ok>"


def test_script_matches_tool_choice_and_schema_constrained_requests():
    forced = {"type": "function", "function": {"name": "web_search"}}
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    script = [{"tool_choice": forced, "tool_calls": [{"name": "web_search", "arguments": {"query": "q"}}]},
              {"tool_choice": "none", "reply": "told not to"},
              {"json_schema": True, "reply": '{"answer": "constrained"}'},
              {"json_schema": False, "tool_choice": None, "reply": "free text"}]
    tools = [{"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}]
    with FakeOpenAIServer(script=script) as server:
        client = _client(server)

        def ask(**kw):
            return client.chat.completions.create(model=MODEL, messages=HELLO, **kw).choices[0].message

        assert ask(tools=tools, tool_choice=forced).tool_calls[0].function.name == "web_search"
        assert ask(tools=tools, tool_choice="none").content == "told not to"
        assert ask(response_format={"type": "json_object", "schema": schema}).content == '{"answer": "constrained"}'
        assert ask(response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}).content \
            == '{"answer": "constrained"}'
        assert ask(response_format={"type": "json_object"}).content == "free text"  # JSON mode without a schema
        assert ask().content == "free text"
        assert ask(tools=tools, tool_choice="auto").content.startswith("fake answer ")  # no rule matches
    with pytest.raises(ValueError, match="'json_schema' must be true or false"):
        load_script([{"json_schema": "yes", "reply": "a"}])


def test_invalid_script_is_rejected():
    with pytest.raises(ValueError, match="exactly one"):
        load_script([{"pattern": "x", "reply": "a", "error": {"status": 400}}])
    with pytest.raises(ValueError, match="unknown keys"):
        load_script([{"patern": "x", "reply": "a"}])


# --------------------------------------------------------------------------- request validation and auth


def test_bad_requests_get_openai_error_shape(srv):
    url = srv.base_url + "/chat/completions"
    bad_json = httpx.post(
        url, content=b'{"model": "x", "messages": [', headers={"Content-Type": "application/json"}
    )
    assert bad_json.status_code == 400
    assert set(bad_json.json()["error"]) == {"message", "type", "param", "code"}
    assert bad_json.json()["error"]["type"] == "invalid_request_error"

    for missing in ("model", "messages"):
        body = _chat_body(HELLO)
        del body[missing]
        r = httpx.post(url, json=body)
        assert r.status_code == 400
        assert r.json()["error"]["param"] == missing

    streamed = httpx.post(url, json={**_chat_body(HELLO), "stream": True})
    assert streamed.status_code == 400
    assert "stream" in streamed.json()["error"]["message"].lower()

    with pytest.raises(openai.BadRequestError):
        _client(srv).responses.create(model=MODEL, input=None)  # type: ignore[arg-type]

    stats = srv.stats()
    assert stats["requests"] == 5
    assert stats["ok_by_key"] == {}


def test_require_key_rejects_wrong_key_without_echoing_it():
    secret = "sk-the-right-one"
    wrong = "sk-wrong-key-abcdef123456"
    with FakeOpenAIServer(require_key=secret) as server:
        bad = openai.OpenAI(base_url=server.base_url, api_key=wrong, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as err:
            bad.chat.completions.create(model=MODEL, messages=HELLO)
        raw = httpx.post(
            server.base_url + "/chat/completions",
            json=_chat_body(HELLO),
            headers={"Authorization": f"Bearer {wrong}"},
        )
        missing = httpx.post(server.base_url + "/chat/completions", json=_chat_body(HELLO))
        good = openai.OpenAI(base_url=server.base_url, api_key=secret, max_retries=0)
        ok = good.chat.completions.create(model=MODEL, messages=HELLO)
    assert err.value.status_code == 401
    assert raw.status_code == 401 and missing.status_code == 401
    assert set(raw.json()["error"]) == {"message", "type", "param", "code"}
    assert wrong not in raw.text and wrong[-6:] not in raw.text
    assert secret not in raw.text and secret not in missing.text
    assert ok.choices[0].message.content.startswith("fake answer ")


# --------------------------------------------------------------------------- faults


def test_fault_429_has_retry_after():
    with FakeOpenAIServer(fault_rate=1.0, fault_types=["429"], retry_after=0.25) as server:
        r = httpx.post(server.base_url + "/chat/completions", json=_chat_body(HELLO))
        with pytest.raises(openai.RateLimitError) as err:
            _client(server).chat.completions.create(model=MODEL, messages=HELLO)
        stats = server.stats()
    assert r.status_code == 429
    assert float(r.headers["Retry-After"]) == pytest.approx(0.25)
    assert r.headers["retry-after-ms"] == "250"
    error = r.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert set(error) == {"message", "type", "param", "code"}
    assert err.value.status_code == 429
    assert stats["faults"]["429"] == 2
    assert stats["ok_by_key"] == {}


def test_fault_500():
    with FakeOpenAIServer(fault_rate=1.0, fault_types=["500"]) as server:
        r = httpx.post(server.base_url + "/chat/completions", json=_chat_body(HELLO))
        with pytest.raises(openai.InternalServerError):
            _client(server).chat.completions.create(model=MODEL, messages=HELLO)
        stats = server.stats()
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "server_error"
    assert stats["faults"] == {"429": 0, "500": 2, "stall": 0, "malformed": 0}


def test_fault_malformed_body_cannot_be_parsed():
    with FakeOpenAIServer(fault_rate=1.0, fault_types=["malformed"]) as server:
        r = httpx.post(server.base_url + "/chat/completions", json=_chat_body(HELLO))
        with pytest.raises(ValueError):
            _client(server).chat.completions.create(model=MODEL, messages=HELLO)
        stats = server.stats()
    assert r.status_code == 200
    assert r.text.startswith('{"id":"chatcmpl-')
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.text)
    assert stats["faults"]["malformed"] == 2
    assert stats["ok_by_key"] == {}


def test_fault_stall_exceeds_client_timeout_and_stop_cuts_it_short():
    # The stall (10 min) outlasts every wait below, and each step waits for an event (a client
    # timeout, the server holding the patient request), never for how fast a loaded machine is.
    # The two impatient requests may or may not reach the server before their clients give up,
    # so only the patient one is counted.
    server = FakeOpenAIServer(fault_rate=1.0, fault_types=["stall"], stall_seconds=600.0).start()
    impatient = httpx.Timeout(60.0, read=0.3)  # only the wait for the reply is short
    patient = [{"role": "user", "content": "I can wait."}]
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.base_url + "/chat/completions", json=_chat_body(HELLO), timeout=impatient)
        with pytest.raises(openai.APITimeoutError):
            # the SDK's own Timeout: its transport need not be the httpx this test imports
            _client(server, timeout=openai.Timeout(60.0, read=0.3)).chat.completions.create(model=MODEL,
                                                                                         messages=HELLO)

        # leave one stalled request in flight with a patient client, then stop the server
        outcome: queue.Queue = queue.Queue()

        def patient_call():
            try:
                outcome.put(
                    httpx.post(server.base_url + "/chat/completions", json=_chat_body(patient), timeout=600)
                )
            except httpx.HTTPError as exc:
                outcome.put(exc)

        caller = threading.Thread(target=patient_call, daemon=True)
        caller.start()
        stats = server.wait_for(lambda s: s["stalled_by_key"].get(request_key(patient)) == 1, timeout=60)
        assert 1 <= stats["faults"]["stall"] <= 3
    finally:
        serving = server._thread
        server.stop(timeout=60)
    assert serving is not None and not serving.is_alive()  # stop returned because the server ended
    caller.join(60)
    assert not caller.is_alive()  # the patient call ended long before its 10-minute stall would have
    result = outcome.get_nowait()
    assert not (isinstance(result, httpx.Response) and result.status_code == 200)
    assert server.stats()["ok_by_key"] == {} and server.stats()["stalled_by_key"] == {}


def test_wait_for_returns_the_stats_that_met_the_condition_or_times_out():
    with FakeOpenAIServer() as server:
        with pytest.raises(TimeoutError, match=r"within 0\.05 s.*'requests': 0"):
            server.wait_for(lambda s: s["requests"] > 0, timeout=0.05)
        done = threading.Thread(target=lambda: _client(server).chat.completions.create(model=MODEL, messages=HELLO))
        done.start()
        stats = server.wait_for(lambda s: sum(s["ok_by_key"].values()) == 1, timeout=60)
        done.join(60)
    assert stats["requests"] == 1 and stats["ok_by_key"] == {request_key(HELLO): 1}


def test_fault_rate_zero_never_faults_and_one_always_faults():
    never = FakeOpenAIServer(fault_rate=0.0)
    always = FakeOpenAIServer(fault_rate=1.0, seed=3)
    keys = [request_key([{"role": "user", "content": f"q{i}"}]) for i in range(200)]
    assert all(never.decide_fault(k, 0) is None for k in keys)
    kinds = [always.decide_fault(k, 0) for k in keys]
    assert set(kinds) == set(FAULT_TYPES)  # every kind shows up
    assert min(kinds.count(k) for k in FAULT_TYPES) > 25  # roughly uniform (expected 50 each)


def test_fault_decisions_are_seeded_and_rate_is_respected():
    a = FakeOpenAIServer(fault_rate=0.3, seed=1)
    b = FakeOpenAIServer(fault_rate=0.3, seed=1)
    c = FakeOpenAIServer(fault_rate=0.3, seed=2)
    keys = [request_key([{"role": "user", "content": f"question {i}"}]) for i in range(1000)]
    seq_a = [a.decide_fault(k, n) for k in keys for n in range(2)]
    assert seq_a == [b.decide_fault(k, n) for k in keys for n in range(2)]
    assert seq_a != [c.decide_fault(k, n) for k in keys for n in range(2)]
    rate = sum(x is not None for x in seq_a) / len(seq_a)
    assert 0.25 < rate < 0.35


def test_retried_request_eventually_succeeds_and_is_reproducible():
    def run_once() -> tuple[list[object], dict]:
        # seed 112 happens to hit this key with all four fault kinds before the first success
        with FakeOpenAIServer(fault_rate=0.5, seed=112, stall_seconds=2.0, retry_after=0.0) as server:
            outcomes: list[object] = []
            body = None
            for _ in range(40):
                try:
                    r = httpx.post(
                        server.base_url + "/chat/completions", json=_chat_body(HELLO), timeout=0.25
                    )
                except httpx.TimeoutException:
                    outcomes.append("timeout")
                    continue
                try:
                    body = r.json() if r.status_code == 200 else None
                except json.JSONDecodeError:
                    body = None
                outcomes.append(r.status_code if body is None else "ok")
                if body is not None:
                    break
            assert body is not None, outcomes
            assert body["choices"][0]["message"]["content"] == "fake answer " + request_key(HELLO)[:12]
            return outcomes, server.stats()

    outcomes, stats = run_once()
    assert outcomes == [200, 429, "timeout", 500, "ok"]  # 200 here means a malformed body
    assert stats["faults"] == {"429": 1, "500": 1, "stall": 1, "malformed": 1}
    assert stats["ok_by_key"] == {request_key(HELLO): 1}
    assert stats["requests"] == len(outcomes)
    assert sum(stats["faults"].values()) == len(outcomes) - 1
    # a second fresh server with the same seed walks through exactly the same sequence
    assert run_once()[0] == outcomes


def test_reset_restarts_fault_sequence():
    with FakeOpenAIServer(fault_rate=0.5, seed=11, fault_types=["429", "500"]) as server:
        url = server.base_url + "/chat/completions"
        first = [httpx.post(url, json=_chat_body(HELLO)).status_code for _ in range(8)]
        reset = httpx.post(f"http://127.0.0.1:{server.port}/_reset")
        assert reset.status_code == 200
        assert server.stats()["requests"] == 0
        second = [httpx.post(url, json=_chat_body(HELLO)).status_code for _ in range(8)]
    assert first == second
    assert 200 in first and (429 in first or 500 in first)


# --------------------------------------------------------------------------- stats


def test_stats_endpoint_counts(srv):
    url = srv.base_url + "/chat/completions"
    other = [{"role": "user", "content": "another question"}]
    for _ in range(3):
        httpx.post(url, json=_chat_body(HELLO))
    httpx.post(url, json=_chat_body(other))
    httpx.post(url, content=b"not json")
    httpx.post(srv.base_url + "/responses", json={"model": MODEL, "input": other})
    httpx.get(srv.base_url + "/models")  # not a completion endpoint: not counted

    stats = httpx.get(f"http://127.0.0.1:{srv.port}/_stats").json()
    assert stats == srv.stats()
    assert stats["requests"] == 6
    # chat and responses share the key when messages == input
    assert stats["ok_by_key"] == {request_key(HELLO): 3, request_key(other): 2}
    assert stats["faults"] == {"429": 0, "500": 0, "stall": 0, "malformed": 0}

    srv.reset_stats()
    assert srv.stats() == {"requests": 0, "ok_by_key": {}, "faults": dict.fromkeys(FAULT_TYPES, 0),
                           "rate_limited": 0, "admitted": {}, "admitted_span_s": 0.0, "batches": 0, "files": 0,
                           "stalled_by_key": {}, "held": 0, "active": 0, "sampling": {}}


def test_concurrent_requests_with_latency():
    async def burst(base_url: str) -> list[int]:
        async with httpx.AsyncClient(base_url=base_url, limits=httpx.Limits(max_connections=32)) as client:
            replies = await asyncio.gather(
                *(
                    client.post("/chat/completions", json=_chat_body([{"role": "user", "content": f"n{i}"}]))
                    for i in range(64)
                )
            )
        return [r.status_code for r in replies]

    # concurrency is exercised here for correctness only; its speed is measured in benchmarks/
    with FakeOpenAIServer(latency=0.05) as server:
        codes = asyncio.run(burst(server.base_url))
        stats = server.stats()
    assert codes == [200] * 64
    assert len(stats["ok_by_key"]) == 64


# --------------------------------------------------------------------------- command line


def test_module_entry_point():
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "trek.testing.fake_openai", "--port", "0", "--seed", "5", "--latency", "0.01"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=15)
        prefix = "fake-openai listening on "
        assert line.startswith(prefix), line
        base_url = line[len(prefix) :].strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        assert port > 0

        client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        reply = client.chat.completions.create(model=MODEL, messages=HELLO)
        assert reply.choices[0].message.content == "fake answer " + request_key(HELLO)[:12]
        assert httpx.get(f"http://127.0.0.1:{port}/_stats").json()["ok_by_key"] == {request_key(HELLO): 1}
    finally:
        proc.terminate()
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert rc == 0
    rest = proc.stdout.read()
    assert rest == ""  # exactly one line on stdout
    proc.stdout.close()
    proc.stderr.close()


def test_a_bug_in_a_subclass_fails_the_call_at_once_with_its_message():
    """A script or subclass error is a 400 naming the exception (a 500 would be retried for minutes)."""

    class Broken(FakeOpenAIServer):
        def _pick_rule(self, model, texts, tool_results):  # the old signature: the server passes `body` too
            return None

    with Broken(script=SCRIPT) as server, pytest.raises(openai.BadRequestError) as err:
        _client(server).chat.completions.create(model=MODEL, messages=HELLO)
    assert err.value.status_code == 400
    assert "TypeError" in str(err.value) and "_pick_rule" in str(err.value)


def test_held_requests_wait_unanswered_until_release():
    with FakeOpenAIServer() as srv:
        srv.hold_after(1)
        first = httpx.post(srv.base_url + "/chat/completions", json=_chat_body(HELLO), timeout=30)
        assert first.status_code == 200 and srv.stats()["held"] == 0
        got: queue.Queue = queue.Queue()
        t = threading.Thread(target=lambda: got.put(httpx.post(srv.base_url + "/chat/completions",
                                                               json=_chat_body(HELLO), timeout=60)))
        t.start()
        stats = srv.wait_for(lambda s: s["held"] == 1, timeout=30)
        assert stats["ok_by_key"] == {request_key(HELLO): 1} and got.empty()  # the second is held, unanswered
        srv.release()
        t.join(60)
        assert got.get_nowait().status_code == 200 and srv.stats()["ok_by_key"] == {request_key(HELLO): 2}
        assert srv.stats()["held"] == 0 and srv.stats()["active"] == 0


def test_the_script_schema_describes_every_rule_key_and_agrees_with_the_loader():
    # `trek schema fake-script`: one property per key load_script accepts, and a rule the loader
    # refuses (two actions, an unknown key) is one the schema refuses too
    import jsonschema
    from typer.testing import CliRunner

    from trek.cli import app
    from trek.testing import fake_openai as fo

    r = CliRunner().invoke(app, ["schema", "fake-script"])
    assert r.exit_code == 0, r.output
    schema = json.loads(r.output)
    assert schema == fo.SCRIPT_SCHEMA
    assert set(schema["items"]["properties"]) == fo._MATCHER_KEYS | fo._ACTION_KEYS | fo._EXTRA_KEYS
    good = [{"pattern": "weather", "tool_results": 0, "tool_calls": [{"name": "search", "arguments": {"q": "w"}}]},
            {"tool_results": 1, "reply": "Based on the search: {last}"},
            {"model": "broken-model", "error": {"status": 400, "message": "nope"}, "usage": {"prompt_tokens": 3}}]
    jsonschema.validate(good, schema)
    assert len(fo.load_script(good)) == 3
    for bad in ([{"reply": "a", "error": {"status": 500}}], [{"reply": "a", "colour": "red"}], [{"model": "m"}]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        with pytest.raises(ValueError):
            fo.load_script(bad)


def test_the_pools_schema_accepts_the_recorded_pools_file():
    import jsonschema
    from typer.testing import CliRunner

    from trek.cli import app

    r = CliRunner().invoke(app, ["schema", "pools"])
    assert r.exit_code == 0, r.output
    schema = json.loads(r.output)
    pools = Path(__file__).resolve().parents[1] / "data" / "runs" / "ctrl" / "build" / "pools.jsonl"
    lines = [json.loads(x) for x in pools.read_text(encoding="utf-8").splitlines()[:20]]
    for line in lines:
        jsonschema.validate(line, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**lines[0], "surprise": 1}, schema)
    bad = CliRunner().invoke(app, ["schema", "nonsense"])
    assert bad.exit_code == 2 and "trajectory, pools, fake-script" in bad.output
