"""Discovery, offline: BM25 over the demo benchmark's pages as the search backend and a scripted
model that proposes queries and verifies pages."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from trek.aio import closing_run, run_sync
from trek.ctrl import discovery as D
from trek.ctrl.pools import Pool, from_mini
from trek.llm import LLMClient
from trek.pages import PageStore
from trek.search.local import LocalSearch
from trek.testing.fake_openai import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "OPENAI_BASE_URL", "TREK_PROMPTS", "TREK_SEARCH_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


SCRIPT = [
    {"pattern": "collecting older web pages", "reply": json.dumps({"queries": ["Harrowmere Rovers head coach"]})},
    {"pattern": r"Tomas Reyel[\s\S]*supports_other_answer",
     "reply": json.dumps({"supports_other_answer": True, "answer": "Tomas Reyel", "reason": "older page"})},
    {"pattern": "supports_other_answer", "reply": json.dumps({"supports_other_answer": False, "reason": "no"})},
    {"pattern": "easy to confuse", "reply": json.dumps({"queries": ["Harrowmere coach women director"],
                                                        "changed_constraint": "category"})},
    {"pattern": "careless reader", "reply": json.dumps({"competing_answer": "Someone Else", "right_type": True,
                                                        "answers_question": False, "supports_reference": False})},
]


def run(pool: Pool, settings: D.DiscoverySettings):
    mini = from_mini()
    store = PageStore()
    store.add_documents([d for p in mini for d in p.documents])
    with FakeOpenAIServer(script=SCRIPT) as srv:
        client = LLMClient("fake-model", base_url=srv.base_url, progress=False, max_retries=0)
        return closing_run(D.adiscover_pool(pool, client, LocalSearch(store), store, settings), client)


def mini_pages(folder) -> Path:
    """A page store holding every document of Mini's pools (what discovery searches and fetches)."""
    pages = folder / "pages.sqlite"
    store = PageStore(pages)
    store.add_documents([d for p in from_mini() for d in p.documents])
    store.close()
    return pages


def gold_only() -> Pool:
    p = from_mini(question_ids=["mini:01"])[0]
    return p.model_copy(update={"documents": p.gold})


def test_temporal_and_relevance_discovery_respect_verdicts_dates_and_quotas():
    pool = gold_only()
    anchor = pool.anchor_date()
    out = run(pool, D.DiscoverySettings(historical=20, relevance=2, temporal_rounds=2, relevance_rounds=2,
                                        results_per_query=20))
    old = out.role("outdated")
    assert old, "the scripted verifier accepts pages naming Tomas Reyel"
    assert all(d.supports_answer == "Tomas Reyel" and "Tomas Reyel" in d.text for d in old)
    assert all(d.date is None or d.date < anchor for d in old)
    assert all(d.metadata["policy"].startswith("temporal:") and not d.metadata["synthetic"] for d in old)
    rel = out.role("relevance")
    assert len(rel) == 2 and all(d.date is None or d.date > anchor for d in rel)
    assert all(d.metadata["policy"].startswith("relevance:role|") for d in rel)
    urls = [d.url for d in out.documents]
    assert len(urls) == len(set(urls)) and out.gold == pool.gold
    log = out.notes["discovery"]["log"]
    assert any(e.get("outcome") == "rejected" and "not before" in e.get("reason", "") for e in log)
    assert out.notes["discovery"]["outdated_added"] == len(old)


def test_quota_stops_temporal_discovery():
    out = run(gold_only(), D.DiscoverySettings(historical=1, relevance=0, temporal_rounds=3, relevance_rounds=0,
                                               results_per_query=20))
    assert len(out.role("outdated")) == 1 and out.role("relevance") == []


def test_gold_pools_from_the_page_store():
    mini = from_mini(question_ids=["mini:01"])
    store = PageStore()
    store.add_documents(mini[0].documents)
    q = mini[0].question
    missing = q.model_copy(update={"id": "x:1", "gold_urls": ["https://nowhere.example/a"]})
    pools, skipped = run_sync(D.agold_pools([q, missing], store))
    assert [p.question.id for p in pools] == ["mini:01"]
    assert [d.url for d in pools[0].gold] == q.gold_urls
    assert pools[0].anchor_date() == dt.date(2024, 7, 30)
    assert skipped[0]["question_id"] == "x:1" and "no usable gold page" in skipped[0]["reason"]


def test_cli_discover_extends_pools_from_a_page_store(tmp_path):
    from typer.testing import CliRunner

    from trek.cli import app
    from trek.ctrl.pools import read_pools, write_pools

    start = write_pools(tmp_path / "start.jsonl", [gold_only()])
    pages = mini_pages(tmp_path)
    out = tmp_path / "pools.jsonl"
    with FakeOpenAIServer(script=SCRIPT) as srv:
        res = CliRunner().invoke(app, ["ctrl", "discover", "--source", "pools", "--pools", str(start),
                                       "--pages", str(pages), "--model", "fake-model", "--base-url", srv.base_url,
                                       "--search", "local", "--out", str(out), "--historical", "8",
                                       "--relevance", "4"])
    assert res.exit_code == 0, res.output
    (pool,) = read_pools(out)
    old, rel = pool.role("outdated"), pool.role("relevance")
    assert 1 <= len(old) < 8 and 1 <= len(rel) <= 4  # the scripted queries repeat, so few new pages
    assert all(d.supports_answer == "Tomas Reyel" for d in old)
    assert f"discovered {len(old)} outdated and {len(rel)} relevance" in res.output
