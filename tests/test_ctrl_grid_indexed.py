"""`trek ctrl run` reads its questions and counts its accuracy grid from byte-offset indexes:
the same questions, counts and errors as the readers that load every record."""

import json

import pytest

from trek import runs as R
from trek.rag.context import CtrlQuestions, load_ctrl_questions, open_ctrl_questions
from trek.rag.runner import Cell
from trek.rag.session import accuracy_grid
from trek.types import Grade, Question, RecordError


def _q(i, dataset="freshqa", **extra):
    return Question(id=f"q{i}", dataset=dataset, question=f"Who leads group {i}?", answers=[f"Leader {i}"],
                    effective_year=2025, **extra)


def test_indexed_questions_equal_the_loaded_ones_in_questions_and_pools_files(tmp_path):
    qs = [_q(1), _q(2, dataset="custom"), _q(3, dataset="sealqa")]
    plain = tmp_path / "questions.jsonl"
    # a later line for the same id wins, as in load_ctrl_questions
    plain.write_text("".join(q.model_dump_json() + "\n" for q in [*qs, _q(1).model_copy(update={"question": "New?"})]))
    pools = tmp_path / "pools.jsonl"
    pools.write_text("".join(json.dumps({"question": q.model_dump(mode="json"), "documents": [{"text": "x" * 50}]})
                             + "\n" for q in qs))
    for path in (plain, pools):
        loaded, indexed = load_ctrl_questions(path), CtrlQuestions(path)
        assert list(indexed) == list(loaded) and len(indexed) == len(loaded)
        assert {k: indexed[k] for k in indexed} == loaded
        assert "q2" in indexed and "q9" not in indexed
        with pytest.raises(KeyError):
            indexed["q9"]
    assert CtrlQuestions(plain)["q1"].question == "New?"
    assert CtrlQuestions(plain)["q2"].grader == "generic"  # a custom dataset gets the generic judge


def test_indexed_questions_refuse_a_bad_line_naming_file_and_line(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(_q(1).model_dump_json() + "\n" + json.dumps({"id": "q2"}) + "\n")
    with pytest.raises(RecordError) as loaded:
        load_ctrl_questions(path)
    with pytest.raises(RecordError) as indexed:
        CtrlQuestions(path)
    assert str(indexed.value) == str(loaded.value)
    assert "questions.jsonl" in str(indexed.value) and "line 2" in str(indexed.value)


def test_a_gzipped_questions_file_is_read_whole(tmp_path):
    import gzip

    path = tmp_path / "questions.jsonl.gz"
    path.write_bytes(gzip.compress(_q(1).model_dump_json().encode() + b"\n"))
    got = open_ctrl_questions(path)
    assert isinstance(got, dict) and list(got) == ["q1"]
    plain = tmp_path / "plain.jsonl"
    plain.write_text(_q(1).model_dump_json() + "\n")
    assert isinstance(open_ctrl_questions(plain), CtrlQuestions)


def _grade(qid, outcome):
    return Grade(question_id=qid, dataset="freshqa", response="r", grader="freshqa", grader_version="v",
                 outcome=outcome, judge_model="j")


def test_accuracy_grid_counts_the_last_grade_of_every_question(tmp_path):
    run = tmp_path / "m__direct__OO"
    run.mkdir()
    R.write_records(run, R.QUESTIONS, [_q(i) for i in range(4)])
    # q0 wrong then right (the later line wins), q1 right, q2 wrong, q3 not graded
    R.write_records(run, R.GRADES, [_grade("q0", "incorrect"), _grade("q1", "correct"), _grade("q2", "incorrect"),
                                    _grade("q0", "correct")])
    empty = tmp_path / "m__direct__MND"
    empty.mkdir()
    R.write_records(empty, R.QUESTIONS, [_q(i) for i in range(2)])  # no grades.jsonl yet
    cells = [Cell("direct", "OO", run, 0), Cell("direct", "MND", empty, 1)]
    assert accuracy_grid(cells) == {("direct", "OO"): (2, 4), ("direct", "MND"): (0, 2)}
    loaded = R.load_grades(run, R.load_questions(run))
    assert sum(g.outcome == "correct" for g in loaded.values()) == 2


def test_accuracy_grid_refuses_a_grade_of_an_unknown_question_naming_its_line(tmp_path):
    run = tmp_path / "m__direct__OO"
    run.mkdir()
    R.write_records(run, R.QUESTIONS, [_q(0)])
    R.write_records(run, R.GRADES, [_grade("q0", "correct"), _grade("q7", "correct")])
    with pytest.raises(RecordError, match=r"grades.jsonl.*line 2.*'q7'"):
        accuracy_grid([Cell("direct", "OO", run, 0)])
