"""TrekBench-Mini's generated timeline pages and answer spans (trek.datasets.mini_timeline)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.datasets import mini
from trek.datasets import mini_timeline as T

BUNDLED = mini.BUNDLED_DIR
#: Gold pages whose answer is never written as one replaceable phrase (a count to be worked out,
#: a list of office holders), so they carry no answer span.
GOLD_WITHOUT_SPAN = {"mini:06:gold:2", "mini:23:gold:1", "mini:26:gold:1", "mini:29:gold:1"}


@pytest.fixture(scope="module")
def bench() -> mini.MiniBenchmark:
    return mini.load(BUNDLED)


def _shown(d) -> str:
    span = mini.answer_span(d)
    assert span is not None, d.id
    return d.text[span.start:span.end]


def _renderings(value: str) -> set[str]:
    out = set()
    for f in T.VALUE_FIELDS:
        try:
            out.add(T.format_value(f, value))
        except ValueError:
            pass
    return out


def _copy_without_generated(tmp_path: Path) -> Path:
    root = tmp_path / "mini"
    shutil.copytree(BUNDLED, root, ignore=shutil.ignore_patterns(T.GENERATED_DIR))
    return root


# -- the bundled data --------------------------------------------------------------------------------
def test_every_timeline_question_has_enough_documents_for_every_ablation(bench):
    specs = T.load_spec(BUNDLED / T.SPEC_FILE)
    assert len(specs) >= 12
    for s in specs:
        docs = bench.documents_for(s.question_id)
        outdated = [d for d in docs if d.role == "outdated"]
        relevance = [d for d in docs if d.role == "relevance"]
        assert len(outdated) >= T.OUTDATED_TARGET and len(relevance) >= T.RELEVANCE_TARGET, s.question_id
        for d in outdated + relevance:
            assert d.supports_answer and (d.date is not None or not mini.is_generated(d)), d.id


def test_the_ctrl_questions_of_the_recorded_runs_all_have_timelines():
    from trek.datasets import load_questions
    from trek.experiments import Settings, question_ids_by_style

    ids = question_ids_by_style(load_questions("mini"), Settings().ctrl_questions)
    timelines = {s.question_id for s in T.load_spec(BUNDLED / T.SPEC_FILE)}
    assert set(ids) <= timelines, sorted(set(ids) - timelines)


def test_generated_pages_are_marked_and_state_their_answer_at_the_span(bench):
    generated = [d for d in bench.documents if mini.is_generated(d)]
    assert generated and all(bench.sources[d.id].parent.name == T.GENERATED_DIR for d in generated)
    for d in generated:
        assert d.role in ("outdated", "relevance") and d.metadata["generator"] == T.VERSION
        assert _shown(d) in _renderings(d.supports_answer), (d.id, _shown(d), d.supports_answer)
    hand = [d for d in bench.documents if not mini.is_generated(d)]
    assert all(bench.sources[d.id].parent == BUNDLED for d in hand)


def test_gold_pages_carry_answer_spans_that_state_the_reference(bench):
    for q in bench.questions:
        for d in bench.documents_for(q.id, "gold"):
            span = mini.answer_span(d)
            if d.id in GOLD_WITHOUT_SPAN:
                assert span is None, d.id
                continue
            assert span is not None, f"{d.id}: gold page without metadata.answer_span"
            shown = d.text[span.start:span.end]
            if span.template.strip("{}") in T.VALUE_FIELDS:  # the template is the value alone
                assert any(shown in _renderings(a) for a in q.answers), (d.id, shown)
            else:  # a phrase (false premise, a count written as a list of months): it is replaced whole
                assert shown.strip() and "{" in span.template


def test_committed_generated_file_is_current_and_regenerates_byte_for_byte(tmp_path):
    assert T.check()  # what trek data mini-generate --check runs
    root = _copy_without_generated(tmp_path)
    path, n = T.write(root)
    assert n == sum(1 for _ in T.output_path().open(encoding="utf-8"))
    assert path.read_bytes() == T.output_path().read_bytes()
    first = path.read_bytes()
    T.write(root)
    assert path.read_bytes() == first


def test_load_without_generated_pages_is_the_hand_written_benchmark(bench):
    hand = mini.load(BUNDLED, generated=False)
    assert [d.id for d in hand.documents] == [d.id for d in bench.documents if not mini.is_generated(d)]
    assert len(hand.documents) < len(bench.documents)


# -- values and templates ----------------------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "shown"), [
    ("value", "Dana Okafor", "Dana Okafor"),
    ("value_words", "4", "four"),
    ("value_words", "0", "zero"),
    ("value_words", "21", "twenty-one"),
    ("value_words_cap", "7", "Seven"),
    ("value_ordinal", "3", "third"),
    ("value_ordinal", "12", "twelfth"),
    ("value_ordinal", "20", "twentieth"),
    ("value_ordinal", "21", "twenty-first"),
    ("value_number", "$2.50", "2.50"),
    ("value_number", "61,268", "61,268"),
    ("value_number", "214 metres", "214"),
])
def test_format_value(field, value, shown):
    assert T.format_value(field, value) == shown


@pytest.mark.parametrize(("field", "value"), [
    ("value_words", "Tarnlight Air"), ("value_ordinal", "2.5"), ("value_number", "Osprey"),
    ("value_words", "120"), ("value_shouting", "4"),
])
def test_format_value_refuses_what_does_not_fit(field, value):
    with pytest.raises(ValueError):
        T.format_value(field, value)


def test_fill_value_returns_the_span_of_the_value():
    text, (a, b) = T.fill_value("In {year}, {value_words_cap} clubs: {who}.", "16", year="2023", who="all")
    assert text == "In 2023, Sixteen clubs: all." and text[a:b] == "Sixteen"
    with pytest.raises(ValueError, match="exactly one"):
        T.fill_value("{value} and {value_words}", "3")
    with pytest.raises(ValueError, match="unknown field"):
        T.fill_value("{value} in {nowhere}", "3")


# -- errors --------------------------------------------------------------------------------------------
def _spec(tmp_path: Path, text: str) -> Path:
    root = _copy_without_generated(tmp_path)
    (root / T.SPEC_FILE).write_text(text, encoding="utf-8")
    return root


GOOD = """\
mini:01:
  title: Rovers coach
  outdated:
    claims: ["{value} coaches the Rovers."]
    timeline: [{value: Tomas Reyel, from: 2016-06-03, to: 2019-05-19}]
  relevance:
    - claims: ["{value} coaches the Rovers women."]
      timeline: [{value: Priya Venkataraman, from: 2024-08-20, to: 2025-04-30}]
"""


def test_a_small_timeline_fills_the_question_to_the_targets(tmp_path):
    root = _spec(tmp_path, GOOD)
    docs = T.generate(root)
    out = [d for d in docs if d.role == "outdated"]
    rel = [d for d in docs if d.role == "relevance"]
    assert len(out) == 12 and len(rel) == 6  # 8 and 4 hand-written
    assert [d.id for d in out][:2] == ["mini:01:outdated:9", "mini:01:outdated:10"]
    assert len({d.date for d in docs}) == len(docs)
    assert all(d.supports_answer == "Tomas Reyel" and _shown(d) == "Tomas Reyel" for d in out)
    assert all(str(d.date) >= "2016-06-03" and str(d.date) <= "2019-05-19" for d in out)


@pytest.mark.parametrize(("text", "message"), [
    (GOOD.replace("  title: Rovers coach\n", ""), "needs exactly title, outdated and relevance"),
    (GOOD.replace("2016-06-03", "June 2016"), "is not a date"),
    (GOOD.replace("{value} coaches the Rovers.", "Someone coaches the Rovers."), "exactly one of"),
    (GOOD.replace("to: 2019-05-19", "to: 2015-05-19"), "is before 'from'"),
    (GOOD.replace("Tomas Reyel", "Dana Okafor"), "is a reference answer of mini:01"),
    (GOOD.replace("mini:01:", "mini:99:"), "no such question"),
    (GOOD.replace("from: 2024-08-20, to: 2025-04-30", "from: 2023-01-01, to: 2023-02-01"), "no day left"),
])
def test_bad_timelines_are_refused_naming_file_and_entry(tmp_path, text, message):
    root = _spec(tmp_path, text)
    with pytest.raises(T.TimelineError, match=message) as info:
        T.generate(root)
    assert str(root / T.SPEC_FILE) in str(info.value)


def test_loader_refuses_a_bad_answer_span_naming_file_and_document(tmp_path):
    root = _copy_without_generated(tmp_path)
    lines = (root / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[0])
    rec["metadata"]["answer_span"] = {"start": 10, "end": 10_000}
    lines[0] = json.dumps(rec)
    (root / "documents.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(mini.MiniBenchmarkError, match="mini:01:gold:1.*answer_span") as info:
        mini.load(root)
    assert str(root / "documents.jsonl") in str(info.value)
    rec["metadata"]["answer_span"] = {"start": 1, "end": 5, "template": "acquired by {who}"}
    lines[0] = json.dumps(rec)
    (root / "documents.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(mini.MiniBenchmarkError, match="exactly one of"):
        mini.load(root)


def test_cli_generates_and_checks(tmp_path):
    root = _copy_without_generated(tmp_path)
    r = CliRunner().invoke(app, ["data", "mini-generate", "--mini-dir", str(root), "--check"])
    assert r.exit_code == 1 and "differs" in r.output
    r = CliRunner().invoke(app, ["data", "mini-generate", "--mini-dir", str(root)])
    assert r.exit_code == 0 and "wrote 214 generated pages" in r.output
    r = CliRunner().invoke(app, ["data", "mini-generate", "--mini-dir", str(root), "--check"])
    assert r.exit_code == 0 and "up to date" in r.output
    (root / T.SPEC_FILE).write_text("nonsense: [", encoding="utf-8")
    r = CliRunner().invoke(app, ["data", "mini-generate", "--mini-dir", str(root)])
    assert r.exit_code == 2 and "not valid YAML" in r.output
