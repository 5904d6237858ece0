"""The contexts.jsonl record: one schema, one reader (file, line and field in every error),
documents that carry what the model saw, format-1 files, and the one renderer."""

import json
from pathlib import Path

import pytest

from trek.contexts import Context, Renderer, read_contexts, render_documents
from trek.ctrl.build import build
from trek.ctrl.pools import from_mini
from trek.types import RecordError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctx")
    return build(from_mini(question_ids=["mini:01", "mini:04"]), out, embedder=None, count_tokens=False)


def lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def write(path, objs):
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs), encoding="utf-8")
    return path


def test_documents_carry_what_the_model_was_shown(built):
    contexts = read_contexts(built.contexts_path)
    pools = {p.question.id: p for p in built.pools}
    for c in contexts:
        assert render_documents(c.documents) == c.rendered
        texts = {d.id: d.text.strip() for d in pools[c.question_id].documents}
        assert all(d.text == texts[d.doc_id] for d in c.documents)
    sba = next(c for c in contexts if c.condition == "SBA")
    assert all(d.url is None for d in sba.documents) and all(d.text for d in sba.documents)


def test_a_subset_is_rendered_renumbered_with_its_own_dates_and_urls(built):
    ctx = next(c for c in read_contexts(built.contexts_path) if c.condition == "SAA")  # shows URLs
    a, b = ctx.documents[-1], ctx.documents[0]
    assert a.url
    text = render_documents([a, b])
    assert text.startswith("[Document 1]\n" + (f"Date: {a.date}\n" if a.date else "") + f"Source URL: {a.url}\n")
    assert text.endswith(b.text) and "[Document 3]" not in text


def test_bad_lines_name_file_line_and_field(built, tmp_path):
    good = lines(built.contexts_path)
    bad_role = json.loads(json.dumps(good[1]))
    bad_role["documents"][2]["role"] = "oracle"
    with pytest.raises(RecordError, match=r"x\.jsonl, line 2: Context: field 'documents\.2\.role'"):
        read_contexts(write(tmp_path / "x.jsonl", [good[0], bad_role]))
    with pytest.raises(RecordError, match=r"line 2: .*field 'extra'"):
        read_contexts(write(tmp_path / "x.jsonl", [good[0], {**good[1], "extra": 1}]))
    with pytest.raises(RecordError, match=r"line 3: repeated context for mini:01 OO"):
        read_contexts(write(tmp_path / "x.jsonl", [good[0], good[1], good[0]]))
    with pytest.raises(RecordError, match=r"line 1: field 'sha256' does not match 'rendered'"):
        read_contexts(write(tmp_path / "x.jsonl", [{**good[0], "rendered": good[0]["rendered"] + "!"}]))


def test_a_format_1_file_loads_with_the_texts_taken_out_of_rendered(built, tmp_path):
    good = lines(built.contexts_path)
    old = [{**o, "documents": [{k: v for k, v in d.items() if k != "text"} for d in o["documents"]]} for o in good]
    assert read_contexts(write(tmp_path / "old.jsonl", old)) == read_contexts(built.contexts_path)
    damaged = json.loads(json.dumps(old[0]))
    damaged["documents"][1]["date"] = "1999-01-01"  # no longer the date shown in 'rendered'
    with pytest.raises(RecordError, match=r"old\.jsonl, line 1: field 'documents\[0\]\.text' is missing"):
        read_contexts(write(tmp_path / "old.jsonl", [damaged]))


def test_the_committed_build_loads():
    contexts = read_contexts(REPO / "data" / "runs" / "ctrl" / "build" / "contexts.jsonl", check_rendering=True)
    assert contexts and all(d.text for c in contexts for d in c.documents)


def test_rendering_is_checked_against_the_templates_in_force_when_asked(built, tmp_path, monkeypatch):
    (tmp_path / "ctrl.render.date.txt").write_text("Published {date}\n")
    monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
    assert read_contexts(built.contexts_path)  # reports need not render again
    with pytest.raises(RecordError, match=r"line 1: field 'rendered' is not the documents rendered"):
        read_contexts(built.contexts_path, check_rendering=True)


def test_pieces_join_to_the_rendered_text_whatever_the_template(tmp_path, monkeypatch):
    ctx = Context.model_validate(lines(build(from_mini(question_ids=["mini:02"]), tmp_path / "b", embedder=None,
                                             count_tokens=False).contexts_path)[0])
    for template in ("[Document {index}]\n{meta}{text}", "<doc n={index}>{meta}{text}</doc>", "{index}: {meta}{text}{text}"):
        (tmp_path / "ctrl.render.document.txt").write_text(template)
        monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
        r = Renderer()
        assert "".join(r.pieces(ctx.documents)) == r.render(ctx.documents)
        assert ctx.documents[0].text in r.render(ctx.documents)


def test_a_context_file_is_indexed_and_read_by_offset_as_read_contexts_reads_it(built, tmp_path):
    from trek.contexts import ContextFile, open_contexts

    whole = read_contexts(built.contexts_path, check_rendering=True)
    f = ContextFile(built.contexts_path, check_rendering=True)
    assert len(f) == len(whole) and list(f) == whole and list(f) == whole  # re-readable, same order
    for cond in f.conditions:
        view = f.of(cond)
        mine = [c for c in whole if c.condition == cond]
        assert list(view) == mine and len(view) == len(mine)
        assert view.question_ids() == [c.question_id for c in mine]
    # a format 1 file: the texts come from 'rendered' on every read
    good = lines(built.contexts_path)
    old = [{**o, "documents": [{k: v for k, v in d.items() if k != "text"} for d in o["documents"]]} for o in good]
    assert list(ContextFile(write(tmp_path / "old.jsonl", old))) == whole
    # the same errors as read_contexts, naming the line
    with pytest.raises(RecordError, match=r"line 3: repeated context for mini:01 OO"):
        ContextFile(write(tmp_path / "x.jsonl", [good[0], good[1], good[0]]))
    assert isinstance(open_contexts(built.contexts_path), ContextFile)
