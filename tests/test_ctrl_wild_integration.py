"""Ctrl discovery's start over the real TrekBench-Wild questions (the 144 of the paper).

Needs the read-only reference copies in ``<repo>/../shared/datasets`` (or ``$TREK_SHARED_DATASETS``)
and skips cleanly when they are absent. No network: every reference URL is answered by an
``httpx.MockTransport`` with a page made here, at run time, that states the question's reference
answer (nothing of the datasets is written to the repository). The pages go through the real
fetch path (redirect rules, content type, trafilatura's text and date) and the gold check.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from trek.aio import closing_run, run_sync
from trek.ctrl import discovery as D
from trek.datasets import load_benchmark
from trek.datasets.wild import PAPER_COUNTS
from trek.llm import LLMClient
from trek.pages import PageStore, normalize_url
from trek.testing.fake_openai import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TREK_SHARED_DATASETS") or REPO.parent / "shared" / "datasets")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SHARED.is_dir(), reason=f"reference datasets not found at {SHARED}"),
]


class _NoSearch:
    name = "none"

    async def acall(self, query, k):  # pragma: no cover - quotas of 0: nothing is searched
        raise AssertionError("no search expected")


def test_the_144_wild_questions_start_from_their_fetched_reference_pages(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("TREK_CACHE", raising=False)
    bench = load_benchmark("wild", SHARED)
    assert bench.counts() == PAPER_COUNTS
    def key(url: str) -> str:  # httpx percent-encodes what a dataset may write as Unicode
        return unquote(normalize_url(url))

    answers: dict[str, list[str]] = defaultdict(list)
    for q in bench.questions:
        for u in q.gold_urls:
            answers[key(u)].append(q.answers[0])
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        seen.append(url)
        said = " ".join(f"<p>As of the latest update, the answer is {a}.</p>" for a in answers.get(key(url), []))
        filler = "<p>" + "This reference page was archived for an offline test of Trek's fetch path. " * 5 + "</p>"
        html = (f"<html><head><title>Reference</title><meta property='article:published_time' "
                f"content='2024-05-0{len(seen) % 9 + 1}'></head><body><article>{filler}{said}</article></body></html>")
        return httpx.Response(200, text=html, headers={"content-type": "text/html; charset=utf-8"})

    store = PageStore(fetch=True, transport=httpx.MockTransport(handler))
    pools, skipped = run_sync(D.awild_start_pools(bench.questions, store))
    assert skipped == [] and len(pools) == 144
    assert Counter(p.question.dataset for p in pools) == Counter(PAPER_COUNTS)
    assert len(seen) == len(answers)  # one fetch per distinct reference page, shared pages once
    assert all(d.date is not None and d.date.year == 2024 for p in pools for d in p.gold)
    assert sum(len(p.gold) for p in pools) == sum(len(q.gold_urls) for q in bench.questions)
    # the gold check passes on every question by reading the pages: no model call
    with FakeOpenAIServer(script=[{"reply": '{"states_answer": false, "quote": null, "reason": "x"}'}]) as srv:
        client = LLMClient("fake-model", base_url=srv.base_url, progress=False, max_retries=0)
        settings = D.DiscoverySettings(historical=0, relevance=0)
        checked = closing_run(D.adiscover_pools(pools, client, _NoSearch(), store, settings), client)
        assert srv.stats()["requests"] == 0
    report = D.discovery_report(checked)
    assert report["pools"] == 144 and report["flagged"] == [] and report["pending"] == []
