"""``trek wild run`` on TrekBench-Mini without holding the benchmark: :func:`trek.datasets.mini.scan`
checks it as :func:`~trek.datasets.mini.load` does and indexes the questions by offset, the pages go
from the files into the page store, and the run's question set is written by
:func:`trek.runs.grow_questions_indexed` (the same bytes as :func:`trek.runs.grow_questions`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli.run import app
from trek.datasets import mini
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Question, RecordError


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "TREK_SEARCH_CACHE", "TREK_PAGES", "OPENAI_BASE_URL", "TREK_SEARCH_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def _q(qid: str) -> dict:
    return {"id": qid, "dataset": "freshqa", "question": f"Who leads {qid}?", "answers": ["Ada"],
            "effective_year": 2024, "effective_year_raw": "2024", "gold_urls": [f"https://example.org/{qid}/gold"],
            "split": "mini"}


def _d(qid: str, role: str = "gold", **kw) -> dict:
    rec = {"id": f"{qid}:{role}:1", "url": f"https://example.org/{qid}/{role}", "date": "2024-05-01",
           "text": f"{qid} is led by Ada.", "question_id": qid, "role": role, "supports_answer": "Ada"}
    rec.update(kw)
    return rec


def _write(folder: Path, questions: list[dict], documents: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, recs in (("questions.jsonl", questions), ("documents.jsonl", documents)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")


def test_scan_reads_what_load_reads_on_the_bundled_benchmark():
    loaded, scanned = mini.load(), mini.scan()
    assert list(scanned.questions) == loaded.questions
    assert list(scanned.questions) == loaded.questions  # a second pass gives the same questions
    assert list(scanned.documents()) == loaded.documents
    assert list(scanned.documents(corpus=True)) == loaded.corpus
    assert scanned.corpus_count == len(loaded.corpus)
    assert list(scanned.questions.head(3)) == loaded.questions[:3]
    assert len(scanned.questions.head(3)) == 3 and len(scanned.questions.head(None)) == len(loaded.questions)


def test_scan_indexes_questions_across_files_by_offset(tmp_path):
    _write(tmp_path, [_q("mini:90")], [_d("mini:90")])
    _write(tmp_path / "_part2", [_q("mini:91"), _q("mini:92")], [_d("mini:91"), _d("mini:92")])
    qs = mini.scan(tmp_path).questions
    assert [q.id for q in qs] == ["mini:90", "mini:91", "mini:92"]
    assert list(qs.file_of) == [0, 1, 1] and len(qs.offsets) == 3  # where the lines are, not the questions
    assert not mini.scan(tmp_path).questions.head(0)


def test_scan_raises_the_first_error_in_file_order(tmp_path):
    # a duplicate document id comes before a broken answer span: load() names the duplicate first
    _write(tmp_path, [_q("mini:90")], [_d("mini:90"), _d("mini:90", url="https://example.org/x"),
                                       _d("mini:90", "outdated", metadata={"answer_span": {"start": 5, "end": 1}})])
    with pytest.raises(ValueError) as loaded:
        mini.load(tmp_path)
    with pytest.raises(ValueError) as scanned:
        mini.scan(tmp_path)
    assert str(scanned.value) == str(loaded.value) and "duplicate document id" in str(loaded.value)


def test_scan_names_the_line_of_an_invalid_question(tmp_path):
    _write(tmp_path, [_q("mini:90"), {**_q("mini:91"), "answers": "Ada"}], [_d("mini:90"), _d("mini:91")])
    with pytest.raises(RecordError) as info:
        mini.scan(tmp_path)
    assert str(tmp_path / "questions.jsonl") in str(info.value) and "line 2" in str(info.value)


def _grow_both(tmp_path: Path, before: list[Question] | None, now: list[Question]) -> tuple[bytes, bytes, list]:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        if before is not None:
            runs.grow_questions(d, before)
    expected = runs.grow_questions(a, now)
    index = runs.grow_questions_indexed(b, iter(now))  # read once: an iterator is enough
    with index.reader() as read:
        indexed = [read(n) for n in range(len(index))]
    assert indexed == expected
    return (a / runs.QUESTIONS).read_bytes(), (b / runs.QUESTIONS).read_bytes(), indexed


@pytest.mark.parametrize("case", ["fresh", "same", "grown", "smaller", "updated", "repeated"])
def test_grow_questions_indexed_writes_what_grow_questions_writes(tmp_path, case):
    qs = [Question.model_validate(_q(f"mini:{i}")) for i in range(90, 95)]
    changed = qs[2].model_copy(update={"question": "Who leads it now?"})
    before, now = {
        "fresh": (None, qs),
        "same": (qs, qs),
        "grown": (qs[:2], qs),
        "smaller": (qs, qs[1:3]),
        "updated": (qs, [qs[4], changed, qs[0]]),
        "repeated": (None, [qs[0], qs[1], changed, qs[2]]),
    }[case]
    expected, got, _ = _grow_both(tmp_path, before, now)
    assert got == expected


def test_wild_run_on_mini_reads_the_benchmark_by_offset(tmp_path, monkeypatch):
    bench = tmp_path / "bench"
    _write(bench, [_q(f"mini:{i}") for i in range(90, 96)],
           [d for i in range(90, 96) for d in (_d(f"mini:{i}"), _d(f"mini:{i}", "outdated", date="2020-01-01"))])
    expected = mini.load(bench)

    def refused(*a, **k):
        raise AssertionError("trek wild run loaded the whole benchmark")

    monkeypatch.setattr(mini, "load", refused)
    run = tmp_path / "run"
    with FakeOpenAIServer(script=[{"reply": "Ada"}]) as srv:
        result = CliRunner().invoke(app, [
            "run", "--model", "fake-model", "--base-url", srv.base_url, "--questions", "mini", "--data-dir",
            str(bench), "--search", "local", "--system", "search-then-read", "--run", str(run), "--limit", "4",
            "--no-progress", "--yes"])
    assert result.exit_code == 0, result.output
    assert [q.id for q in runs.load_questions(run).values()] == [q.id for q in expected.questions[:4]]
    answers = runs.load_answers(run)
    assert list(answers) == [q.id for q in expected.questions[:4]] and all(t.status == "ok" for t in answers.values())
    assert runs.read_meta(run).config["questions"] == 4


def test_wild_run_on_a_broken_mini_names_file_and_line(tmp_path):
    bench = tmp_path / "bench"
    _write(bench, [_q("mini:90")], [_d("mini:90"), {**_d("mini:90", "outdated"), "colour": "red"}])
    result = CliRunner().invoke(app, [
        "run", "--model", "fake-model", "--base-url", "http://127.0.0.1:9", "--questions", "mini", "--data-dir",
        str(bench), "--search", "local", "--run", str(tmp_path / "run"), "--no-progress", "--yes"])
    assert result.exit_code != 0
    assert str(bench / "documents.jsonl") in result.output and "line 2" in result.output


def test_local_index_keeps_its_page_keys_packed():
    from trek.search.local import Strings as _Keys  # the index's key list

    keys = _Keys()
    assert not keys and len(keys) == 0
    for k in ("example.org/a", "éxample.org/ü", ""):
        keys.append(k)
    assert len(keys) == 3 and keys
    assert [keys[i] for i in range(3)] == ["example.org/a", "éxample.org/ü", ""]
