"""Discovery of natural distractors (paper D.1-D.2, D.5) with a search backend and a model.

For questions without supplied pools (FreshQA, InfoDeepSeek) and to fill shortages elsewhere:

* :func:`agold_pools` fetches each question's reference URLs into the page store as gold documents.
* **Temporality**: per round, a model proposes historical query variants following a strategy that
  cycles through :data:`TEMPORAL_STRATEGIES`; code runs them on the search backend, fetches the
  result pages into the page store, and a separate verifier call keeps pages that support an answer
  different from the reference. Pages dated on or after the gold-date anchor are rejected.
* **Relevance**: per round, the model proposes queries that change one constraint of the question
  (:data:`RELEVANCE_STRATEGIES`: role, geographic scope, metric, category, population, ranking
  criterion), then broader related queries as a fallback; the verifier keeps pages that support a
  plausible competing answer of the right type while neither answering the question nor supporting
  the reference. Pages newer than the anchor within the reference year are preferred, then pages
  up to the end of the following year, then undated ones; single-constraint candidates come before
  broader ones. The policy used is recorded on every document.

Quotas (20 historical, 10 relevance) are enforced by code. Every model prompt is a named,
overridable template; every decision (query, URL, verdict, reason) is kept in ``notes['discovery']``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trek.aio import fan_out
from trek.ctrl.common import same_answer
from trek.ctrl.fabrication import window_length
from trek.ctrl.pools import HISTORICAL_TARGET, RELEVANCE_TARGET, Pool
from trek.llm.client import LLMClient
from trek.llm.structured import achat_json
from trek.pages import Page, PageStore, normalize_url
from trek.search.base import SearchBackend, SearchUnavailable
from trek.templates import register, render, template_version
from trek.types import Document, Question

__all__ = [
    "VERSION",
    "TEMPORAL_STRATEGIES",
    "RELEVANCE_STRATEGIES",
    "DiscoverySettings",
    "agold_pools",
    "adiscover_pool",
    "adiscover_pools",
]

VERSION = "ctrl.discovery/1"

TEMPORAL_STRATEGIES = (
    "name an earlier holder or value of the answer and search for it directly",
    "add a past year (before the gold date) to the question's key terms",
    "search for the news of an earlier change, appointment, release or result",
    "search for older lists, rankings, reports or reference pages on the topic",
    "search for the subject's own announcements from earlier years",
)
RELEVANCE_STRATEGIES = (
    "role",
    "geographic scope",
    "metric",
    "category",
    "population",
    "ranking criterion",
)
BROAD_STRATEGY = "a broader related question on the same topic"

TEMPORAL_QUERIES_PROMPT = register(
    "ctrl.discovery.temporal_queries",
    """\
We are collecting older web pages for a test of reasoning about facts that change over time.

Question: {question}
Answer as of {reference_year}: {answers}
The newest evidence for that answer is dated {anchor_date}.
Pages already collected: {found}

Propose up to {n} web search queries that would find pages published BEFORE {anchor_date} which
gave a different, earlier answer to the question (an earlier holder, value, ranking or status).
Strategy for this round: {strategy}.

Reply with JSON only: {{"queries": ["...", "..."]}}""",
)

TEMPORAL_VERIFY_PROMPT = register(
    "ctrl.discovery.temporal_verify",
    """\
Judge one web page for a test of reasoning about facts that change over time.

Question: {question}
Answer as of {reference_year}: {answers}
Page date: {page_date}

Page:
<<<
{page}
>>>

Does this page, read on its own, support an answer to the question that is DIFFERENT from the
answer above (for example the answer that was true at an earlier time)? A page that does not
address the question does not count.

Reply with JSON only:
{{"supports_other_answer": true or false, "answer": "<the answer the page supports, or null>",
  "reason": "<one sentence>"}}""",
)

RELEVANCE_QUERIES_PROMPT = register(
    "ctrl.discovery.relevance_queries",
    """\
We are collecting web pages that are easy to confuse with evidence for a question.

Question: {question}
Answer as of {reference_year}: {answers}
Pages already collected: {found}

Write up to {n} web search queries for a NEIGHBOURING question: change exactly one constraint of
the original question, namely its {search_strategy}, so that the pages found give a plausible
answer of the same type that is not the answer to the original question.
Dates: {date_policy}

Reply with JSON only: {{"queries": ["...", "..."], "changed_constraint": "<what you changed>"}}""",
)

RELEVANCE_VERIFY_PROMPT = register(
    "ctrl.discovery.relevance_verify",
    """\
Judge one web page for a test of reasoning about facts that change over time.

Question: {question}
Answer as of {reference_year}: {answers}

Page:
<<<
{page}
>>>

Decide: (1) which answer a careless reader could take from this page for the question, if any;
(2) whether it is of the right type (a person for a person, a number for a number, ...);
(3) whether the page actually answers the original question with all its constraints;
(4) whether the page supports the answer given above.

Reply with JSON only:
{{"competing_answer": "<answer or null>", "right_type": true or false,
  "answers_question": true or false, "supports_reference": true or false,
  "reason": "<one sentence>"}}""",
)


@dataclass
class DiscoverySettings:
    historical: int = HISTORICAL_TARGET
    relevance: int = RELEVANCE_TARGET
    temporal_rounds: int = len(TEMPORAL_STRATEGIES)
    relevance_rounds: int = len(RELEVANCE_STRATEGIES) + 1  # the last round is the broad fallback
    queries_per_round: int = 3
    results_per_query: int = 5
    max_verifications: int = 60  # per question and kind: caps the cost of one question
    page_chars: int = 12000  # head of a page shown to the verifier
    chat_params: dict[str, Any] = field(default_factory=dict)


def prompt_versions() -> dict[str, str]:
    names = {
        "ctrl.discovery.temporal_queries": TEMPORAL_QUERIES_PROMPT,
        "ctrl.discovery.temporal_verify": TEMPORAL_VERIFY_PROMPT,
        "ctrl.discovery.relevance_queries": RELEVANCE_QUERIES_PROMPT,
        "ctrl.discovery.relevance_verify": RELEVANCE_VERIFY_PROMPT,
    }
    return {n: template_version(n, t, VERSION) for n, t in names.items()}


def _date(page: Page) -> dt.date | None:
    if not page.date:
        return None
    try:
        return dt.date.fromisoformat(page.date[:10])
    except ValueError:
        return None


async def agold_pools(questions: Sequence[Question], store: PageStore) -> tuple[list[Pool], list[dict[str, Any]]]:
    """Pools holding each question's reference pages (fetched into ``store``) as gold documents.

    Returns the pools and one record per question left out (no usable gold page), with the reason.
    """
    pools, skipped = [], []
    for q in questions:
        pages = await fan_out(q.gold_urls, store.aget, progress=False)
        docs = []
        for i, (u, p) in enumerate(zip(q.gold_urls, pages, strict=True)):
            if not p.available:
                continue
            docs.append(Document(
                id=f"{q.id}:gold:{i}", url=u, title=p.title, date=_date(p), text=p.text, question_id=q.id,
                role="gold", supports_answer=q.answers[0], source=p.source,
                metadata={"origin": "discovery", "policy": "reference_url", "synthetic": False},
            ))
        if docs:
            pools.append(Pool(question=q, documents=docs, origin="discovery"))
        else:
            reasons = [p.error or p.status for p in pages]
            skipped.append({"question_id": q.id, "reason": f"no usable gold page ({'; '.join(map(str, reasons))})"})
    return pools, skipped


@dataclass
class _Run:
    pool: Pool
    client: LLMClient
    backend: SearchBackend
    store: PageStore
    s: DiscoverySettings
    seen: set[str] = field(default_factory=set)
    log: list[dict[str, Any]] = field(default_factory=list)

    @property
    def q(self) -> Question:
        return self.pool.question

    def common(self) -> dict[str, str]:
        year = self.q.effective_year or self.q.effective_year_raw or "the present"
        return {"question": self.q.question, "answers": "; ".join(self.q.answers), "reference_year": str(year)}

    async def ask(self, name: str, default: str, **fields: Any) -> dict[str, Any] | None:
        prompt = render(name, default, **self.common(), **fields)

        def shape(v: Any) -> dict[str, Any]:
            if not isinstance(v, dict):
                raise ValueError("expected a JSON object")
            return v

        res = await achat_json(self.client, [{"role": "user", "content": prompt}], validate=shape,
                               max_reasks=1, **self.s.chat_params)
        if res.status == "pending":
            raise _Pending(res.error or "call failed")
        return res.value if res.ok else None

    async def candidates(self, queries: list[str]) -> list[Page]:
        urls: list[str] = []
        for query in queries[: self.s.queries_per_round]:
            try:
                out = await self.backend.acall(str(query), self.s.results_per_query)
            except SearchUnavailable as e:
                self.log.append({"query": query, "error": str(e)})
                continue
            for r in out.results:
                key = normalize_url(r.url)
                if key not in self.seen:
                    self.seen.add(key)
                    urls.append(r.url)
        pages = await fan_out(urls, self.store.aget, progress=False)
        usable = []
        for p in pages:
            if p.available and p.text.strip():
                usable.append(p)
            else:
                self.log.append({"url": p.url, "outcome": "unusable", "reason": p.error or p.status})
        return usable


class _Pending(Exception):
    pass


def _found(docs: list[Document]) -> str:
    return json.dumps([{"url": d.url, "answer": d.supports_answer} for d in docs][-20:], ensure_ascii=False)


async def _temporal(run: _Run) -> list[Document]:
    s, q = run.s, run.q
    anchor = run.pool.anchor_date()
    have = run.pool.role("outdated")
    found: list[Document] = []
    checked = 0
    for r in range(s.temporal_rounds):
        if len(have) + len(found) >= s.historical or checked >= s.max_verifications:
            break
        strategy = TEMPORAL_STRATEGIES[r % len(TEMPORAL_STRATEGIES)]
        reply = await run.ask("ctrl.discovery.temporal_queries", TEMPORAL_QUERIES_PROMPT,
                              anchor_date=anchor.isoformat() if anchor else "unknown",
                              found=_found(have + found), n=s.queries_per_round, strategy=strategy)
        queries = [x for x in (reply or {}).get("queries", []) if isinstance(x, str)]
        for page in await run.candidates(queries):
            if len(have) + len(found) >= s.historical or checked >= s.max_verifications:
                break
            entry: dict[str, Any] = {"kind": "temporal", "round": r, "url": page.url, "strategy": strategy}
            when = _date(page)
            if when is not None and anchor is not None and when >= anchor:
                run.log.append({**entry, "outcome": "rejected", "reason": f"dated {when} (not before {anchor})"})
                continue
            checked += 1
            v = await run.ask("ctrl.discovery.temporal_verify", TEMPORAL_VERIFY_PROMPT,
                              page_date=when.isoformat() if when else "unknown", page=page.text[: s.page_chars])
            answer = (v or {}).get("answer")
            if not v or v.get("supports_other_answer") is not True or not isinstance(answer, str):
                run.log.append({**entry, "outcome": "rejected", "reason": (v or {}).get("reason") or "unparsed"})
                continue
            if same_answer(answer, q.answers):
                run.log.append({**entry, "outcome": "rejected", "reason": "supports the reference answer"})
                continue
            run.log.append({**entry, "outcome": "kept", "answer": answer})
            found.append(Document(
                id=f"{q.id}:outdated:d{len(found) + 1}", url=page.url, title=page.title, date=when,
                text=page.text, question_id=q.id, role="outdated", supports_answer=answer, source=page.source,
                metadata={"origin": "discovery", "policy": f"temporal:{strategy}", "synthetic": False,
                          "verifier": v, "backend": run.backend.name},
            ))
    return found


async def _relevance(run: _Run) -> list[Document]:
    s, q = run.s, run.q
    anchor = run.pool.anchor_date()
    year = q.effective_year or (anchor.year if anchor else None)
    have = run.pool.role("relevance")
    tiers: dict[int, list[Document]] = {0: [], 1: [], 2: [], 3: []}
    checked = 0
    length = window_length(run.pool)
    after = anchor.isoformat() if anchor else "the newest evidence"
    for r in range(s.relevance_rounds):
        if len(have) + len(tiers[0]) + len(tiers[1]) >= s.relevance or checked >= s.max_verifications:
            break
        broad = r >= len(RELEVANCE_STRATEGIES)
        strategy = BROAD_STRATEGY if broad else RELEVANCE_STRATEGIES[r]
        policy = f"published after {after}" + (f", within {year}" if year else "")
        if broad and year:
            policy = f"published after {after}, up to the end of {year + 1}"
        reply = await run.ask("ctrl.discovery.relevance_queries", RELEVANCE_QUERIES_PROMPT,
                              found=_found(have + sum(tiers.values(), [])), n=s.queries_per_round,
                              search_strategy=strategy, date_policy=policy)
        queries = [x for x in (reply or {}).get("queries", []) if isinstance(x, str)]
        changed = (reply or {}).get("changed_constraint")
        for page in await run.candidates(queries):
            if checked >= s.max_verifications:
                break
            entry: dict[str, Any] = {"kind": "relevance", "round": r, "url": page.url, "strategy": strategy}
            when = _date(page)
            if when is None:
                tier = 3
            elif anchor is not None and when <= anchor:
                run.log.append({**entry, "outcome": "rejected", "reason": f"dated {when} (not after {anchor})"})
                continue
            elif year is None or when.year <= year:
                tier = 1 if broad else 0
            elif when.year == year + 1:
                tier = 2
            else:
                run.log.append({**entry, "outcome": "rejected", "reason": f"dated {when} (after {year + 1})"})
                continue
            checked += 1
            passage = page.text[:length]
            v = await run.ask("ctrl.discovery.relevance_verify", RELEVANCE_VERIFY_PROMPT, page=passage)
            ans = (v or {}).get("competing_answer")
            ok = (v is not None and isinstance(ans, str) and v.get("right_type") is True
                  and v.get("answers_question") is False and v.get("supports_reference") is False
                  and not same_answer(ans, q.answers))
            if not ok:
                run.log.append({**entry, "outcome": "rejected", "reason": (v or {}).get("reason") or "unparsed"})
                continue
            tier_name = ("single_constraint", "broad", "following_year", "undated")[tier]
            run.log.append({**entry, "outcome": "kept", "answer": ans, "tier": tier_name})
            tiers[tier].append(Document(
                id=f"{q.id}:relevance:pending", url=page.url, title=page.title, date=when, text=passage,
                question_id=q.id,
                role="relevance", supports_answer=ans, source=page.source,
                metadata={"origin": "discovery", "policy": f"relevance:{strategy}|{tier_name}",
                          "changed_constraint": changed, "synthetic": False, "verifier": v,
                          "backend": run.backend.name, "contiguous_extract": [0, len(passage)]},
            ))
    chosen = [d for t in range(4) for d in tiers[t]][: max(0, s.relevance - len(have))]
    return [d.model_copy(update={"id": f"{q.id}:relevance:d{i}"}) for i, d in enumerate(chosen, start=1)]


async def adiscover_pool(pool: Pool, client: LLMClient, backend: SearchBackend, store: PageStore,
                         settings: DiscoverySettings | None = None) -> Pool:
    """The pool with discovered outdated and relevance documents added up to the quotas."""
    s = settings or DiscoverySettings()
    run = _Run(pool, client, backend, store, s)
    run.seen.update(normalize_url(d.url) for d in pool.documents)
    pending = None
    temporal: list[Document] = []
    relevance: list[Document] = []
    try:
        temporal = await _temporal(run)
        relevance = await _relevance(run)
    except _Pending as p:
        pending = str(p)
    notes = dict(pool.notes)
    notes["discovery"] = {
        "outdated_added": len(temporal),
        "relevance_added": len(relevance),
        "targets": {"outdated": s.historical, "relevance": s.relevance},
        "model": client.model,
        "backend": backend.name,
        "prompts": prompt_versions(),
        "pending": pending,
        "log": run.log,
    }
    return pool.model_copy(update={"documents": [*pool.documents, *temporal, *relevance], "notes": notes})


async def adiscover_pools(pools: Sequence[Pool], client: LLMClient, backend: SearchBackend, store: PageStore,
                          settings: DiscoverySettings | None = None) -> list[Pool]:
    """:func:`adiscover_pool` for every pool, concurrently."""
    return await fan_out(pools, lambda p: adiscover_pool(p, client, backend, store, settings),
                         desc="ctrl discovery", unit="question", progress=client.progress)
