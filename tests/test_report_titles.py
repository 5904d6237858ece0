"""Titles name the model and question set of the runs behind a table; demo runs are marked."""

import json
import shutil

from trek.report.titles import benchmark_of, demo_label, runs_title


def test_demo_label():
    assert demo_label(True, "Table 1").startswith("DEMO DATA")
    assert demo_label(False, "Table 1") == "Table 1"


def test_benchmark_of():
    assert benchmark_of(["mini:01", "mini:02"], "X") == "TrekBench-Mini"
    assert benchmark_of(["mini:01", "freshqa:3"], "X") == "X"
    assert benchmark_of([], "X") == "X"


def test_runs_title_names_model_and_question_set_and_marks_demo_runs(tmp_path, demo_runs):
    demo = runs_title("Accuracy (%)", {"x": demo_runs["demo-lm"]})
    assert demo.startswith("DEMO DATA") and "demo-lm" in demo and "TrekBench-Mini" in demo
    real = tmp_path / "real"
    shutil.copytree(demo_runs["demo-lm"], real)
    meta = json.loads((real / "run.json").read_text())
    meta["model"], meta["config"]["benchmark"] = "Quokka-13B", "My-Set"
    meta["config"].pop("demo", None)
    (real / "run.json").write_text(json.dumps(meta))
    title = runs_title("Accuracy (%)", [real])
    assert not title.startswith("DEMO DATA") and "Quokka-13B" in title and "My-Set" in title


def test_runs_title_says_who_judged_under_their_role(tmp_path, demo_runs):
    run = tmp_path / "run"
    shutil.copytree(demo_runs["demo-lm"], run)
    (run / "trace.jsonl").unlink(missing_ok=True)
    grades = [json.loads(x) for x in (run / "grades.jsonl").read_text().splitlines()]
    judge = grades[0]["judge_model"]
    assert judge and f"; graded by {judge})" in runs_title("Accuracy (%)", [run])
    for g in grades:
        g["judge_model"] = "oracle"
    (run / "grades.jsonl").write_text("".join(json.dumps(g) + "\n" for g in grades))
    assert runs_title("Accuracy (%)", [run]).endswith("questions; graded by the exact judge)")
    # a trace judged by another model: named as TrekTrace's judge, never as a grader
    trace = {"question_id": "mini:01", "models": {"diagnostic": "judge-d @ http://x", "analysis": "judge-a @ http://x"}}
    (run / "trace.jsonl").write_text(json.dumps(trace) + "\n")
    assert runs_title("A", [run]).endswith("; graded by the exact judge; TrekTrace judged by judge-d, judge-a)")
    trace["models"] = {"diagnostic": "oracle", "analysis": "oracle"}
    (run / "trace.jsonl").write_text(json.dumps(trace) + "\n")
    assert runs_title("A", [run]).endswith("; graded and traced by the exact judge)")
    (run / "grades.jsonl").unlink()
    (run / "trace.jsonl").unlink()
    title = runs_title("Accuracy (%)", [run])
    assert "judged" not in title and "graded" not in title


def test_runs_title_counts_each_question_set_of_the_runs(tmp_path, demo_runs):
    mini = tmp_path / "mini"
    shutil.copytree(demo_runs["demo-lm"], mini)
    meta = json.loads((mini / "run.json").read_text())
    meta["config"].pop("benchmark", None)
    (mini / "run.json").write_text(json.dumps(meta))
    n_mini = len((mini / "questions.jsonl").read_text().splitlines())
    own = tmp_path / "own"
    own.mkdir()
    rows = [{"id": f"lake-{i}", "dataset": "custom", "question": f"q{i}?", "answers": ["a"]} for i in range(3)]
    (own / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    title = runs_title("Accuracy (%)", {"a": mini, "b": own})
    assert f"TrekBench-Mini, {n_mini} questions + custom, 3 questions" in title and "TrekBench-Wild" not in title
