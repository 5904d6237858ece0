"""The reading rules of the exact grader: what a response commits to, as a careful grader reads it.

:mod:`trek.graders.exact` finds which annotated answers a response names; these rules decide
what the response *says* about them. Each is one named function with its own tests
(``tests/test_exact_rules.py``):

* :func:`words` — the response's words, split where prose breaks. **Answers never match inside
  a URL or a slug**: a token that is a web address (``https://…``, ``www.…``, ``host.tld/…``) or
  a slug (an identifier of three or more lowercase parts joined by hyphens, or any parts joined by
  underscores, as in a page path: ``salt-lanterns-breaks-the``) is an identifier, not prose, and
  stands as a break no answer is found in or across. Two-part hyphenated words (``Adeyemi-Hart``,
  ``Lanner-2``, ``17-station``) stay prose.
* :func:`abstains` — **declining to answer**: a clause that says it cannot answer (``I don't
  know``, ``not sure``) or that the information is missing: a negation followed closely by a
  word of knowing or saying (``does not contain any information``, ``the pages don't say``,
  ``couldn't find``, ``there is no record``).
* :func:`commitment` — **hedges and lists**: the answer a response commits to is its first
  annotated answer that is not negated (``not X``, ``rather than X``, ``neither X nor Y``), together
  with every answer offered beside it as an alternative: listed with it (only commas, ``and``,
  ``or``, slashes or hedging words between: ``A, B, C``; ``A or maybe B``), or offered in a next
  sentence that opens with a hedge (``A. Or perhaps B.``), or offered anywhere after it as a
  possibility (``17, though it may have 15``; ``A; it could also be B``). A disjunction with an unannotated
  alternative (``A or somebody else``) is a hedge too. The response is correct only when every
  answer it commits to is acceptable and it does not hedge: a right answer among wrong guesses is
  not enough. Answers mentioned in other roles (``A, who replaced B``; ``17, up from 15``) are
  context, not candidates.
* :func:`rejects_premise` — **false premises**: a response rejects the premise only with a
  statement that denies it: a clause with a negation or a word of denial (``no``, ``never``,
  ``wasn't``, ``blocked``, ``cancelled``, ``false``…) that bears on the question (it shares a
  content word with it, speaks of the event happening, of the premise, states that something was
  blocked, cancelled or false, that there is none (``there isn't one``), or is a bare ``None`` /
  ``Nobody``), and that is not aimed at one
  candidate (``not Tessaly Holdings``, ``Tessaly Holdings did not``). The
  response's first clause that either denies or asserts an annotated answer as the answer (names
  one with no negation bearing on it) decides: ``Calloway Marine Group acquired it, not Tessaly
  Holdings.`` accepts the premise, ``No election was held in 2024; the party kept its 9 seats``
  rejects it, an opening ``No,`` before an assertion denies nothing, and clauses that decline
  (``does not contain any information about …``) deny nothing.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from trek.graders.freshqa import normalize_answer

__all__ = [
    "Word",
    "NEGATIONS",
    "DENIALS",
    "words",
    "is_url",
    "is_slug",
    "abstains",
    "commitment",
    "rejects_premise",
]

#: Negation words (normalized: apostrophes dropped, ``didn't`` -> ``didnt``).
NEGATIONS = frozenset({
    "no", "not", "never", "none", "neither", "nor", "nobody", "noone", "nothing", "nowhere", "cannot", "cant",
    "dont", "doesnt", "didnt", "isnt", "wasnt", "werent", "arent", "hasnt", "hadnt", "havent", "wont", "wouldnt",
    "couldnt", "shouldnt", "aint", "without",
})
#: Words that deny an event or a claim without a negation word.
DENIALS = frozenset({
    "false", "incorrect", "untrue", "wrong", "mistaken", "inaccurate", "blocked", "cancelled", "canceled",
    "abandoned", "collapsed", "withdrawn", "scrapped", "postponed", "failed", "rejected", "vetoed", "halted",
    "nonexistent", "misconception",
})
#: Denial words that say the event itself failed ("the Calloway takeover was blocked").
_EVENT_FAILS = frozenset({
    "blocked", "cancelled", "canceled", "abandoned", "collapsed", "withdrawn", "scrapped", "postponed", "failed",
    "rejected", "vetoed", "halted",
})
#: Words of knowing, finding and saying: a negation close before one declines to answer.
_KNOWING = frozenset({
    "know", "known", "knowledge", "sure", "certain", "determine", "determined", "find", "found", "say", "says",
    "said", "mention", "mentions", "mentioned", "state", "states", "stated", "specify", "specifies", "specified",
    "provide", "provides", "provided", "contain", "contains", "contained", "include", "includes", "included",
    "tell", "tells", "confirm", "confirmed", "verify", "verified", "identify", "answer", "answered", "access",
    "information", "info", "details", "detail", "data", "record", "records", "evidence", "idea", "clue",
    "indication", "reference", "mentioning", "able", "possible", "available", "given", "enough", "sufficient",
    "clear", "recall", "remember", "aware", "report", "reports", "reported", "disclose", "disclosed", "list",
    "lists", "listed", "show", "shows", "shown", "give", "gives", "have", "has", "had",
})
#: How many words after a negation a word of knowing may stand and still be about knowing.
_KNOWING_WINDOW = 4
#: Phrases (normalized) that decline to answer without a negation word.
_DECLINES = ("unsure", "unknown", "unclear", "unable to", "insufficient information", "impossible to determine",
             "impossible to say", "lack of information", "lacks information", "no answer")
#: Words allowed between two answers offered as alternatives (besides nothing at all).
_LIST_WORDS = frozenset({
    "or", "and", "either", "/", "&", "maybe", "perhaps", "possibly", "probably", "alternatively", "also",
    "otherwise", "it", "its", "could", "might", "may", "be", "is", "was", "would", "possible", "likely",
    "plausibly", "possibility", "another", "candidate", "else", "i", "think", "guess", "too", "as", "well",
})
#: Words that may follow the last item of a list of answers.
_ITEM_FOLLOWERS = frozenset({"or", "and", "/", "&", "are", "were", "both", "all", "either", "each"})
#: Words that open a hedge (needed for an alternative offered in a later sentence).
_HEDGES = frozenset({"or", "maybe", "perhaps", "possibly", "alternatively", "might", "could", "otherwise", "else"})
#: Words after ``or`` that approximate rather than offer an alternative (``17 or so``).
_APPROXIMATE = frozenset({"so", "thereabouts", "not"})
#: Words that negate the answer right after them (``not X``, ``rather than X``, ``instead of X``).
_NEGATES_NEXT = frozenset({"not", "never", "neither", "nor", "except", "unlike", "excluding", "isnt", "wasnt"})
_NEGATES_NEXT2 = (("rather", "than"), ("instead", "of"), ("other", "than"), ("as", "opposed", "to"))
#: Words allowed between such a negation and the answer it negates (``not by X``, ``not the X``).
_LIGHT = frozenset({"by", "from", "to", "of", "it", "is", "was", "be", "been", "that", "this", "one", "even"})
#: Words that never make a clause bear on the question (question words, auxiliaries, pronouns).
_STOPWORDS = frozenset({
    "which", "what", "who", "whom", "whose", "when", "where", "why", "how", "many", "much", "does", "did", "do",
    "has", "have", "had", "was", "were", "is", "are", "been", "being", "will", "would", "shall", "should", "can",
    "could", "may", "might", "must", "this", "that", "these", "those", "there", "their", "they", "them", "then",
    "than", "with", "from", "into", "onto", "over", "under", "about", "after", "before", "since", "until",
    "during", "for", "and", "or", "but", "of", "in", "on", "at", "to", "by", "as", "its", "it", "any", "some",
    "current", "currently", "most", "more", "also", "other", "such", "very", "just", "only", "each", "every",
})
#: Words by which a denial bears on the event or on the premise itself.
_PREMISE_WORDS = frozenset({
    "happen", "happened", "happens", "occur", "occurred", "exist", "exists", "existed", "place", "premise",
    "question", "assumption", "ever", "such",
})
#: Negative pronouns that, opening a clause, deny the existence the question presumes (``None.``).
_NEGATIVE_ANSWERS = frozenset({"none", "nobody", "noone", "nothing", "neither", "never", "nowhere"})
#: Negations that negate a noun, not a predicate (``no more``, ``nobody else``).
_DETERMINERS = frozenset({"no", "none", "nothing", "nobody", "noone", "without", "neither", "nor"})
#: Words allowed between a hedge and the alternative it offers (``it may have 15``, ``could also be B``).
_HEDGE_GAP = frozenset({"be", "have", "been", "also", "it", "is", "was", "instead", "rather", "even", "actually",
                        "just", "well", "really", "in", "fact"})
#: Words that open a new clause for the premise rule.
_CLAUSE_OPENERS = r"but|however|although|though|whereas|yet|instead|because|while"

_URL = re.compile(r"(?:[a-z][a-z0-9+.-]*://|www\.)\S+|\b[\w-]+(?:\.[\w-]+)+/\S*", re.IGNORECASE)
_BARE_HOST = re.compile(r"^[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|edu|gov|io|info|co|uk|de|fr|example|html?|php)$",
                        re.IGNORECASE)
_SLUG = re.compile(r"^(?:[a-z0-9]+(?:-[a-z0-9]+){2,}|\w*[a-z0-9]_[a-z0-9]\w*)$")
_EDGE = "\"'`“”‘’«»()[]{}<>*,.;:!?"
_SENTENCE_END = re.compile(r"[.!?;]+[\"'”’)\]]*$")


@dataclass(frozen=True)
class Word:
    """One normalized word of a response: ``sentence`` counts breaks (a sentence end, an opening
    bracket, a URL or slug), ``phrase`` counts those and commas too."""

    text: str
    sentence: int
    phrase: int


def is_url(token: str) -> bool:
    """True for a whitespace token that is (or holds) a web address."""
    core = token.strip(_EDGE)
    return bool(_URL.search(token)) or bool(_BARE_HOST.match(core))


def is_slug(token: str) -> bool:
    """True for an identifier token: three or more lowercase parts joined by hyphens, or parts
    joined by underscores (``salt-lanterns-breaks-the``, ``salt_lanterns``)."""
    core = token.strip(_EDGE)
    return bool(_SLUG.match(core)) and not core.replace("-", "").isdigit()


def words(text: str | None, numbers=None) -> list[Word]:
    """The response's words as the grader compares them, with where sentences and phrases break
    (URLs and slugs are breaks and leave no words). ``numbers``: the grader's number-word reader
    (a function over a list of words; default none)."""
    raw = html.unescape(text or "")
    out: list[Word] = []
    sentence = phrase = 0
    buf: list[str] = []

    def flush(new_sentence: bool) -> None:
        nonlocal sentence, phrase, buf
        if buf:
            ws = normalize_answer(" ".join(buf)).split()
            for w in (numbers(ws) if numbers else ws):
                out.append(Word(w, sentence, phrase))
        buf = []
        phrase += 1
        if new_sentence:
            sentence += 1

    for line in raw.splitlines():
        for token in line.split():
            if is_url(token) or is_slug(token):
                flush(True)
                continue
            if token[:1] in "([{":
                flush(True)
            buf.append(token)
            if _SENTENCE_END.search(token) and not re.search(r"\d[.]\d", token[-4:]):
                flush(True)
            elif token.rstrip("\"'”’)]").endswith(","):
                flush(False)
        flush(True)
    return out


# -- declining ------------------------------------------------------------------------------------
def _declines(ws: Sequence[str]) -> bool:
    """True for a clause (normalized words) that declines to answer."""
    text = f" {' '.join(ws)} "
    if any(f" {p} " in text for p in _DECLINES):
        return True
    for i, w in enumerate(ws):
        if w in NEGATIONS and any(v in _KNOWING for v in ws[i + 1:i + 1 + _KNOWING_WINDOW]):
            return True
    return False


def abstains(text: str | None) -> bool:
    """True when the response declines to answer in some clause (an empty response too)."""
    if not (text or "").strip():
        return True
    ws = words(text)
    clauses: dict[int, list[str]] = {}
    for w in ws:
        clauses.setdefault(w.sentence, []).append(w.text)
    return any(_declines(c) for c in clauses.values())


# -- hedges and lists -----------------------------------------------------------------------------
def _negator(ws: Sequence[Word], start: int) -> int | None:
    """The position of the word that negates the answer starting at ``start`` (``not X``,
    ``rather than X``, ``neither X nor Y``), or None when nothing just before it negates it."""
    j = start - 1
    while j >= 0 and ws[j].text in _LIGHT and ws[j].phrase == ws[start].phrase:
        j -= 1
    if j < 0 or ws[j].phrase != ws[start].phrase:
        return None
    if ws[j].text in _NEGATES_NEXT:
        return j
    for p in _NEGATES_NEXT2:
        if j + 1 >= len(p) and tuple(w.text for w in ws[j + 1 - len(p):j + 1]) == p:
            return j + 1 - len(p)
    return None


def _negated(ws: Sequence[Word], start: int) -> bool:
    """True when the answer starting at ``start`` is negated by the words just before it."""
    return _negator(ws, start) is not None


def _alternatives(ws: Sequence[Word], end: int, start: int) -> bool:
    """True when the answer at ``start`` is offered as an alternative to the one ending at ``end``."""
    gap = ws[end:start]
    if any(w.text not in _LIST_WORDS for w in gap):
        return False
    crosses = ws[end - 1].sentence != ws[start].sentence
    return not crosses or any(w.text in _HEDGES for w in gap)


def _open_disjunction(ws: Sequence[Word], i: int, step: int, taken: set[int]) -> bool:
    """True when, going from word ``i`` by ``step``, an ``or`` joins the answer to an unannotated
    alternative in the same sentence (``A or somebody else``, ``B or A``)."""
    sentence = ws[i].sentence
    j = i + step
    while 0 <= j < len(ws) and ws[j].sentence == sentence and ws[j].text in _LIST_WORDS - {"or", "/"}:
        j += step
    if not (0 <= j < len(ws)) or ws[j].sentence != sentence or ws[j].text not in ("or", "/"):
        return False
    k = j + step
    while 0 <= k < len(ws) and ws[k].sentence == sentence and ws[k].text in _LIST_WORDS and ws[k].text != "else":
        k += step
    if not (0 <= k < len(ws)) or ws[k].sentence != sentence or k in taken:
        return step > 0 and 0 <= k < len(ws) and ws[k].text == "else"
    return ws[k].text not in _APPROXIMATE and ws[k].text not in _STOPWORDS


def _hedged_before(ws: Sequence[Word], start: int) -> bool:
    """True when a hedge just before the answer at ``start`` offers it as a possibility (``it may
    have 15``, ``it could also be B``, ``or perhaps B``)."""
    j = start - 1
    while j >= 0 and ws[j].text in _HEDGE_GAP and ws[j].phrase == ws[start].phrase:
        j -= 1
    return j >= 0 and ws[j].phrase == ws[start].phrase and ws[j].text in _HEDGES | {"may", "maybe", "perhaps"}


def _ends_item(ws: Sequence[Word], spans: Sequence[tuple[int, int, bool]], k: int) -> bool:
    """True when the answer ``spans[k]`` ends a list item: nothing follows it in its phrase but a
    list word, a plural verb or another answer ("A, B and C are ..."; not "A, and B is the assistant")."""
    end = spans[k][1]
    if end >= len(ws) or ws[end].phrase != ws[end - 1].phrase:
        return True
    return ws[end].text in _ITEM_FOLLOWERS or any(s == end for s, _, _ in spans)


def commitment(ws: Sequence[Word], spans: Sequence[tuple[int, int, bool]]) -> tuple[list[int], bool]:
    """What a response commits to (see the module docstring). ``ws``: its words; ``spans``: the
    annotated answers it names as ``(start, end, acceptable)`` word positions, in order. Returns
    the indices into ``spans`` of the committed answers (first one first) and whether the response
    also hedges with an unannotated alternative."""
    live = [k for k, (s, _, _) in enumerate(spans) if not _negated(ws, s)]
    if not live:
        return [], False
    chosen = [live[0]]
    for k in live[1:]:
        prev_end = spans[chosen[-1]][1]
        start = spans[k][0]
        if start < prev_end:
            continue
        if _hedged_before(ws, start) or (_alternatives(ws, prev_end, start) and (
                any(w.text in _HEDGES for w in ws[prev_end:start]) or _ends_item(ws, spans, k))):
            chosen.append(k)
    taken = {i for k in spans for i in range(k[0], k[1])}
    first, last = spans[chosen[0]], spans[chosen[-1]]
    hedge = _open_disjunction(ws, first[0], -1, taken) or _open_disjunction(ws, last[1] - 1, 1, taken)
    return chosen, hedge


# -- false premises -------------------------------------------------------------------------------
def _clauses(text: str) -> list[str]:
    """The clauses of a response for the premise rule: sentences, parts after a contrastive
    conjunction, a tail of ``, not …`` and an opening ``No,`` / ``Yes,`` split off."""
    raw = html.unescape(text or "")
    parts = re.split(rf"[.!?;:\n]+(?:\s+|$)|\s*,\s*(?=(?:not|never|rather)\b)|\b(?:{_CLAUSE_OPENERS})\b", raw,
                     flags=re.IGNORECASE)
    out: list[str] = []
    for p in parts:
        m = re.match(r"\s*(no|nope|yes|yeah|correct)\s*[,!]\s*(.+)$", p or "", re.IGNORECASE | re.DOTALL)
        out.extend([m.group(1), m.group(2)] if m else [p or ""])
    return [c for c in out if c.strip()]


def _stem(w: str) -> str:
    """A crude stem for topic overlap (``opened`` ~ ``open``, ``acquisition`` ~ ``acquired``)."""
    for suffix in ("ations", "ation", "ings", "ing", "ions", "ion", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[:-len(suffix)]
            break
    return w[:5]


def _clause_kind(ws: list[str], topic: set[str], answers: Sequence[Sequence[str]], alone: bool) -> str | None:
    """``"denies"``, ``"asserts"`` (names an annotated answer as the answer) or None (neither:
    declines, contrasts a candidate away, or does not bear on the question)."""
    if not ws or _declines(ws):
        return None
    seq = [_w(x) for x in ws]
    named = [i for a in answers if a for i in range(len(ws) - len(a) + 1) if ws[i:i + len(a)] == list(a)]
    contrast = {_negator(seq, i) for i in named} - {None}
    free = [i for i in named if _negator(seq, i) is None]
    cues = [i for i, w in enumerate(ws) if (w in NEGATIONS or w in DENIALS) and i not in contrast]
    if not cues:
        return "asserts" if free else None
    if free and min(free) < min(cues):
        if all(ws[c] in _DETERMINERS for c in cues):
            return "asserts"  # "9 seats, no more": a determiner after the answer negates no predicate of it
        if not any(ws[c] in _EVENT_FAILS for c in cues):
            return None  # "Tessaly Holdings did not", "Tessaly is wrong": one candidate denied, not the premise
    bare = ws in (["no"], ["nope"])
    if bare:
        return "denies" if alone else None
    bears = (ws[0] in _NEGATIVE_ANSWERS or _existential(ws) or bool(named) or any(w in _PREMISE_WORDS or w in DENIALS for w in ws)
             or any(_stem(w) in topic for w in ws if w not in _STOPWORDS and len(w) >= 3))
    return "denies" if bears else None


def _existential(ws: Sequence[str]) -> bool:
    """True for a clause that denies that something exists ("there isn't one", "there was no …")."""
    for i, w in enumerate(ws[:-1]):
        if w != "there":
            continue
        if ws[i + 1] in ("isnt", "wasnt", "arent", "werent", "hasnt", "havent", "hadnt"):
            return True
        if ws[i + 1] in ("is", "was", "are", "were", "has", "have", "had", "been") and i + 2 < len(ws) and (
                ws[i + 2] in ("no", "not", "never", "none")):
            return True
    return False


def rejects_premise(question: str, response: str | None, answers: Sequence[Sequence[str]]) -> bool:
    """True when ``response`` rejects the false premise of ``question`` (module docstring): its
    first clause that denies or asserts denies. ``answers``: the annotated answers (normalized
    words) a response could assert instead."""
    topic = {_stem(w) for w in normalize_answer(question).split() if w not in _STOPWORDS and len(w) >= 3}
    clauses = _clauses(response or "")
    for clause in clauses:
        kind = _clause_kind([w.text for w in words(clause)], topic, answers, alone=len(clauses) == 1)
        if kind is not None:
            return kind == "denies"
    return False


def _w(text: str) -> Word:
    return Word(text, 0, 0)
