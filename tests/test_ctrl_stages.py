"""Ctrl discovery and model fabrication as stages (:mod:`trek.stage`), in process: a finished
question is kept without a call while its input key is unchanged, a changed input re-does
exactly that question, an internal error becomes a ``failed`` record that the next run re-does,
and the role's request parameters reach every call. (kill -9 and resume: ``test_ctrl_kill.py``.)"""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_ctrl_discovery import SCRIPT, gold_only
from test_ctrl_fabrication import FixedEmbedder, script

from trek import runs
from trek.aio import closing_run
from trek.ctrl import discovery as D
from trek.ctrl import fabrication as F
from trek.ctrl.pools import from_mini
from trek.llm import LLMClient
from trek.pages import PageStore
from trek.search.local import LocalSearch
from trek.stage import execute
from trek.testing.fake_openai import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "OPENAI_BASE_URL", "TREK_PROMPTS", "TREK_SEARCH_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def mini_store() -> PageStore:
    store = PageStore()
    store.add_documents([d for p in from_mini() for d in p.documents])
    return store


class BrokenSearch:
    """A search backend with a bug: every call raises an internal error."""

    name = "broken"

    async def acall(self, query, k=None):
        raise RuntimeError("the backend has a bug")


def discover(records, srv, backend=None, **settings):
    store = mini_store()
    client = LLMClient("fake-model", base_url=srv.base_url, progress=False, max_retries=0)
    s = D.DiscoverySettings(**{"historical": 2, "relevance": 1, "temporal_rounds": 1, "relevance_rounds": 1,
                               "check_gold": False, "recover_dates": False, **settings})
    stage = D.DiscoveryStage(records, client, backend or LocalSearch(store), store, s)
    return closing_run(execute(stage, [gold_only()], outputs=[records], progress=False), client)


@pytest.mark.slow  # five discoveries over the BM25 index of Mini's pages: seconds
def test_discovery_keeps_finished_questions_and_redoes_a_changed_or_failed_one(tmp_path):
    records = tmp_path / "pools.discovery.jsonl"
    with FakeOpenAIServer(script=SCRIPT) as srv:
        failed = discover(records, srv, backend=BrokenSearch())
        (rec,) = failed.of(records)
        assert rec.status == "failed" and "RuntimeError: the backend has a bug" in rec.error
        assert rec.pool.notes["discovery"]["pending"] == rec.error  # the pools file says why, too
        first = discover(records, srv)
        (rec,) = first.of(records)
        assert first.made == 1 and rec.status == "ok" and rec.pool.role("outdated")  # the failed one re-done
        srv.reset_stats()
        again = discover(records, srv)
        assert (again.kept, again.made, srv.stats()["requests"]) == (1, 0, 0)
        assert again.of(records) == first.of(records)
        changed = discover(records, srv, historical=1)  # another quota: another input key
        assert changed.made == 1 and len(changed.of(records)[0].pool.role("outdated")) == 1
    assert [json.loads(x)["status"] for x in records.read_text().splitlines()] == ["ok"]  # compacted once


def fabricate(records, srv, **settings):
    pool = from_mini(question_ids=["mini:01"])[0]
    pool = pool.model_copy(update={"documents": [d for d in pool.documents if d.id != "mini:01:gold:2"]})
    client = LLMClient("fake-model", base_url=srv.base_url, progress=False, max_retries=0)
    s = F.FabricationSettings(**{"target": 1, "max_attempts": 2, **settings})
    return closing_run(F.afabricate_into(records, [pool], client, FixedEmbedder(0.97), s), client)


def test_fabrication_keeps_finished_questions_and_redoes_a_changed_one(tmp_path):
    records = tmp_path / runs.FABRICATIONS
    with FakeOpenAIServer(script=script()) as srv:
        (first,) = fabricate(records, srv)
        assert len(first.role("fabrication")) == 1 and not first.notes["fabrication"]["pending"]
        sent = srv.stats()["requests"]
        assert sent >= 2
        srv.reset_stats()
        (again,) = fabricate(records, srv)
        assert again == first and srv.stats()["requests"] == 0
        (changed,) = fabricate(records, srv, chat_params={"temperature": 0})  # another input: done again
        assert srv.stats()["requests"] == sent and changed.role("fabrication")


def test_fabrication_left_pending_by_a_failing_endpoint_is_a_pending_record(tmp_path):
    records = tmp_path / runs.FABRICATIONS
    with FakeOpenAIServer(script=[{"pattern": ".", "error": {"status": 500}}]) as srv:
        (pool,) = fabricate(records, srv)
    (line,) = records.read_text().splitlines()
    rec = json.loads(line)
    assert rec["status"] == "pending" and rec["error"] and pool.notes["fabrication"]["pending"] == rec["error"]


@pytest.mark.slow  # a trek ctrl discover over the BM25 index of Mini's pages: seconds
def test_the_discovery_role_parameters_reach_every_call(tmp_path):
    from test_ctrl_discovery import mini_pages
    from typer.testing import CliRunner

    from trek.cli import app
    from trek.ctrl.pools import write_pools

    start = write_pools(tmp_path / "start.jsonl", [gold_only()])
    out = tmp_path / "pools.jsonl"
    with FakeOpenAIServer(script=SCRIPT) as srv:
        res = CliRunner().invoke(app, ["ctrl", "discover", "--source", "pools", "--pools", str(start), "--pages",
                                       str(mini_pages(tmp_path)), "--discovery", "fake-model", "--discovery-base-url",
                                       srv.base_url, "--discovery-param", "temperature=0.25", "--effort", "high",
                                       "--out", str(out), "--historical", "2", "--relevance", "1",
                                       "--no-check-gold", "--no-recover-dates"])
    assert res.exit_code == 0, res.output
    con = sqlite3.connect(tmp_path / runs.LLM_CACHE)
    bodies = [json.loads(r)["body"] for (r,) in con.execute("SELECT request FROM responses")]
    con.close()
    assert bodies and all(b.get("temperature") == 0.25 and b.get("reasoning_effort") == "high" for b in bodies)
    assert runs.RunDir(tmp_path).discovery_records().exists() and runs.RunDir(tmp_path).discovery_report().exists()
