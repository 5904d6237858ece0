"""Stuck states say how to get unstuck: a grade re-run that keeps unreadable verdicts names the
flag that grades them again, and a trace that could trace nothing because grades are unreadable
exits 3 naming the command that finishes the run."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Grade, Question, RunMeta, Trajectory, write_jsonl


def answered_run(root, outcome: str | None = None):
    q = Question(id="q1", dataset="custom", question="Who won?", answers=["Ada"], grader="generic",
                 gold_urls=["https://example.org/a"])
    write_jsonl(root / runs.QUESTIONS, [q])
    write_jsonl(root / runs.ANSWERS, [Trajectory(question_id="q1", model="agent-x", final_answer="Bob")])
    if outcome:
        write_jsonl(root / runs.GRADES, [Grade(question_id="q1", dataset="custom", response="Bob", outcome=outcome,
                                               grader="generic", grader_version="1", judge_model="j")])
    runs.write_meta(root, RunMeta(run_id="r", kind="import", model="agent-x", endpoint=None))


@pytest.mark.slow
def test_a_grade_rerun_that_keeps_unparsed_grades_says_how_to_regrade_them(tmp_path, monkeypatch):
    answered_run(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    runner = CliRunner()
    # unscripted, the fake server's replies carry no verdict: the grade is unparsed
    with FakeOpenAIServer() as srv:
        args = ["grade", str(tmp_path), "--judge", "j", "--judge-base-url", srv.base_url, "--no-progress"]
        first = runner.invoke(app, args)
        again = runner.invoke(app, args)
    grades = [json.loads(x) for x in (tmp_path / runs.GRADES).read_text().splitlines()]
    assert [g["outcome"] for g in grades] == ["unparsed"]
    assert "1 unparsed" in again.output, again.output
    assert f"trek grade {tmp_path} --regrade unparsed" in again.output
    assert first.exit_code == again.exit_code


def test_trace_exits_3_when_unreadable_grades_leave_nothing_to_trace(tmp_path, monkeypatch):
    answered_run(tmp_path, outcome="unparsed")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["trace", str(tmp_path), "--judge", "j", "--judge-base-url", srv.base_url,
                                     "--base-url", srv.base_url, "--yes", "--no-progress"])
        assert srv.stats()["requests"] == 0
    assert r.exit_code == 3, r.output
    assert "not traced: unparsed 1" in r.output
    assert f"trek grade {tmp_path} --judge MODEL --regrade unparsed" in r.output


def test_trace_of_a_run_whose_failures_are_all_known_is_not_held_back(tmp_path, monkeypatch):
    answered_run(tmp_path, outcome="correct")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["trace", str(tmp_path), "--judge", "j", "--judge-base-url", srv.base_url,
                                     "--base-url", srv.base_url, "--yes", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "not finished" not in r.output
