"""`trek llm run` and `trek cost` end to end, through the real CLI, against the fake server."""

from __future__ import annotations

import json
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
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    write_requests(req, 12)
    args = ["llm", "run", str(req), "--out", str(out), "--model", "fm", "--no-progress", "--max-retries", "0", "--timeout", "2.5"]
    with FakeOpenAIServer(fault_rate=0.5, seed=3, stall_seconds=6, retry_after=0.01) as srv:
        r = invoke(*args, "--base-url", srv.base_url)
        first = read_out(out)
        pending = [x for x in first if x["status"] == "pending"]
        assert r.exit_code == 3 and pending, "some requests should have failed once"
        assert all(x["content"] is None and x["error"] for x in pending)
        for _ in range(10):
            r = invoke(*args, "--base-url", srv.base_url)
            if r.exit_code == 0:
                break
        final = read_out(out)
    assert r.exit_code == 0
    assert all(x["status"] == "ok" for x in final)
    assert len({x["id"] for x in final}) == len(final) == 12
    assert all(v == 1 for v in srv.stats()["ok_by_key"].values())


@pytest.mark.parametrize(
    "line,message",
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "line 2: field 'id'"),
        ({"id": "a", "messages": [{"role": "user", "content": "x"}]}, "line 2: field 'id': duplicate id 'a' (first on line 1)"),
        ({"id": "b", "messages": []}, "line 2: field 'messages'"),
        ({"id": "b", "messages": [{"role": "robot", "content": "x"}]}, "line 2: field 'messages.0.role'"),
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
    with FakeOpenAIServer(fault_rate=0.3, seed=1, stall_seconds=2, retry_after=0.01) as srv:
        r = invoke("llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--model", "fm",
                   "--no-progress", "--timeout", "1", env=env)
        assert r.exit_code in (0, 3)
        assert secret not in r.output
    with FakeOpenAIServer(require_key="sk-something-else") as srv:
        r = runner.invoke(app, ["llm", "run", str(req), "--out", str(tmp_path / "o2.jsonl"), "--base-url", srv.base_url,
                                "--model", "fm2", "--no-progress"], env=env)
        assert r.exit_code == 2 and "401" in r.output and secret not in r.output
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f"key found in {f.name}"


def test_sigkill_halfway_then_resume(tmp_path):
    req, out, cache = tmp_path / "req.jsonl", tmp_path / "out.jsonl", tmp_path / "c.sqlite"
    rows = write_requests(req, 120)
    env = {**os.environ, "OPENAI_API_KEY": "sk-x"}
    with FakeOpenAIServer(latency=0.1) as srv:
        cmd = [sys.executable, "-m", "trek.cli", "llm", "run", str(req), "--out", str(out), "--cache", str(cache),
               "--base-url", srv.base_url, "--model", "fm", "--max-connections", "4", "--no-progress"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ok = srv.stats()["ok_by_key"]
            if len(ok) >= 40:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        conn = sqlite3.connect(cache)
        answered = {json.dumps(json.loads(r)["body"]["messages"]) for (r,) in conn.execute("SELECT request FROM responses")}
        conn.close()
        assert 0 < len(answered) < 120, "the kill should land half-way"
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
    from trek.llm.cost import summarize_usage
    from trek.llm.usage import PriceTable

    df = summarize_usage(run, PriceTable.load(prices)).set_index("model")
    # 1M in * $2 + 200k out * $10 = $2 + $2
    assert df.loc["gpt-4o", "cost_usd"] == pytest.approx(4.0)
    assert df.loc["gpt-4o", "cached_calls"] == 1
    assert df.loc["mystery-model", "cost_usd"] != df.loc["mystery-model", "cost_usd"]  # NaN: tokens only
    assert "$4.0000" in r.output and "mystery-model" in r.output
