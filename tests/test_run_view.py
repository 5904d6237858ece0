"""`trek view RUN`: a run read as it is, before grading and tracing too."""

import json
import shutil

from typer.testing import CliRunner

from trek.cli import app


def lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_an_ungraded_run_shows_each_question_answer_and_trajectory(tmp_path, demo_runs):
    run = tmp_path / "run"
    shutil.copytree(demo_runs["demo-lm-search"], run)
    for name in ("grades.jsonl", "trace.jsonl"):
        (run / name).unlink(missing_ok=True)
    r = CliRunner().invoke(app, ["view", str(run)])
    assert r.exit_code == 0, r.output
    page = (run / "view.html").read_text(encoding="utf-8")
    questions, answers = lines(run / "questions.jsonl"), lines(run / "answers.jsonl")
    assert page.count('class="case"') == len(questions)
    for q in questions:
        assert f">{q['id']} · " in page
    queries = [c["query"] for a in answers for c in a.get("search_calls", [])]
    from html import escape

    assert queries and all(escape(q, quote=True) in page for q in queries)
    urls = [u for a in answers for u in a.get("opened_urls", [])]
    assert all(escape(u, quote=True) in page for u in urls)
    assert "not graded" in page and "not traced" in page


def test_a_graded_and_traced_run_shows_grades_and_labels(tmp_path, demo_runs):
    run = demo_runs["demo-lm-search"]
    out = tmp_path / "page.html"
    r = CliRunner().invoke(app, ["view", str(run), "--out", str(out)])
    assert r.exit_code == 0 and f"wrote {out}" in r.output
    page = out.read_text(encoding="utf-8")
    grades = lines(run / "grades.jsonl")
    assert page.count('data-gr="correct"') == sum(g["outcome"] == "correct" for g in grades)
    if (run / "trace.jsonl").exists():
        labels = {lab for t in lines(run / "trace.jsonl") if t["status"] == "done" for lab in t["labels"]}
        assert all(lab in page for lab in labels)


def test_a_folder_that_is_not_a_run_is_named(tmp_path):
    r = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert r.exit_code == 2 and f"{tmp_path}: no questions.jsonl there" in r.output
