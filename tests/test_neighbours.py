"""Habits of the neighbours (inspect_ai): sampling flags and --epochs on `trek wild run`, `trek
retry RUN` from what run.json recorded, `trek runs list` -- on the fake server's demo script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.epochs import epoch_accuracy, epoch_dirs
from trek.testing.fake_openai import FakeOpenAIServer

WILD = ["wild", "run", "--questions", "mini", "--model", "demo", "--search", "local", "--limit", "3", "--no-progress"]


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def answers(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / runs.ANSWERS).read_text().splitlines() if x.strip()]


def correct_by_question(run: Path) -> dict[str, bool]:
    grades = [json.loads(x) for x in (run / runs.GRADES).read_text().splitlines() if x.strip()]
    return {g["question_id"]: g["outcome"] == "correct" for g in grades}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A two-epoch run at temperature 0.2, graded, on one demo server; a shared $TREK_CACHE, so
    the epochs' distinct cache keys are what keeps epoch 2 from replaying epoch 1."""
    tmp = tmp_path_factory.mktemp("epochs")
    run = tmp / "run"
    env = {"TREK_CACHE": str(tmp / "shared-cache.sqlite"), "OPENAI_BASE_URL": ""}
    with FakeOpenAIServer(script="demo") as srv:
        first = invoke(*WILD, "--run", str(run), "--base-url", srv.base_url, "--temperature", "0.2", "--epochs", "2",
                       env=env)
        stats = srv.stats()
        again = invoke(*WILD, "--run", str(run), "--base-url", srv.base_url, "--temperature", "0.2", "--epochs", "2",
                       env=env)
        requests_again = srv.stats()["requests"] - stats["requests"]
        grade = invoke("grade", str(run), "--judge", "demo-judge", "--judge-base-url", srv.base_url, "--no-progress",
                       env=env)
        yield {"run": run, "tmp": tmp, "first": first, "stats": stats, "again": again,
               "requests_again": requests_again, "grade": grade, "url": srv.base_url, "srv": srv, "env": env}


@pytest.mark.slow
def test_wild_run_sends_the_temperature_and_answers_every_epoch(served):
    assert served["first"].exit_code == 0, served["first"].output
    run, stats = served["run"], served["stats"]
    # every request carried the temperature given on the command line, and nothing else was set
    assert stats["sampling"] == {"temperature": {"0.2": stats["requests"]}}, stats["sampling"]
    assert [k for k, _ in epoch_dirs(run)] == [1, 2]
    second = run / runs.EPOCH_DIR.format(2)
    for k, d in ((1, run), (2, second)):
        got = answers(d)
        assert len(got) == 3 and {a["status"] for a in got} <= {"ok", "no_answer"}, got
        meta = json.loads((d / runs.META).read_text())
        assert meta["config"]["epoch"] == k and meta["config"]["epochs"] == 2
        assert meta["config"]["system"]["params"] == {"temperature": 0.2}
    # epoch 2 asked the server itself (the shared cache keys epochs apart): as many requests as epoch 1
    assert stats["requests"] % 2 == 0 and stats["requests"] >= 6


@pytest.mark.slow
def test_a_second_invocation_resumes_every_epoch_without_a_call(served):
    assert served["again"].exit_code == 0, served["again"].output
    assert served["requests_again"] == 0
    assert served["again"].output.count("(3 already done before this run)") == 2


@pytest.mark.slow
def test_grade_grades_every_epoch_and_prints_accuracy_per_epoch_and_pooled(served):
    assert served["grade"].exit_code == 0, served["grade"].output
    run = served["run"]
    per_epoch = [correct_by_question(d) for _, d in epoch_dirs(run)]
    table = epoch_accuracy(run)
    assert list(table.index) == ["1", "2", "pooled"]
    for k, correct in enumerate(per_epoch, start=1):
        assert table.at[str(k), "accuracy"] == pytest.approx(100.0 * sum(correct.values()) / 3)
    pooled = sum((per_epoch[0][q] + per_epoch[1][q]) / 2 for q in per_epoch[0]) / 3
    assert table.at["pooled", "accuracy"] == pytest.approx(100.0 * pooled)
    assert table.at["pooled", "ci_low"] <= table.at["pooled", "accuracy"] <= table.at["pooled", "ci_high"]
    out = served["grade"].output
    assert "accuracy per epoch and pooled" in out and "pooled" in out.splitlines()[-1]


@pytest.mark.slow
def test_runs_list_shows_each_run_and_epoch_in_80_columns(served):
    r = invoke("runs", "list", str(served["tmp"]), env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].split() == ["run", "system", "model", "n", "accuracy", "traced", "cost", "status"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    for name, d in (("run", served["run"]), ("run/epoch-2", served["run"] / "epoch-2")):
        correct = correct_by_question(d)
        row = rows[name]
        assert row[1:4] == ["agentic/local", "demo", "3"], row
        assert row[4] == f"{100.0 * sum(correct.values()) / 3:.1f}%"
        assert row[-1] == "graded"


@pytest.mark.slow
def test_retry_asks_again_only_the_failed_question_with_the_recorded_settings(served, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(served["run"], run)
    second = run / runs.EPOCH_DIR.format(2)
    got = answers(second)
    kept = (run / runs.ANSWERS).read_bytes(), [got[0], got[2]]
    got[1] = {**got[1], "status": "failed", "error": "made to fail by the test"}
    (second / runs.ANSWERS).write_text("".join(json.dumps(a) + "\n" for a in got))
    srv, env = served["srv"], {**served["env"], "TREK_CACHE": str(tmp_path / "fresh-cache.sqlite")}
    before = srv.stats()
    r = invoke("retry", str(run), "--no-progress", env=env)
    assert r.exit_code == 0, r.output
    assert f"retrying 1 question(s) of {run} (5 answer(s) kept)" in r.output
    after = srv.stats()
    assert after["requests"] > before["requests"]
    # the retried question went out with the recorded temperature, and it is answered now
    assert after["sampling"]["temperature"]["0.2"] - before["sampling"]["temperature"]["0.2"] == \
        after["requests"] - before["requests"]
    assert {a["status"] for a in answers(second)} <= {"ok", "no_answer"}
    assert (run / runs.ANSWERS).read_bytes() == kept[0] and [answers(second)[i] for i in (0, 2)] == kept[1]
    again = invoke("retry", str(run), "--no-progress", env=env)
    assert again.exit_code == 0 and "nothing to retry" in again.output, again.output


def test_retry_refuses_a_folder_that_is_not_a_wild_run(tmp_path):
    r = invoke("retry", str(tmp_path))
    assert r.exit_code == 2 and f"{tmp_path / runs.META} does not exist" in r.output, r.output
    (tmp_path / runs.META).write_text(json.dumps({"run_id": "x", "kind": "ctrl"}))
    r = invoke("retry", str(tmp_path))
    assert r.exit_code == 2 and "is a ctrl run" in r.output, r.output
    (tmp_path / runs.META).write_text(json.dumps({"run_id": "x", "kind": "wild", "config": {}}))
    r = invoke("retry", str(tmp_path))
    assert r.exit_code == 2 and "records no invocation" in r.output, r.output
    epoch = tmp_path / runs.EPOCH_DIR.format(2)
    epoch.mkdir()
    (epoch / runs.META).write_text(json.dumps({"run_id": "e", "kind": "wild", "config": {"epoch": 2}}))
    r = invoke("retry", str(epoch))
    assert r.exit_code == 2 and f"trek retry {tmp_path}" in r.output, r.output


@pytest.mark.parametrize(("args", "message"), [
    (["--temperature", "0.2", "--param", "temperature=0.5"], "--temperature and --param temperature=... both set"),
    (["--temperature", "nan"], "--temperature must be a number from 0 to 2"),
    (["--temperature", "3"], "--temperature must be a number from 0 to 2"),
    (["--max-tokens", "0"], "--max-tokens must be 1 or more"),
    (["--epochs", "0"], "--epochs"),
])
def test_bad_sampling_flags_are_refused_before_any_call(tmp_path, args, message):
    r = invoke(*WILD, "--run", str(tmp_path / "run"), "--base-url", "http://127.0.0.1:9/v1", *args)
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "run").exists()


def test_runs_list_of_a_folder_without_runs_says_so(tmp_path):
    r = invoke("runs", "list", str(tmp_path))
    assert r.exit_code == 1 and "no run folders" in r.output, r.output
