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

Round 2 (grader version ``exact-4``), one function each:

* :func:`negated_after` (``X is not the CEO; Y is``), :func:`narrated_change` (the last
  assertion of a narrated change wins) and :func:`self_corrected` (``Y? No - X``) take answers
  out of what a response commits to;
* :func:`unlisted_extra` — lists are "all and only"; :func:`list_count` — a count must agree
  with the list it introduces; :func:`list_markers` — ``2.`` / ``Step 2`` / ``[3]`` are no words;
* :func:`other_time`, :func:`restates_correction` and :func:`premise_answers` — a denial about
  another year is a different premise, restating the reference's true state rejects the premise,
  and InfoDeepSeek's third rule (a rejection gives the answer the reference still gives);
* :func:`prepare` and :func:`formats` — possessives, scale words, money and dates in one form;
  :func:`reordered` — a multi-entity answer named in another order.
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
    "premise_clauses",
    "prepare",
    "formats",
    "list_markers",
    "negated_after",
    "narrated_change",
    "self_corrected",
    "reordered",
    "proper_words",
    "unlisted_extra",
    "list_count",
    "premise_answers",
    "restates_correction",
    "other_time",
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
    "lists", "listed", "show", "shows", "shown", "give", "gives", "have", "has", "had", "knows", "knew",
})
#: How many words after a negation a word of knowing may stand and still be about knowing.
_KNOWING_WINDOW = 4
#: Phrases (normalized) that decline to answer without a negation word.
_DECLINES = ("unsure", "unknown", "unclear", "unable to", "insufficient information", "impossible to determine",
             "impossible to say", "lack of information", "lacks information", "no answer", "who knows",
             "need more context", "more context", "need more information", "need more details", "need clarification",
             "please clarify", "could you clarify", "can you clarify", "please specify", "could you specify")
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
_NEGATES_NEXT2 = (("rather", "than"), ("instead", "of"), ("other", "than"), ("as", "opposed", "to"), ("no", "longer"))
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


# -- formats: numbers, money, dates, possessives -------------------------------------------------
#: Scale words after a number (``1.24 million`` -> ``1240000``).
_SCALE_WORDS = {"thousand": 3, "million": 6, "mn": 6, "billion": 9, "bn": 9, "trillion": 12}
#: Currency symbols and words, each read as one canonical word written after the amount.
_CURRENCIES = {"$": "dollar", "dollar": "dollar", "dollars": "dollar", "usd": "dollar", "€": "euro", "euro": "euro",
               "euros": "euro", "eur": "euro", "£": "pound", "pound": "pound", "pounds": "pound", "gbp": "pound",
               "¥": "yen", "yen": "yen", "jpy": "yen"}
#: Currency marks written before an amount (``$2.75``, ``EUR 4.27``).
_CURRENCY_BEFORE = frozenset({"$", "€", "£", "¥", "usd", "eur", "gbp", "jpy"})
_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"), start=1)}
_MONTH_ABBR = {**{m[:3]: m for m in _MONTHS}, "sept": "september"}
_MONTH_NAME = {i: m for m, i in _MONTHS.items()}
_ISO_DATE = re.compile(r"^(\d{4})-(\d{1,2})(?:-(\d{1,2}))?$")
_ORDINAL = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)$")
_DECIMAL = re.compile(r"^\d+(?:\.\d+)?$")
#: Capitalized words whose ``'s`` is a contraction, not a possessive (``It's``, ``That's``).
_CONTRACTED = frozenset({"it", "that", "what", "there", "here", "he", "she", "who", "where", "let", "how", "when",
                         "why", "this"})
_POSSESSIVE = re.compile(r"\b([A-Z][\w-]*)['\u2019]s\b")


_ABBR_DOT = re.compile(r"\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.(?=\s+\d)", re.IGNORECASE)
_DATE_COMMA = re.compile(r"\b([A-Za-z]{3,9}\s+\d{1,2}(?:st|nd|rd|th)?),(?=\s+\d{4}\b)")


def prepare(text: str) -> str:
    """The raw text with possessives of names dropped (``Okafor's`` -> ``Okafor``), so a name in
    the possessive names the answer (contractions, ``It's``, are kept), and a date's own
    punctuation dropped (``Mar. 5, 2024`` -> ``Mar 5 2024``), so it reads as one phrase. Dates,
    grouped numbers, money and durations are first put in one form by their parsers
    (:func:`trek.graders.exact_values.canonical`), and letters of other cased scripts are
    transliterated (:func:`trek.graders.exact_values.transliterate`)."""
    from trek.graders.exact_values import canonical, transliterate

    text = canonical(transliterate(text))
    text = _POSSESSIVE.sub(lambda m: m.group(0) if m.group(1).lower() in _CONTRACTED else m.group(1), text)
    text = _ABBR_DOT.sub(r"\1", text)
    return _DATE_COMMA.sub(lambda m: m.group(1) if m.group(1).split()[0].lower().rstrip(".")[:3] in _MONTH_ABBR
                           else m.group(0), text)


def _scaled(number: str, exponent: int) -> str:
    from decimal import Decimal

    value = Decimal(number).scaleb(exponent)
    return format(value.normalize(), "f") if value == value.to_integral_value() else format(value, "f")


def _day(w: str) -> int | None:
    m = _ORDINAL.match(w)
    d = int(m.group(1)) if m else (int(w) if w.isdigit() and len(w) <= 2 else None)
    return d if d is not None and 1 <= d <= 31 else None


def formats(ws: list[str]) -> list[str]:
    """Normalized words with numbers, money and dates in one form, so the forms of one value
    agree (:func:`trek.graders.exact.normalize` applies it to references and responses alike):

    * a scale word after a number multiplies it: ``1.24 million`` -> ``1240000``, ``4.27 bn`` ->
      ``4270000000`` (separators are already gone: ``1,240,000`` -> ``1240000``);
    * a currency symbol, code or word is one word after the amount: ``€4.27 billion``,
      ``EUR 4.27 billion`` and ``4.27 billion euros`` all read ``4270000000 euro``;
    * a date reads day, month name, year: ``2024-03-05``, ``5 March 2024``, ``March 5, 2024``,
      ``Mar. 5th 2024`` and ``the 5th of March 2024`` all read ``5 march 2024`` (``2024-03`` and
      ``Mar 2024`` read ``march 2024``), so a year is still a word of its own.
    """
    out: list[str] = []
    i, n = 0, len(ws)

    def month_at(k: int) -> str | None:
        return _MONTH_ABBR.get(ws[k], ws[k] if ws[k] in _MONTHS else None) if 0 <= k < n else None

    while i < n:
        w = ws[i]
        m = _ISO_DATE.match(w)
        if m and 1 <= int(m.group(2)) <= 12 and (m.group(3) is None or 1 <= int(m.group(3)) <= 31):
            out.extend(([str(int(m.group(3)))] if m.group(3) else []) + [_MONTH_NAME[int(m.group(2))], m.group(1)])
            i += 1
            continue
        month = month_at(i)
        if month is not None:
            if i + 2 < n and _day(ws[i + 1]) and re.fullmatch(r"\d{4}", ws[i + 2]):
                out.extend([str(_day(ws[i + 1])), month, ws[i + 2]])  # "march 5 2024" -> "5 march 2024"
                i += 3
                continue
            near = (i + 1 < n and (_day(ws[i + 1]) or re.fullmatch(r"\d{4}", ws[i + 1]))) or (out and _day(out[-1]))
            out.append(month if (month == w or near) else w)  # an abbreviation only beside a day or year
            i += 1
            continue
        d = _day(w)
        if d is not None and (month_at(i + 1) or (i + 1 < n and ws[i + 1] == "of" and month_at(i + 2))):
            out.append(str(d))  # "5th of march" -> "5 march"
            i += 2 if ws[i + 1] == "of" else 1
            continue
        if w in _CURRENCY_BEFORE and i + 1 < n and _DECIMAL.match(ws[i + 1]):
            j = i + 1
            amount = ws[j]
            if j + 1 < n and ws[j + 1] in _SCALE_WORDS:
                amount = _scaled(amount, _SCALE_WORDS[ws[j + 1]])
                j += 1
            out.extend([amount, _CURRENCIES[w]])
            if j + 1 < n and _CURRENCIES.get(ws[j + 1]) == _CURRENCIES[w]:
                j += 1  # "$4 dollars": one currency word
            i = j + 1
            continue
        if _DECIMAL.match(w) and i + 1 < n and ws[i + 1] in _SCALE_WORDS:
            out.append(_scaled(w, _SCALE_WORDS[ws[i + 1]]))
            i += 2
            continue
        if w in _CURRENCIES and out and _DECIMAL.match(out[-1]):
            out.append(_CURRENCIES[w])
            i += 1
            continue
        out.append(w)
        i += 1
    return out


def words(text: str | None, numbers=None) -> list[Word]:
    """The response's words as the grader compares them, with where sentences and phrases break
    (URLs and slugs are breaks and leave no words; so are list markers, :func:`list_markers`).
    ``numbers``: the grader's number-word reader (a function over a list of words; default none)."""
    raw = prepare(html.unescape(text or ""))
    markers = list_markers(raw)
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

    for ln, line in enumerate(raw.splitlines()):
        for ti, token in enumerate(line.split()):
            if is_url(token) or is_slug(token):
                flush(True)
                continue
            if (ln, ti) in markers:
                flush(False)
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


#: Words after which a number labels a step or a source, not an answer (``Step 2``, ``Document 3``).
_MARKER_WORDS = frozenset({"step", "steps", "option", "item", "point", "document", "doc", "source", "result",
                           "passage", "snippet", "citation", "reference", "ref", "context", "no"})
_MARKER = re.compile(r"^\(?(\d{1,2})[.)]$")


def list_markers(text: str) -> set[tuple[int, int]]:
    """The ``(line, token)`` positions of the list markers in ``text``: a number that numbers an
    item (``1.`` / ``2)`` / ``(3)`` opening a line or following a sentence end, when a neighbouring
    number of the same form marks another item, or ``2)`` / ``(2)`` opening a line), a bracketed
    citation (``[2]``), and a number after a word that labels it (``Step 2``, ``Document 3``).
    They are not words of the response, so a marker never names an answer."""
    lines = [line.split() for line in text.splitlines()]
    found: dict[tuple[int, int], tuple[str, int]] = {}
    out: set[tuple[int, int]] = set()
    for ln, toks in enumerate(lines):
        for ti, tok in enumerate(toks):
            if re.fullmatch(r"\[\d{1,3}\][.,;:]?", tok):
                out.add((ln, ti))
                continue
            core = tok.rstrip(":.,;")
            if ti and core.isdigit() and len(core) <= 2 and toks[ti - 1].lower().strip("*_") in _MARKER_WORDS:
                out.add((ln, ti))
                continue
            m = _MARKER.match(tok)
            if not m or ti + 1 >= len(toks):
                continue
            starts = ti == 0 or bool(re.search(r"[.;:!?]$", toks[ti - 1]))
            if starts:
                form = "paren" if tok.endswith(")") else "dot"
                found[(ln, ti)] = (form, int(m.group(1)))
                if ti == 0 and form == "paren":
                    out.add((ln, ti))
    numbers = {(form, n) for form, n in found.values()}
    for pos, (form, n) in found.items():
        if (form, n - 1) in numbers or (form, n + 1) in numbers:
            out.add(pos)
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
    return ws[end].text in _ITEM_FOLLOWERS | _JOINT or any(s == end for s, _, _ in spans)


#: Auxiliaries allowed between an answer and the negation after it (``X is not``, ``X did not``).
_AUX = frozenset({"is", "was", "are", "were", "has", "have", "had", "does", "did", "do", "will", "would", "could",
                  "can", "still"})
#: Contracted negations that negate the answer before them (``X isn't``).
_NEG_AUX = frozenset({"isnt", "wasnt", "arent", "werent", "hasnt", "havent", "hadnt", "doesnt", "didnt", "dont",
                      "wont", "wouldnt", "cant", "cannot", "couldnt"})


def negated_after(ws: Sequence[Word], start: int, end: int) -> bool:
    """**Negation after a name**: True when the words right after the answer at ``start:end``
    negate it in its phrase (``X is not the CEO``, ``X isn't``, ``X is no longer the coach``,
    ``X did not win``); ``X is not only …`` negates nothing."""
    j = end
    if j < len(ws) and ws[j].text in _AUX and ws[j].phrase == ws[end - 1].phrase:
        j += 1
    if j >= len(ws) or ws[j].phrase != ws[end - 1].phrase:
        return False
    w = ws[j].text
    nxt = ws[j + 1].text if j + 1 < len(ws) and ws[j + 1].phrase == ws[j].phrase else ""
    if w == "no":
        return nxt == "longer"
    if w == "not" and j == end:
        return False  # "X not Y" is a contrast, read by the list rules
    return (w == "not" or w in _NEG_AUX) and nxt != "only"


#: Words that mark a value as a past one when they follow it closely (``X was coach until 2024``).
_PAST_AFTER = frozenset({"was", "were", "until", "till", "used", "previously", "formerly", "had"})
#: Words that mark a value as a past one just before it (``previously X``, ``from X to Y``).
_PAST_BEFORE = frozenset({"previously", "formerly", "originally", "initially", "former", "once", "earlier", "from"})
#: Words that mark a value as the current one just before it (``now Y``, ``since then Y``).
_NOW_BEFORE = frozenset({"now", "currently", "today", "presently", "since", "latest"})
#: Words that end a narrated change: the value after them replaced the one before (``X to Y``).
_CHANGE_GAP = (("to",), ("replaced", "by"), ("succeeded", "by"), ("handed", "over", "to"), ("gave", "way", "to"))
#: Words by which a response corrects itself before its final answer (``Y? No - X``).
_CORRECTIONS = frozenset({"no", "actually", "correction", "sorry", "wait", "rather"})
_CORRECTION_GAP = frozenset({"its", "it", "is", "was", "answer", "i", "mean", "that", "make", "scratch", "wait",
                             "sorry", "correct", "one", "right", "or", "should", "be", "actually", "no"})


def _near(ws: Sequence[Word], i: int, step: int, limit: int, vocab: frozenset[str]) -> bool:
    """True when a word of ``vocab`` stands within ``limit`` words of ``i`` (by ``step``) in its sentence."""
    k = i + step
    while 0 <= k < len(ws) and abs(k - i) <= limit and ws[k].sentence == ws[i].sentence:
        if ws[k].text in vocab:
            return True
        k += step
    return False


def narrated_change(ws: Sequence[Word], spans: Sequence[tuple[int, int, bool]], live: Sequence[int]) -> set[int]:
    """**The last assertion of a narrated change wins**: the indices of ``live`` answers the
    response gives as past values of a change it narrates, when a later live answer is the value
    after the change: ``from X to Y`` / ``X was replaced by Y`` (the gap between them says so), or
    ``X was coach until 2024; since then Y`` / ``15 stations until the extension, so now 17`` (a
    past mark near X and a mark of the present just before Y). ``Bo Reed, then Ada Vale`` narrates
    nothing and stays a list of two."""
    out: set[int] = set()
    for a, k in enumerate(live):
        s, e, _ = spans[k]
        for j in live[a + 1:]:
            js = spans[j][0]
            if js < e:
                continue
            gap = tuple(w.text for w in ws[e:js])
            direct = ws[e - 1].sentence == ws[js].sentence and any(
                len(gap) >= len(p) and gap[-len(p):] == p and len(gap) - len(p) <= 2 for p in _CHANGE_GAP)
            if direct and max((q for q in _CHANGE_GAP if gap[-len(q):] == q), key=len) == ("to",):
                direct = _near(ws, s, -1, 2, frozenset({"from"}))  # "to" alone: only "from X to Y"
            past = _near(ws, e - 1, 1, 3, _PAST_AFTER) or _near(ws, s, -1, 2, _PAST_BEFORE - {"from"})
            now = _near(ws, js, -1, 3, _NOW_BEFORE)
            if direct or (past and now):
                out.add(k)
                break
    return out


def self_corrected(ws: Sequence[Word], spans: Sequence[tuple[int, int, bool]], live: Sequence[int]) -> set[int]:
    """**Self-correction**: the indices of ``live`` answers a response takes back by correcting
    itself: a later answer opened by a correction (``Y? No - X``, ``Y. Actually, X``, ``Y, sorry,
    I mean X``, ``Y, or rather X``) replaces every answer before it. A correction word that opens
    the phrase or sentence right before the later answer counts; a later answer marked as a past
    one (``Actually, Bo Reed was the previous coach``) corrects nothing."""
    out: set[int] = set()
    for a, j in enumerate(live):
        if a == 0:
            continue
        js, je, _ = spans[j]
        k = js - 1
        while k >= 0 and ws[k].text in _CORRECTION_GAP - _CORRECTIONS and js - k <= 4:
            k -= 1
        if k < 0 or ws[k].text not in _CORRECTIONS or js - k > 4:
            continue
        if ws[k].text == "rather" and not (k and ws[k - 1].text == "or"):
            continue  # "rather than X" negates X (read elsewhere); only "or rather X" corrects
        opens = k == 0 or ws[k - 1].phrase != ws[k].phrase or ws[k].text == "rather"
        earlier = [i for i in live[:a] if spans[i][1] <= k]
        if opens and earlier and not _near(ws, je - 1, 1, 3, _PAST_AFTER | {"previous", "former"}):
            out.update(earlier)
    return out


def commitment(ws: Sequence[Word], spans: Sequence[tuple[int, int, bool]]) -> tuple[list[int], bool]:
    """What a response commits to (see the module docstring). ``ws``: its words; ``spans``: the
    annotated answers it names as ``(start, end, acceptable)`` word positions, in order. Returns
    the indices into ``spans`` of the committed answers (first one first) and whether the response
    also hedges with an unannotated alternative."""
    live = [k for k, (s, e, _) in enumerate(spans) if not _negated(ws, s) and not negated_after(ws, s, e)]
    gone = narrated_change(ws, spans, live) | self_corrected(ws, spans, live)
    live = [k for k in live if k not in gone]
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


def reordered(ws: Sequence[Word], answer: Sequence[str]) -> list[tuple[int, int]]:
    """**Reordered multi-entity answers**: the ``(start, end)`` word spans where the response names
    every part of an answer of several parts joined by ``and`` / ``&`` (``Malia Obama and Sasha
    Obama``) in another order, in one sentence, with only ``and`` / ``&`` / ``/`` (or commas)
    between them: ``Sasha Obama and Malia Obama``, and with a shared last word said once: ``Sasha
    and Malia Obama``."""
    parts: list[list[str]] = [[]]
    for w in answer:
        if w in ("and", "&"):
            parts.append([])
        else:
            parts[-1].append(w)
    if len(parts) < 2 or any(not p for p in parts):
        return []
    shared = parts[0][-1] if all(len(p) >= 2 and p[-1] == parts[0][-1] for p in parts) else None
    text = [w.text for w in ws]
    out: list[tuple[int, int]] = []

    def match(i: int, left: list[int], order: list[int]) -> int | None:
        if not left:
            return i
        if order:
            while i < len(ws) and text[i] in ("and", "&", "/") and ws[i].sentence == ws[i - 1].sentence:
                i += 1
        for k in left:
            forms = [parts[k]]
            if shared is not None and len(left) > 1:
                forms.append(parts[k][:-1])
            for f in forms:
                j = i + len(f)
                if j <= len(ws) and text[i:j] == f and ws[j - 1].sentence == ws[i].sentence and (
                        not order or ws[i].sentence == ws[i - 1].sentence):
                    rest = [x for x in left if x != k]
                    if f is not parts[k] and shared is not None:
                        end = match(j, rest, [*order, k])
                        # a part said without the shared word needs the last part to say it
                        if end is not None and text[end - 1] == shared:
                            return end
                        continue
                    end = match(j, rest, [*order, k])
                    if end is not None:
                        return end
        return None

    for i in range(len(ws)):
        end = match(i, list(range(len(parts))), [])
        if end is not None and text[i:end] != list(answer):
            out.append((i, end))
    return out


#: Words that say two names share the answer (``A and B shared it``, ``A and C are co-CEOs``).
_JOINT = frozenset({"shared", "share", "shares", "jointly", "together", "co", "both", "each", "tied", "joint"})
#: Capitalized words that are not names (sentence openers, pronouns, titles).
_NOT_NAMES = frozenset({"i", "yes", "no", "both", "and", "or", "but", "so", "then", "it", "he", "she", "they", "we",
                        "you", "this", "that", "these", "those", "there", "also", "mr", "mrs", "ms", "dr", "sir"})


def proper_words(text: str | None) -> set[str]:
    """The normalized words ``text`` writes capitalized (names, as far as case tells)."""
    out: set[str] = set()
    for tok in prepare(html.unescape(text or "")).split():
        core = tok.strip(_EDGE)
        if core[:1].isupper():
            out.update(w for w in normalize_answer(core).split() if w not in _NOT_NAMES)
    return out


def unlisted_extra(ws: Sequence[Word], spans: Sequence[tuple[int, int, bool]], chosen: Sequence[int],
                   names: set[str], question: set[str]) -> bool:
    """**Lists are "all and only"**: True when the response lists an unannotated name with the
    answers it commits to, joined by ``and`` / ``&`` / ``/`` in one phrase and offered as a joint
    answer: the name ends the phrase or is followed by a list word or a word of sharing (``A and B
    shared it``, ``A and C are co-CEOs``, ``C and A``). ``names``: the words the response writes
    capitalized (:func:`proper_words`); ``question``: the question's words (its entities are not
    candidates). ``A, and B is the assistant`` lists nothing."""
    taken = {i for s, e, _ in spans for i in range(s, e)}

    def name_run(i: int, step: int) -> int:
        k = i
        while 0 <= k < len(ws) and k not in taken and ws[k].text in names and ws[k].text not in question \
                and ws[k].phrase == ws[i].phrase:
            k += step
        return abs(k - i)

    def closes(k: int, phrase: int) -> bool:
        return k >= len(ws) or ws[k].phrase != phrase or ws[k].text in _ITEM_FOLLOWERS | _JOINT

    for c in chosen:
        s, e, _ = spans[c]
        if e + 1 < len(ws) and ws[e].text in ("and", "&", "/") and ws[e].phrase == ws[e - 1].phrase:
            n = name_run(e + 1, 1)
            if n and closes(e + 1 + n, ws[e].phrase):
                return True
        if s >= 2 and ws[s - 1].text in ("and", "&", "/") and ws[s - 1].phrase == ws[s].phrase:
            n = name_run(s - 2, -1)
            if n and closes(e, ws[s].phrase):
                return True
    return False


_COUNT_HEAD = re.compile(r"(?<![\w.])([0-9]{1,2}|[A-Za-z]+(?:-[A-Za-z]+)?)\b([^:\n.;]{0,60}?):[ \t]*([^\n]*)")
_ITEM_LINE = re.compile(r"^\s*(?:[-*\u2022]|\(?\d{1,2}[.)])\s+\S")


def list_count(text: str | None, value: str, numbers) -> int | None:
    """**Count-versus-list consistency**: where the response introduces a list with its count
    (``8 stations: A, B, …``, ``eight of them:`` then one item a line), the number of items it
    lists, else None. ``value``: the count committed to (digits); ``numbers``: the grader's
    normalizer of one phrase (``eight`` -> ``['8']``)."""
    raw = html.unescape(text or "")
    lines = raw.splitlines()
    for m in _COUNT_HEAD.finditer(raw):
        if numbers(m.group(1)) != [value]:
            continue
        rest = m.group(3).split(". ")[0].strip().rstrip(".")
        if rest:
            items = [x for x in re.split(r"\s*(?:,|;|\band\b|&)\s*", rest) if x.strip()]
        else:
            line = raw[:m.end()].count("\n")
            items = []
            for ln in lines[line + 1:]:
                if not ln.strip():
                    if items:
                        break
                    continue
                if not _ITEM_LINE.match(ln):
                    break
                items.append(ln)
        if len(items) >= 2:
            return len(items)
    return None


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


#: Words that say a state persisted (one class when a response restates a reference).
_PERSISTS = frozenset({"remained", "remains", "remain", "stayed", "stays", "stay", "still", "kept", "keeps", "keep",
                       "continued", "continues", "continue", "unchanged"})
_YEAR = re.compile(r"^(?:1[89]|2[01])\d\d$")


def _reference_clauses(reference: str) -> list[list[str]]:
    """A reference answer's clauses (normalized words), split at every punctuation mark."""
    return [ws for part in re.split(r"[.;:!?,]+", prepare(html.unescape(reference)))
            if (ws := normalize_answer(part).split())]


def _denies_words(ws: Sequence[str]) -> bool:
    return any(w in NEGATIONS or w in DENIALS for w in ws)


def _names(ws: Sequence[str], answer: Sequence[str]) -> bool:
    n = len(answer)
    return bool(n) and any(list(ws[i:i + n]) == list(answer) for i in range(len(ws) - n + 1))


def premise_answers(references: Sequence[str], answers: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """**InfoDeepSeek's third rule**: the annotated answers (normalized words, from ``answers``)
    that every form of the reference still gives besides rejecting the premise: named in a clause
    of it that denies nothing (``…, so the party kept the 9 seats it had won in 2020`` gives 9;
    ``Calloway's takeover was blocked`` gives nothing). A rejection must give them too."""
    forms = [_reference_clauses(r) for r in references if r and r.strip()]
    out: list[tuple[str, ...]] = []
    for a in answers:
        if a and forms and all(any(_names(c, a) and not _denies_words(c) for c in f) for f in forms):
            out.append(tuple(a))
    return out


def _content(ws: Sequence[str], topic: set[str]) -> set[str]:
    return {"<persists>" if w in _PERSISTS else _stem(w) for w in ws
            if w not in _STOPWORDS and (len(w) >= 3 or w in _PERSISTS) and (w in _PERSISTS or _stem(w) not in topic)}


def restates_correction(clause: Sequence[str], references: Sequence[str], answers: Sequence[Sequence[str]],
                        topic: set[str]) -> bool:
    """**A rejection without a negation word**: True when a clause (normalized words) restates
    the true state a reference gives in place of the premise (``Brenmoor remained independent``
    for a reference ending ``so Brenmoor remained independent``): it shares two or more content
    words with a clause of the reference that denies nothing and names no annotated answer (words
    of the question left out; words of persisting, ``remained`` / ``stayed`` / ``still``, count as
    one)."""
    mine = _content(clause, topic)
    for r in references:
        for c in _reference_clauses(r or ""):
            if _denies_words(c) or any(_names(c, a) for a in answers):
                continue
            if len(mine & _content(c, topic)) >= 2:
                return True
    return False


def other_time(clause: Sequence[str], allowed: set[str]) -> bool:
    """**A different premise is not a rejection**: True when a denying clause (normalized words)
    is about another time than the question and its reference (it names a year neither names:
    ``No company acquired it in 2023`` for a question about 2024)."""
    return any(_YEAR.match(w) and w not in allowed for w in clause)


def premise_clauses(question: str, response: str | None, answers: Sequence[Sequence[str]], *,
                    references: Sequence[str] = ()) -> list[str | None]:
    """The reading of every clause of ``response`` for the premise rule, in order: ``"denies"``,
    ``"asserts"`` (names an annotated answer as the answer) or None (neither). Arguments as for
    :func:`rejects_premise`, which reads the first clause that is not None."""
    topic = {_stem(w) for w in normalize_answer(question).split() if w not in _STOPWORDS and len(w) >= 3}
    allowed = {w for t in (question, *references) for w in normalize_answer(t).split() if _YEAR.match(w)}
    clauses = _clauses(response or "")
    out: list[str | None] = []
    for clause in clauses:
        ws = [w.text for w in words(clause)]
        kind = _clause_kind(ws, topic, answers, alone=len(clauses) == 1)
        if kind == "denies" and other_time(ws, allowed):
            kind = None  # denies another premise than the question's
        elif kind is None and references and not _declines(ws) and restates_correction(ws, references, answers,
                                                                                         topic):
            kind = "denies"
        out.append(kind)
    return out


def rejects_premise(question: str, response: str | None, answers: Sequence[Sequence[str]], *,
                    references: Sequence[str] = ()) -> bool:
    """True when ``response`` rejects the false premise of ``question`` (module docstring): its
    first clause that denies or asserts denies. ``answers``: the annotated answers (normalized
    words) a response could assert instead; ``references``: the reference answers, which tell the
    premise's time (:func:`other_time`) and the true state a response may restate instead of
    denying (:func:`restates_correction`)."""
    kinds = [k for k in premise_clauses(question, response, answers, references=references) if k is not None]
    return bool(kinds) and kinds[0] == "denies"


def _w(text: str) -> Word:
    return Word(text, 0, 0)
