"""Roles: one record per role, one option factory, and no endpoint nobody chose."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.roles import EVALUATED, ROLE_NAMES, Role, RoleError, flag_of
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Grade, Question, RunMeta, Trajectory, write_jsonl


def test_flags_follow_one_rule():
    assert [flag_of(EVALUATED, w) for w in ("", "base-url", "param")] == ["--model", "--base-url", "--param"]
    assert [flag_of("diagnostic-judge", w) for w in ("", "base-url", "param")] == [
        "--diagnostic-judge", "--diagnostic-judge-base-url", "--diagnostic-judge-param"]
    assert "judge" in ROLE_NAMES and "fabricator" in ROLE_NAMES
    with pytest.raises(KeyError, match="no role named 'grader'"):
        flag_of("grader")


def test_a_role_without_an_endpoint_is_refused_naming_its_flag():
    assert Role("judge", "m", "http://h/v1").require_endpoint(None).base_url == "http://h/v1"
    assert Role("judge", "m").require_endpoint("http://rec/v1").base_url == "http://rec/v1"
    with pytest.raises(RoleError, match="--fabricator-base-url"):
        Role("fabricator", "m").require_endpoint(None)


def imported_run(root):
    """A graded run as `trek import` leaves it: run.json records no endpoint."""
    q = Question(id="q1", dataset="custom", question="Who won?", answers=["Ada"], grader="generic")
    write_jsonl(root / runs.QUESTIONS, [q])
    write_jsonl(root / runs.ANSWERS, [Trajectory(question_id="q1", model="agent-x", final_answer="Bob")])
    write_jsonl(root / runs.GRADES, [Grade(question_id="q1", dataset="custom", response="Bob", outcome="incorrect",
                                           grader="generic", grader_version="1", judge_model="j")])
    runs.write_meta(root, RunMeta(run_id="r", kind="import", model="agent-x", endpoint=None))


def test_trace_of_an_imported_run_without_base_url_stops_before_any_call(tmp_path, monkeypatch):
    imported_run(tmp_path)
    with FakeOpenAIServer() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)  # a default the user did not choose for this run
        r = CliRunner().invoke(app, ["trace", str(tmp_path), "--judge", "j", "--judge-base-url", srv.base_url, "--yes"])
        assert r.exit_code == 2, r.output
        assert "--base-url" in r.output and "records none" in r.output
        assert srv.stats()["requests"] == 0
    assert not (tmp_path / runs.TRACE).exists()


def test_an_old_spelling_works_with_a_one_line_notice(tmp_path):
    imported_run(tmp_path)
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["trace", str(tmp_path), "--judge", "j", "--diagnostic-base-url", srv.base_url,
                                     "--analysis-judge-base-url", srv.base_url, "--dry-run"])
    assert "notice: --diagnostic-base-url is the old spelling of --diagnostic-judge-base-url" in r.output
    assert "--base-url" in r.output and r.exit_code == 2  # still refused for the evaluated model's endpoint
