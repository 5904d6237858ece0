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

Around these two steps, per question (:func:`adiscover_pool`):

* **Gold check** (``check_gold``): every gold document must still state a reference answer. A page
  that names it (:func:`states_answer`: the normalized answer as whole words of the normalized
  text) passes without a call; otherwise the model is asked, and its "yes" counts only with a
  quote found verbatim in the page. A question none of whose gold pages passes is **flagged**
  (``notes['gold_check']['status'] == 'flagged'``), never dropped: reference answers are carried
  over as the paper does, and the flag tells the researcher which to review.
* **Date-only recovery** (``recover_dates``, paper D.5): an undated gold, outdated or relevance
  document gets a date from a separate call that reads the cached page (from the page store; no
  new fetch) and must quote the words that give the date, found verbatim in the page or its URL;
  the semantic verifier is not run again. Gold dates are recovered first (they set the anchor);
  after discovery, a discovered document whose recovered date breaks its kind's date rule is
  removed (recorded). ``metadata['date_source']`` says ``recovered`` for such a date.

:func:`awild_start_pools` makes the starting pools of TrekBench-Wild questions: LongSeal's gold and
outdated snapshots for the SealQA questions a user-supplied LongSeal file holds (matched by id),
every other question from its reference URLs fetched into the page store. :func:`discovery_report`
summarizes a run per question (start, gold check, documents per role, recovered dates, pending).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek.aio import fan_out
from trek.ctrl.common import normalize_answer, same_answer
from trek.ctrl.fabrication import window_length
from trek.ctrl.pools import HISTORICAL_TARGET, RELEVANCE_TARGET, Pool, PoolRecord, apply_quotas
from trek.llm.client import LLMClient
from trek.llm.structured import achat_json
from trek.pages import Page, PageStore, normalize_url
from trek.search.base import SearchBackend, SearchUnavailable
from trek.stage import Slot, Stage, digest
from trek.templates import register, render, template_version
from trek.types import Document, Question

__all__ = [
    "VERSION",
    "TEMPORAL_STRATEGIES",
    "RELEVANCE_STRATEGIES",
    "DiscoverySettings",
    "states_answer",
    "agold_pools",
    "awild_start_pools",
    "adiscover_pool",
    "adiscover_pools",
    "DiscoveryStage",
    "discovery_report",
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


GOLD_CHECK_PROMPT = register(
    "ctrl.discovery.gold_check",
    """\
Check one reference page of a question about a fact that changes over time.

Question: {question}
Reference answer(s) as of {reference_year}: {answers}

Page:
<<<
{page}
>>>

Does this page, as it reads now, state one of the reference answers to the question (in any
wording)? If it does, copy the sentence that states it exactly as it appears in the page.

Reply with JSON only:
{{"states_answer": true or false, "quote": "<the exact sentence, or null>", "reason": "<one sentence>"}}""",
)

DATE_PROMPT = register(
    "ctrl.discovery.date_only",
    """\
Find the publication date of one web page.

URL: {url}
Title: {title}

Page:
<<<
{page}
>>>

Give the date only when the page or its URL shows it (a byline, a dateline, a "posted on" or
"updated" line, a date in the address). Copy the words that show it exactly as they appear.

Reply with JSON only:
{{"date": "YYYY-MM-DD or null", "evidence": "<the exact words that give the date, or null>"}}""",
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
    check_gold: bool = True  # gold pages must still state a reference answer (else the question is flagged)
    recover_dates: bool = True  # the date-only step for undated documents (paper D.5)
    date_chars: int = 6000  # head of a cached page shown to the date-only step
    chat_params: dict[str, Any] = field(default_factory=dict)


def prompt_versions() -> dict[str, str]:
    names = {
        "ctrl.discovery.temporal_queries": TEMPORAL_QUERIES_PROMPT,
        "ctrl.discovery.temporal_verify": TEMPORAL_VERIFY_PROMPT,
        "ctrl.discovery.relevance_queries": RELEVANCE_QUERIES_PROMPT,
        "ctrl.discovery.relevance_verify": RELEVANCE_VERIFY_PROMPT,
        "ctrl.discovery.gold_check": GOLD_CHECK_PROMPT,
        "ctrl.discovery.date_only": DATE_PROMPT,
    }
    return {n: template_version(n, t, VERSION) for n, t in names.items()}


def _words(text: str) -> str:
    return f" {normalize_answer(text)} "


def states_answer(text: str, answers: Sequence[str]) -> str | None:
    """The first reference answer ``text`` names as whole words after :func:`normalize_answer`
    (case, accents, punctuation and a leading article ignored), else None."""
    hay = _words(text)
    for a in answers:
        needle = normalize_answer(a)
        if needle and f" {needle} " in hay:
            return a
    return None


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def _verbatim(quote: Any, *texts: str) -> bool:
    """``quote`` (whitespace and case aside) occurs in one of ``texts``."""
    if not isinstance(quote, str) or len(quote.strip()) < 4:
        return False
    q = _squash(quote)
    return any(q in _squash(t) for t in texts)


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
                metadata={"origin": "discovery", "policy": "reference_url", "synthetic": False,
                          "date_source": "page" if p.date else None},
            ))
        missing = [{"url": u, "reason": p.error or p.status} for u, p in zip(q.gold_urls, pages, strict=True)
                   if not p.available]
        if docs:
            notes = {"start": "reference_urls", **({"gold_unavailable": missing} if missing else {})}
            pools.append(Pool(question=q, documents=docs, origin="discovery", notes=notes))
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


async def _check_gold(run: _Run) -> dict[str, Any]:
    """Whether each gold document still states a reference answer (module doc)."""
    q, s = run.q, run.s
    pages = []
    for d in run.pool.gold:
        entry: dict[str, Any] = {"doc_id": d.id, "url": d.url}
        named = states_answer(d.text, q.answers)
        if named is not None:
            pages.append({**entry, "status": "states_answer", "method": "text", "answer": named})
            continue
        v = await run.ask("ctrl.discovery.gold_check", GOLD_CHECK_PROMPT, page=d.text[: s.page_chars])
        if v is None:
            pages.append({**entry, "status": "unchecked", "method": "model", "reason": "unparsed reply"})
        elif v.get("states_answer") is True and _verbatim(v.get("quote"), d.text):
            pages.append({**entry, "status": "states_answer", "method": "model", "quote": v.get("quote")})
        elif v.get("states_answer") is True:
            pages.append({**entry, "status": "not_stated", "method": "model",
                          "reason": "the model said yes but its quote is not in the page"})
        else:
            pages.append({**entry, "status": "not_stated", "method": "model", "reason": v.get("reason")})
    ok = any(x["status"] == "states_answer" for x in pages)
    out: dict[str, Any] = {"status": "ok" if ok else "flagged", "pages": pages}
    if not ok:
        out["reason"] = "no gold page states a reference answer"
    return out


def _parse_iso(value: Any) -> dt.date | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.date.fromisoformat(value.strip()[:10]) if len(value.strip()) >= 10 else None
    except ValueError:
        return None


async def _recover_dates(run: _Run, docs: list[Document]) -> list[Document]:
    """``docs`` with dates recovered where the date-only step finds one (others unchanged)."""
    out = []
    for d in docs:
        if d.date is not None or d.metadata.get("synthetic"):
            out.append(d)
            continue
        page = run.store.lookup(d.url)
        text = page.text if page is not None and page.status == "ok" and page.text.strip() else d.text
        title = (page.title if page is not None else "") or d.title or ""
        entry: dict[str, Any] = {"kind": "date", "doc_id": d.id, "url": d.url,
                                 "cached": page is not None and page.status == "ok"}
        v = await run.ask("ctrl.discovery.date_only", DATE_PROMPT, url=d.url, title=title,
                          page=text[: run.s.date_chars])
        when = _parse_iso((v or {}).get("date"))
        if when is None:
            run.log.append({**entry, "outcome": "none", "reason": "no date given" if v else "unparsed"})
            out.append(d)
            continue
        evidence = (v or {}).get("evidence")
        if not _verbatim(evidence, text, d.url):
            run.log.append({**entry, "outcome": "rejected", "date": when.isoformat(),
                            "reason": "the evidence is not in the page or its URL"})
            out.append(d)
            continue
        run.log.append({**entry, "outcome": "recovered", "date": when.isoformat(), "evidence": evidence})
        meta = {**d.metadata, "date_source": "recovered", "date_evidence": evidence}
        out.append(d.model_copy(update={"date": when, "metadata": meta}))
    return out


def _date_rule(run: _Run, docs: list[Document]) -> list[Document]:
    """Discovered documents whose recovered date breaks their kind's date rule are removed."""
    anchor = run.pool.anchor_date()
    year = run.q.effective_year or (anchor.year if anchor else None)
    kept = []
    for d in docs:
        recovered = d.metadata.get("date_source") == "recovered" and d.metadata.get("origin") == "discovery"
        why = None
        if recovered and d.date is not None and anchor is not None:
            if d.role == "outdated" and d.date >= anchor:
                why = f"recovered date {d.date} is not before {anchor}"
            elif d.role == "relevance" and d.date <= anchor:
                why = f"recovered date {d.date} is not after {anchor}"
            elif d.role == "relevance" and year is not None and d.date.year > year + 1:
                why = f"recovered date {d.date} is after {year + 1}"
        if why:
            run.log.append({"kind": "date", "doc_id": d.id, "url": d.url, "outcome": "removed", "reason": why})
        else:
            kept.append(d)
    return kept


async def adiscover_pool(pool: Pool, client: LLMClient, backend: SearchBackend, store: PageStore,
                         settings: DiscoverySettings | None = None) -> Pool:
    """The pool with discovered outdated and relevance documents added up to the quotas, after the
    gold check and with undated documents dated by the date-only step (module doc)."""
    s = settings or DiscoverySettings()
    run = _Run(pool, client, backend, store, s)
    run.seen.update(normalize_url(d.url) for d in pool.documents)
    pending = None
    temporal: list[Document] = []
    relevance: list[Document] = []
    gold_check: dict[str, Any] | None = None
    start = list(pool.documents)
    try:
        if s.check_gold:
            gold_check = await _check_gold(run)
        if s.recover_dates:
            golds = await _recover_dates(run, pool.gold)
            by_id = {d.id: d for d in golds}
            start = [by_id.get(d.id, d) for d in start]
            run.pool = pool.model_copy(update={"documents": start})
        temporal = await _temporal(run)
        relevance = await _relevance(run)
        if s.recover_dates:
            others = [d for d in start if d.role != "gold"] + temporal + relevance
            dated = {d.id: d for d in await _recover_dates(run, others)}
            kept = {d.id for d in _date_rule(run, list(dated.values()))}
            start = [dated.get(d.id, d) for d in start if d.role == "gold" or d.id in kept]
            temporal = [dated[d.id] for d in temporal if d.id in kept]
            relevance = [dated[d.id] for d in relevance if d.id in kept]
    except _Pending as p:
        pending = str(p)
    notes = dict(pool.notes)
    if gold_check is not None:
        notes["gold_check"] = gold_check
    notes["discovery"] = _notes(s, client, backend, run.log, pending, len(temporal), len(relevance))
    return pool.model_copy(update={"documents": [*start, *temporal, *relevance], "notes": notes})


def _notes(s: DiscoverySettings, client: LLMClient, backend: SearchBackend, log: list[dict[str, Any]],
           pending: str | None, outdated: int = 0, relevance: int = 0) -> dict[str, Any]:
    """What ``pool.notes["discovery"]`` records of one question's discovery."""
    dates = [e for e in log if e.get("kind") == "date"]
    return {
        "outdated_added": outdated,
        "relevance_added": relevance,
        "targets": {"outdated": s.historical, "relevance": s.relevance},
        "dates_recovered": sum(e["outcome"] == "recovered" for e in dates),
        "dates_not_recovered": sum(e["outcome"] in ("none", "rejected") for e in dates),
        "removed_by_recovered_date": sum(e["outcome"] == "removed" for e in dates),
        "model": client.model,
        "backend": backend.name,
        "prompts": prompt_versions(),
        "pending": pending,
        "log": log,
    }


async def adiscover_pools(pools: Sequence[Pool], client: LLMClient, backend: SearchBackend, store: PageStore,
                          settings: DiscoverySettings | None = None) -> list[Pool]:
    """:func:`adiscover_pool` for every pool, concurrently, with nothing kept on disk (the
    estimate drives it; a run goes through :class:`DiscoveryStage`)."""
    return await fan_out(pools, lambda p: adiscover_pool(p, client, backend, store, settings),
                         desc="ctrl discovery", unit="question", progress=client.progress)


class DiscoveryStage(Stage[Pool, PoolRecord]):
    """Discovery on :mod:`trek.stage`: one :class:`~trek.ctrl.pools.PoolRecord` per question in
    the checkpoint file ``records``, holding its pool after discovery, cut to the quotas.

    The input key covers the starting pool, the model, the search backend's name, the settings
    and the prompt versions. A question whose call failed, or that the budget stopped, is
    ``pending`` (what it found so far is kept in its pool) and is tried again on the next run,
    its finished calls replayed from the response cache; an internal error is ``failed``.
    """

    record = PoolRecord
    name = "ctrl discovery"
    unit = "question"

    def __init__(self, records: str | os.PathLike[str], client: LLMClient, backend: SearchBackend,
                 store: PageStore, settings: DiscoverySettings | None = None):
        self.records, self.client, self.backend, self.store = Path(records), client, backend, store
        self.settings = settings or DiscoverySettings()

    def slot(self, pool: Pool) -> Slot:
        return Slot(self.records, pool.question.id)

    def input_key(self, pool: Pool) -> str:
        return digest({"pool": pool.model_dump(mode="json"), "model": self.client.model, "backend": self.backend.name,
                       "settings": dataclasses.asdict(self.settings), "prompts": prompt_versions(), "version": VERSION})

    def _quotas(self, pool: Pool) -> Pool:
        return apply_quotas(pool, historical=self.settings.historical, relevance=self.settings.relevance)

    async def produce(self, pool: Pool, key: str) -> PoolRecord:
        made = self._quotas(await adiscover_pool(pool, self.client, self.backend, self.store, self.settings))
        why = made.notes["discovery"]["pending"]
        return PoolRecord(question_id=pool.question.id, input_key=key, status="pending" if why else "ok", error=why,
                          pool=made)

    def failure(self, pool: Pool, key: str, error: str) -> PoolRecord:
        notes = {**pool.notes, "discovery": _notes(self.settings, self.client, self.backend, [], error)}
        return PoolRecord(question_id=pool.question.id, input_key=key, status="failed", error=error,
                          pool=self._quotas(pool.model_copy(update={"notes": notes})))

    def llm_clients(self) -> list[LLMClient]:
        return [self.client]


async def awild_start_pools(questions: Sequence[Question], store: PageStore,
                            longseal: Sequence[Pool] = ()) -> tuple[list[Pool], list[dict[str, Any]]]:
    """Starting pools for TrekBench-Wild questions, in question order, and the questions left out.

    A question with a pool in ``longseal`` (:func:`trek.ctrl.pools.from_longseal`, same ids) starts
    from LongSeal's gold and outdated snapshots (the question record is the Wild one); every other
    question from its reference URLs (:func:`agold_pools`). Every starting document is put into
    ``store``, so later steps read the same pages. Left out: questions without a usable gold page,
    each with the reason.
    """
    by_id = {p.question.id: p for p in longseal}
    from_seal = {}
    for q in questions:
        if q.id in by_id:
            p = by_id[q.id]
            notes = {**p.notes, "start": "longseal"}
            from_seal[q.id] = p.model_copy(update={"question": q, "notes": notes})
    fetched, skipped = await agold_pools([q for q in questions if q.id not in from_seal], store)
    made = {p.question.id: p for p in fetched}
    for p in from_seal.values():
        if not p.gold:
            skipped.append({"question_id": p.question.id, "reason": "the LongSeal row has no gold document"})
    out = []
    for q in questions:
        p = from_seal.get(q.id) or made.get(q.id)
        if p is not None and p.gold:
            store.add_documents(d for d in p.documents if d.url not in store)
            out.append(p)
    order = {q.id: i for i, q in enumerate(questions)}
    skipped.sort(key=lambda x: order.get(x["question_id"], len(order)))
    return out, skipped


def discovery_report(pools: Sequence[Pool], skipped: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Per question: where its pool started, the gold check, documents per role, dates recovered,
    shortages and whether it is pending; and the totals. ``skipped`` lists questions left out."""
    rows = []
    for p in pools:
        disc = p.notes.get("discovery", {})
        check = p.notes.get("gold_check", {})
        rows.append({
            "question_id": p.question.id,
            "dataset": p.question.dataset,
            "start": p.notes.get("start", p.origin),
            "gold_check": check.get("status", "not run"),
            "documents": {r: len(p.role(r)) for r in ("gold", "outdated", "relevance")},
            "dated": {r: sum(1 for d in p.role(r) if d.date is not None) for r in ("gold", "outdated", "relevance")},
            "dates_recovered": disc.get("dates_recovered", 0),
            "shortage": p.notes.get("shortage", {}),
            "pending": disc.get("pending"),
            "gold_unavailable": p.notes.get("gold_unavailable", []),
        })
    return {
        "questions": len(rows) + len(skipped),
        "pools": len(rows),
        "skipped": list(skipped),
        "flagged": [r["question_id"] for r in rows if r["gold_check"] == "flagged"],
        "pending": [r["question_id"] for r in rows if r["pending"]],
        "documents": {r: sum(x["documents"][r] for x in rows) for r in ("gold", "outdated", "relevance")},
        "dates_recovered": sum(r["dates_recovered"] for r in rows),
        "per_question": rows,
    }
