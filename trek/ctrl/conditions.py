"""Conditions (paper D.4) and ablations (A.3, section 4.4): which documents, in which order, shown how.

Main conditions:

``OO``    up to 20 historical documents + gold
``MND``   up to 10 historical + up to 10 relevance documents + gold
``SAA``   a deterministic sample of up to 10 of MND's distractors + up to 5 republication + up to 5
          fabrication documents + gold, source URLs shown
``SBA``   SAA's documents in SAA's order, URLs hidden
``GOLD``  gold documents only

Ablations (further conditions):

``OO:gold=first``, ``OO:gold=1/3``, ``OO:gold=2/3``, ``OO:gold=last``
    OO's documents and distractor order, the gold block placed at that position
``OO:k=5``, ``OO:k=10``, ``OO:k=15``, ``OO:k=20``
    OO with a distractor budget; budgets are nested (the first k of one seeded ranking)
``OO:timeswap``
    OO with each gold document exchanging its displayed date with a distinct outdated document
    (the latest-dated ones first); content unchanged
``SAA:domainswap``
    SAA with each gold document shown on a fictitious domain and a synthetic document (fabrications
    first) shown on that gold document's real domain; content unchanged

Sampling and order are pure functions of (question id, condition) through :func:`trek.ctrl.common.rng`.
Incomplete pools use what exists: never padded, never dropped.

Source URLs (``show_urls``): by default (``"cued"``) only the domain-cued condition shows them, as
the paper does (D.4): ``SAA`` and its ablation ``SAA:domainswap``, whose point is the domain shown;
every other condition renders index, date and text. ``"all"`` shows them everywhere except ``SBA``
(what Trek did before; the recorded runs of ``make runs`` keep it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from trek.contexts import Context, Renderer, Shown, sha256_of
from trek.ctrl.common import FICTITIOUS_DOMAINS, CtrlError, rng
from trek.ctrl.pools import Pool
from trek.tokens import count_joined
from trek.types import Document

__all__ = [
    "VERSION",
    "MAIN_CONDITIONS",
    "ABLATIONS",
    "ALL_CONDITIONS",
    "Budgets",
    "Entry",
    "select",
    "assemble_pool",
    "iter_contexts",
    "context_record",
    "budget_shortfalls",
    "BudgetCounter",
    "SHOW_URLS",
    "CUED_CONDITIONS",
    "shows_urls",
]

VERSION = "ctrl.conditions/1"
MAIN_CONDITIONS = ("OO", "MND", "SAA", "SBA", "GOLD")
POSITIONS = {"first": 0.0, "1/3": 1 / 3, "2/3": 2 / 3, "last": 1.0}
BUDGETS = (5, 10, 15, 20)
ABLATIONS = (
    *(f"OO:gold={p}" for p in POSITIONS),
    *(f"OO:k={k}" for k in BUDGETS),
    "OO:timeswap",
    "SAA:domainswap",
)
ALL_CONDITIONS = (*MAIN_CONDITIONS, *ABLATIONS)
#: Where source URLs are shown: ``cued`` (the paper: only the domain-cued conditions) or ``all``.
SHOW_URLS = ("cued", "all")
#: The domain-cued conditions: the only ones that show source URLs under ``show_urls="cued"``.
CUED_CONDITIONS = ("SAA", "SAA:domainswap")


def shows_urls(condition: str, show_urls: str = "cued") -> bool:
    """Whether ``condition`` displays source URLs under the ``show_urls`` policy (:data:`SHOW_URLS`)."""
    if show_urls not in SHOW_URLS:
        raise CtrlError(f"show_urls must be one of {', '.join(SHOW_URLS)}, not {show_urls!r}")
    if condition == "SBA":
        return False
    return show_urls == "all" or condition in CUED_CONDITIONS


@dataclass(frozen=True)
class Budgets:
    """Per-condition targets (paper D.4)."""

    oo_historical: int = 20
    mnd_historical: int = 10
    mnd_relevance: int = 10
    saa_natural: int = 10
    saa_republication: int = 5
    saa_fabrication: int = 5


@dataclass(slots=True)
class Entry:
    """A document placed in a context, with what is displayed for it."""

    doc: Document
    date: str | None
    url: str | None
    original_date: str | None = None
    original_url: str | None = None


def _iso(doc: Document) -> str | None:
    return doc.date.isoformat() if doc.date is not None else None


def _sample(docs: Sequence[Document], k: int, *seed: object) -> list[Document]:
    if len(docs) <= k:
        return list(docs)
    return rng(*seed).sample(list(docs), k)


def _shuffled(docs: Sequence[Document], *seed: object) -> list[Document]:
    out = list(docs)
    rng(*seed).shuffle(out)
    return out


def _plain(docs: Iterable[Document], show_urls: bool = True) -> list[Entry]:
    return [Entry(d, _iso(d), d.url if show_urls else None) for d in docs]


def _with_gold_at(distractors: list[Document], gold: list[Document], frac: float) -> list[Document]:
    pos = round(frac * len(distractors))
    return distractors[:pos] + gold + distractors[pos:]


def _timeswap(order: list[Document]) -> list[Entry]:
    entries = _plain(order)
    golds = [e for e in entries if e.doc.role == "gold" and e.date is not None]
    outdated = sorted(
        (e for e in entries if e.doc.role == "outdated" and e.date is not None),
        key=lambda e: (e.date, e.doc.id),
        reverse=True,
    )
    for g, o in zip(golds, outdated, strict=False):
        g.original_date, o.original_date = g.date, o.date
        g.date, o.date = o.date, g.date
    return entries


def _swap_host(url: str, host: str) -> str:
    parts = urlsplit(url)
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"https://{host}{path}{query}"


def _domainswap(order: list[Document], qid: str) -> list[Entry]:
    entries = _plain(order)
    golds = [e for e in entries if e.doc.role == "gold"]
    synth = [e for e in entries if e.doc.role == "fabrication"] + [
        e for e in entries if e.doc.role == "republication"
    ]
    offset = rng(qid, "SAA:domainswap", "domain").randrange(len(FICTITIOUS_DOMAINS))
    for i, g in enumerate(golds):
        real_host = urlsplit(g.doc.url).hostname or ""
        g.original_url = g.url
        g.url = _swap_host(g.doc.url, FICTITIOUS_DOMAINS[(offset + i) % len(FICTITIOUS_DOMAINS)])
        if i < len(synth):
            s = synth[i]
            s.original_url = s.url
            s.url = _swap_host(s.doc.url, real_host)
    return entries


def _hide_urls(entries: list[Entry]) -> list[Entry]:
    return [Entry(e.doc, e.date, None, e.original_date, None) for e in entries]


def select(pool: Pool, conditions: Sequence[str] = ALL_CONDITIONS,
           budgets: Budgets | None = None, *, show_urls: str = "cued") -> dict[str, list[Entry]]:
    """The displayed documents of each condition for one pool, in context order; source URLs
    only where :func:`shows_urls` says so."""
    b = budgets or Budgets()
    if show_urls not in SHOW_URLS:
        raise CtrlError(f"show_urls must be one of {', '.join(SHOW_URLS)}, not {show_urls!r}")
    unknown = [c for c in conditions if c not in ALL_CONDITIONS]
    if unknown:
        raise CtrlError(f"unknown condition(s) {unknown}; known: {list(ALL_CONDITIONS)}")
    qid = pool.question.id
    gold = pool.gold
    if not gold:
        raise CtrlError(f"question {qid!r}: pool has no gold document")
    hist, rel = pool.role("outdated"), pool.role("relevance")
    out: dict[str, list[Entry]] = {}
    want = set(conditions)

    ranking = _shuffled(hist, qid, "OO", "ranking")  # nested budgets: OO takes the first 20
    oo_d = ranking[: b.oo_historical]
    oo = _shuffled(oo_d + gold, qid, "OO", "order")
    out["OO"] = _plain(oo)
    oo_distractors = [d for d in oo if d.role != "gold"]
    for name, frac in POSITIONS.items():
        c = f"OO:gold={name}"
        if c in want:
            out[c] = _plain(_with_gold_at(oo_distractors, gold, frac))
    for k in BUDGETS:
        c = f"OO:k={k}"
        if c in want:
            out[c] = _plain(_shuffled(ranking[:k] + gold, qid, c, "order"))
    if "OO:timeswap" in want:
        out["OO:timeswap"] = _timeswap(oo)

    mnd_d = _sample(hist, b.mnd_historical, qid, "MND", "historical") + _sample(
        rel, b.mnd_relevance, qid, "MND", "relevance"
    )
    out["MND"] = _plain(_shuffled(mnd_d + gold, qid, "MND", "order"))

    natural = _sample(mnd_d, b.saa_natural, qid, "SAA", "natural")
    adversarial = pool.role("republication")[: b.saa_republication] + pool.role("fabrication")[: b.saa_fabrication]
    saa = _shuffled(natural + adversarial + gold, qid, "SAA", "order")
    out["SAA"] = _plain(saa)
    out["SBA"] = _plain(saa, show_urls=False)
    if "SAA:domainswap" in want:
        out["SAA:domainswap"] = _domainswap(saa, qid)
    out["GOLD"] = _plain(gold)
    return {c: out[c] if shows_urls(c, show_urls) else _hide_urls(out[c]) for c in conditions}


def _budget_checks(conditions: Sequence[str], b: Budgets, fabricated: bool) -> list[tuple[str, int, Any]]:
    """``(name, budget, documents a pool can give it)`` for every budget the ``conditions`` use."""
    want = set(conditions)
    hist = lambda p: len(p.role("outdated"))  # noqa: E731
    rel = lambda p: len(p.role("relevance"))  # noqa: E731
    checks: list[tuple[str, int, Any]] = []
    if want & {"OO", "OO:timeswap", *(f"OO:gold={k}" for k in POSITIONS)}:
        checks.append(("OO outdated", b.oo_historical, hist))
    checks += [(f"OO:k={k} outdated", k, hist) for k in BUDGETS if f"OO:k={k}" in want]
    saa = want & {"SAA", "SBA", "SAA:domainswap"}
    if want & {"MND"} or saa:
        checks += [("MND outdated", b.mnd_historical, hist), ("MND relevance", b.mnd_relevance, rel)]
    if saa:
        checks += [("SAA natural", b.saa_natural, lambda p: min(hist(p), b.mnd_historical) + min(rel(p), b.mnd_relevance)),
                   ("SAA republication", b.saa_republication, lambda p: len(p.role("republication")))]
        if fabricated:
            checks.append(("SAA fabrication", b.saa_fabrication, lambda p: len(p.role("fabrication"))))
    return checks


def budget_shortfalls(pools: Iterable[Pool], conditions: Sequence[str] = ALL_CONDITIONS,
                      budgets: Budgets | None = None, *, fabricated: bool = True) -> list[str]:
    """One line per budget of ``conditions`` that some pool cannot fill, naming how many questions
    have fewer documents than the budget (their contexts hold all they have: never padded).
    ``fabricated=False`` leaves out the fabrication budget (fabrication did not run)."""
    counter = BudgetCounter(conditions, budgets)
    for p in pools:
        counter.add(p)
    return counter.lines(fabricated=fabricated)


class BudgetCounter:
    """:func:`budget_shortfalls` one pool at a time: :meth:`add` each pool, then :meth:`lines`."""

    def __init__(self, conditions: Sequence[str], budgets: Budgets | None = None):
        self._conditions, self._budgets = tuple(conditions), budgets or Budgets()
        self._checks = _budget_checks(self._conditions, self._budgets, True)
        self._short = [0] * len(self._checks)  # pools under each budget
        self._least: list[int | None] = [None] * len(self._checks)  # the fewest documents among them
        self.pools = 0

    def add(self, pool: Pool) -> None:
        self.pools += 1
        for i, (_, budget, have) in enumerate(self._checks):
            c = have(pool)
            if c < budget:
                self._short[i] += 1
                least = self._least[i]
                self._least[i] = c if least is None else min(least, c)

    def lines(self, *, fabricated: bool = True) -> list[str]:
        wanted = {name for name, _, _ in _budget_checks(self._conditions, self._budgets, fabricated)}
        return [f"budget {name} {budget}: {self._short[i]} of {self.pools} questions have fewer in their pool "
                f"(as few as {self._least[i]}); their contexts hold what the pool has"
                for i, (name, budget, _) in enumerate(self._checks) if name in wanted and self._short[i]]


def context_record(pool: Pool, condition: str, entries: Sequence[Entry], renderer: Renderer,
                   count_tokens: bool = False) -> Context:
    """The context of one condition; ``tokens`` is the o200k_base count of ``rendered`` when
    ``count_tokens``, else null."""
    shown = [Shown(e.date, e.url, e.doc.text.strip()) for e in entries]
    pieces = renderer.pieces(shown)
    rendered = "".join(pieces)
    docs = []
    for e, s in zip(entries, shown, strict=True):
        d = e.doc
        docs.append({
            "doc_id": d.id,
            "role": d.role,
            "url": e.url,
            "date": e.date,
            "synthetic": bool(d.metadata.get("synthetic", d.role in ("republication", "fabrication"))),
            "answer": d.supports_answer,
            "original_url": e.original_url,
            "original_date": e.original_date,
            "text": s.text,
        })
    return Context.model_validate({
        "question_id": pool.question.id,
        "dataset": pool.question.dataset,
        "condition": condition,
        "documents": docs,
        "n_distractors": sum(1 for e in entries if e.doc.role != "gold"),
        "rendered": rendered,
        "sha256": sha256_of(rendered),
        "tokens": count_joined(pieces) if count_tokens else None,
    })


def assemble_pool(pool: Pool, conditions: Sequence[str] = ALL_CONDITIONS, *, budgets: Budgets | None = None,
                  renderer: Renderer | None = None, count_tokens: bool = False,
                  show_urls: str = "cued") -> list[Context]:
    """The contexts of one pool, one per condition in the given order."""
    r = renderer or Renderer()
    chosen = select(pool, conditions, budgets, show_urls=show_urls)
    return [context_record(pool, c, chosen[c], r, count_tokens) for c in conditions]


def iter_contexts(pools: Iterable[Pool], conditions: Sequence[str] = ALL_CONDITIONS, *,
                  budgets: Budgets | None = None, count_tokens: bool = False,
                  show_urls: str = "cued") -> Iterator[Context]:
    """Contexts for every pool (pool order) and condition (given order)."""
    r = Renderer()
    for p in pools:
        yield from assemble_pool(p, conditions, budgets=budgets, renderer=r, count_tokens=count_tokens,
                                 show_urls=show_urls)
