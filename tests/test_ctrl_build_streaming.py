"""Ctrl build streams: pools given one at a time (a generator, ``iter_pools`` of a file) give the
files a list gives, and a pool is dropped once it and its contexts are written, so a build's
memory does not grow with the number of questions."""

from __future__ import annotations

import weakref

import pytest

from trek.ctrl.build import build
from trek.ctrl.conditions import MAIN_CONDITIONS, BudgetCounter, budget_shortfalls
from trek.ctrl.pools import Pool, from_mini, iter_pools, read_pools, write_pools
from trek.types import RecordError

IDS = ["mini:01", "mini:02", "mini:04", "mini:07"]


def files(folder):
    return {name: (folder / name).read_bytes() for name in ("pools.jsonl", "contexts.jsonl", "build.json")}


def copies(pools: list[Pool], n: int):
    """``n`` distinct pools made from ``pools`` as they are asked for (question and document ids
    renamed; the documents are new objects)."""
    for i in range(n):
        p = pools[i % len(pools)]
        qid = f"{p.question.id}-{i}"
        docs = [d.model_copy(update={"id": f"{d.id}-{i}", "question_id": qid, "url": f"{d.url}?copy={i}"})
                for d in p.documents]
        yield p.model_copy(update={"question": p.question.model_copy(update={"id": qid}), "documents": docs})


@pytest.mark.parametrize("fabricator", ["none", pytest.param("exact", marks=pytest.mark.slow)])
def test_a_generator_of_pools_builds_what_a_list_builds(tmp_path, fabricator):
    pools = from_mini(question_ids=IDS)
    a = build(pools, tmp_path / "list", embedder=None, conditions=MAIN_CONDITIONS, fabricator=fabricator,
              count_tokens=False)
    b = build(iter(pools), tmp_path / "gen", embedder=None, conditions=MAIN_CONDITIONS, fabricator=fabricator,
              count_tokens=False)
    assert files(tmp_path / "list") == files(tmp_path / "gen")
    assert [m.replace(str(tmp_path / "list"), "OUT") for m in a.messages] == \
           [m.replace(str(tmp_path / "gen"), "OUT") for m in b.messages]
    assert a.pools == b.pools == list(b.iter_pools()) and len(b.pools) == len(IDS)
    if fabricator == "exact":
        assert any(p.role("fabrication") for p in b.pools)
    # and from the file it wrote, read a pool at a time: the same build again
    c = build(iter_pools(tmp_path / "gen" / "pools.jsonl"), tmp_path / "again", embedder=None,
              conditions=MAIN_CONDITIONS, fabricator=fabricator, count_tokens=False)
    assert files(tmp_path / "again")["contexts.jsonl"] == files(tmp_path / "gen")["contexts.jsonl"]
    assert c.pools == b.pools


def test_a_pool_is_dropped_once_it_and_its_contexts_are_written(tmp_path):
    base = from_mini(question_ids=IDS)
    alive: list[weakref.ref] = []
    most = 0

    def watched():
        nonlocal most
        for p in copies(base, 40):
            most = max(most, sum(1 for r in alive if r() is not None))
            alive.append(weakref.ref(p.documents[0]))  # shared by every copy the build makes of the pool
            yield p

    r = build(watched(), tmp_path, embedder=None, conditions=MAIN_CONDITIONS, fabricator="none", count_tokens=False)
    assert r.contexts == 40 * len(MAIN_CONDITIONS)
    assert most <= 2, f"{most} earlier pools still held while the build read the next"


def test_the_budget_counter_says_what_budget_shortfalls_says():
    pools = from_mini(question_ids=IDS)
    said = {}
    for fabricated in (True, False):
        counter = BudgetCounter(MAIN_CONDITIONS)
        for p in pools:
            counter.add(p)
        said[fabricated] = counter.lines(fabricated=fabricated)
        assert said[fabricated] == budget_shortfalls(pools, MAIN_CONDITIONS, fabricated=fabricated)
        assert said[fabricated] and all(f"of {len(pools)} questions" in line for line in said[fabricated])
    # these pools have no fabrications: that budget is short only when fabrication ran
    assert [x for x in said[True] if x not in said[False]] == [x for x in said[True] if "SAA fabrication" in x] != []


def test_iter_pools_checks_every_pool_as_read_pools_does(tmp_path):
    pools = from_mini(question_ids=IDS[:2])
    good = write_pools(tmp_path / "good.jsonl", pools)
    assert list(iter_pools(good)) == read_pools(good) == pools
    bad = write_pools(tmp_path / "bad.jsonl", [pools[0], pools[1], pools[0]])
    seen = []
    with pytest.raises(RecordError, match=r"bad\.jsonl.*3.*duplicate question id 'mini:01'"):
        for p in iter_pools(bad):
            seen.append(p.question.id)
    assert seen == ["mini:01", "mini:02"]  # the good ones came first, one at a time
