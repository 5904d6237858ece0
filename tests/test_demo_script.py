"""The fake server's ``demo`` script: placeholders filled from named groups (JSON-safe in object
replies and tool arguments), and a Mini run on it that gets right and wrong grades and TrekTrace
labels offline, through the plain commands."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.testing.demo import demo_script
from trek.testing.fake_openai import FakeOpenAIServer, load_script


def _chat(srv: FakeOpenAIServer, text: str, **extra) -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], **extra}
    return httpx.post(srv.base_url + "/chat/completions", json=body, timeout=10).json()["choices"][0]["message"]


def test_named_groups_fill_text_object_and_tool_call_replies():
    rules = [
        {"pattern": r"^say (?P<word>\w+)$", "reply": "you said {word}; {last}"},
        {"pattern": r"^quote (?P<q>.+)$", "reply": {"answer": "{q}", "kept": ["{q}", 3]}},
        {"pattern": r"^find (?P<q>.+)$", "tool_calls": [{"name": "search", "arguments": {"query": "{q}"}}]},
    ]
    with FakeOpenAIServer(script=rules) as srv:
        assert _chat(srv, "say hello")["content"] == "you said hello; say hello"
        # a captured quote and backslash stay inside the JSON document
        got = json.loads(_chat(srv, 'quote he said "no" \\ twice')["content"])
        assert got == {"answer": 'he said "no" \\ twice', "kept": ['he said "no" \\ twice', 3]}
        call = _chat(srv, 'find "Tourism in Barcelona"')["tool_calls"][0]["function"]
        assert json.loads(call["arguments"]) == {"query": '"Tourism in Barcelona"'}


def test_a_brace_that_names_no_group_is_left_as_it_is():
    with FakeOpenAIServer(script=[{"pattern": "x", "reply": '{"a": 1} {word}'}]) as srv:
        assert _chat(srv, "x")["content"] == '{"a": 1} {word}'


def test_demo_is_a_script_name_and_a_bad_reply_type_is_refused():
    assert len(load_script("demo")) == len(demo_script())
    with pytest.raises(ValueError, match="rule #0: 'reply' must be a string, an object or an array"):
        load_script([{"reply": 3}])


@pytest.mark.parametrize(("reference", "answer", "verdict"), [
    ("Dana Okafor", "The coach is dana okafor.", "verdict: correct"),
    ("Dana Okafor", "Marek Lindqvist", "verdict: incorrect"),
    ("Dana Okafor", "I am not sure.", "verdict: not_attempted"),
])
def test_the_demo_generic_grader_calls_an_answer_right_when_it_names_the_reference(reference, answer, verdict):
    from trek.graders.generic import JUDGE_PROMPT

    prompt = JUDGE_PROMPT.format(question="Who coaches?", effective_year=2024, answers=f"{reference} | D. Okafor",
                                 response=answer)
    with FakeOpenAIServer(script="demo") as srv:
        assert _chat(srv, prompt)["content"].splitlines()[-1] == verdict


@pytest.mark.slow
def test_a_mini_run_on_the_demo_server_is_graded_and_traced_with_both_outcomes(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    run = tmp_path / "demo"
    runner = CliRunner()
    with FakeOpenAIServer(script="demo") as srv:
        for args in (["wild", "run", "--questions", "mini", "--model", "demo", "--search", "local", "--run", str(run),
                      "--base-url", srv.base_url, "--limit", "12"],
                     ["grade", str(run), "--judge", "demo-judge", "--judge-base-url", srv.base_url],
                     ["trace", str(run), "--judge", "demo-judge", "--judge-base-url", srv.base_url, "--yes"]):
            r = runner.invoke(app, [*args, "--no-progress"])
            assert r.exit_code == 0, (args, r.output)
    outcomes = [json.loads(x)["outcome"] for x in (run / runs.GRADES).read_text().splitlines()]
    assert len(outcomes) == 12 and "correct" in outcomes and "incorrect" in outcomes
    traced = [json.loads(x) for x in (run / runs.TRACE).read_text().splitlines()]
    assert traced and all(t["status"] == "done" for t in traced)
    labels = {lab for t in traced for lab in t["labels"]}
    assert len(labels) >= 2, labels


@pytest.mark.slow
def test_trek_fake_server_prints_its_address_and_serves_the_demo(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "trek.cli", "fake-server", "--script", "demo"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("fake-openai listening on http://127.0.0.1:") and line.endswith("/v1"), line
        url = line.rsplit(" ", 1)[1]
        body = {"model": "j", "messages": [{"role": "user", "content": "Gold target: 17\nPredicted answer: 17 stations"}]}
        reply = httpx.post(url + "/chat/completions", json=body, timeout=10).json()
        assert reply["choices"][0]["message"]["content"] == "A"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0
