"""The exit codes of docs/exit-codes.md, one case per code per family of commands, in process.

0 done; 1 a "no" that is not an error; 2 usage, bad input or an error that stops the command;
3 not finished; 4 finished but for items the endpoint rejected; 130 interrupted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from _scripts import load_script
from typer.testing import CliRunner

from trek.cli import app
from trek.datasets import mini
from trek.testing.fake_openai import FakeOpenAIServer

MODEL, JUDGE, DIAG, ANA = "demo-lm", "demo-judge", "demo-diagnostic-judge", "demo-analysis-judge"
DOC = Path(__file__).resolve().parents[1] / "docs" / "exit-codes.md"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in [k for k in os.environ if k.startswith(("OPENAI_", "TREK_"))]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def invoke(*args, **kw):
    return CliRunner().invoke(app, [str(a) for a in args], **kw)


def wild(srv, run: Path, *more) -> list:
    return ["wild", "run", "--model", "m", "--base-url", srv.base_url, "--questions", "mini", "--search", "none",
            "--run", run, "--no-progress", "--max-retries", "0", "--limit", "2", *more]


def test_the_page_lists_each_code_once():
    codes = re.findall(r"^\| (\d+) \|", DOC.read_text(encoding="utf-8"), flags=re.M)
    assert codes == ["0", "1", "2", "3", "4", "130"]


# -- trek wild run (and trek retry, which runs the same code) ------------------------------------
@pytest.mark.slow  # five runs against the fake server
def test_wild_run(tmp_path, mini_bench, monkeypatch):
    doomed = mini_bench.questions[1].question.split("?")[0][:40]
    with FakeOpenAIServer(script=[{"reply": "an answer"}]) as srv:
        assert invoke(*wild(srv, tmp_path / "ok")).exit_code == 0
        r = invoke(*wild(srv, tmp_path / "bad", "--system", "nope"))
        assert r.exit_code == 2 and "--system" in r.output
    with FakeOpenAIServer(script=[{"error": {"status": 503, "message": "overloaded"}}]) as srv:
        r = invoke(*wild(srv, tmp_path / "pending"))
        assert r.exit_code == 3 and "pending" in r.output, r.output
    with FakeOpenAIServer(script=[{"pattern": doomed, "error": {"status": 400, "message": "context too long"}},
                                  {"reply": "an answer"}]) as srv:
        r = invoke(*wild(srv, tmp_path / "failed"))
        assert r.exit_code == 4 and "1 failed" in r.output, r.output
        # interrupted (Ctrl-C, SIGTERM): 130
        import trek.answering.wild as W

        def interrupted(*a, **k):
            raise KeyboardInterrupt

        monkeypatch.setattr(W, "run_wild", interrupted)
        assert invoke(*wild(srv, tmp_path / "stopped")).exit_code == 130


@pytest.fixture(scope="module")
def mini_bench():
    return mini.load()


# -- trek grade and trek trace --------------------------------------------------------------------
@pytest.fixture(scope="module")
def answered(tmp_path_factory, mini_bench):
    """A demo run of three questions, answered by the demo script (not graded)."""
    script = (load_script("demo_runs").demo_script(mini_bench.questions, mini_bench)
              + load_script("demo_trace").demo_trace_script(mini_bench, MODEL))
    run = tmp_path_factory.mktemp("answered") / "run"
    with pytest.MonkeyPatch.context() as mp, FakeOpenAIServer(script=script) as srv:
        for var in [k for k in os.environ if k.startswith(("OPENAI_", "TREK_"))]:
            mp.delenv(var)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        r = invoke("wild", "run", "--model", MODEL, "--base-url", srv.base_url, "--run", run, "--questions", "mini",
                   "--search", "local", "--system", "search-then-read", "--limit", "3", "--no-progress")
        assert r.exit_code == 0, r.output
    return run, script


def copy(run: Path, tmp_path: Path) -> Path:
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


@pytest.mark.slow  # the demo chain against the fake server
def test_grade(answered, tmp_path):
    run, script = answered
    with FakeOpenAIServer(script=script) as srv:
        assert invoke("grade", tmp_path / "nowhere", "--judge", JUDGE, "--judge-base-url", srv.base_url).exit_code == 2
        r = invoke("grade", copy(run, tmp_path / "a"), "--judge", JUDGE, "--judge-base-url", srv.base_url,
                   "--no-progress")
        assert r.exit_code == 0, r.output
    with FakeOpenAIServer(script=[{"reply": "I would rather not say."}]) as srv:  # unreadable verdicts
        r = invoke("grade", copy(run, tmp_path / "b"), "--judge", "j", "--judge-base-url", srv.base_url,
                   "--no-progress", "--max-retries", "0")
        assert r.exit_code == 3 and "--regrade unparsed" in r.output, r.output
    with FakeOpenAIServer(script=[{"error": {"status": 400, "message": "this request is too long"}}]) as srv:
        r = invoke("grade", copy(run, tmp_path / "c"), "--judge", "j", "--judge-base-url", srv.base_url,
                   "--no-progress", "--max-retries", "0")
        assert r.exit_code == 4 and "failed" in r.output, r.output


@pytest.mark.slow  # the demo chain against the fake server
def test_trace(answered, tmp_path):
    run, script = answered
    run = copy(run, tmp_path)
    with FakeOpenAIServer(script=script) as srv:
        args = ["trace", run, "--diagnostic-judge", DIAG, "--analysis-judge", ANA, "--judge-base-url", srv.base_url,
                "--base-url", srv.base_url, "--no-progress"]
        assert invoke("trace", tmp_path / "nowhere", "--judge", "oracle").exit_code == 2
        r = invoke(*args)  # nothing graded yet: nothing that needed tracing could be traced
        assert r.exit_code == 3 and f"trek grade {run}" in r.output, r.output
        assert invoke("grade", run, "--judge", JUDGE, "--judge-base-url", srv.base_url, "--no-progress").exit_code == 0
        r = invoke(*args)
        assert r.exit_code == 0, r.output


# -- trek llm run, and the cost question every spending command asks --------------------------------
def requests_file(tmp_path: Path, n: int = 2) -> Path:
    p = tmp_path / "req.jsonl"
    p.write_text("".join(json.dumps({"id": f"r{i}", "model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
                         + "\n" for i in range(n)))
    return p


def test_llm_run(tmp_path, monkeypatch):
    req = requests_file(tmp_path)
    out = lambda name: ["--out", tmp_path / name, "--no-progress", "--max-retries", "0"]  # noqa: E731
    with FakeOpenAIServer() as srv:
        assert invoke("llm", "run", req, "--base-url", srv.base_url, *out("ok.jsonl")).exit_code == 0
        assert invoke("llm", "run", tmp_path / "missing.jsonl", "--base-url", srv.base_url,
                      *out("x.jsonl")).exit_code == 2
        assert invoke("llm", "run", req, "--bogus-option").exit_code == 2  # click's usage error
        # the cost question answered no: 1
        prices = tmp_path / "prices.json"
        prices.write_text(json.dumps({"m": {"input": 1000.0, "output": 1000.0}}))
        import trek.cli.options as O

        monkeypatch.setattr(O, "sys", type("S", (), {"stdin": type("T", (), {"isatty": staticmethod(lambda: True)})}))
        r = invoke("llm", "run", req, "--base-url", srv.base_url, "--prices", prices, "--confirm-above", "0",
                   *out("asked/asked.jsonl"), input="n\n")
        assert r.exit_code == 1 and "not started" in r.output, r.output
    with FakeOpenAIServer(script=[{"error": {"status": 503, "message": "overloaded"}}]) as srv:
        assert invoke("llm", "run", req, "--base-url", srv.base_url, *out("pending.jsonl")).exit_code == 3
    with FakeOpenAIServer(script=[{"pattern": "q1", "error": {"status": 400, "message": "bad request"}}]) as srv:
        assert invoke("llm", "run", req, "--base-url", srv.base_url, *out("failed.jsonl")).exit_code == 4


# -- trek data, trek runs list, trek ctrl ---------------------------------------------------------
def test_data(tmp_path):
    from test_mini_timeline import _copy_without_generated

    assert invoke("data", "info", "--mini").exit_code == 0
    r = invoke("data", "info", "--data-dir", tmp_path / "empty")  # no source files: bad input, 2
    assert r.exit_code == 2 and "FreshQA" in r.output
    r = invoke("data", "download", "--only", "no-such-dataset", "--data-dir", tmp_path / "d")
    assert r.exit_code == 2, r.output
    r = invoke("data", "mini-generate", "--mini-dir", _copy_without_generated(tmp_path), "--check")
    assert r.exit_code == 1 and "differs" in r.output  # a check's "no"


def test_a_download_that_fails_is_an_error(tmp_path, monkeypatch):
    from test_datasets import fake_pin, refused_url

    from trek.datasets import download as dl

    monkeypatch.setattr(dl, "PINS", (fake_pin(refused_url(), b"bytes\n"),))
    r = invoke("data", "download", "--data-dir", tmp_path)
    assert r.exit_code == 2 and "freshqa/test.csv" in r.output, r.output


def test_runs_list(tmp_path):
    with FakeOpenAIServer(script=[{"reply": "an answer"}]) as srv:
        assert invoke(*wild(srv, tmp_path / "runs" / "one")).exit_code == 0
    assert invoke("runs", "list", tmp_path / "runs").exit_code == 0
    (tmp_path / "empty").mkdir()
    assert invoke("runs", "list", tmp_path / "empty").exit_code == 1  # found nothing
    assert invoke("runs", "list", tmp_path / "nowhere").exit_code == 2


def test_ctrl(tmp_path):
    args = ["ctrl", "build", "--source", "mini", "--questions", "mini:01,mini:02", "--no-tokens"]
    assert invoke(*args, "--out", tmp_path / "b", "--conditions", "OO,GOLD").exit_code == 0
    r = invoke(*args, "--out", tmp_path / "c", "--conditions", "XX")
    assert r.exit_code == 2 and "XX" in r.output
