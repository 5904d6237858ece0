"""Reranking-based RAG (paper §4.3, D.6): relevance x Gaussian temporal decay, top k, shared answer.

For each document of a context:

* **relevance** ``r`` from a pluggable scorer: :class:`EmbeddingScorer` (offline default, cosine
  similarity of ``wordllama`` embeddings, weights shipped in its wheel) or :class:`HTTPScorer`
  (any OpenAI-compatible ``/rerank`` or ``/score`` endpoint, e.g. vLLM serving
  Qwen3-Reranker-8B as in the paper). The query is the named template ``rag.rerank.query``.
* **temporal weight** ``w = exp(-(d / sigma_days)^2 / 2)`` where ``d`` is the number of days
  between the document's displayed date and the cutoff, December 31 of the effective year.
  Documents dated after the cutoff decay the same way (``after_cutoff="decay"``) or get 0
  (``"zero"``). Undated documents get the mean weight of the dated ones, 1 when none is dated;
  a question without an effective year gives every document weight 1.
* **combined score**: relevance is min-max scaled to [0, 1] within the context (all 1 when all
  equal), then ``combine="product"`` gives ``r' * w`` and ``combine="sum"`` gives
  ``alpha * r' + (1 - alpha) * w``.

The ``top_k`` highest scores (ties broken by context order) go to the shared answer prompt in
their context order, renumbered. The paper gives neither the decay width nor the combination;
the defaults (``sigma_days=365``, product) are a choice, recorded in every run's ``run.json``.
One model call per question (plus one scorer request per context with :class:`HTTPScorer`).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import numpy as np

from trek.contexts import Context, render_documents
from trek.embeddings import WordLlamaEmbedder
from trek.llm.cache import LLMCache
from trek.llm.client import LLMClient
from trek.rag.answer import MethodOutput, aanswer, answer_version, question_prompt
from trek.retry import backoff, retry_after, retrying
from trek.templates import register, template_version
from trek.types import Question

__all__ = [
    "VERSION",
    "QUERY_PROMPT",
    "Scorer",
    "EmbeddingScorer",
    "HTTPScorer",
    "ScorerError",
    "make_scorer",
    "parse_date",
    "cutoff_year",
    "temporal_weights",
    "combine_scores",
    "top_k",
    "Rerank",
]

VERSION = "rag.rerank/1"

QUERY_PROMPT = register(
    "rag.rerank.query",
    """\
Find evidence that meets every requirement of the question.
Question: {question}
Time frame of the answer: {effective_year}""",
)


# -- temporal weights --------------------------------------------------------------------------
def parse_date(text: str | None) -> dt.date | None:
    """A displayed date as a day: ``2024-03-05`` (or a timestamp starting so), ``2024-03`` (the
    15th), ``2024`` (July 1); ``None`` for missing or unreadable dates."""
    if not text:
        return None
    s = text.strip()
    try:
        return dt.date.fromisoformat(s[:10])
    except ValueError:
        pass
    m = re.fullmatch(r"(\d{4})-(\d{2})", s)
    if m:
        try:
            return dt.date(int(m.group(1)), int(m.group(2)), 15)
        except ValueError:
            return None
    m = re.fullmatch(r"(\d{4})", s)
    return dt.date(int(m.group(1)), 7, 1) if m else None


def cutoff_year(q: Question) -> int | None:
    """The year whose December 31 is the cutoff: the effective year; for a bound such as
    ``before 2022`` the year before it; any other four-digit year in the raw text; else None."""
    if q.effective_year is not None:
        return q.effective_year
    raw = q.effective_year_raw or ""
    m = re.search(r"before\s+(\d{4})", raw, re.IGNORECASE)
    if m:
        return int(m.group(1)) - 1
    m = re.search(r"\b(\d{4})\b", raw)
    return int(m.group(1)) if m else None


def temporal_weights(
    dates: Sequence[dt.date | None], year: int | None, sigma_days: float = 365.0, after_cutoff: str = "decay"
) -> np.ndarray:
    """Gaussian decay from December 31 of ``year``; shape ``(len(dates),)``, values in [0, 1].

    Undated documents get the mean weight of the dated ones (1.0 when none is dated); with
    ``year`` ``None`` every weight is 1.0.
    """
    if sigma_days <= 0:
        raise ValueError("sigma_days must be positive")
    if after_cutoff not in ("decay", "zero"):
        raise ValueError("after_cutoff must be 'decay' or 'zero'")
    n = len(dates)
    if year is None or n == 0:
        return np.ones(n)
    cutoff = dt.date(year, 12, 31)
    w = np.full(n, np.nan)
    for i, d in enumerate(dates):
        if d is None:
            continue
        days = (cutoff - d).days
        w[i] = 0.0 if (days < 0 and after_cutoff == "zero") else math.exp(-0.5 * (days / sigma_days) ** 2)
    dated = ~np.isnan(w)
    w[~dated] = float(w[dated].mean()) if dated.any() else 1.0
    return w


def combine_scores(relevance: Sequence[float], temporal: Sequence[float], combine: str = "product",
                   alpha: float = 0.5) -> np.ndarray:
    """Relevance min-max scaled to [0, 1] (all 1 when constant), combined with the weights."""
    r = np.asarray(relevance, dtype=float)
    w = np.asarray(temporal, dtype=float)
    if r.shape != w.shape:
        raise ValueError(f"relevance has shape {r.shape}, temporal weights {w.shape}")
    if r.size == 0:
        return r
    span = float(r.max() - r.min())
    scaled = (r - r.min()) / span if span > 0 else np.ones_like(r)
    if combine == "product":
        return scaled * w
    if combine == "sum":
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must lie in [0, 1]")
        return alpha * scaled + (1.0 - alpha) * w
    raise ValueError(f"combine must be 'product' or 'sum', not {combine!r}")


def top_k(scores: Sequence[float], k: int) -> list[int]:
    """Indices of the ``k`` highest scores, ties broken by position, returned in position order."""
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    return sorted(order[: max(k, 0)])


# -- relevance scorers -------------------------------------------------------------------------
class ScorerError(RuntimeError):
    """The relevance scorer failed after its retries (the question is left pending)."""


class Scorer(Protocol):
    name: str

    async def ascore(self, query: str, texts: Sequence[str]) -> list[float]: ...


class EmbeddingScorer:
    """Cosine similarity of ``wordllama`` static embeddings (the Ctrl build's offline embedder,
    :class:`trek.embeddings.WordLlamaEmbedder`; no network, no model call)."""

    def __init__(self, dim: int = 256, memo_size: int = 50_000):
        self.dim = dim
        self.name = f"wordllama-{dim}"
        self.memo_size = memo_size
        self._embedder = WordLlamaEmbedder(dim)
        self._memo: dict[str, np.ndarray] = {}
        self.calls = 0
        self.cache_hits = 0

    def _unit(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, memoized by text (a document recurs across conditions)."""
        new = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if new:
            emb = self._embedder.embed(new)
            norms = np.linalg.norm(emb, axis=1)
            norms[norms == 0] = 1.0
            if len(self._memo) + len(new) > self.memo_size:
                self._memo.clear()
            self._memo.update(zip(new, emb / norms[:, None], strict=True))
        return np.stack([self._memo[t] for t in texts])

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        unit = self._unit([query, *texts])
        return [float(x) for x in unit[1:] @ unit[0]]

    async def ascore(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.score(query, texts)


class _TransientScorerError(Exception):
    """A scorer failure worth retrying; ``retry_after`` is what the endpoint asked to wait."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class HTTPScorer:
    """Relevance from an OpenAI-compatible rerank endpoint (vLLM, Jina, Cohere shape).

    ``api="rerank"`` posts ``{"model", "query", "documents"}`` to ``BASE/rerank`` and reads
    ``results[].index`` / ``relevance_score``; ``api="score"`` posts ``{"model", "text_1",
    "text_2"}`` to ``BASE/score`` and reads ``data[].index`` / ``score``. Replies are cached in the
    run's LLM cache (a second run sends nothing); transient failures (408, 429, 5xx, timeouts,
    connection errors, a body that is not JSON) are retried ``max_retries`` times by Trek's one
    retry policy (:mod:`trek.retry`: capped, jittered exponential backoff from ``backoff_base``
    to ``backoff_cap`` seconds, never shorter than a ``Retry-After`` the endpoint sent). The key comes
    from ``api_key``, ``$TREK_RERANK_API_KEY`` or ``$OPENAI_API_KEY`` and is never stored.
    """

    def __init__(self, model: str, base_url: str, *, api: str = "rerank", api_key: str | None = None,
                 cache: LLMCache | None = None, timeout: float = 120.0, max_retries: int = 4,
                 backoff_base: float = 0.5, backoff_cap: float = 30.0, seed: int | None = None,
                 transport: httpx.AsyncBaseTransport | None = None):
        if api not in ("rerank", "score"):
            raise ValueError("api must be 'rerank' or 'score'")
        from trek.llm.client import endpoint_identity

        self.model = model
        self._request_base = base_url.rstrip("/")  # as given (credentials too): for the request only
        self.base_url = endpoint_identity(base_url)  # what names, cache keys and errors show
        self.api = api
        self.name = f"{api}:{model}@{self.base_url}"
        self.cache = cache
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self._rng = random.Random(seed)
        self._key = api_key or os.environ.get("TREK_RERANK_API_KEY") or os.environ.get("OPENAI_API_KEY") or ""
        self._transport = transport
        self.calls = 0
        self.cache_hits = 0

    def _body(self, query: str, texts: Sequence[str]) -> dict[str, Any]:
        if self.api == "rerank":
            return {"model": self.model, "query": query, "documents": list(texts), "top_n": len(texts)}
        return {"model": self.model, "text_1": query, "text_2": list(texts)}

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        url = f"{self.base_url}/{self.api}"  # shown in errors
        async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport) as http:

            async def once() -> dict[str, Any]:
                self.calls += 1
                try:
                    resp = await http.post(f"{self._request_base}/{self.api}", json=body, headers=headers)
                except httpx.HTTPError as e:
                    raise _TransientScorerError(type(e).__name__) from None
                if resp.status_code in (408, 429) or resp.status_code >= 500:
                    raise _TransientScorerError(f"HTTP {resp.status_code}", retry_after(resp.headers))
                if resp.status_code >= 400:
                    raise ScorerError(f"{url}: HTTP {resp.status_code}: {resp.text[:200]}")
                try:
                    return resp.json()
                except ValueError:
                    raise _TransientScorerError("reply is not JSON") from None

            try:
                return await retrying(once, retry_on=(_TransientScorerError,), max_retries=self.max_retries,
                                      wait=backoff(self.backoff_base, self.backoff_cap, self._rng))
            except _TransientScorerError as e:
                raise ScorerError(f"{url}: failed after {self.max_retries + 1} attempts ({e})") from None

    def _read(self, raw: dict[str, Any], n: int) -> list[float]:
        rows = raw.get("results") if self.api == "rerank" else raw.get("data")
        field = "relevance_score" if self.api == "rerank" else "score"
        out: list[float | None] = [None] * n
        for row in rows or []:
            i = row.get("index")
            if isinstance(i, int) and 0 <= i < n and isinstance(row.get(field), int | float):
                out[i] = float(row[field])
        if any(v is None for v in out):
            raise ScorerError(f"{self.name}: reply does not score every document ({sum(v is None for v in out)} missing)")
        return [float(v) for v in out]  # type: ignore[arg-type]

    async def ascore(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        body = self._body(query, texts)
        if self.cache is None:
            raw = await self._post(body)
        else:
            request = {"endpoint": self.base_url, "api": self.api, "body": body, "sample": 0}
            raw, cached = await self.cache.get(request, lambda: self._post(body))
            self.cache_hits += int(cached)
        return self._read(raw, len(texts))


def make_scorer(spec: str = "wordllama", *, base_url: str | None = None, cache: LLMCache | None = None,
                **kw: Any) -> Scorer:
    """``wordllama`` (offline default), ``rerank:MODEL`` or ``score:MODEL`` (an endpoint at
    ``base_url``, e.g. ``rerank:Qwen/Qwen3-Reranker-8B`` served by vLLM)."""
    if spec in ("", "wordllama"):
        return EmbeddingScorer()
    api, _, model = spec.partition(":")
    if api in ("rerank", "score") and model:
        if not base_url:
            raise ValueError(f"scorer {spec!r} needs a base URL (--reranker-base-url)")
        return HTTPScorer(model, base_url, api=api, cache=cache, **kw)
    raise ValueError(f"unknown relevance scorer {spec!r}: use 'wordllama', 'rerank:MODEL' or 'score:MODEL'")


# -- the method ----------------------------------------------------------------------------------
@dataclass
class Rerank:
    """Relevance x temporal decay, top ``k`` documents to the shared answer prompt."""

    scorer: Scorer | None = None
    sigma_days: float = 365.0
    combine: str = "product"
    alpha: float = 0.5
    k: int = 10
    after_cutoff: str = "decay"

    name = "rerank"
    calls = 1

    def __post_init__(self) -> None:
        if self.scorer is None:
            self.scorer = EmbeddingScorer()
        combine_scores([1.0], [1.0], self.combine, self.alpha)  # validate early
        temporal_weights([], 2000, self.sigma_days, self.after_cutoff)
        if self.k < 1:
            raise ValueError("k must be at least 1")

    def config(self) -> dict[str, Any]:
        assert self.scorer is not None
        return {
            "method": self.name, "version": VERSION, "scorer": self.scorer.name, "sigma_days": self.sigma_days,
            "combine": self.combine, "alpha": self.alpha if self.combine == "sum" else None, "top_k": self.k,
            "after_cutoff": self.after_cutoff, "cutoff": "December 31 of the effective year",
            "undated_weight": "mean of dated (1 if none dated)", "order": "context order",
        }

    def versions(self) -> dict[str, str]:
        return {"rag.rerank": VERSION, "rag.rerank.query": template_version("rag.rerank.query", QUERY_PROMPT, VERSION),
                "rag.answer": answer_version()}

    async def arun(self, q: Question, ctx: Context, client: LLMClient, params: dict[str, Any]) -> MethodOutput:
        assert self.scorer is not None
        docs = ctx.documents
        out = MethodOutput()
        query = question_prompt("rag.rerank.query", QUERY_PROMPT, q)
        try:
            rel = await self.scorer.ascore(query, [d.text or "" for d in docs])
        except ScorerError as e:
            return out.pending(f"relevance scorer: {e}")
        year = cutoff_year(q)
        temporal = temporal_weights([parse_date(d.date) for d in docs], year, self.sigma_days,
                                    self.after_cutoff)
        scores = combine_scores(rel, temporal, self.combine, self.alpha)
        kept = top_k(scores, self.k)
        ranks = {i: r for r, i in enumerate(sorted(range(len(scores)), key=lambda i: (-scores[i], i)), start=1)}
        out.details = {
            "cutoff": f"{year}-12-31" if year is not None else None,
            "kept_doc_ids": [docs[i].doc_id for i in kept],
            "scores": [
                {"doc_id": d.doc_id, "relevance": round(float(rel[i]), 6), "temporal": round(float(temporal[i]), 6),
                 "score": round(float(scores[i]), 6), "rank": ranks[i], "kept": i in kept}
                for i, d in enumerate(docs)
            ],
        }
        return await aanswer(client, q, render_documents(docs[i] for i in kept), out, params)
