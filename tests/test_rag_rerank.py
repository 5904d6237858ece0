"""Rerank: temporal weights against hand-worked values, score combination, top-k, scorers."""

import asyncio
import datetime as dt
import json
import math
import time

import httpx
import numpy as np
import pytest

from trek.llm.cache import LLMCache
from trek.rag.rerank import (
    EmbeddingScorer,
    HTTPScorer,
    ScorerError,
    combine_scores,
    cutoff_year,
    make_scorer,
    parse_date,
    temporal_weights,
    top_k,
)
from trek.types import Question

D = dt.date.fromisoformat


def test_dated_weights_are_gaussian_in_days_before_the_cutoff():
    # cutoff 2024-12-31, sigma 10 days: 0, 10 and 20 days before -> 1, e^-0.5, e^-2
    w = temporal_weights([D("2024-12-31"), D("2024-12-21"), D("2024-12-11")], 2024, sigma_days=10)
    assert w == pytest.approx([1.0, 0.6065306597, 0.1353352832])


def test_undated_documents_get_the_mean_of_the_dated_ones():
    w = temporal_weights([D("2024-12-31"), None, D("2024-12-21"), D("2024-12-11"), None], 2024, sigma_days=10)
    mean = (1.0 + math.exp(-0.5) + math.exp(-2)) / 3  # 0.5806...
    assert w[1] == pytest.approx(mean) and w[4] == pytest.approx(mean)
    assert w[1] == pytest.approx(0.5806219810)


def test_no_dated_document_or_no_year_gives_weight_one():
    assert temporal_weights([None, None], 2024).tolist() == [1.0, 1.0]
    assert temporal_weights([D("2001-01-01"), None], None).tolist() == [1.0, 1.0]


def test_cutoff_is_december_31_and_later_documents_decay_or_vanish():
    # 10 days after the cutoff: symmetric decay by default, zero on request
    late = [D("2025-01-10"), D("2024-12-31")]
    assert temporal_weights(late, 2024, sigma_days=10) == pytest.approx([math.exp(-0.5), 1.0])
    assert temporal_weights(late, 2024, sigma_days=10, after_cutoff="zero").tolist() == [0.0, 1.0]
    # a one-year width: a document one year (366 days in 2024) before the cutoff
    assert temporal_weights([D("2023-12-31")], 2024, sigma_days=366)[0] == pytest.approx(math.exp(-0.5))
    with pytest.raises(ValueError, match="sigma_days"):
        temporal_weights([None], 2024, sigma_days=0)


def test_cutoff_year_from_the_question():
    q = Question(id="q", dataset="x", question="?", answers=["a"], effective_year=2023)
    assert cutoff_year(q) == 2023
    assert cutoff_year(q.model_copy(update={"effective_year": None, "effective_year_raw": "before 2022"})) == 2021
    assert cutoff_year(q.model_copy(update={"effective_year": None, "effective_year_raw": None})) is None


def test_parse_date_forms():
    assert parse_date("2024-03-05") == D("2024-03-05")
    assert parse_date("2024-03-05T10:00:00Z") == D("2024-03-05")
    assert parse_date("2024-03") == D("2024-03-15")
    assert parse_date("2024") == D("2024-07-01")
    assert parse_date("March 2024") is None and parse_date(None) is None


def test_combine_product_and_sum():
    rel, w = [0.2, 0.6, 1.0], [1.0, 0.5, 0.5]  # relevance scales to [0, 0.5, 1]
    assert combine_scores(rel, w, "product") == pytest.approx([0.0, 0.25, 0.5])
    assert combine_scores(rel, w, "sum", alpha=0.5) == pytest.approx([0.5, 0.5, 0.75])
    assert combine_scores([3.0, 3.0], [0.2, 0.4]) == pytest.approx([0.2, 0.4])  # constant relevance -> 1
    with pytest.raises(ValueError, match="combine"):
        combine_scores(rel, w, "max")


def test_top_k_takes_highest_scores_ties_by_position_in_context_order():
    assert top_k([0.5, 0.9, 0.9, 0.1, 0.7], 3) == [1, 2, 4]
    assert top_k([1.0, 1.0, 1.0, 1.0], 2) == [0, 1]
    assert top_k([0.3, 0.1], 10) == [0, 1]


def test_embedding_scorer_prefers_the_topical_document():
    s = EmbeddingScorer()
    scores = s.score("Who coaches the football club?",
                     ["The football club appointed a new head coach.", "Rainfall totals for the region in March."])
    assert scores[0] > scores[1]
    assert np.all(np.abs(scores) <= 1.0 + 1e-9)


def _transport(handler, seen):
    def wrapped(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, json.loads(request.content)))
        return handler(request, len(seen))
    return httpx.MockTransport(wrapped)


def test_http_rerank_scorer_reads_results_by_index_and_caches(tmp_path):
    seen = []

    def handler(request, n):
        docs = json.loads(request.content)["documents"]
        results = [{"index": i, "relevance_score": 1.0 / (i + 1)} for i in reversed(range(len(docs)))]
        return httpx.Response(200, json={"results": results})

    cache = LLMCache(tmp_path / "c.sqlite")
    s = HTTPScorer("rr", "http://fake/v1", cache=cache, transport=_transport(handler, seen), api_key="k")
    assert asyncio.run(s.ascore("q", ["a", "b", "c"])) == pytest.approx([1.0, 0.5, 1 / 3])
    assert seen[0][0] == "/v1/rerank" and seen[0][1]["query"] == "q"
    assert asyncio.run(s.ascore("q", ["a", "b", "c"])) == pytest.approx([1.0, 0.5, 1 / 3])
    assert len(seen) == 1 and s.cache_hits == 1


def test_http_score_scorer_retries_then_fails_cleanly():
    seen = []

    def flaky(request, n):
        if n == 1:
            return httpx.Response(503)
        return httpx.Response(200, json={"data": [{"index": 0, "score": 0.25}, {"index": 1, "score": 0.75}]})

    s = HTTPScorer("rr", "http://fake/v1", api="score", transport=_transport(flaky, seen), backoff_base=0.0)
    assert asyncio.run(s.ascore("q", ["a", "b"])) == [0.25, 0.75]
    assert seen[-1][0] == "/v1/score" and seen[-1][1]["text_2"] == ["a", "b"] and len(seen) == 2

    bad = HTTPScorer("rr", "http://fake/v1", transport=_transport(lambda r, n: httpx.Response(400, text="no"), []))
    with pytest.raises(ScorerError, match="HTTP 400"):
        asyncio.run(bad.ascore("q", ["a"]))
    partial = HTTPScorer("rr", "http://fake/v1", transport=_transport(
        lambda r, n: httpx.Response(200, json={"results": [{"index": 0, "relevance_score": 1}]}), []))
    with pytest.raises(ScorerError, match="missing"):
        asyncio.run(partial.ascore("q", ["a", "b"]))


def test_http_scorer_waits_as_long_as_retry_after_asks():
    # one retry policy (trek.retry): a 429 carrying Retry-After: 0.25 is retried no sooner than
    # 0.25 s later, although the backoff alone would wait a millisecond
    seen, at = [], []

    def limited(request, n):
        at.append(time.monotonic())
        if n == 1:
            return httpx.Response(429, headers={"Retry-After": "0.25"}, json={"error": "slow down"})
        return httpx.Response(200, json={"results": [{"index": 0, "relevance_score": 0.5}]})

    s = HTTPScorer("rr", "http://fake/v1", transport=_transport(limited, seen), backoff_base=0.001, seed=1)
    assert asyncio.run(s.ascore("q", ["a"])) == [0.5]
    assert len(seen) == 2 and s.calls == 2
    assert at[1] - at[0] >= 0.24


def test_http_scorer_gives_up_after_its_retries():
    seen = []
    s = HTTPScorer("rr", "http://fake/v1", transport=_transport(lambda r, n: httpx.Response(503), seen),
                   max_retries=2, backoff_base=0.001)
    with pytest.raises(ScorerError, match=r"failed after 3 attempts \(HTTP 503\)"):
        asyncio.run(s.ascore("q", ["a"]))
    assert len(seen) == 3


def test_make_scorer_specs():
    assert make_scorer("wordllama").name.startswith("wordllama")
    assert make_scorer("rerank:Qwen/Qwen3-Reranker-8B", base_url="http://h/v1").name.startswith("rerank:")
    with pytest.raises(ValueError, match="base URL"):
        make_scorer("score:m")
    with pytest.raises(ValueError, match="unknown"):
        make_scorer("bm25")
