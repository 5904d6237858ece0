"""The offline demo runs: the real pipeline against the scripted fake model and judge."""

import json

import pytest
from _scripts import load_script

from trek.report.wild import discover_runs, wild_accuracy
from trek.runs import correctness

demo_runs = load_script("demo_runs")
DEMO_RUNS, build_demo_runs = demo_runs.DEMO_RUNS, demo_runs.build_demo_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return build_demo_runs(tmp_path_factory.mktemp("demo"))


def test_every_configuration_is_run_and_graded(runs):
    assert list(runs) == list(DEMO_RUNS)
    for d in runs.values():
        grades = [json.loads(line) for line in (d / "grades.jsonl").read_text().splitlines()]
        assert len(grades) >= 12
        assert {g["outcome"] for g in grades} <= {"correct", "incorrect", "not_attempted"}


def test_grades_follow_the_scripted_plan(runs):
    # The scripted model answers right on questions i % 4 == 0 (closed book) and i % 3 == 0
    # (search-then-read); the judge accepts exactly the references. So the graders, the judge
    # script and the runner must agree on these counts.
    table = correctness(runs)
    n = len(table)
    assert table["demo-lm"].sum() == len([i for i in range(n) if i % 4 == 0])
    assert table["demo-lm-read"].sum() == len([i for i in range(n) if i % 3 == 0])
    agentic = [i for i in range(n) if i % 3 != 2 and i % 5 != 4]
    assert table["demo-lm-search"].sum() == len(agentic)


def test_agentic_trajectories_record_queries_and_urls(runs):
    first = json.loads((runs["demo-lm-search"] / "answers.jsonl").read_text().splitlines()[0])
    questions = [json.loads(x) for x in (runs["demo-lm-search"] / "questions.jsonl").read_text().splitlines()]
    assert first["search_calls"][0]["query"] == questions[0]["question"]
    assert first["retrieved_urls"] and first["opened_urls"] == [questions[0]["gold_urls"][0]]


def test_discovery_and_table_order(runs):
    found = discover_runs(runs_dir=next(iter(runs.values())).parent)
    assert list(found) == list(DEMO_RUNS)
    acc = wild_accuracy(found)
    assert list(acc.index) == list(DEMO_RUNS)
    # closed book is scripted right on questions i % 4 == 0, over every question of the run
    n = len((runs["demo-lm"] / "questions.jsonl").read_text().splitlines())
    assert n >= 12
    micro = acc.loc["demo-lm", "micro"]
    assert micro["acc"] == pytest.approx(100 * len(range(0, n, 4)) / n, abs=0.05)
    assert micro["low"] < micro["acc"] < micro["high"]  # a 95% Wilson interval around it


def test_discover_runs_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="make runs"):
        discover_runs(runs_dir=tmp_path / "none")
    with pytest.raises(FileNotFoundError, match="grades.jsonl"):
        discover_runs({"x": tmp_path})
