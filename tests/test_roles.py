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


def test_a_role_without_an_endpoint_is_refused_naming_its_flag(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert Role("judge", "m", "http://h/v1").require_endpoint(None).base_url == "http://h/v1"
    assert Role("judge", "m").require_endpoint("http://rec/v1").base_url == "http://rec/v1"
    with pytest.raises(RoleError, match="--fabricator-base-url") as e:
        Role("fabricator", "m").require_endpoint(None)
    assert "OPENAI_BASE_URL" in str(e.value)
    with pytest.raises(RoleError) as e:
        Role(EVALUATED, None).require_endpoint(None)
    assert "None" not in str(e.value) and "evaluated model has no endpoint" in str(e.value)


def test_an_endpoint_falls_back_to_the_environment_and_says_so(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    # the flag and the recorded endpoint still come first, silently
    assert Role(EVALUATED, "m", "http://h/v1").require_endpoint("http://rec/v1").base_url == "http://h/v1"
    assert Role(EVALUATED, "m").require_endpoint("http://rec/v1").base_url == "http://rec/v1"
    assert capsys.readouterr().err == ""
    got = Role(EVALUATED, "m").require_endpoint(None, where="runs/x/run.json")
    assert got.base_url == "http://127.0.0.1:9/v1"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "$OPENAI_BASE_URL = http://127.0.0.1:9/v1" in err and "runs/x/run.json" in err


def imported_run(root):
    """A graded run as `trek import` leaves it: run.json records no endpoint."""
    q = Question(id="q1", dataset="custom", question="Who won?", answers=["Ada"], grader="generic")
    write_jsonl(root / runs.QUESTIONS, [q])
    write_jsonl(root / runs.ANSWERS, [Trajectory(question_id="q1", model="agent-x", final_answer="Bob")])
    write_jsonl(root / runs.GRADES, [Grade(question_id="q1", dataset="custom", response="Bob", outcome="incorrect",
                                           grader="generic", grader_version="1", judge_model="j")])
    runs.write_meta(root, RunMeta(run_id="r", kind="import", model="agent-x", endpoint=None))


def test_trace_of_an_imported_run_without_any_endpoint_stops_before_any_call(tmp_path, monkeypatch):
    imported_run(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["trace", str(tmp_path), "--judge", "j", "--judge-base-url", srv.base_url, "--yes"])
        assert r.exit_code == 2, r.output
        assert "--base-url" in r.output and "records none" in r.output and "OPENAI_BASE_URL" in r.output
        assert "None" not in r.output
        assert srv.stats()["requests"] == 0
    assert not (tmp_path / runs.TRACE).exists()


def test_trace_of_an_imported_run_takes_the_environments_endpoint_and_names_it(tmp_path, monkeypatch):
    imported_run(tmp_path)
    with FakeOpenAIServer() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        r = CliRunner().invoke(app, ["trace", str(tmp_path), "--judge", "j", "--judge-base-url", srv.base_url, "--yes"])
        assert r.exit_code == 0, r.output
        assert f"$OPENAI_BASE_URL = {srv.base_url}" in r.output
        assert f"evaluated agent-x @ {srv.base_url}" in r.output


def test_an_old_spelling_works_with_a_one_line_notice(tmp_path):
    imported_run(tmp_path)
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["trace", str(tmp_path), "--judge", "j", "--diagnostic-base-url", srv.base_url,
                                     "--analysis-judge-base-url", srv.base_url, "--dry-run"])
    assert "notice: --diagnostic-base-url is the old spelling of --diagnostic-judge-base-url" in r.output
    assert "--base-url" in r.output and r.exit_code == 2  # still refused for the evaluated model's endpoint


def commands():
    """(name, click command) of every command of `trek`, sub-commands included."""
    import typer

    def walk(cmd, prefix):
        if hasattr(cmd, "list_commands"):  # a group (the root loads its commands on request)
            ctx = cmd.context_class(cmd)
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), f"{prefix} {name}".strip())
        else:
            yield prefix, cmd

    return dict(walk(typer.main.get_command(app), ""))


def shown_flags(cmd) -> set[str]:
    return {o for p in cmd.params if not getattr(p, "hidden", False) for o in p.opts if o.startswith("--")}


def test_every_command_follows_the_flag_rule():
    cmds = commands()
    assert {"grade", "trace run", "ctrl build", "ctrl discover", "ctrl calibrate", "ctrl run", "wild run"} <= set(cmds)
    for name in ("grade", "ctrl discover", "ctrl build", "ctrl calibrate"):
        assert "--base-url" not in shown_flags(cmds[name]), f"{name} calls no evaluated model"
    with_judge = [n for n, c in cmds.items() if "--judge" in shown_flags(c)]
    assert {"grade", "trace run", "ctrl run"} <= set(with_judge)
    for name in with_judge:
        assert {"--judge-base-url", "--judge-param"} <= shown_flags(cmds[name]), name
    assert "--prompts" in shown_flags(cmds["wild run"])
    roles = set(ROLE_NAMES)
    for name, c in cmds.items():  # an endpoint flag names a role of the one list (or is the evaluated model's)
        for flag in shown_flags(c):
            if flag.endswith("-base-url") and flag != "--base-url":
                role = flag.removeprefix("--").removesuffix("-base-url")
                assert role in roles, f"{name}: {flag} names no role of {sorted(roles)}"


def test_every_help_is_readable_at_80_columns():
    for name in commands():
        r = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert r.exit_code == 0, (name, r.output)
        long = [line for line in r.output.splitlines() if len(line) > 80]
        assert not long and "…" not in r.output, (name, long[:3])


#: Commands that call the evaluated model: only they show --base-url and --param.
CALL_THE_EVALUATED_MODEL = {"wild run", "ctrl run", "trace run", "trace verify", "llm run", "retry"}


def test_the_evaluated_models_flags_are_only_where_it_is_called_and_every_role_has_its_endpoint():
    cmds = commands()
    for name, c in cmds.items():
        flags = shown_flags(c)
        if {"--base-url", "--param"} & flags:
            assert name in CALL_THE_EVALUATED_MODEL, f"{name} shows the evaluated model's endpoint but calls no model"
        if "--model" in flags:  # `trek import --model` names the evaluated model of a log; it calls nothing
            assert name in CALL_THE_EVALUATED_MODEL | {"import"}, name
        for flag in flags:
            if flag.endswith("-param") and flag != "--param":
                assert flag.removeprefix("--").removesuffix("-param") in ROLE_NAMES, f"{name}: {flag}"
        for role in ROLE_NAMES:
            if f"--{role}" in flags:
                assert f"--{role}-base-url" in flags, f"{name}: --{role} without --{role}-base-url"
    assert {n for n, c in cmds.items() if "--base-url" in shown_flags(c)} == CALL_THE_EVALUATED_MODEL
    wild = shown_flags(cmds["wild run"])
    assert {"--prompts", "--search-proxy-base-url"} <= wild and "--search-base-url" not in wild
    graders = [n for n, c in cmds.items() if "--grader" in shown_flags(c)]
    assert sorted(graders) == ["ctrl run", "grade"]  # every command that grades has the one grader choice
    helps = {n: next(p.help for p in cmds[n].params if "--grader" in p.opts) for n in graders}
    assert len(set(helps.values())) == 1, helps

