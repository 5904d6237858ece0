"""Fabrication distractors (paper D.2, D.3, D.5): minimal edits of gold text that assert a wrong answer.

Three model calls per candidate, each a named, overridable prompt template:

1. ``ctrl.fabrication.locate``  find a verbatim answer-bearing span in a gold document;
2. ``ctrl.fabrication.edit``    propose exact replacements (entity or value substitutions plus the
   dependent edits) that make a window around the span assert a plausible wrong answer;
3. ``ctrl.fabrication.verify``  check that the edited window supports the declared wrong answer,
   not the reference, and is internally consistent.

Between 2 and 3, code applies the edits and checks them (:func:`check_candidate`): every ``find``
matches exactly one span of the window, the edits do not overlap, the text changes, the declared
answer differs from every reference answer, and the embedding similarity of the edited window to
the original is at least ``min_similarity`` (the paper: 0.90 with text-embedding-3-small; by
default the threshold calibrated for the embedder in use,
:func:`trek.ctrl.calibration.default_min_similarity`). A rejected candidate is retried with the
recorded reason as feedback, up to ``max_attempts`` times per slot; up to ``target`` (5)
fabrications are made per question. Every attempt and its outcome is kept in the pool's notes.

The window is centred on the located span; its length is the median length of up to ten dated
historical documents nearest in date to the gold-date anchor, bounded to [1,500, 12,000]
characters, 6,000 when there is none; a gold document no longer than its window is the window,
and needs no locate call. Fabrication keeps the gold document's date.

**Exact fabrication** (:func:`fabricate_exact`, no model): where a gold document's answer-bearing
span is annotated (``metadata.answer_span``, as on TrekBench-Mini's pages), the span is the
located passage and the edit writes another answer of the question's timeline in its place
(through the span's template: "four" becomes "three", ``was acquired by {value}``...). The
answers tried are those the pool's outdated documents support, most recent first, then those of
its relevance documents; each attempt takes the next one. The edit's ``find`` is the span widened
word by word until it occurs once in the window, and the candidate goes through the same
:func:`check_candidate` as a model's (unique span, a change, an answer that differs from every
reference and from the fabrications already made, the similarity floor); there is no semantic
verifier. The documents carry the same fields as the model's (``verifier`` and ``model`` null)
and ``fabricator: "exact"`` (``"model"`` for the model's).

**No leaks of the reference answer** (D.2-D.3). The exact fabricator makes the *dependent edits*
(:func:`dependent_map`): every other mention of the reference answer in the window (``Dana has
signed``, ``Okafor's``) is replaced consistently by the fabricated value's word in the same place;
on a model's fabrication the code makes the dependent edits the model left out (kept apart as
``dependent_edits``), and the similarity floor is checked again on the result. The title gets the
same edits and the URL a made-up slug that names the fabricated value (:func:`fabricated_slug`),
never the gold page's. Then the *consistency check* (:func:`check_no_reference`) refuses, for both
fabricators, a fabrication whose URL path, title or text still names the reference answer (a word
of :func:`reference_words`), with the reason as feedback. A false-premise question's reference
is a statement, not a name: it is not checked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek.aio import fan_out
from trek.ctrl.calibration import default_min_similarity
from trek.ctrl.common import (
    FICTITIOUS_DOMAINS,
    CtrlError,
    cut_window,
    normalize_answer,
    rng,
    same_answer,
    slugify,
)
from trek.ctrl.edits import Rejection, apply_edits
from trek.ctrl.pools import Pool, PoolRecord
from trek.embeddings import Embedder, cosine
from trek.llm.client import LLMClient
from trek.llm.structured import achat_json, object_schema
from trek.stage import Slot, Stage, digest, execute
from trek.templates import register, render, template_version
from trek.types import Document, Question, iter_jsonl

__all__ = [
    "VERSION",
    "LOCATE_PROMPT",
    "EDIT_PROMPT",
    "VERIFY_PROMPT",
    "Rejection",
    "FabricationSettings",
    "window_length",
    "cut_window",
    "apply_edits",
    "check_candidate",
    "afabricate_pool",
    "afabricate_pools",
    "FabricationStage",
    "afabricate_into",
    "resolve_settings",
    "FABRICATORS",
    "has_answer_span",
    "exact_values",
    "fabricate_exact",
    "reference_words",
    "dependent_map",
    "map_text",
    "names_reference",
    "check_no_reference",
    "fabricated_slug",
]

#: ctrl.fabrication/2: dependent edits, a slug naming the value, the consistency check (D.3).
VERSION = "ctrl.fabrication/2"
#: How a build fabricates: ``auto`` (exact where a gold page has an annotated answer span, else
#: the model when one is given), ``exact``, ``model`` or ``none``.
FABRICATORS = ("auto", "exact", "model", "none")
MIN_WINDOW, MAX_WINDOW, DEFAULT_WINDOW = 1500, 12000, 6000

LOCATE_PROMPT = register(
    "ctrl.fabrication.locate",
    """\
You help build a test set of misleading documents. Below is a question, its correct answer and a
document that supports that answer.

Question: {question}
Correct answer(s): {answers}
The question is read as of: {reference_year}

Copy, character for character, the shortest passage of the document (a sentence, a paragraph or a
few table rows) that states the correct answer. Take it from the body of the document: not from a
title, a menu, a list of links or a reading recommendation. Do not change, shorten or fix anything
inside the passage.
{feedback}
Document:
<<<
{document}
>>>

Reply with JSON only: {{"span": "<the exact passage>"}}, or {{"span": null}} if the document does
not state the answer.""",
)

EDIT_PROMPT = register(
    "ctrl.fabrication.edit",
    """\
You help build a test set of misleading documents. Rewrite the passage below as little as possible
so that it states a plausible but WRONG answer to the question, as if it had been published as of
{reference_year}.

Question: {question}
Correct answer(s), which the edited passage must no longer support: {answers}
Wrong answers already used for this question (choose a different one): {used_answers}
Variant: {variant}

Rules:
- Substitute the answer-bearing entity or value, then make only the dependent edits needed for
  the passage to stay consistent (other mentions, derived numbers, pronouns).
- Keep every other word, the layout and the dates as they are.
- Each "find" must be copied exactly from the passage and must occur there exactly once (include a
  few surrounding words when needed); edits must not overlap.
- The wrong answer must be of the same type as the correct one and believable for that time.
{feedback}
Passage:
<<<
{window}
>>>

Reply with JSON only:
{{"wrong_answer": "<the answer the edited passage now supports>",
  "replacements": [{{"find": "<exact text>", "replace": "<new text>"}}]}}""",
)

VERIFY_PROMPT = register(
    "ctrl.fabrication.verify",
    """\
Check an edited passage for a test set of misleading documents.

Question: {question}
Correct answer(s): {answers}
The question is read as of: {reference_year}
Answer the passage is meant to support: {declared_answer}

Passage:
<<<
{passage}
>>>

Decide two things. (1) Does a reader of this passage alone arrive at the declared answer and NOT
at the correct one? (2) Are the passage's claims that bear on the answer consistent with each
other (no leftover mention of the correct answer, no contradicting figures or dates)?

Reply with JSON only:
{{"supports_declared_answer": true or false, "internally_consistent": true or false,
  "reason": "<one sentence>"}}""",
)

FEEDBACK_TEMPLATE = "\nYour previous attempt was rejected: {reason}. Correct this in the new attempt.\n"


@dataclass
class FabricationSettings:
    """Knobs of the fabrication step; every default is the paper's where it states one."""

    target: int = 5
    max_attempts: int = 3
    #: None: the embedder's calibrated default (:func:`trek.ctrl.calibration.default_min_similarity`).
    min_similarity: float | None = None
    min_window: int = MIN_WINDOW
    max_window: int = MAX_WINDOW
    default_window: int = DEFAULT_WINDOW
    nearby: int = 10
    chat_params: dict[str, Any] = field(default_factory=dict)
    max_reasks: int = 1


def prompt_versions() -> dict[str, str]:
    return {
        "ctrl.fabrication.locate": template_version("ctrl.fabrication.locate", LOCATE_PROMPT, VERSION),
        "ctrl.fabrication.edit": template_version("ctrl.fabrication.edit", EDIT_PROMPT, VERSION),
        "ctrl.fabrication.verify": template_version("ctrl.fabrication.verify", VERIFY_PROMPT, VERSION),
    }


def window_length(pool: Pool, s: FabricationSettings | None = None) -> int:
    """Median length of up to ``nearby`` dated historical documents nearest the anchor, bounded."""
    s = s or FabricationSettings()
    anchor = pool.anchor_date()
    dated = [d for d in pool.role("outdated") if d.date is not None]
    if not dated:
        return s.default_window
    if anchor is not None:
        dated.sort(key=lambda d: (abs((anchor - d.date).days), d.id))  # type: ignore[operator]
    else:
        dated.sort(key=lambda d: (-d.date.toordinal(), d.id))  # type: ignore[union-attr]
    med = statistics.median(len(d.text) for d in dated[: s.nearby])
    return int(min(max(med, s.min_window), s.max_window))


def check_candidate(
    window: str,
    candidate: dict[str, Any],
    references: Sequence[str],
    embedder: Embedder,
    min_similarity: float = 0.90,
    used_answers: Sequence[str] = (),
) -> tuple[str, float]:
    """Structural checks of one proposed edit; returns (edited window, similarity) or raises Rejection.

    ``used_answers`` are wrong answers of fabrications already accepted for the question: repeating
    one is rejected so that the five fabrications assert different answers."""
    replacements = candidate.get("replacements") or []
    edited = apply_edits(window, replacements)
    if edited == window:
        raise Rejection("no_change", "the replacements leave the passage unchanged")
    declared = candidate.get("wrong_answer")
    if not isinstance(declared, str) or not normalize_answer(declared):
        raise Rejection("empty_answer", "no wrong answer was declared")
    if same_answer(declared, list(references)):
        raise Rejection("same_answer", f"the declared answer {declared!r} equals a reference answer")
    if same_answer(declared, list(used_answers)):
        raise Rejection("repeated_answer", f"{declared!r} was already used for this question; choose another")
    vec = embedder.embed([window, edited])
    sim = cosine(vec[0], vec[1])
    if sim < min_similarity:
        raise Rejection("low_similarity", f"embedding similarity {sim:.3f} is below {min_similarity:.2f}")
    return edited, sim


def _edit_shape(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    reps = value.get("replacements")
    if not isinstance(reps, list) or not all(isinstance(r, dict) for r in reps):
        raise ValueError("'replacements' must be a list of {find, replace} objects")
    return value


#: Reply shapes of the three calls, sent to endpoints that enforce schemas.
LOCATE_SCHEMA = object_schema({"span": {"type": ["string", "null"], "maxLength": 400}})
EDIT_SCHEMA = object_schema({
    "wrong_answer": "text",
    "replacements": {"type": "array", "items": object_schema({"find": "text", "replace": "text"}),
                     "minItems": 1, "maxItems": 4},
})
VERIFY_SCHEMA = object_schema({"supports_declared_answer": "boolean", "internally_consistent": "boolean",
                               "reason": "text"})


def _locate_shape(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or "span" not in value:
        raise ValueError("expected a JSON object with 'span'")
    return value


def _verify_shape(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    for k in ("supports_declared_answer", "internally_consistent"):
        if not isinstance(value.get(k), bool):
            raise ValueError(f"'{k}' must be true or false")
    return value


class _Pending(Exception):
    pass


@dataclass
class _Ctx:
    client: LLMClient
    embedder: Embedder
    settings: FabricationSettings
    pool: Pool

    @property
    def q(self):
        return self.pool.question

    def fields(self) -> dict[str, str]:
        year = self.q.effective_year or self.q.effective_year_raw or "the date of the documents"
        return {"question": self.q.question, "answers": "; ".join(self.q.answers), "reference_year": str(year)}

    async def ask(self, name: str, default: str, shape: Any, schema: dict[str, Any], **fields: Any) -> dict[str, Any]:
        prompt = render(name, default, **self.fields(), **fields)
        res = await achat_json(
            self.client, [{"role": "user", "content": prompt}], validate=shape,
            max_reasks=self.settings.max_reasks, schema=schema, **self.settings.chat_params,
        )
        if res.status == "pending":
            raise _Pending(res.error or "call failed")
        if not res.ok:
            raise Rejection("unparsed", f"{name} reply not readable: {res.error}")
        return res.value


async def _locate(ctx: _Ctx, gold: Document, feedback: str) -> tuple[int, int]:
    value = await ctx.ask("ctrl.fabrication.locate", LOCATE_PROMPT, _locate_shape, LOCATE_SCHEMA, document=gold.text,
                          feedback=feedback)
    span = value.get("span")
    if not isinstance(span, str) or not span.strip():
        raise Rejection("no_span", "no answer-bearing passage was returned")
    start = gold.text.find(span)
    if start == -1:
        raise Rejection("span_not_found", "the passage is not a verbatim part of the document")
    return start, start + len(span)


async def _one_slot(ctx: _Ctx, slot: int, used: list[str], located: dict[str, tuple[int, int]],
                    log: list[dict[str, Any]]) -> Document | None:
    golds = ctx.pool.gold
    gold = golds[(slot - 1) % len(golds)]
    s = ctx.settings
    feedback = ""
    for attempt in range(1, s.max_attempts + 1):
        fb = FEEDBACK_TEMPLATE.format(reason=feedback) if feedback else ""
        entry: dict[str, Any] = {"slot": slot, "attempt": attempt, "source_doc": gold.id, "feedback": feedback or None}
        try:
            length = window_length(ctx.pool, s)
            if len(gold.text) <= length:  # the window is the whole document: no passage to locate
                located.setdefault(gold.id, (0, len(gold.text)))
            elif gold.id not in located:
                located[gold.id] = await _locate(ctx, gold, fb)
            a, b = located[gold.id]
            lo, hi = cut_window(gold.text, a, b, length)
            window = gold.text[lo:hi]
            cand = await ctx.ask(
                "ctrl.fabrication.edit", EDIT_PROMPT, _edit_shape, EDIT_SCHEMA, window=window,
                used_answers="; ".join(used) or "none", variant=f"{slot} of {s.target}", feedback=fb,
            )
            entry["candidate"] = cand
            edited, sim = await asyncio.to_thread(
                check_candidate, window, cand, ctx.q.answers, ctx.embedder, s.min_similarity, list(used)
            )
            # the dependent edits the model left out: every other mention of the reference answer
            mapping = dependent_map(ctx.q, str(cand["wrong_answer"]))
            completed = map_text(edited, mapping)
            if completed != edited:
                dependent = [{"old": m.group(0), "new": _cased(_lookup(mapping, m.group(0)), m.group(0))}
                             for m in _pattern([o for o, _ in mapping]).finditer(edited)]
                vec = await asyncio.to_thread(ctx.embedder.embed, [window, completed])
                sim = cosine(vec[0], vec[1])
                if sim < s.min_similarity:
                    raise Rejection("low_similarity", f"embedding similarity {sim:.3f} (with the dependent edits) is "
                                                      f"below {s.min_similarity:.2f}")
                edited, cand = completed, {**cand, "dependent_edits": dependent}
                entry["similarity"] = round(sim, 4)
            check_no_reference(ctx.q, _document(ctx.pool, slot, gold, lo, hi, edited, cand, sim, None, attempt,
                                                model=ctx.client.model, embedder=ctx.embedder.name,
                                                fabricator="model"))
            verdict = await ctx.ask(
                "ctrl.fabrication.verify", VERIFY_PROMPT, _verify_shape, VERIFY_SCHEMA,
                declared_answer=cand["wrong_answer"], passage=edited,
            )
            entry["verifier"] = verdict
            if not (verdict["supports_declared_answer"] and verdict["internally_consistent"]):
                raise Rejection("verifier_rejected", str(verdict.get("reason") or "the verifier said no"))
        except Rejection as r:
            entry.update(outcome="rejected", kind=r.kind, reason=r.message)
            log.append(entry)
            feedback = r.feedback
            continue
        entry["outcome"] = "accepted"
        log.append(entry)
        used.append(cand["wrong_answer"])
        return _document(ctx.pool, slot, gold, lo, hi, edited, cand, sim, verdict, attempt,
                         model=ctx.client.model, embedder=ctx.embedder.name, fabricator="model")
    return None


def _document(pool: Pool, slot: int, gold: Document, lo: int, hi: int, edited: str, cand: dict[str, Any],
              sim: float, verdict: dict[str, Any] | None, attempts: int, *, model: str | None, embedder: str,
              fabricator: str) -> Document:
    qid = pool.question.id
    offset = rng(qid, "fabrication", "domain").randrange(len(FICTITIOUS_DOMAINS))
    domain = FICTITIOUS_DOMAINS[(offset + slot - 1) % len(FICTITIOUS_DOMAINS)]
    when = f"{gold.date.year}/{gold.date.month:02d}/" if gold.date else ""
    value = str(cand["wrong_answer"])
    title = map_text(gold.title, dependent_map(pool.question, value))
    slug = fabricated_slug(title, value)
    return Document(
        id=f"{qid}:fabrication:{slot}",
        url=f"https://{domain}/{when}{slug}-f{slot}",
        title=title,
        date=gold.date,
        text=edited,
        question_id=qid,
        role="fabrication",
        supports_answer=cand["wrong_answer"],
        source=domain,
        metadata={
            "origin": "synthetic",
            "policy": "fabrication",
            "synthetic": True,
            "source_doc": gold.id,
            "source_url": gold.url,
            "window": [lo, hi],
            "edits": [{"old": r["find"], "new": str(r.get("replace", ""))} for r in cand["replacements"]],
            **({"dependent_edits": cand["dependent_edits"]} if cand.get("dependent_edits") else {}),
            "declared_answer": cand["wrong_answer"],
            "similarity": round(sim, 4),
            "embedder": embedder,
            "verifier": verdict,
            "attempts": attempts,
            "model": model,
            "fabricator": fabricator,
            "version": VERSION,
        },
    )


def resolve_settings(settings: FabricationSettings, embedder: Embedder) -> FabricationSettings:
    """``settings`` with ``min_similarity`` set: as given, else the embedder's calibrated default."""
    if settings.min_similarity is not None:
        return settings
    return dataclasses.replace(settings, min_similarity=default_min_similarity(embedder.name)[0])


async def afabricate_pool(pool: Pool, client: LLMClient, embedder: Embedder,
                          settings: FabricationSettings | None = None) -> Pool:
    """The pool with up to ``settings.target`` fabrication documents (existing ones replaced)."""
    s = resolve_settings(settings or FabricationSettings(), embedder)
    if not pool.gold:
        raise CtrlError(f"question {pool.question.id!r}: no gold document to fabricate from")
    ctx = _Ctx(client, embedder, s, pool)
    used: list[str] = []
    located: dict[str, tuple[int, int]] = {}
    log: list[dict[str, Any]] = []
    made: list[Document] = []
    pending = None
    try:
        for slot in range(1, s.target + 1):
            doc = await _one_slot(ctx, slot, used, located, log)
            if doc is not None:
                made.append(doc)
    except _Pending as p:
        pending = str(p)
    notes = _notes("model", made, s, settings, client.model, embedder, {"prompts": prompt_versions()}, pending, log)
    return _with(pool, made, notes)


def _notes(fabricator: str, made: list[Document], s: FabricationSettings, given: FabricationSettings | None,
           model: str | None, embedder: Embedder, extra: dict[str, Any], pending: str | None,
           log: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``pool.notes["fabrication"]`` records of one fabrication, by either fabricator."""
    return {
        "fabricator": fabricator,
        "made": len(made),
        "target": s.target,
        "model": model,
        "embedder": embedder.name,
        "min_similarity": s.min_similarity,
        "min_similarity_source": ("given" if given is not None and given.min_similarity is not None
                                  else default_min_similarity(embedder.name)[1]),
        **extra,
        "pending": pending,
        "attempts": log,
    }


def _with(pool: Pool, made: list[Document], fabrication_notes: dict[str, Any]) -> Pool:
    """``pool`` with ``made`` in place of its fabrications and the notes of how they were made."""
    base = [d for d in pool.documents if d.role != "fabrication"]
    return pool.model_copy(update={"documents": base + made, "notes": {**pool.notes, "fabrication": fabrication_notes}})


async def afabricate_pools(pools: Sequence[Pool], client: LLMClient, embedder: Embedder,
                           settings: FabricationSettings | None = None) -> list[Pool]:
    """:func:`afabricate_pool` for every pool, concurrently (the client bounds connections), with
    nothing kept on disk (the estimate drives it; a build goes through :class:`FabricationStage`)."""
    return await fan_out(pools, lambda p: afabricate_pool(p, client, embedder, settings),
                         desc="ctrl fabrication", unit="question", progress=client.progress)


class FabricationStage(Stage[Pool, PoolRecord]):
    """Model fabrication on :mod:`trek.stage`: one :class:`~trek.ctrl.pools.PoolRecord` per
    question in the checkpoint file ``records`` (a build folder's ``fabrications.jsonl``),
    holding the pool with its fabrications.

    The input key covers the pool fabricated from (republications included, no fabrication), the
    model, the embedder, the settings and the prompt versions. A question whose call failed, or
    that the budget stopped, is ``pending`` (the fabrications made so far are kept) and is done
    again on the next run, its finished calls replayed from the response cache.
    """

    record = PoolRecord
    name = "ctrl fabrication"
    unit = "question"

    def __init__(self, records: str | os.PathLike[str], client: LLMClient, embedder: Embedder,
                 settings: FabricationSettings | None = None):
        self.records, self.client, self.embedder, self.given = Path(records), client, embedder, settings
        self.settings = resolve_settings(settings or FabricationSettings(), embedder)

    def slot(self, pool: Pool) -> Slot:
        return Slot(self.records, pool.question.id)

    def input_key(self, pool: Pool) -> str:
        given = self.given is not None and self.given.min_similarity is not None
        return digest({"pool": pool.model_dump(mode="json"), "model": self.client.model, "embedder": self.embedder.name,
                       "settings": dataclasses.asdict(self.settings), "min_similarity_given": given,
                       "prompts": prompt_versions(), "version": VERSION})

    async def produce(self, pool: Pool, key: str) -> PoolRecord:
        made = await afabricate_pool(pool, self.client, self.embedder, self.given)
        why = made.notes["fabrication"]["pending"]
        return PoolRecord(question_id=pool.question.id, input_key=key, status="pending" if why else "ok", error=why,
                          pool=made)

    def failure(self, pool: Pool, key: str, error: str) -> PoolRecord:
        notes = _notes("model", [], self.settings, self.given, self.client.model, self.embedder,
                       {"prompts": prompt_versions()}, error, [])
        return PoolRecord(question_id=pool.question.id, input_key=key, status="failed", error=error,
                          pool=_with(pool, [], notes))

    def llm_clients(self) -> list[LLMClient]:
        return [self.client]


async def afabricate_into(records: str | os.PathLike[str], pools: Sequence[Pool], client: LLMClient,
                          embedder: Embedder, settings: FabricationSettings | None = None) -> list[Pool]:
    """``pools`` fabricated by the model through :class:`FabricationStage` (checkpoint file
    ``records``; finished questions whose input is unchanged are kept without a call), in order.
    A pending or failed question comes back with ``notes["fabrication"]["pending"]`` saying why."""
    await afabricate_records(records, pools, client, embedder, settings)
    return list(iter_fabricated(records))


async def afabricate_records(records: str | os.PathLike[str], pools: Iterable[Pool], client: LLMClient,
                             embedder: Embedder, settings: FabricationSettings | None = None) -> None:
    """:func:`afabricate_into` keeping nothing: ``pools`` a re-readable source (a list, or
    :class:`trek.stage.Reread` over a file), the fabricated pools left in ``records`` in their
    order (:func:`iter_fabricated` reads them one at a time)."""
    stage = FabricationStage(records, client, embedder, settings)
    await execute(stage, pools, outputs=[records], progress=client.progress)


def iter_fabricated(records: str | os.PathLike[str]) -> Iterator[Pool]:
    """The pools of a fabrication checkpoint file, in order, read one at a time."""
    for r in iter_jsonl(Path(records), PoolRecord):
        yield r.pool


# -- the reference answer's words: dependent edits and the consistency check (D.2-D.3) -------------------
#: Words of a reference answer that never name it (function words).
_FUNCTION_WORDS = frozenset({"the", "a", "an", "of", "by", "and", "in", "on", "at", "to", "for", "with", "de", "von"})
_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS_WORDS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORDINAL_WORDS = ["zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
                  "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
                  "eighteenth", "nineteenth"]
_TENS_ORDINALS = ["twentieth", "thirtieth", "fortieth", "fiftieth", "sixtieth", "seventieth", "eightieth", "ninetieth"]
#: Ordinals below this name a count too often by accident ("the first rider", "second place") to
#: count as a mention of a reference number; from it on (``third``, ``fifth``, ``11th``) they do.
ORDINAL_FROM = 3
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.,][0-9]+)*(?:[-'][A-Za-z0-9]+)*")


_ORDINALS: set[str] = set()


def _number_word(value: str) -> str | None:
    """``15`` -> ``fifteen`` (0-99), else None."""
    if not value.isdigit() or int(value) > 99:
        return None
    n = int(value)
    if n < 20:
        return _NUMBER_WORDS[n]
    tens, unit = divmod(n, 10)
    return _TENS_WORDS[tens - 2] + (f"-{_NUMBER_WORDS[unit]}" if unit else "")


def _int_of(word: str) -> int | None:
    """The whole number a digit string or number word writes (0-99), else None."""
    low = word.lower()
    if low.isdigit():
        return int(low)
    for n in range(100):
        if _number_word(str(n)) == low:
            return n
    return None


def _ordinals(n: int | None, low: int = ORDINAL_FROM) -> list[str]:
    """``5`` -> ``["fifth", "5th"]`` (from ``low`` to 99), else ``[]``."""
    if n is None or not max(low, 1) <= n <= 99:
        return []
    if n < 20:
        word = _ORDINAL_WORDS[n]
    else:
        tens, unit = divmod(n, 10)
        word = _TENS_ORDINALS[tens - 2] if not unit else f"{_TENS_WORDS[tens - 2]}-{_ORDINAL_WORDS[unit]}"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return [word, f"{n}{suffix}"]


def _ordinal_words() -> set[str]:
    return {o for n in range(ORDINAL_FROM, 100) for o in _ordinals(n)}


_ORDINALS.update(_ordinal_words())


def _words(text: str) -> list[str]:
    """The words of ``text`` (possessive ``'s`` dropped; hyphenated words and decimals kept whole)."""
    return [re.sub(r"'s$", "", w) for w in _WORD.findall(text or "")]


def _parts(word: str) -> list[str]:
    return [p for p in re.split(r"[-']", word) if p]


def _stems(text: str) -> set[str]:
    return {w.lower()[:5] for w in _words(text) for w in _parts(w)}


def _numeric(word: str) -> bool:
    """A number: digits (``17``, ``2.75``, ``61,482``) or a number word (``four``)."""
    return (bool(re.fullmatch(r"[0-9]+(?:[.,][0-9]+)*", word)) or word.lower() in _NUMBER_WORDS + _TENS_WORDS
            or word.lower() in _ORDINALS)


def reference_words(question: Question, value: str = "") -> list[str]:
    """The words that name ``question``'s reference answer, as an answer form writes them:

    * in a quantity (a form opening with a number: ``17 stations``, ``$2.75``, ``four times``)
      its numbers alone, in any case (``17``, ``four``), and a whole number's ordinals from
      :data:`ORDINAL_FROM` on (``fifth``, ``5th`` of ``5``: "his fifth win" names the count);
    * in a name (``Dana Okafor``, ``Pellanor Vista 9``, ``Lanner-2``) its capitalized words and a
      hyphenated word's parts (``Adeyemi-Hart``, ``Adeyemi``, ``Hart``; ``Lanner-2``, ``Lanner``),
      matched with their capital: ``mobile operators`` is no mention of ``Norvale Mobile``; a word
      the question uses for its own subject is none either (``Lanternfish`` of ``Lanternfish
      4.2``), unless the whole form is in the question (an option it offers: ``Caddisford``).

    Words the fabricated ``value`` shares are left out; none for a false premise, whose
    reference is a statement, not a name."""
    if question.false_premise:
        return []
    mine = {p.lower() for w in _words(value) for p in [w, *_parts(w)]}
    mine |= {o for w in list(mine) for o in _ordinals(_int_of(w))}
    asked = _stems(question.question)
    qtext = " ".join(_words(question.question)).lower()
    out: list[str] = []
    for form in question.answers:
        ws = _words(form)
        if not ws:
            continue
        quantity = _numeric(ws[0])
        offered = f" {' '.join(ws).lower()} " in f" {qtext} "
        for w in ws:
            for t in [w, *_parts(w)]:
                low = t.lower()
                if low in mine or t in out or low in _FUNCTION_WORDS:
                    continue
                if quantity:
                    if _numeric(t) and low not in out:
                        out.append(low)
                        out += [o for o in _ordinals(_int_of(t)) if o not in out and o not in mine]
                    continue
                if not t[:1].isupper() or (t.isdigit()) or (low[:5] in asked and not offered):
                    continue
                out.append(t)
    return out


def dependent_map(question: Question, value: str) -> list[tuple[str, str]]:
    """The dependent edits of a fabrication (D.2): ``(old, new)`` pairs, longest old first, that
    replace every mention of the reference answer by the fabricated ``value`` consistently: each
    answer form by the value, and each word of :func:`reference_words` by the value's word in the
    same place (first by first, last by last: ``Dana Okafor`` -> ``Kofi Brennan-Adu`` makes
    ``Dana`` ``Kofi`` and ``Okafor`` ``Brennan-Adu``); a number word by the value's number word
    (``seventeen`` -> ``fifteen``). Empty for a false premise."""
    names = set(reference_words(question, value))
    if not names:
        return []
    vws = _words(value) or [value]
    out: dict[str, str] = {}
    for form in sorted(question.answers, key=len, reverse=True):
        ws = _words(form)
        if not ws:
            continue
        if not _numeric(ws[0]):
            out.setdefault(form.strip(), value)  # a name, whole (a quantity keeps its unit: only its number changes)
        for i, w in enumerate(ws):
            j = 0 if len(ws) == 1 else round(i * (len(vws) - 1) / (len(ws) - 1))
            target = value if len(ws) == 1 else vws[min(j, len(vws) - 1)]
            if w.lower() in _NUMBER_WORDS + _TENS_WORDS:
                target = _number_word(_words(value)[0] if _words(value) else value) or target
            elif _numeric(w) and _numeric(ws[0]):
                target = next((v for v in vws if _numeric(v)), target)
            for t in [w, *_parts(w)]:
                if t in names or (t.lower() in names and _numeric(t)):
                    out.setdefault(t, target)
            if _numeric(ws[0]):  # a count's ordinals become the value's ("fifth" -> "fourth")
                vn = next((_int_of(v) for v in vws if _int_of(v) is not None), None)
                for old, new in zip(_ordinals(_int_of(w)), _ordinals(vn, low=1), strict=False):
                    if old in names:
                        out.setdefault(old, new)
    return sorted(out.items(), key=lambda kv: -len(kv[0]))


def _pattern(olds: Sequence[str]) -> re.Pattern[str]:
    """Whole-word matches of ``olds``: a capitalized one (a name) where the text writes it with a
    capital (``Ada``, ``ADA``; not ``ada``), any other (numbers, number words) in any case."""
    alts = "|".join((f"(?=[A-Z])(?i:{re.escape(o)})" if o[:1].isupper() else f"(?i:{re.escape(o)})") for o in olds)
    return re.compile(rf"(?<![A-Za-z0-9])(?:{alts})(?![A-Za-z0-9]|[.,][0-9])")


def _cased(new: str, old: str) -> str:
    return new[:1].upper() + new[1:] if old[:1].isupper() and new[:1].islower() else new


def map_text(text: str, mapping: Sequence[tuple[str, str]]) -> str:
    """``text`` with the :func:`dependent_map` applied (whole words, any case, a capital kept)."""
    if not mapping or not text:
        return text
    return _pattern([o for o, _ in mapping]).sub(lambda m: _cased(_lookup(mapping, m.group(0)), m.group(0)), text)


def _lookup(mapping: Sequence[tuple[str, str]], found: str) -> str:
    for o, n in mapping:
        if o == found:
            return n
    return next(n for o, n in mapping if o.lower() == found.lower())


def _dependent_edits(window: str, a: int, b: int, new: str, mapping: Sequence[tuple[str, str]]
                     ) -> tuple[list[dict[str, str]], int]:
    """The replacements that write ``new`` over ``window[a:b]`` and make the dependent edits
    elsewhere in the window, each ``find`` unique in it; and the offset of ``new`` in the result."""
    subs = [(a, b, new)]
    if mapping:
        for m in _pattern([o for o, _ in mapping]).finditer(window):
            if m.end() <= a or m.start() >= b:
                subs.append((m.start(), m.end(), _cased(_lookup(mapping, m.group(0)), m.group(0))))
    subs.sort()
    groups: list[list[Any]] = [[s, e, [(s, e, n)]] for s, e, n in subs]
    changed = True
    while changed:
        changed = False
        for g in groups:
            lo, hi = _unique_find(window, g[0], g[1])
            if (lo, hi) != (g[0], g[1]):
                g[0], g[1] = lo, hi
        groups.sort(key=lambda g: g[0])
        merged: list[list[Any]] = []
        for g in groups:
            if merged and g[0] < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], g[1])
                merged[-1][2] += g[2]
                changed = True
            else:
                merged.append(g)
        groups = merged
    reps = []
    for lo, hi, inner in groups:
        pos, parts = lo, []
        for s_, e_, n_ in sorted(inner):
            parts += [window[pos:s_], n_]
            pos = e_
        parts.append(window[pos:hi])
        reps.append({"find": window[lo:hi], "replace": "".join(parts)})
    offset = a + sum(len(n_) - (e_ - s_) for s_, e_, n_ in subs if e_ <= a)
    return reps, offset


def fabricated_slug(title: str, value: str) -> str:
    """A made-up URL slug for a fabrication: its (edited) title's words naming the fabricated
    ``value``, never the gold page's slug: the value first unless the title names it, and no number
    but the value's (``Reserve Bank trims main rate to 4.00%`` for the value 3 ->
    ``3-reserve-bank-trims-main-rate-to``)."""
    mine = {w.lower() for w in _words(value)}
    kept = [w for w in _words(title) if not re.search(r"[0-9]", w) or w.lower() in mine]
    named = bool(mine) and mine <= {w.lower() for w in kept}
    return slugify(" ".join(kept if named else [value, *kept]) or value)


def names_reference(question: Question, value: str, url: str, title: str, text: str) -> list[str]:
    """**The consistency check (D.3)**: where a fabrication still names the reference answer: the
    fields (``url`` path, ``title``, ``text``) holding a word of :func:`reference_words`, as
    ``field: word``; empty when none does."""
    names = set(reference_words(question, value))
    if not names:
        return []
    path = re.sub(r"^[a-z]+://[^/]+", "", url or "")
    slug_words = {p.lower() for w in _words(path.replace("/", " ").replace("-", " ")) for p in [w, *_parts(w)]}
    found = []
    for where, body in (("url", None), ("title", title), ("text", text)):
        if body is None:  # a slug is lower case: any word of the answer in it names it
            found += [f"url: {w}" for w in sorted(names) if all(p.lower() in slug_words for p in _parts(w) or [w])]
            continue
        said = {p for w in _words(body) for p in [w, *_parts(w)]}
        capital = {p.lower() for p in said if p[:1].isupper()}
        lower = {p.lower() for p in said}
        found += [f"{where}: {w}" for w in sorted(names) if w.lower() in (capital if w[:1].isupper() else lower)]
    return found


def check_no_reference(question: Question, doc: Document) -> None:
    """Raise :class:`Rejection` (``names_reference``) when the fabricated ``doc`` still names the
    reference answer in its URL, title or text (:func:`names_reference`)."""
    found = names_reference(question, doc.supports_answer or "", doc.url, doc.title, doc.text)
    if found:
        raise Rejection("names_reference", "the fabrication still names the reference answer ("
                        + ", ".join(found[:6]) + "); replace every mention of it")


# -- exact fabrication on annotated pools ---------------------------------------------------------------
def has_answer_span(pool: Pool) -> bool:
    """True when some gold document of ``pool`` has an annotated answer span."""
    from trek.datasets.mini import answer_span

    return any(answer_span(g) is not None for g in pool.gold)


def exact_values(pool: Pool) -> list[str]:
    """The answers exact fabrication tries, in order: those the outdated documents support (most
    recent first, undated last), then those of the relevance documents; each once, none equal to a
    reference answer."""
    def recent_first(docs: list[Document]) -> list[Document]:
        return sorted(docs, key=lambda d: (d.date is None, -(d.date.toordinal() if d.date else 0), d.id))

    out: list[str] = []
    for d in recent_first(pool.role("outdated")) + recent_first(pool.role("relevance")):
        a = (d.supports_answer or "").strip()
        if a and not same_answer(a, pool.question.answers) and not same_answer(a, out):
            out.append(a)
    return out


def _unique_find(window: str, a: int, b: int) -> tuple[int, int]:
    """``(lo, hi)`` around ``window[a:b]``, widened a word at a time on each side until the text
    occurs once in ``window`` (or the whole window is taken)."""
    lo, hi = a, b
    while window.count(window[lo:hi]) > 1 and (lo > 0 or hi < len(window)):
        if lo > 0:
            lo = window.rfind(" ", 0, max(lo - 1, 0)) + 1
        if hi < len(window):
            nxt = window.find(" ", hi + 1)
            hi = len(window) if nxt == -1 else nxt
    return lo, hi


def fabricate_exact(pool: Pool, embedder: Embedder, settings: FabricationSettings | None = None) -> Pool:
    """The pool with up to ``settings.target`` exact fabrications (existing ones replaced); no model.

    Uses the gold documents with an annotated answer span, in turn; a pool without any gets none,
    and its notes say so."""
    from trek.datasets.mini import answer_span
    from trek.datasets.mini_timeline import fill_value

    s = resolve_settings(settings or FabricationSettings(), embedder)
    if not pool.gold:
        raise CtrlError(f"question {pool.question.id!r}: no gold document to fabricate from")
    golds = [g for g in pool.gold if answer_span(g) is not None]
    values = exact_values(pool)
    refs = pool.question.answers
    used: list[str] = []
    log: list[dict[str, Any]] = []
    made: list[Document] = []
    nxt = 0
    length = window_length(pool, s)
    for slot in range(1, s.target + 1 if golds else 1):
        gold = golds[(slot - 1) % len(golds)]
        span = answer_span(gold)
        assert span is not None
        if len(gold.text) <= length:
            lo, hi = 0, len(gold.text)
        else:
            lo, hi = cut_window(gold.text, span.start, span.end, length)
        window = gold.text[lo:hi]
        a, b = span.start - lo, span.end - lo
        for attempt in range(1, s.max_attempts + 1):
            if nxt >= len(values):
                break
            value = values[nxt]
            nxt += 1
            entry: dict[str, Any] = {"slot": slot, "attempt": attempt, "source_doc": gold.id, "value": value}
            try:
                try:
                    new, (vs, ve) = fill_value(span.template, value)
                except ValueError as e:
                    raise Rejection("unfit_value", str(e)) from None
                reps, at = _dependent_edits(window, a, b, new, dependent_map(pool.question, value))
                cand = {"wrong_answer": value, "replacements": reps}
                entry["candidate"] = cand
                edited, sim = check_candidate(window, cand, refs, embedder, s.min_similarity, used)
                entry["similarity"] = round(sim, 4)
                doc = _document(pool, slot, gold, lo, hi, edited, cand, sim, None, attempt, model=None,
                                embedder=embedder.name, fabricator="exact")
                check_no_reference(pool.question, doc)
            except Rejection as r:
                entry.update(outcome="rejected", kind=r.kind, reason=r.message)
                log.append(entry)
                continue
            entry["outcome"] = "accepted"
            log.append(entry)
            used.append(value)
            doc.metadata["answer_span"] = {"start": at + vs, "end": at + ve}  # where the new value stands
            made.append(doc)
            break
    notes = _notes("exact", made, s, settings, None, embedder, {"values": values}, None, log)
    if not golds:
        notes["reason"] = "no gold document has an annotated answer span"
    elif len(made) < s.target and nxt >= len(values):
        notes["reason"] = f"the timeline offers {len(values)} other answers"
    return _with(pool, made, notes)
