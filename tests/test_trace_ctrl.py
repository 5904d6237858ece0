"""TrekTrace on a Ctrl run (``trek.trace.ctrl``): the pages the model saw are its context's
documents, each under its own URL (the pool's where the condition hides it), with the passage the
context showed; a method that chose among the documents is refused."""

from __future__ import annotations

import pytest

from trek import runs
from trek.annotations import for_run
from trek.ctrl.build import build
from trek.ctrl.pools import from_mini
from trek.datasets import mini
from trek.pages import normalize_url
from trek.trace.ctrl import ctrl_pages, trace_store
from trek.trace.verify import _ctrl_kinds
from trek.types import RunMeta, write_jsonl

QUESTIONS = ["mini:01", "mini:02"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctrl")
    build(from_mini(question_ids=QUESTIONS), root / "build", conditions=("OO", "SAA"), count_tokens=False,
          doc_chars=160, embedder=None, fabricator="exact")
    return root


def ctrl_run(root, method, condition):
    rd = root / "runs" / f"m__{method}__{condition}"
    rd.mkdir(parents=True, exist_ok=True)
    runs.write_meta(rd, RunMeta(run_id=rd.name, kind="ctrl", model="m", config={
        "method": method, "condition": condition, "contexts": "build/contexts.jsonl"}))
    write_jsonl(rd / runs.QUESTIONS, [q for q in mini.load().questions if q.id in QUESTIONS])
    return rd


@pytest.mark.parametrize("condition", ["OO", "SAA"])
def test_a_direct_runs_pages_are_its_contexts_documents_in_order(grid, condition):
    from trek.contexts import read_contexts

    rd = ctrl_run(grid, "direct", condition)
    found = ctrl_pages(rd)
    contexts = {c.question_id: c for c in read_contexts(grid / "build" / "contexts.jsonl") if c.condition == condition}
    ann = for_run(rd)
    kind = _ctrl_kinds(rd)
    store = trace_store(rd)
    try:
        for qid in QUESTIONS:
            urls, ctx = found.collection(qid), contexts[qid]
            assert len(urls) == len(ctx.documents)  # one URL a document, in context order
            q = next(q for q in mini.load().questions if q.id == qid)
            assert {normalize_url(u) for u in q.gold_urls} <= {normalize_url(u) for u in urls}
            assert ann.unknown_urls(urls) == []  # the exact judge knows every page
            for url, d in zip(urls, ctx.documents, strict=True):
                assert d.url in (None, url) or d.original_url == url
                assert store.get(url).text == d.text  # the passage the context showed
                assert kind(url) == (None if d.role == "gold" else d.role)
            if condition == "OO":
                assert all(d.url is None for d in ctx.documents)  # the condition hides them: the pools name them
    finally:
        store.close()


def test_a_method_that_chose_among_the_documents_is_refused(grid):
    rd = ctrl_run(grid, "rerank", "OO")
    with pytest.raises(ValueError, match="method 'rerank'"):
        ctrl_pages(rd)


def test_a_run_that_is_not_ctrl_reads_its_own_page_store(tmp_path):
    assert ctrl_pages(tmp_path) is None
    store = trace_store(tmp_path)
    try:
        assert len(store) == 0
    finally:
        store.close()
