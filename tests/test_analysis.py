"""Accuracy tables and run frames on small made-up run directories whose numbers can be
worked out by hand. Accuracy is over every question of the run's question set."""

from __future__ import annotations

import math

import pytest

from trek import runs
from trek.analysis import accuracy_by_dataset, accuracy_by_run
from trek.types import Grade, Question, RecordError, Trajectory, write_jsonl


def q(qid: str, dataset: str) -> Question:
    return Question(id=qid, dataset=dataset, question=f"{qid}?", answers=["x"])


def t(qid: str, status: str = "ok") -> Trajectory:
    return Trajectory(question_id=qid, model="m", final_answer=None if status == "pending" else "r", status=status)


def g(qid: str, dataset: str, outcome: str) -> Grade:
    return Grade(question_id=qid, dataset=dataset, response="r", outcome=outcome,
                 grader=dataset, grader_version="v1", judge_model="judge")


def make_run(root, questions, answers, grades):
    write_jsonl(root / runs.QUESTIONS, questions)
    write_jsonl(root / runs.ANSWERS, answers)
    if grades is not None:
        write_jsonl(root / runs.GRADES, grades)
    return root


@pytest.fixture
def run(tmp_path):
    # dataset a: 5 questions, 2 correct, 1 incorrect, 1 not attempted, 1 unparsed;
    # dataset b: 5 questions, 3 correct, 1 pending grade, 1 with no answer at all.
    qs = [q(f"a{i}", "a") for i in range(1, 6)] + [q(f"b{i}", "b") for i in range(1, 6)]
    answers = [t(x.id) for x in qs if x.id != "b5"]
    grades = [
        g("a1", "a", "correct"), g("a2", "a", "incorrect"), g("a3", "a", "correct"),
        g("a4", "a", "not_attempted"), g("a5", "a", "unparsed"),
        g("b1", "b", "correct"), g("b2", "b", "correct"), g("b3", "b", "pending"), g("b4", "b", "correct"),
    ]
    return make_run(tmp_path / "run", qs, answers, grades)


def test_frame_has_one_row_per_question_even_without_answer_or_grade(run):
    df = runs.frame(run)
    assert list(df["question_id"]) == [f"a{i}" for i in range(1, 6)] + [f"b{i}" for i in range(1, 6)]
    b5 = df.set_index("question_id").loc["b5"]
    assert b5["answer_status"] == "missing" and b5["outcome"] == "ungraded" and not b5["correct"]
    assert df["correct"].sum() == 5
    assert list(df.columns) == runs.FRAME_COLUMNS


def test_accuracy_counts_every_question(run):
    t_ = accuracy_by_dataset(run)
    assert list(t_.index) == ["a", "b", "micro", "macro"] and t_.index.name == "dataset"
    a, b, micro, macro = (t_.loc[k] for k in ["a", "b", "micro", "macro"])
    assert (a["n"], a["answered"], a["graded"], a["correct"], a["unparsed"], a["pending"]) == (5, 5, 4, 2, 1, 0)
    assert (b["n"], b["answered"], b["graded"], b["correct"], b["unparsed"], b["pending"]) == (5, 4, 3, 3, 0, 1)
    assert a["accuracy"] == pytest.approx(40.0)  # 2 of 5: the unparsed grade is not correct
    assert b["accuracy"] == pytest.approx(60.0)  # 3 of 5: pending and unanswered are not correct
    assert micro["accuracy"] == pytest.approx(50.0)
    assert macro["accuracy"] == pytest.approx(50.0)
    # the "answered only" view is an extra column
    assert a["acc_graded"] == pytest.approx(50.0) and b["acc_graded"] == pytest.approx(100.0)
    # Wilson 95% interval for 5/10, from the score-interval formula
    z = 1.959963984540054
    n, p = 10, 0.5
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert micro["ci_low"] == pytest.approx(100 * (centre - half), abs=1e-6)
    assert micro["ci_high"] == pytest.approx(100 * (centre + half), abs=1e-6)
    assert 0.0 <= macro["ci_low"] < 50.0 < macro["ci_high"] <= 100.0


def test_one_unparsed_one_pending_of_three_is_a_third(tmp_path):
    qs = [q("x1", "a"), q("x2", "a"), q("x3", "a")]
    run = make_run(tmp_path / "r", qs, [t("x1"), t("x2"), t("x3")],
                   [g("x1", "a", "correct"), g("x2", "a", "unparsed"), g("x3", "a", "pending")])
    assert accuracy_by_dataset(run).loc["micro", "accuracy"] == pytest.approx(100 / 3)


def test_ungraded_run_is_zero_not_missing(tmp_path):
    run = make_run(tmp_path / "r", [q("x1", "a"), q("x2", "a")], [t("x1"), t("x2", "pending")], None)
    tab = accuracy_by_dataset(run, ci=False)
    assert tab.loc["micro", "accuracy"] == 0.0 and tab.loc["micro", "pending"] == 1
    assert tab.loc["micro", "answered"] == 1 and math.isnan(tab.loc["micro", "acc_graded"])


def test_macro_bootstrap_is_seeded(run):
    t1 = accuracy_by_dataset(run, seed=3, n_resamples=2000)
    t2 = accuracy_by_dataset(run, seed=3, n_resamples=2000)
    assert t1.loc["macro", "ci_low"] == t2.loc["macro", "ci_low"]
    fast = accuracy_by_dataset(run, ci=False)
    assert fast.loc["macro", "accuracy"] == pytest.approx(50.0) and math.isnan(fast.loc["micro", "ci_low"])


def test_accuracy_by_run(run, tmp_path):
    other = make_run(tmp_path / "run2", [q("a1", "a"), q("a2", "a")], [t("a1"), t("a2")],
                     [g("a1", "a", "correct"), g("a2", "a", "incorrect")])
    tab = accuracy_by_run({"model-x": run, "model-y": other})
    assert list(tab.index) == ["model-x", "model-y"] and tab.index.name == "run"
    assert list(tab.columns) == ["a", "b", "micro", "macro", "n", "graded", "undecided", "unparsed", "pending"]
    assert tab.loc["model-x", "micro"] == pytest.approx(50.0)
    assert math.isnan(tab.loc["model-y", "b"]) and tab.loc["model-y", "micro"] == pytest.approx(50.0)
    assert tab.loc["model-x", "n"] == 10 and tab.loc["model-x", "pending"] == 1
    only_b = accuracy_by_run({"x": run}, datasets=["b"])
    assert list(only_b.columns)[:3] == ["b", "micro", "macro"]


def test_correctness_keeps_shared_questions(run, tmp_path):
    other = make_run(tmp_path / "run2", [q("a1", "a"), q("a2", "a")], [t("a1"), t("a2")],
                     [g("a1", "a", "incorrect"), g("a2", "a", "incorrect")])
    table = runs.correctness({"x": run, "y": other})
    assert list(table.index) == ["a1", "a2"]
    assert table.loc["a1", "x"] and not table.loc["a1", "y"]


def test_bad_run_files_name_file_and_line(tmp_path, run):
    with pytest.raises(RecordError, match="run directory does not exist"):
        runs.frame(tmp_path / "nope")
    (run / runs.GRADES).write_text('{"question_id": "zz", "dataset": "a", "response": "r", "outcome": "correct",'
                                   ' "grader": "a", "grader_version": "v"}\n')
    with pytest.raises(RecordError, match=r"grades.jsonl, line 1: field 'question_id': 'zz' is not in"):
        runs.frame(run)
    (run / runs.GRADES).write_text('{"question_id": NaN}\n')
    with pytest.raises(RecordError, match=r"line 1: not valid JSON \(NaN is not allowed\)"):
        runs.frame(run)
    (run / runs.GRADES).write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(RecordError, match="not UTF-8"):
        runs.frame(run)


def test_discover_orders_by_config_then_name(tmp_path, run):
    from trek.types import RunMeta

    for name, order in (("zeta", 0), ("alpha", 1)):
        d = make_run(tmp_path / "all" / name, [q("a1", "a")], [t("a1")], [g("a1", "a", "correct")])
        runs.write_meta(d, RunMeta(run_id=name, kind="wild", config={"order": order}))
    (tmp_path / "all" / "ungraded").mkdir()
    assert list(runs.discover(tmp_path / "all")) == ["zeta", "alpha"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        runs.discover(tmp_path, runs={"x": tmp_path})
    meta = runs.update_meta(tmp_path / "all" / "zeta", config={"label": "z"})
    assert meta.config == {"order": 0, "label": "z"} and runs.read_meta(tmp_path / "all" / "zeta") == meta


@pytest.mark.parametrize(("response", "answers", "expected"), [
    ("The coach is Dana Okafor.", ["Dana Okafor"], True),
    ("the COACH is dana  okafor", ["Dana Okafor", "Okafor"], True),
    ("It is Alex Chen.", ["Dana Okafor", "Okafor"], False),
    ("Okaforson took over.", ["Okafor"], False),  # whole words only
    ("", ["x"], False),
    (None, ["x"], False),
    ("anything", [""], False),
])
def test_mentions_answer(response, answers, expected):
    from trek.analysis import mentions_answer

    assert mentions_answer(response, answers) is expected


def test_judge_check_counts_decided_grades_with_answers(tmp_path):
    from trek.analysis import judge_check

    qs = [Question(id=f"q{i}", dataset="a", question="?", answers=["Okafor"]) for i in range(1, 6)]
    said = {"q1": "Okafor", "q2": "Chen", "q3": "Chen", "q4": "Okafor", "q5": "Okafor"}
    outcomes = {"q1": "correct", "q2": "correct", "q3": "incorrect", "q4": "pending", "q5": "unparsed"}
    answers = [Trajectory(question_id=k, model="m", final_answer=v, status="ok") for k, v in said.items()]
    grades = [Grade(question_id=k, dataset="a", response=said[k], outcome=v, grader="a", grader_version="v1",
                    judge_model="j") for k, v in outcomes.items()]
    run = make_run(tmp_path / "r", qs, answers, grades)
    row = judge_check({"r": run}).loc["r"]
    # decided: q1 (judged yes, mentions yes), q2 (yes, no), q3 (no, no)
    assert row["n"] == 3
    assert row["judged_correct"] == pytest.approx(200 / 3)
    assert row["mentions_answer"] == pytest.approx(100 / 3)
    assert row["agreement"] == pytest.approx(200 / 3)
    assert row["kappa"] == pytest.approx(0.4)


def test_the_outcome_frame_holds_the_values_of_the_full_frame_in_categories(run):
    full = runs.frame(run, columns=runs.OUTCOME_COLUMNS)
    slim = runs.outcome_frame(run)
    assert list(slim.columns) == runs.OUTCOME_COLUMNS
    for c in ("dataset", "answer_status", "outcome"):
        assert str(slim[c].dtype) == "category"
        assert slim[c].astype(str).tolist() == full[c].tolist()
    assert slim["correct"].dtype == bool and slim["correct"].tolist() == full["correct"].tolist()
    # the accuracy table of a run directory (read slim) is the table of its full frame
    assert accuracy_by_dataset(run).equals(accuracy_by_dataset(runs.frame(run)))


def test_the_outcome_frame_of_a_run_without_answers_or_grades(tmp_path):
    rd = make_run(tmp_path / "run", [q("a1", "a"), q("b1", "b")], [], None)
    slim = runs.outcome_frame(rd)
    assert slim["answer_status"].astype(str).tolist() == ["missing", "missing"]
    assert slim["outcome"].astype(str).tolist() == ["ungraded", "ungraded"] and not slim["correct"].any()


def test_the_outcome_frame_names_the_line_of_a_bad_record(run):
    with (run / runs.GRADES).open("a") as fh:
        fh.write('{"question_id": "zz", "dataset": "a", "response": "r", "outcome": "correct", "grader": "a", '
                 '"grader_version": "v1"}\n')
    with pytest.raises(RecordError, match=r"grades.jsonl.*line 10.*'zz' is not in questions.jsonl"):
        runs.outcome_frame(run)
    with (run / runs.QUESTIONS).open("a") as fh:
        fh.write(q("a1", "a").model_dump_json() + "\n")
    with pytest.raises(RecordError, match=r"questions.jsonl.*line 11.*duplicate question id 'a1'"):
        runs.outcome_frame(run)
