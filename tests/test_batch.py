"""`trek llm run` and `trek cost` end to end, through the real CLI, against the fake server."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer
from trek.testing.fake_openai import request_key as server_key

runner = CliRunner()


def write_requests(path: Path, n: int, **extra) -> list[dict]:
    rows = [{"id": f"r{i}", "messages": [{"role": "user", "content": f"batch question {i}"}], **extra} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def read_out(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def invoke(*args: str, env: dict | None = None):
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


def test_run_writes_input_order_and_resumes_without_calls(tmp_path):
    req = tmp_path / "req.jsonl"
    out = tmp_path / "out.jsonl"
    write_requests(req, 30)
    with FakeOpenAIServer(latency=0.01) as srv:
        r = invoke("llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--model", "fm", "--no-progress")
        assert r.exit_code == 0, r.output
        lines = read_out(out)
        assert [x["id"] for x in lines] == [f"r{i}" for i in range(30)]
        assert all(x["status"] == "ok" and x["content"] and x["cached"] is False for x in lines)
        assert all(x["usage"]["prompt_tokens"] > 0 for x in lines)
        n = srv.stats()["requests"]
        r2 = invoke("llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--model", "fm", "--no-progress")
        assert r2.exit_code == 0
        assert srv.stats()["requests"] == n  # zero HTTP requests the second time
        assert read_out(out) == lines
        # a changed request under the same id is asked again, the others are kept
        rows = [json.loads(x) for x in req.read_text().splitlines()]
        rows[3]["messages"][0]["content"] = "changed"
        req.write_text("".join(json.dumps(x) + "\n" for x in rows))
        invoke("llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--model", "fm", "--no-progress")
        assert srv.stats()["requests"] == n + 1
        assert read_out(out)[3]["content"] != lines[3]["content"]
    assert (tmp_path / "llm-cache.sqlite").exists()


def test_pending_ids_are_retried_on_next_run(tmp_path):
    # Faults are a pure function of (seed, request, arrival): with seed 1, 7 of these 12
    # requests fail on their first arrival and the unluckiest one on its first two, so three
    # runs without retries finish, deterministically and without any backoff wait.
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 12)
    args = ["llm", "run", str(req), "--out", str(out), "--model", "fm", "--no-progress", "--max-retries", "0"]
    with FakeOpenAIServer(fault_rate=0.4, seed=1, fault_types=["429", "500", "malformed"], retry_after=0.01) as srv:
        r1 = invoke(*args, "--base-url", srv.base_url)
        first = read_out(out)
        pending = [x for x in first if x["status"] == "pending"]
        assert r1.exit_code == 3 and len(pending) == 7
        assert all(x["content"] is None and x["error"] for x in pending)
        r2 = invoke(*args, "--base-url", srv.base_url)
        second = read_out(out)
        assert r2.exit_code == 3 and 0 < sum(x["status"] == "pending" for x in second) < 7
        assert srv.stats()["requests"] == 12 + 7  # only the pending ones were asked again
        r3 = invoke(*args, "--base-url", srv.base_url)
        final = read_out(out)
    assert r3.exit_code == 0
    assert all(x["status"] == "ok" for x in final)
    assert [x["id"] for x in final] == [f"r{i}" for i in range(12)]
    assert all(v == 1 for v in srv.stats()["ok_by_key"].values())


@pytest.mark.parametrize(
    "line,message",
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "line 2: field 'id'"),
        ({"id": "a", "messages": [{"role": "user", "content": "x"}]}, "line 2: field 'id': duplicate id 'a' (first on line 1)"),
        ({"id": "b", "messages": []}, "line 2: field 'messages'"),
        ({"id": "b", "messages": [{"role": "robot", "content": "x"}]}, "line 2: id 'b': field 'messages.0.role'"),
        ({"id": "b", "messages": [{"role": "user", "content": "x"}], "stream": True}, "line 2: field 'stream'"),
    ],
)
def test_bad_requests_name_file_line_field(tmp_path, line, message):
    req = tmp_path / "req.jsonl"
    req.write_text(json.dumps({"id": "a", "messages": [{"role": "user", "content": "x"}]}) + "\n" + json.dumps(line) + "\n")
    r = runner.invoke(app, ["llm", "run", str(req), "--out", str(tmp_path / "o.jsonl"), "--model", "m", "--base-url", "http://127.0.0.1:9/v1"])
    assert r.exit_code == 2
    flat = " ".join(r.output.split())
    assert str(req.name) in flat and message in flat
    assert not (tmp_path / "o.jsonl").exists()


def test_key_never_written_anywhere(tmp_path):
    secret = "sk-trek-test-SECRET-0123456789"
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 10)
    env = {"OPENAI_API_KEY": secret}
    with FakeOpenAIServer(fault_rate=0.3, seed=1, stall_seconds=0.3, retry_after=0.01) as srv:
        r = invoke("llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--model", "fm",
                   "--no-progress", "--timeout", "0.2", "--max-retries", "1", env=env)
        assert r.exit_code in (0, 3)
        assert secret not in r.output
    with FakeOpenAIServer(require_key="sk-something-else") as srv:
        r = runner.invoke(app, ["llm", "run", str(req), "--out", str(tmp_path / "o2.jsonl"), "--base-url", srv.base_url,
                                "--model", "fm2", "--no-progress"], env=env)
        assert r.exit_code == 2 and "401" in r.output and secret not in r.output
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f"key found in {f.name}"


@pytest.mark.slow
def test_sigkill_halfway_then_resume(tmp_path):
    req, out, cache = tmp_path / "req.jsonl", tmp_path / "out.jsonl", tmp_path / "c.sqlite"
    rows = write_requests(req, 60)
    env = {**os.environ, "OPENAI_API_KEY": "sk-x"}
    with FakeOpenAIServer(latency=0.05) as srv:
        cmd = [sys.executable, "-m", "trek.cli", "llm", "run", str(req), "--out", str(out), "--cache", str(cache),
               "--base-url", srv.base_url, "--model", "fm", "--max-connections", "4", "--no-progress"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ok = srv.stats()["ok_by_key"]
            if len(ok) >= 20:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        conn = sqlite3.connect(cache)
        answered = {json.dumps(json.loads(r)["body"]["messages"]) for (r,) in conn.execute("SELECT request FROM responses")}
        conn.close()
        assert 0 < len(answered) < 60, "the kill should land half-way"
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        stats = srv.stats()["ok_by_key"]
    final = read_out(out)
    assert [x["id"] for x in final] == [r["id"] for r in rows]
    assert all(x["status"] == "ok" for x in final)
    for msgs in answered:
        assert stats[server_key(json.loads(msgs))] == 1  # never asked again after the kill


def test_cost_command(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    recs = [
        {"id": "a", "model": "gpt-4o", "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 100_000, "calls": 1}},
        {"id": "b", "model": "gpt-4o", "usage": {"prompt_tokens": 0, "completion_tokens": 100_000, "calls": 1, "cached_calls": 1}},
        {"id": "c", "model": "mystery-model", "usage": {"prompt_tokens": 5, "completion_tokens": 5, "calls": 1}},
    ]
    (run / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"gpt-4o": {"input": 2.0, "output": 10.0}}))
    r = invoke("cost", str(run), "--prices", str(prices))
    assert r.exit_code == 0
    from trek.costs import summarize_usage
    from trek.llm.usage import PriceTable

    df = summarize_usage(run, PriceTable.load(prices)).set_index("model")
    # 1M in * $2 + 200k out * $10 = $2 + $2
    assert df.loc["gpt-4o", "cost_usd"] == pytest.approx(4.0)
    assert df.loc["gpt-4o", "cached_calls"] == 1
    assert df.loc["mystery-model", "cost_usd"] != df.loc["mystery-model", "cost_usd"]  # NaN: tokens only
    assert "$4.0000" in r.output and "mystery-model" in r.output


# -- data safety ------------------------------------------------------------------------------
def run_cli(tmp_path, srv, req, out, *extra, env=None):
    base = ["llm", "run", str(req), "--out", str(out), "--model", "fake-model", "--no-progress",
            "--base-url", srv.base_url if srv else "http://127.0.0.1:9/v1"]
    r = runner.invoke(app, [*base, *extra], env=env)
    return r.exit_code, " ".join(r.output.split())


def test_out_equal_to_the_requests_file_is_refused(tmp_path):
    req = tmp_path / "req.jsonl"
    write_requests(req, 3)
    before = req.read_text()
    code, msg = run_cli(tmp_path, None, req, tmp_path / "." / "req.jsonl")
    assert code == 2 and "is the requests file" in msg
    assert req.read_text() == before


def test_a_second_run_on_the_same_out_is_refused(tmp_path):
    from trek.batch import _locked

    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 3)
    with FakeOpenAIServer() as srv, _locked(out):  # as if another `trek llm run` were writing it
        code, msg = run_cli(tmp_path, srv, req, out)
        assert code == 2 and "another run is writing" in msg
        assert srv.stats()["requests"] == 0
    with FakeOpenAIServer() as srv:  # the lock goes with its holder
        assert run_cli(tmp_path, srv, req, out)[0] == 0


def test_answered_ids_missing_from_the_requests_file_are_not_discarded(tmp_path):
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    rows = write_requests(req, 5)
    with FakeOpenAIServer() as srv:
        assert run_cli(tmp_path, srv, req, out)[0] == 0
        paid = out.read_text()
        req.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
        code, msg = run_cli(tmp_path, srv, req, out)
        assert code == 2 and "2 answered ids" in msg and "r3, r4" in msg
        assert out.read_text() == paid and srv.stats()["requests"] == 5
        # reordering the requests keeps every answer and follows the new order, with no call
        req.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
        assert run_cli(tmp_path, srv, req, out)[0] == 0
        assert srv.stats()["requests"] == 5
    assert read_out(out) == list(reversed([json.loads(x) for x in paid.splitlines()]))


def test_budget_caps_spend_across_resumes(tmp_path):
    # $1 per completion token; a call is estimated at max_tokens=3 ($3) and the fake's replies
    # have 3 tokens ($3): calls are issued while spent + reserved + $3 <= $10, i.e. 3 ($9).
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 8, max_tokens=3)
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"fake-model": {"input": 0, "output": 1e6}}))
    args = ["--budget", "10", "--prices", str(prices), "--max-connections", "1"]
    with FakeOpenAIServer() as srv:
        code, msg = run_cli(tmp_path, srv, req, out, *args)
        assert code == 3 and srv.stats()["requests"] == 3
        code, msg = run_cli(tmp_path, srv, req, out, *args)  # a resume does not get a fresh $10
        assert code == 3 and srv.stats()["requests"] == 3
        assert all("in earlier runs" in x["error"] for x in read_out(out) if x["status"] == "pending")
        code, msg = run_cli(tmp_path, srv, req, out, "--budget", "100", "--prices", str(prices))
        assert code == 0 and srv.stats()["requests"] == 8


@pytest.mark.parametrize("option,value", [("--budget", "nan"), ("--budget", "-1"), ("--transport", "curl")])
def test_bad_settings_are_refused(tmp_path, option, value):
    req = tmp_path / "req.jsonl"
    write_requests(req, 1)
    code, msg = run_cli(tmp_path, None, req, tmp_path / "o.jsonl", option, value)
    assert code == 2 and option.strip("-") in msg


def test_negative_price_is_refused(tmp_path):
    req, prices = tmp_path / "req.jsonl", tmp_path / "p.json"
    write_requests(req, 1)
    prices.write_text(json.dumps({"fake-model": {"input": -1, "output": 1}}))
    code, msg = run_cli(tmp_path, None, req, tmp_path / "o.jsonl", "--prices", str(prices))
    assert code == 2 and "non-negative" in msg


def test_unusable_out_and_cache_are_refused_before_any_call(tmp_path):
    req = tmp_path / "req.jsonl"
    write_requests(req, 2)
    (tmp_path / "folder").mkdir()
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    (tmp_path / "a-file").write_text("x")
    cases = [
        ((tmp_path / "folder",), "is a folder"),
        ((tmp_path / "a-file" / "out.jsonl",), "is a file, not a folder"),
        ((tmp_path / "o.jsonl", "--cache", str(tmp_path / "folder")), "is a folder"),
        ((tmp_path / "o.jsonl", "--cache", str(garbage)), "SQLite"),
    ]
    with FakeOpenAIServer() as srv:
        for (out, *extra), expected in cases:
            code, msg = run_cli(tmp_path, srv, req, out, *extra)
            assert code == 2 and expected in msg and "Traceback" not in msg, msg
        assert srv.stats()["requests"] == 0
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize(
    "content,expected",
    [
        (b'{"id": "a", "messages": [{"role": "user", "content": "x"}]}\n\xff\xfe\x00binary\n', "not UTF-8"),
        (b'{"id": "a", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}\n', "line 1: not valid JSON (NaN"),
    ],
)
def test_binary_or_nan_input_names_file_and_line(tmp_path, content, expected):
    req = tmp_path / "req.jsonl"
    req.write_bytes(content)
    code, msg = run_cli(tmp_path, None, req, tmp_path / "o.jsonl")
    assert code == 2 and "req.jsonl" in msg and expected in msg, msg


def test_an_out_that_is_not_an_earlier_output_is_left_alone(tmp_path):
    req, out = tmp_path / "req.jsonl", tmp_path / "notes.txt"
    write_requests(req, 1)
    out.write_text("my precious notes\n")
    code, msg = run_cli(tmp_path, None, req, out)
    assert code == 2 and "not an earlier output" in msg and "line 1" in msg
    assert out.read_text() == "my precious notes\n"


def test_unreadable_requests_file(tmp_path):
    code, msg = run_cli(tmp_path, None, tmp_path, tmp_path / "o.jsonl")
    assert code == 2 and "is a folder" in msg


def test_cost_prices_a_proxy_search_model_at_its_own_rate(tmp_path):
    from trek.costs import summarize_usage
    from trek.llm.usage import PriceTable

    run = tmp_path / "run"
    run.mkdir()
    # 1M prompt tokens in all, of which 400k were spent by the proxy search model
    rec = {"question_id": "q", "model": "gpt-4o", "system": {"proxy_model": "cheap-search"},
           "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 0, "calls": 3},
           "search_usage": {"prompt_tokens": 400_000, "completion_tokens": 0, "calls": 2}}
    (run / "answers.jsonl").write_text(json.dumps(rec) + "\n")
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"gpt-4o": {"input": 2.0, "output": 10.0}, "cheap-search": {"input": 0.5, "output": 1.0}}))
    df = summarize_usage(run, PriceTable.load(prices)).set_index("model")
    assert df.loc["gpt-4o", "prompt_tokens"] == 600_000 and df.loc["gpt-4o", "calls"] == 1
    assert df.loc["cheap-search", "prompt_tokens"] == 400_000
    assert df.loc["gpt-4o", "cost_usd"] == pytest.approx(1.2) and df.loc["cheap-search", "cost_usd"] == pytest.approx(0.2)
    assert df.loc["", "cost_usd"] == pytest.approx(1.4)  # the TOTAL row


# -- bad input and faults (the output rule, input read once, request fields, one id failing alone) -----
def test_requests_from_a_pipe_are_read_once(tmp_path):
    # a named pipe can be read once, as /dev/stdin fed by a shell; written from a thread, so the
    # command runs in this process (a fresh process would only add its start-up)
    import threading

    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 4)
    fifo = tmp_path / "requests.pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(req.read_text()), daemon=True)
    writer.start()
    with FakeOpenAIServer() as srv:
        r = invoke("llm", "run", str(fifo), "--out", str(out), "--model", "fm", "--base-url", srv.base_url,
                   "--no-progress", env={"OPENAI_API_KEY": "k"})
        assert r.exit_code == 0, r.output
        assert "4 ids: 4 ok" in " ".join(r.output.split())
        assert srv.stats()["requests"] == 4
    writer.join(10)
    assert not writer.is_alive()
    assert [x["id"] for x in read_out(out)] == ["r0", "r1", "r2", "r3"]


def test_devices_pipes_and_run_inputs_are_refused_as_out(tmp_path):
    req = tmp_path / "req.jsonl"
    write_requests(req, 2)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1, "output": 1}}))
    cases = [
        (("/dev/full",), "is a device"),  # it used to be read as an earlier output, without end
        ((fifo,), "is a pipe"),
        ((tmp_path / "c.sqlite", "--cache", str(tmp_path / "c.sqlite")), "a file this command reads"),
        ((prices, "--prices", str(prices)), "a file this command reads"),
    ]
    with FakeOpenAIServer() as srv:
        for (out, *extra), expected in cases:
            code, msg = run_cli(tmp_path, srv, req, out, *extra)
            assert code == 2 and expected in msg, msg
        assert srv.stats()["requests"] == 0
    import stat

    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and stat.S_ISFIFO(fifo.stat().st_mode)
    assert json.loads(prices.read_text()) == {"fake-model": {"input": 1, "output": 1}}


@pytest.mark.parametrize("line, expected", [
    ({"messages": [{"role": "user", "content": 5}]}, "field 'messages.0.content': must be text or a list of parts"),
    ({"messages": [{"role": "user", "content": None}]}, "field 'messages.0.content': must be text, not null"),
    ({"messages": [{"role": "user", "content": [7]}]}, "field 'messages.0.content': part 0 must be an object"),
    ({"temperature": "hot"}, "field 'temperature': must be a number from 0 to 2, got 'hot'"),
    ({"temperature": 3}, "field 'temperature': must be a number from 0 to 2"),
    ({"top_p": -0.1}, "field 'top_p'"),
    ({"max_tokens": -5}, "field 'max_tokens': must be a whole number of tokens, at least 1, got -5"),
    ({"max_completion_tokens": 2.5}, "field 'max_completion_tokens'"),
    ({"seed": "x"}, "field 'seed'"),
])
def test_request_fields_are_checked_before_any_call(tmp_path, line, expected):
    req = tmp_path / "req.jsonl"
    good = {"id": "ok-1", "messages": [{"role": "user", "content": "fine"}]}
    bad = {**good, "id": "bad-2", **line}
    req.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with FakeOpenAIServer() as srv:
        code, msg = run_cli(tmp_path, srv, req, tmp_path / "o.jsonl")
        assert srv.stats()["requests"] == 0
    assert code == 2 and "req.jsonl, line 2: id 'bad-2':" in msg and expected in msg, msg


def test_an_oversized_message_fails_alone_named_by_file_line_and_id(tmp_path):
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    rows = [{"id": "a", "messages": [{"role": "user", "content": "short one"}]},
            {"id": "huge", "messages": [{"role": "user", "content": "word " * 240_000}]},  # 1,200,000 characters
            {"id": "c", "messages": [{"role": "user", "content": "short two"}]}]
    req.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeOpenAIServer() as srv:  # its body limit (1 MB) answers 413, as an endpoint refuses a too-long prompt
        code, msg = run_cli(tmp_path, srv, req, out)
        assert code == 4, msg
        assert "req.jsonl, line 2, id 'huge': request rejected: 413" in msg and "1 failed" in msg
        lines = {x["id"]: x for x in read_out(out)}
        assert lines["a"]["status"] == lines["c"]["status"] == "ok"
        assert lines["huge"]["status"] == "failed" and "line 2, id 'huge'" in lines["huge"]["error"]
        assert lines["huge"]["content"] is None
        n = srv.stats()["requests"]
        code, _ = run_cli(tmp_path, srv, req, out)  # a re-run keeps the answers and tries the failed id again
        assert code == 4 and srv.stats()["requests"] == n + 1


# -- the output is a journal while the run goes on -------------------------------------------------
def test_results_are_appended_and_the_output_rewritten_once(tmp_path, monkeypatch):
    import trek.batch as batch
    import trek.stage
    from trek.aio import run_sync
    from trek.llm import LLMClient

    rewrites: list[int] = []
    real = trek.stage.write_jsonl

    def counting(path, rows):
        rows = list(rows)
        rewrites.append(len(rows))
        return real(path, rows)

    monkeypatch.setattr(trek.stage, "write_jsonl", counting)  # the executor's compaction
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 120)
    with FakeOpenAIServer() as srv:
        client = LLMClient("fm", base_url=srv.base_url, api_key="k", progress=False, max_connections=4,
                           cache=tmp_path / "c.sqlite")
        s = run_sync(batch.run_batch(req, out, client, checkpoint_seconds=0.0))
        assert s.ok == 120 and rewrites == [120]  # 120 checkpoints appended; one compaction at the end
        assert [x["id"] for x in read_out(out)] == [f"r{i}" for i in range(120)]
        # nothing left to do: the output is not touched at all
        rewrites.clear()
        ino = out.stat().st_ino, out.stat().st_mtime_ns
        client = LLMClient("fm", base_url=srv.base_url, api_key="k", progress=False, cache=tmp_path / "c.sqlite")
        run_sync(batch.run_batch(req, out, client))
        assert rewrites == [] and (out.stat().st_ino, out.stat().st_mtime_ns) == ino


def test_a_killed_runs_journal_resumes_superseded_lines_and_a_partial_tail(tmp_path):
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    rows = write_requests(req, 4)
    with FakeOpenAIServer() as srv:
        args = ["llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--model", "fm", "--no-progress"]
        assert invoke(*args).exit_code == 0
        done = read_out(out)
        n = srv.stats()["requests"]
        # as a kill -9 leaves it: r1 first pending then answered (appended later), r3 cut mid-line
        pend = {**done[1], "status": "pending", "content": None, "error": "timed out"}
        text = "".join(json.dumps(x) + "\n" for x in (done[0], pend, done[2], done[1])) + json.dumps(done[3])[:25]
        out.write_text(text)
        r = invoke(*args)
        assert r.exit_code == 0, r.output
        assert srv.stats()["requests"] == n  # r3's reply is in the cache; r1's later line counts
        assert [x["id"] for x in read_out(out)] == [x["id"] for x in rows]
        assert [x["status"] for x in read_out(out)] == ["ok"] * 4


def test_a_torn_last_line_is_reported_once_and_its_request_sent_again(tmp_path, caplog):
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 5)
    with FakeOpenAIServer() as srv:
        args = ["llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--model", "fm", "--no-progress"]
        assert invoke(*args).exit_code == 0
        whole = out.read_bytes()
        lines = whole.splitlines(keepends=True)
        out.write_bytes(b"".join(lines[:4]) + lines[4][:20])  # killed while writing the last line
        n = srv.stats()["requests"]
        with caplog.at_level(logging.WARNING, logger="trek"):
            r = invoke(*args, env={"OPENAI_API_KEY": "sk-x"})
        assert r.exit_code == 0, r.output
        torn = [rec.getMessage() for rec in caplog.records if "partial last line" in rec.getMessage()]
        assert len(torn) == 1 and "out.jsonl, line 5" in torn[0], caplog.text
        assert srv.stats()["requests"] == n  # the torn line's reply comes from the cache
    assert [x["id"] for x in read_out(out)] == [f"r{i}" for i in range(5)]


def test_a_requests_file_is_checked_whole_then_read_again_holding_no_request(tmp_path, monkeypatch):
    import trek.batch as batch
    from trek.aio import run_sync
    from trek.llm import LLMClient
    from trek.stage import window
    from trek.types import RecordError

    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 600)
    src = batch.read_requests(req, "fm")
    assert isinstance(src, batch.RequestsFile) and len(src) == 600
    assert list(src) == list(src) == batch.load_requests(req, "fm")  # every pass gives the same requests
    # the whole file is checked when it is read, with load_requests' errors: a duplicate id far down
    bad = tmp_path / "bad.jsonl"
    bad.write_text(req.read_text() + json.dumps({"id": "r7", "messages": [{"role": "user", "content": "x"}]}) + "\n")
    for read in (batch.read_requests, batch.load_requests):
        with pytest.raises(RecordError, match=r"line 601.*duplicate id 'r7' \(first on line 8\)"):
            read(bad, "fm")
    # a file changed after its check is refused at the next pass, not read as other requests
    changed = tmp_path / "changed.jsonl"
    write_requests(changed, 3)
    later = batch.read_requests(changed, "fm")
    write_requests(changed, 4)
    with pytest.raises(batch.BatchError, match="changed after its requests were checked"):
        iter(later)

    class Counted(batch.BatchItem):
        alive = most = 0

        def __init__(self, *args):
            super().__init__(*args)
            type(self).alive += 1
            type(self).most = max(type(self).most, type(self).alive)

        def __del__(self):
            type(self).alive -= 1

    monkeypatch.setattr(batch, "BatchItem", Counted)
    with FakeOpenAIServer() as srv:
        client = LLMClient("fm", base_url=srv.base_url, api_key="k", progress=False, max_connections=4,
                           cache=tmp_path / "c.sqlite")
        limit = window(batch.BatchStage(out, client, req))
        s = run_sync(batch.run_batch(req, out, client))
    assert s.ok == 600 and limit < 600
    # the requests in flight and the one being read, not the file's 600
    assert 0 < Counted.most <= limit + 3 and Counted.alive == 0, (Counted.most, limit)
    assert [x["id"] for x in read_out(out)] == [f"r{i}" for i in range(600)]
