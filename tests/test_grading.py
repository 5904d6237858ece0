"""Run-level grading: resume, cache, pending handling and the ``trek grade`` command."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from trek.cli.grade import grade_command
from trek.graders import sealqa
from trek.grading import grade_run, run_grading
from trek.llm import LLMClient
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Grade, Question, Trajectory, read_jsonl, write_jsonl

# The scripted judge: every dataset's prompt has a phrase of its own.
SCRIPT = [
    {"pattern": "Gold target", "reply": "A"},
    {"pattern": "Reference answer", "reply": "No"},
    {"reply": "evaluation: correct"},
]

QUESTIONS = [
    Question(id="freshqa:1", dataset="freshqa", question="Capital of France?", answers=["Paris"], effective_year=2024),
    Question(id="freshqa:2", dataset="freshqa", question="Largest moon of Saturn?", answers=["Titan"], effective_year=2024),
    Question(id="infodeepseek:1", dataset="infodeepseek", question="Who wrote the novel?", answers=["R. Author"]),
    Question(id="sealqa:1", dataset="sealqa", question="How many bridges?", answers=["12"], effective_year=2025),
    Question(id="sealqa:2", dataset="sealqa", question="How many towers?", answers=["3"], effective_year=2025),
    Question(id="sealqa:3", dataset="sealqa", question="How many gates?", answers=["5"], effective_year=2025),
]


def trajectories() -> list[Trajectory]:
    return [
        Trajectory(question_id="freshqa:1", model="m", final_answer="paris."),  # exact match
        Trajectory(question_id="freshqa:2", model="m", final_answer="Saturn VI (Titan)"),
        Trajectory(question_id="infodeepseek:1", model="m", final_answer="Someone Else"),
        Trajectory(question_id="sealqa:1", model="m", final_answer="twelve"),
        Trajectory(question_id="sealqa:2", model="m", status="pending", error="429"),
        # sealqa:3 has no answer at all
    ]


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("TREK_CACHE", raising=False)
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    d = tmp_path / "run"
    write_jsonl(d / "questions.jsonl", QUESTIONS)
    write_jsonl(d / "answers.jsonl", trajectories())
    yield d


def judge_for(srv, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("max_retries", 0)
    return LLMClient("judge-model", base_url=srv.base_url, api_key="sk-test", **kw)


def test_grade_run_writes_grades_and_reports_pending_answers(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        report = run_grading(run_dir, judge_for(srv), progress=False)
        assert srv.stats()["requests"] == 3  # freshqa:1 is an exact match
    on_disk = read_jsonl(run_dir / "grades.jsonl", Grade)
    assert [g.question_id for g in on_disk] == ["freshqa:1", "freshqa:2", "infodeepseek:1", "sealqa:1"]
    assert [g.outcome for g in on_disk] == ["correct", "correct", "incorrect", "correct"]
    assert [g.method for g in on_disk] == ["exact", "judge", "judge", "judge"]
    assert report.pending_answers == ["sealqa:2"] and report.unanswered == ["sealqa:3"]
    assert (report.kept, report.graded) == (0, 4)
    assert "1 pending answer(s)" in report.describe()


def test_second_run_keeps_grades_and_makes_no_call(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        first = grade_run(run_dir, judge_for(srv), progress=False)
        n = srv.stats()["requests"]
        report = run_grading(run_dir, judge_for(srv), progress=False)
        assert srv.stats()["requests"] == n
    assert report.kept == 4 and report.graded == 0
    assert [g.model_dump() for g in report.grades] == [g.model_dump() for g in first]  # same created_at too


def test_regrading_from_scratch_is_served_by_the_run_cache(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        judge = judge_for(srv)
        assert judge.cache is None
        first = grade_run(run_dir, judge, progress=False)
        assert judge.cache is None  # the run's cache was only borrowed
        assert (run_dir / "llm-cache.sqlite").exists()
        n = srv.stats()["requests"]
        (run_dir / "grades.jsonl").unlink()
        fresh = judge_for(srv)
        report = run_grading(run_dir, fresh, progress=False)
        assert srv.stats()["requests"] == n
    assert report.graded == 4 and report.http_calls == 0 and report.cache_hits == 3
    assert [g.outcome for g in report.grades] == [g.outcome for g in first]


def test_pending_grades_are_retried_next_time(run_dir):
    failing = [{"pattern": "Gold target", "error": {"status": 503, "message": "down"}}, *SCRIPT]
    with FakeOpenAIServer(script=failing) as srv:
        report = run_grading(run_dir, judge_for(srv), progress=False)
    by_id = {g.question_id: g for g in report.grades}
    assert by_id["sealqa:1"].outcome == "pending" and report.pending_grades == 1
    assert by_id["sealqa:1"].correct is None

    with FakeOpenAIServer(script=SCRIPT) as srv:
        report = run_grading(run_dir, judge_for(srv), progress=False)
        assert srv.stats()["requests"] == 1  # only the pending one
    assert {g.question_id: g.outcome for g in report.grades}["sealqa:1"] == "correct"
    assert report.kept == 3 and report.graded == 1


def test_changed_response_or_judge_is_regraded(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        grade_run(run_dir, judge_for(srv), progress=False)
        trajs = trajectories()
        trajs[3] = Trajectory(question_id="sealqa:1", model="m", final_answer="12 bridges")
        write_jsonl(run_dir / "answers.jsonl", trajs)
        n = srv.stats()["requests"]
        report = run_grading(run_dir, judge_for(srv), progress=False)
        assert srv.stats()["requests"] == n + 1
        assert report.kept == 3
        # another judge model: every judged grade is redone (the exact match needs no call)
        other = run_grading(run_dir, judge_for(srv), progress=False, model="other-judge")
        assert srv.stats()["requests"] == n + 4
    assert other.kept == 0 and all(g.judge_model == "other-judge" for g in other.grades)


def test_prompt_override_regrades_only_its_dataset(run_dir, tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "grader.sealqa.txt").write_text("Gold target: {target}\n{question}\n{predicted_answer}\nLetter?")
    with FakeOpenAIServer(script=SCRIPT) as srv:
        grade_run(run_dir, judge_for(srv), progress=False)
        n = srv.stats()["requests"]
        report = run_grading(run_dir, judge_for(srv), prompts_dir=prompts, progress=False)
        assert srv.stats()["requests"] == n + 1
    seal = {g.question_id: g for g in report.grades}["sealqa:1"]
    assert seal.grader_version.startswith(sealqa.VERSION + "+override.")
    assert report.kept == 3
    # the override was for this call only
    assert sealqa.grader_version() == sealqa.VERSION


def test_bad_input_names_file_line_and_field(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        lines = (run_dir / "answers.jsonl").read_text().splitlines()
        lines[1] = json.dumps({"question_id": "freshqa:2", "model": "m", "status": "maybe"})
        (run_dir / "answers.jsonl").write_text("\n".join(lines) + "\n")
        with pytest.raises(ValueError, match=r"answers\.jsonl, line 2: .*status"):
            grade_run(run_dir, judge_for(srv), progress=False)

        lines[1] = json.dumps({"question_id": "nope:1", "model": "m"})
        (run_dir / "answers.jsonl").write_text("\n\n".join(lines) + "\n")  # blank lines in between
        with pytest.raises(ValueError, match=r"answers\.jsonl, line 3: field 'question_id': 'nope:1'"):
            grade_run(run_dir, judge_for(srv), progress=False)
        assert srv.stats()["requests"] == 0


# -- the command ------------------------------------------------------------------------------
def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("grade")(grade_command)

    @app.command("other")
    def _other() -> None:  # a second command keeps "grade" as a sub-command name
        pass

    return app


def test_grade_command_prints_the_accuracy_table(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        args = ["grade", str(run_dir), "--judge", "judge-model", "--judge-base-url", srv.base_url, "--no-progress"]
        res = CliRunner().invoke(cli(), args)
        assert res.exit_code == 0, res.output
        assert "micro" in res.output and "macro" in res.output and "freshqa" in res.output
        assert (run_dir / "llm-cache.sqlite").exists()
        n = srv.stats()["requests"]
        res = CliRunner().invoke(cli(), args)
        assert res.exit_code == 0 and srv.stats()["requests"] == n


def test_the_judge_endpoint_is_judge_base_url_and_the_old_flag_warns(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        args = ["grade", str(run_dir), "--judge", "judge-model", "--no-progress"]
        res = CliRunner().invoke(cli(), [*args, "--judge-base-url", srv.base_url])
        assert res.exit_code == 0, res.output
        assert f"roles: judge judge-model @ {srv.base_url}" in res.output  # said before the first call
        assert res.output.index("roles:") < res.output.index("grades (")
        (run_dir / "grades.jsonl").unlink()
        res = CliRunner().invoke(cli(), [*args, "--base-url", srv.base_url])
        assert res.exit_code == 0, res.output
        assert "notice: --base-url is the old spelling of --judge-base-url" in res.output and f"judge-model @ {srv.base_url}" in res.output
        res = CliRunner().invoke(cli(), [*args, "--base-url", srv.base_url, "--judge-base-url", srv.base_url])
        assert res.exit_code == 2 and "give only --judge-base-url" in res.output


def test_grade_command_exit_codes(run_dir, tmp_path):
    with FakeOpenAIServer(script=[{"error": {"status": 500, "message": "down"}}]) as srv:
        base = ["--judge", "judge-model", "--judge-base-url", srv.base_url, "--no-progress", "--max-retries", "0"]
        missing = tmp_path / "empty"
        missing.mkdir()
        res = CliRunner().invoke(cli(), ["grade", str(missing), *base])
        assert res.exit_code == 2
        assert "questions.jsonl" in res.output and "does not exist" in res.output
        assert "Traceback" not in res.output

        res = CliRunner().invoke(cli(), ["grade", str(tmp_path / "nowhere"), *base])
        assert res.exit_code == 2 and "does not exist" in res.output
        assert not (tmp_path / "nowhere").exists()

        (run_dir / "questions.jsonl").write_text((run_dir / "questions.jsonl").read_text() + "{not json\n")
        res = CliRunner().invoke(cli(), ["grade", str(run_dir), *base])
        assert res.exit_code == 2 and "line 7" in res.output and "not valid JSON" in res.output

        write_jsonl(run_dir / "questions.jsonl", QUESTIONS)
        res = CliRunner().invoke(cli(), ["grade", str(run_dir), *base])
        assert res.exit_code == 3  # the judge is down: grades pending, run again
        assert "pending" in res.output

        res = CliRunner().invoke(cli(), ["grade", str(run_dir), *base[2:]])
        assert res.exit_code == 2  # --judge is required


def test_grade_command_accuracy_is_over_every_question(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        args = ["grade", str(run_dir), "--judge", "judge-model", "--judge-base-url", srv.base_url, "--no-progress"]
        res = CliRunner().invoke(cli(), args)
    # 3 correct (freshqa:1, freshqa:2, sealqa:1) of 6 questions; a pending and a missing answer
    micro = next(line for line in res.output.splitlines() if line.startswith("micro"))
    assert micro.split()[1] == "50.0"
    assert micro.split()[4:7] == ["6", "4", "4"]  # n, answered, graded


def test_unparsed_grade_exits_3(run_dir):
    script = [{"pattern": "one letter only", "reply": "Still thinking."},
              {"pattern": "gold target", "reply": "I cannot decide."}, *SCRIPT]
    with FakeOpenAIServer(script=script) as srv:
        args = ["grade", str(run_dir), "--judge", "judge-model", "--judge-base-url", srv.base_url, "--no-progress"]
        res = CliRunner().invoke(cli(), args)
    assert res.exit_code == 3 and "1 unparsed" in res.output


def test_changing_a_reference_regrades_only_that_question(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        grade_run(run_dir, judge_for(srv), progress=False)
        n = srv.stats()["requests"]
        fixed = [q.model_copy(update={"answers": ["Titan (Saturn VI)"]}) if q.id == "freshqa:2" else q
                 for q in QUESTIONS]
        write_jsonl(run_dir / "questions.jsonl", fixed)
        report = run_grading(run_dir, judge_for(srv), progress=False)
        assert srv.stats()["requests"] == n + 1
        assert (report.kept, report.graded) == (3, 1)
        # the false-premise flag and the effective year decide a grade too
        flagged = [q.model_copy(update={"effective_year": 2023}) if q.id == "sealqa:1" else q for q in fixed]
        write_jsonl(run_dir / "questions.jsonl", flagged)
        assert run_grading(run_dir, judge_for(srv), progress=False).graded == 1


def test_judge_params_are_sent_only_when_asked_and_rejections_name_the_flag(run_dir):
    with FakeOpenAIServer(script=SCRIPT) as srv:
        base = ["grade", str(run_dir), "--judge", "judge-model", "--judge-base-url", srv.base_url, "--no-progress"]
        res = CliRunner().invoke(cli(), base)
        assert res.exit_code == 0, res.output
        settings = [g.judge_settings for g in read_jsonl(run_dir / "grades.jsonl", Grade)]
        assert all("temperature" not in s for s in settings)  # nothing the user did not ask for
        res = CliRunner().invoke(cli(), [*base, "--judge-param", "reasoning_effort=high",
                                         "--judge-param", "max_completion_tokens=500"])
        assert res.exit_code == 0, res.output
        settings = read_jsonl(run_dir / "grades.jsonl", Grade)[1].judge_settings
        assert settings["reasoning_effort"] == "high" and settings["max_completion_tokens"] == 500
        res = CliRunner().invoke(cli(), [*base, "--judge-param", "no-equals-sign"])
        assert res.exit_code == 2 and "--judge-param" in res.output
    rejecting = [{"error": {"status": 400, "message": "Unsupported value: 'temperature' does not support 0 "
                            "with this model. Only the default (1) value is supported."}}]
    with FakeOpenAIServer(script=rejecting) as srv:
        res = CliRunner().invoke(cli(), ["grade", str(run_dir), "--judge", "judge-model", "--judge-base-url", srv.base_url,
                                         "--no-progress", "--judge-param", "temperature=0"])
    assert res.exit_code == 2
    assert "hint:" in res.output and "--judge-param temperature=0" in res.output


def test_regrade_unparsed_asks_a_fixed_judge_afresh_and_keeps_the_rest(run_dir):
    from trek.testing.fake_openai import load_script

    broken = [{"pattern": "How many bridges", "reply": "I cannot say."}, *SCRIPT]
    with FakeOpenAIServer(script=broken) as srv:
        args = ["grade", str(run_dir), "--judge", "judge-model", "--no-progress", "--judge-param", "max_reasks=0",
                "--judge-base-url", srv.base_url]
        assert CliRunner().invoke(cli(), args).exit_code == 3  # one unparsed verdict
        first = srv.stats()["requests"]
        assert {g.question_id: g.outcome for g in read_jsonl(run_dir / "grades.jsonl", Grade)}["sealqa:1"] == "unparsed"
        srv.rules = load_script(SCRIPT)  # the judge is fixed behind the same endpoint and model
        assert CliRunner().invoke(cli(), args).exit_code == 3  # without --regrade: kept (the cache replays it)
        assert srv.stats()["requests"] == first
        res = CliRunner().invoke(cli(), [*args, "--regrade", "unparsed"])
        assert res.exit_code == 0, res.output
        assert srv.stats()["requests"] == first + 1  # only the unparsed verdict was asked again
        assert CliRunner().invoke(cli(), args).exit_code == 0 and srv.stats()["requests"] == first + 1  # and it stays
        assert CliRunner().invoke(cli(), [*args, "--regrade", "sometimes"]).exit_code == 2
    grades = {g.question_id: g.outcome for g in read_jsonl(run_dir / "grades.jsonl", Grade)}
    assert grades["sealqa:1"] == "correct" and grades["freshqa:1"] == "correct"
