"""Ctrl from Wild-shaped questions, end to end and offline: `trek ctrl discover --source wild` over
source datasets in their own schemas (and a LongSeal file), with a Tavily-shaped search service
and pages served on loopback (fetched over HTTP, read by trafilatura), and the scripted fake
model; then `trek ctrl build`, whose contexts must have the paper's composition (D.4).

The scripted web is ``tests/demo/wild_web.py`` (everything invented)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest
from _scripts import load_script
from typer.testing import CliRunner

from trek.aio import closing_run, run_sync
from trek.cli import app
from trek.contexts import read_contexts
from trek.ctrl import discovery as D
from trek.ctrl.pools import Pool, read_pools
from trek.llm import LLMClient
from trek.pages import PageStore
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Document, Question

wild_web = load_script("wild_web")
demo_build = load_script("demo_ctrl_build")


def _clean_env(mp):
    for var in ("TREK_CACHE", "OPENAI_BASE_URL", "TREK_PROMPTS", "TREK_SEARCH_CACHE", "TREK_PAGES",
                "TREK_DATA_DIR", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        mp.delenv(var, raising=False)
    mp.setenv("OPENAI_API_KEY", "sk-test")
    mp.setenv("TAVILY_API_KEY", "tvly-test")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    _clean_env(monkeypatch)


def discover(web, tmp, *extra):
    data_dir, longseal = web.write_datasets(tmp / "datasets")
    out = tmp / "discover" / "pools.jsonl"
    with FakeOpenAIServer(script=web.rules()) as srv, pytest.MonkeyPatch.context() as mp:
        _clean_env(mp)
        mp.setenv("TAVILY_BASE_URL", web.base)
        res = CliRunner().invoke(app, ["ctrl", "discover", "--source", "wild", "--data-dir", str(data_dir),
                                       "--longseal", str(longseal), "--model", "fake-model", "--base-url",
                                       srv.base_url, "--search", "tavily", "--fetch", "--fetch-private",
                                       "--pages", str(tmp / "discover" / "pages.sqlite"), "--out", str(out),
                                       "--allow-partial", *extra])  # a small invented Wild
        calls = srv.stats()
    return res, out, calls


@pytest.fixture(scope="module")
def wild_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wild")
    with wild_web.WildWeb(9) as web:
        res, out, calls = discover(web, tmp)
        assert res.exit_code == 0, res.output
        pools = read_pools(out)
        build_dir = tmp / "build"
        with FakeOpenAIServer(script=demo_build.demo_script(pools)) as srv, pytest.MonkeyPatch.context() as mp:
            _clean_env(mp)
            built = CliRunner().invoke(app, ["ctrl", "build", "--source", "pools", "--pools", str(out), "--out",
                                             str(build_dir), "--model", "fake-model", "--base-url", srv.base_url,
                                             "--conditions", "OO,MND,SAA,SBA,GOLD,SAA:domainswap,OO:timeswap"])
        assert built.exit_code == 0, built.output
        return {"web": web, "discover": res, "pools": pools, "out": out, "calls": calls, "build": built,
                "build_dir": build_dir, "contexts": read_contexts(build_dir / "contexts.jsonl")}


def roles(ctx):
    return Counter(d.role for d in ctx.documents)


@pytest.mark.slow
def test_contexts_have_the_papers_composition(wild_run):
    pools = {p.question.id: p for p in wild_run["pools"]}
    by = {(c.question_id, c.condition): c for c in wild_run["contexts"]}
    assert len(pools) == 9 and {c.question_id for c in wild_run["contexts"]} == set(pools)
    fabricated = 0
    for qid, p in pools.items():
        n_gold = len(p.gold)
        oo, mnd, saa, sba, gold = (by[qid, c] for c in ("OO", "MND", "SAA", "SBA", "GOLD"))
        assert roles(oo) == {"outdated": 20, "gold": n_gold}
        assert roles(mnd) == {"outdated": 10, "relevance": 10, "gold": n_gold}
        r = roles(saa)
        assert r["outdated"] + r["relevance"] == 10 and r["republication"] == 5 and r["gold"] == n_gold
        assert r["fabrication"] <= 5 and set(r) <= {"outdated", "relevance", "republication", "fabrication", "gold"}
        fabricated += r["fabrication"]
        mnd_ids = {d.doc_id for d in mnd.documents}
        assert all(d.doc_id in mnd_ids for d in saa.documents if d.role in ("outdated", "relevance"))
        assert [d.doc_id for d in sba.documents] == [d.doc_id for d in saa.documents]
        assert roles(gold) == {"gold": n_gold}
        # source URLs only in the domain-cued conditions
        assert all(d.url for d in saa.documents) and all(d.url for d in by[qid, "SAA:domainswap"].documents)
        for c in (oo, mnd, sba, gold, by[qid, "OO:timeswap"]):
            assert not any(d.url for d in c.documents) and "Source URL:" not in c.rendered
        # every distractor of OO and MND is a real page found by discovery or supplied by LongSeal
        assert all(d.doc_id.startswith(qid) for d in oo.documents + mnd.documents)
    # five fabrications wherever the gold page names the answer (demo replies edit that sentence)
    named = [qid for qid, p in pools.items() if D.states_answer(p.gold[0].text, p.question.answers)]
    assert fabricated == 5 * len(named) and len(named) == 7
    manifest = json.loads((wild_run["build_dir"] / "build.json").read_text())
    assert manifest["show_urls"] == "cued" and manifest["url_conditions"] == ["SAA", "SAA:domainswap"]
    assert manifest["gold_check_flagged"] == [q for q, p in pools.items() if p.notes["gold_check"]["status"] == "flagged"]
    assert "flagged by discovery's gold check" in wild_run["build"].output


@pytest.mark.slow
def test_discovery_fills_the_quotas_from_real_fetches_and_searches(wild_run):
    web, pools = wild_run["web"], wild_run["pools"]
    for p in pools:
        i = next(j for j in range(web.n) if web.question(j) == p.question.question)
        assert len(p.role("outdated")) == 20 and len(p.role("relevance")) == 10
        disc = p.notes["discovery"]
        assert disc["pending"] is None and disc["backend"] == "tavily"
        if web.in_longseal(i):
            assert p.notes["start"] == "longseal"
            seal = [d for d in p.role("outdated") if d.metadata["origin"] == "longseal"]
            assert len(seal) == 8 and disc["outdated_added"] == 12
            assert all(d.url.startswith("https://longseal.example/") for d in p.gold)
        else:
            assert p.notes["start"] == "reference_urls" and disc["outdated_added"] == 20
            assert [d.url for d in p.gold] == [web.url(f"/q{i}/gold")]
        old = [d for d in p.role("outdated") if d.metadata["origin"] == "discovery"]
        assert {d.supports_answer for d in old} <= set(wild_web.OLD[:24])
        assert all(d.text and "head coach was" in d.text for d in old)
        rel = p.role("relevance")
        assert {d.supports_answer for d in rel} == set(wild_web.REL[:10])
        assert all(d.metadata["policy"] == "relevance:role|single_constraint" for d in rel)
        log = disc["log"]
        assert any(e.get("outcome") == "rejected" and "not after" in e.get("reason", "") for e in log)
        assert any(e.get("outcome") == "rejected" and "not before" in e.get("reason", "") for e in log)
        assert any(e.get("outcome") == "unusable" and e.get("reason") == "HTTP 404" for e in log)
        assert any(e.get("reason") == "the page does not name a coach" for e in log)
    # FreshQA's second reference URL is a 404: kept out of the gold documents and recorded
    fresh = [p for p in pools if p.question.dataset == "freshqa"]
    assert fresh and all(p.notes["gold_unavailable"][0]["reason"] == "HTTP 404" for p in fresh)
    # every historical candidate was fetched once (the page store keeps what it fetched)
    fetched = Counter(wild_run["web"].fetch_log)
    assert fetched and max(fetched.values()) == 1


@pytest.mark.slow
def test_page_dates_come_from_trafilatura_and_the_date_only_step(wild_run):
    web = wild_run["web"]
    for p in wild_run["pools"]:
        anchor = p.anchor_date()
        assert anchor is not None
        for d in p.role("outdated"):
            assert d.date is not None, d.id  # every historical page is dated in the end
            if d.metadata["origin"] == "discovery":
                k = int(d.url.rsplit("h", 1)[1])
                assert d.date == web.hist_date(k) and d.date < anchor
                recovered = d.metadata.get("date_source") == "recovered"
                assert recovered == (k % 4 == 3)  # meta, URL and "Posted dd.mm.yyyy" dates are trafilatura's
                if recovered:
                    assert d.metadata["date_evidence"] in d.text
        assert all(d.date is not None and d.date > anchor for d in p.role("relevance"))
    undated_gold = [p for p in wild_run["pools"] if p.gold[0].metadata.get("date_source") == "recovered"]
    assert [p.question.question for p in undated_gold] == [web.question(5)]
    assert undated_gold[0].anchor_date() == web.anchor(5)
    report = json.loads(wild_run["out"].with_name("pools.report.json").read_text())
    assert report["dates_recovered"] == sum(p.notes["discovery"]["dates_recovered"] for p in wild_run["pools"])
    assert report["dates_recovered"] >= 9 * 5


@pytest.mark.slow
def test_gold_pages_that_no_longer_state_the_answer_are_flagged_not_dropped(wild_run):
    web = wild_run["web"]
    by_text = {p.question.question: p for p in wild_run["pools"]}
    flagged = by_text[web.question(7)].notes["gold_check"]
    assert flagged["status"] == "flagged" and flagged["pages"][0]["status"] == "not_stated"
    nickname = by_text[web.question(4)].notes["gold_check"]
    assert nickname["status"] == "ok" and nickname["pages"][0]["method"] == "model"
    named = by_text[web.question(0)].notes["gold_check"]
    assert named["status"] == "ok" and named["pages"][0]["method"] == "text"
    report = json.loads(wild_run["out"].with_name("pools.report.json").read_text())
    assert report["flagged"] == [by_text[web.question(7)].question.id] and report["skipped"] == []
    assert f"flagged {report['flagged'][0]}" in wild_run["discover"].output
    row = next(r for r in report["per_question"] if r["question_id"] == report["flagged"][0])
    assert row["documents"] == {"gold": 1, "outdated": 20, "relevance": 10}


@pytest.mark.slow
def test_a_question_without_a_usable_gold_page_is_left_out_with_its_reason_and_exit_3(tmp_path):
    with wild_web.WildWeb(3, dead_gold=True) as web:
        res, out, _ = discover(web, tmp_path, "--historical", "2", "--relevance", "1")
    assert res.exit_code == 3, res.output
    pools = read_pools(out)
    report = json.loads(out.with_name("pools.report.json").read_text())
    assert len(pools) == 2 and report["questions"] == 3
    (skip,) = report["skipped"]
    assert skip["question_id"].startswith("infodeepseek:") and "HTTP 404" in skip["reason"]
    assert f"skipped {skip['question_id']}" in res.output and "1 left out" in res.output
    assert all(len(p.role("outdated")) <= 2 and len(p.role("relevance")) <= 1 for p in pools)


def _tiny_pool(text: str) -> Pool:
    q = Question(id="t:1", dataset="freshqa", question="Who coaches the Tarnby crew?", answers=["Ada Brennan"],
                 effective_year=2024)
    gold = Document(id="t:1:gold:0", url="https://t.example/gold", text="The Tarnby crew is coached by Ada Brennan.",
                    date=dt.date(2024, 3, 1), role="gold", supports_answer="Ada Brennan", question_id="t:1")
    old = Document(id="t:1:outdated:0", url="https://t.example/old", text=text, role="outdated",
                   supports_answer="Orla Penn", question_id="t:1", metadata={"origin": "longseal"})
    return Pool(question=q, documents=[gold, old])


@pytest.mark.parametrize("evidence, recovered", [("posted on the third of May", True),
                                                 ("posted on the 3rd of May 2019", False)])
def test_a_recovered_date_needs_its_evidence_in_the_cached_page(evidence, recovered):
    pool = _tiny_pool("Orla Penn coached the crew. This was posted on the third of May, in 2019.")
    store = PageStore()
    store.add_documents(pool.documents)
    rules = [{"pattern": "Find the publication date", "reply": json.dumps({"date": "2019-05-03", "evidence": evidence})}]
    with FakeOpenAIServer(script=rules) as srv:
        client = LLMClient("fake-model", base_url=srv.base_url, progress=False, max_retries=0)
        settings = D.DiscoverySettings(historical=1, relevance=0)
        out = closing_run(D.adiscover_pool(pool, client, _NoSearch(), store, settings), client)
        assert srv.stats()["requests"] == 1  # one date-only call; the gold named its answer: no check call
    (old,) = out.role("outdated")
    assert (old.date == dt.date(2019, 5, 3)) is recovered
    entry = next(e for e in out.notes["discovery"]["log"] if e.get("kind") == "date")
    assert entry["outcome"] == ("recovered" if recovered else "rejected")
    assert out.notes["gold_check"]["status"] == "ok"


class _NoSearch:
    name = "none"

    async def acall(self, query, k):  # pragma: no cover - the quotas are full, nothing is searched
        raise AssertionError("no search expected")


def test_states_answer_matches_whole_words_after_normalization():
    assert D.states_answer("Coach: ADA BRENNAN, since May.", ["Ada Brennan"]) == "Ada Brennan"
    assert D.states_answer("The Brennanites won.", ["Brennan"]) is None
    assert D.states_answer("It has 17 stations.", ["seventeen", "17"]) == "17"
    assert D.states_answer("Nothing here.", ["the Admiral"]) is None
    assert D.states_answer("They call her the Admiral.", ["The Admiral"]) == "The Admiral"


def test_awild_start_pools_keeps_the_wild_question_record_for_longseal_pools(tmp_path):
    from trek.ctrl.pools import from_longseal
    from trek.datasets import load_benchmark

    with wild_web.WildWeb(6) as web:
        data_dir, longseal = web.write_datasets(tmp_path)
        bench = load_benchmark("wild", data_dir)
        assert len(bench.questions) == 6 and bench.counts() == {"freshqa": 2, "infodeepseek": 2, "sealqa": 2}
        store = PageStore(fetch=True, allow_private=True)
        pools, skipped = run_sync(D.awild_start_pools(bench.questions, store, from_longseal(longseal)))
    assert skipped == [] and [p.question.id for p in pools] == [q.id for q in bench.questions]
    seal = [p for p in pools if p.notes["start"] == "longseal"]
    assert len(seal) == 1 and seal[0].question.metadata["subset"] == "seal_hard"  # the Wild record
    assert all(store.lookup(d.url) is not None for p in pools for d in p.documents)
