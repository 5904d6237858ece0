import json

import pytest

from trek.types import Document, Grade, Question, RecordError, Usage, read_jsonl, write_jsonl


def _q(**kw):
    base = {"id": "x:1", "dataset": "freshqa", "question": "Who?", "answers": ["A"]}
    base.update(kw)
    return base


def test_roundtrip(tmp_path):
    p = tmp_path / "q.jsonl"
    qs = [Question(**_q(id=f"x:{i}", effective_year=2024)) for i in range(3)]
    write_jsonl(p, qs)
    back = read_jsonl(p, Question)
    assert [q.id for q in back] == ["x:0", "x:1", "x:2"]
    assert back[0].effective_year == 2024
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind


def test_error_names_file_line_and_field(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps(_q()) + "\n" + json.dumps(_q(answers=[])) + "\n")
    with pytest.raises(RecordError) as e:
        read_jsonl(p, Question)
    msg = str(e.value)
    assert str(p) in msg and "line 2" in msg and "answers" in msg


def test_bad_json_and_unknown_field(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": "d1", "url": "https://a.example/x", "text": "t"}\n{not json\n')
    with pytest.raises(RecordError, match="line 2: not valid JSON"):
        read_jsonl(p, Document)
    p.write_text('{"id": "d1", "url": "https://a.example/x", "text": "t", "colour": 1}\n')
    with pytest.raises(RecordError, match=r"line 1: .*field 'colour'"):
        read_jsonl(p, Document)


def test_bad_date_names_field(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": "d1", "url": "https://a.example/x", "text": "t", "date": "32/13/2020"}\n')
    with pytest.raises(RecordError, match=r"line 1: .*field 'date'"):
        read_jsonl(p, Document)


def test_write_failure_keeps_old_file(tmp_path):
    p = tmp_path / "g.jsonl"
    write_jsonl(p, [{"a": 1}])

    def gen():
        yield {"a": 2}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_jsonl(p, gen())
    assert p.read_text() == '{"a":1}\n'
    assert len(list(tmp_path.iterdir())) == 1


def test_usage_addition_and_unknown_cost():
    a = Usage(prompt_tokens=10, completion_tokens=5, calls=1, cost_usd=0.5)
    b = Usage(prompt_tokens=1, completion_tokens=2, calls=1, cost_usd=0.25)
    s = a + b
    assert (s.prompt_tokens, s.completion_tokens, s.calls, s.cost_usd) == (11, 7, 2, 0.75)
    assert (a + Usage(cost_usd=None)).cost_usd is None
    full = Usage(prompt_tokens=1, completion_tokens=2, reasoning_tokens=3, cached_tokens=4, calls=5, cached_calls=6,
                 cost_usd=1.0)
    assert full + full - full == full  # every count, not only the ones above
    assert full - full == Usage() and (full - Usage(cost_usd=None)).cost_usd is None


def test_grade_correct_property():
    g = dict(question_id="q", dataset="sealqa", response="r", grader="sealqa", grader_version="1")
    assert Grade(outcome="correct", **g).correct is True
    assert Grade(outcome="not_attempted", **g).correct is False
    assert Grade(outcome="unparsed", **g).correct is None


def test_binary_line_is_named_by_its_own_number(tmp_path):
    from trek.types import RecordError, iter_json_lines

    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a": 1}\n\xff\xfe binary\n')
    with pytest.raises(RecordError, match=r"x.jsonl, line 2: not UTF-8"):
        list(iter_json_lines(p))
