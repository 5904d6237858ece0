"""The values a response names, annotated or not: what the exact grader must know before it decides.

:mod:`trek.graders.exact` finds the *annotated* answers a response names. A careful grader also
sees everything else the response offers as a value: a person's or a place's name, a number, a
date. When such a value stands where the answer goes and no annotation covers it, the grader
cannot tell an unlisted alias from a wrong answer, and the exact judge says ``undecided``
instead of guessing. This module finds those values:

* :func:`names` — runs of capitalized words (and words in scripts without case, such as Chinese),
  in their sentence. A sentence's first word is a name only when it is not a common English word
  (word frequencies from :mod:`wordfreq`, zipf below :data:`COMMON_ZIPF`) or another name word
  follows it. Titles, pronouns, months and role codes (``CEO``) are no names.
* :func:`numbers` — digit tokens (with their separators) that are not list markers.
* :func:`uncovered` — the names and numbers no annotated answer and no word of the question
  covers: what the response names that the annotations do not.
* :func:`unreadable` — number forms the grader cannot read as one value (``383 726``,
  ``1.374.687``, ``19/11/2024``, ``US$44bn``, ``2 h 00 min 35 s``) when nothing reads them.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trek.graders.freshqa import normalize_answer

__all__ = ["COMMON_ZIPF", "Value", "names", "numbers", "uncovered", "unreadable", "sentences"]

#: A sentence's first word written capitalized is a name only below this word frequency (zipf
#: scale of :mod:`wordfreq`: 3 is once per million words, 4 ten times; ``Dana`` 3.8, ``Answer`` 5.2).
COMMON_ZIPF = 4.0

#: Capitalized words that never name an answer on their own.
_NOT_VALUES = frozenset({
    "i", "im", "ive", "id", "ill", "mr", "mrs", "ms", "dr", "sir", "prof", "st", "the", "a", "an", "and", "or", "of",
    "yes", "no", "ok", "okay", "ceo", "cfo", "coo", "cto", "fc", "ai", "tv", "am", "pm", "utc", "gmt", "faq", "pdf",
    "url", "html", "q", "note", "answer", "source", "sources", "update", "edit",
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
})
#: Lower-case words that may stand inside a name (``Bank of England``, ``Port of Spain``).
_NAME_JOINERS = frozenset({"of", "de", "da", "del", "der", "van", "von", "la", "le", "du", "di", "bin", "al", "the",
                           "and", "&"})
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n+")
_TOKEN = re.compile(r"\S+")
_EDGE = "\"'`“”‘’«»()[]{}<>*,.;:!?"
_URLISH = re.compile(r"(?:[a-z][a-z0-9+.-]*://|www\.)|\.(?:com|org|net|html?)\b|[a-z]/[a-z]", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^(?:\(?\d{1,2}[.)]|\[\d{1,3}\][.,;:]?)$")
_HAS_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Value:
    """One value a response names: its text as written, its normalized words, its kind (``name``
    or ``number``) and the index of its sentence."""

    text: str
    words: tuple[str, ...]
    kind: str
    sentence: int


@functools.lru_cache(maxsize=65536)
def _zipf(word: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en")


def _caseless(core: str) -> bool:
    """True for a token in a script without letter case (Chinese, Japanese, Arabic, Hebrew…)."""
    return any(ch.isalpha() and not ch.isascii() and ch.lower() == ch.upper() for ch in core)


def _name_word(core: str) -> bool:
    if not core or _HAS_DIGIT.search(core):
        return False
    if _caseless(core):
        return True
    return core[0].isupper() and any(ch.isalpha() for ch in core)


def sentences(text: str | None) -> list[str]:
    """The sentences of ``text`` (split after ``.!?;:`` and at line breaks; a decimal point or an
    abbreviation with no space after it does not split)."""
    raw = html.unescape(text or "")
    return [s for s in _SENTENCE_SPLIT.split(raw) if s.strip()]


def _name_run(run: list[str], at_start: bool, sentence: int) -> Value | None:
    """The name a run of name words makes, or None (a lone common word opening a sentence, a title)."""
    while run and run[-1].lower() in _NAME_JOINERS:
        run = run[:-1]
    ws = tuple(normalize_answer(" ".join(run)).split())
    if not ws or all(w in _NOT_VALUES for w in ws):
        return None
    if len(run) == 1 and at_start and not _caseless(run[0]) and _zipf(ws[0]) >= COMMON_ZIPF:
        return None
    return Value(" ".join(run), ws, "name", sentence)


def names(text: str | None) -> list[Value]:
    """The names ``text`` writes (see the module docstring), in order."""
    out: list[Value] = []
    for si, sentence in enumerate(sentences(text)):
        toks = [t for t in _TOKEN.findall(sentence) if not _URLISH.search(t)]
        cores = [re.sub(r"['\u2019]s$", "", t.strip(_EDGE)) for t in toks]
        runs: list[tuple[list[str], bool]] = []
        run: list[str] = []
        start = 0
        for i, (tok, core) in enumerate(zip(toks, cores, strict=True)):
            if _name_word(core) and not (i == 0 and core.lower() in _NOT_VALUES):
                if not run:
                    start = i
                run.append(core)
            elif run and core.lower() in _NAME_JOINERS and i + 1 < len(cores) and _name_word(cores[i + 1]):
                run.append(core)
                continue
            elif run:
                runs.append((run, start == 0))
                run = []
                continue
            if run and (tok[-1:] in ",;:!?)" or (tok.endswith(".") and len(core) > 1)):
                runs.append((run, start == 0))
                run = []
        if run:
            runs.append((run, start == 0))
        for r, at_start in runs:
            v = _name_run(r, at_start, si)
            if v is not None:
                out.append(v)
    return out


def numbers(text: str | None) -> list[Value]:
    """The number tokens ``text`` writes (list markers and citations left out), in order; a run of
    digit groups split by spaces (``383 726``) is one value."""
    out: list[Value] = []
    for si, sentence in enumerate(sentences(text)):
        toks = [t for t in _TOKEN.findall(sentence) if not _URLISH.search(t)]
        i = 0
        while i < len(toks):
            tok = toks[i]
            if not _HAS_DIGIT.search(tok) or (_LIST_MARKER.match(tok) and (i == 0 or toks[i - 1][-1:] in ".:;")):
                i += 1
                continue
            j = i + 1
            while j < len(toks) and re.fullmatch(r"\d{3}[.,;:]?", toks[j]) and re.search(r"\d$", toks[j - 1]):
                j += 1  # "383 726": one number written with thin spaces
            raw = " ".join(toks[i:j]).strip(_EDGE)
            ws = tuple(normalize_answer(raw).split())
            if ws:
                out.append(Value(raw, ws, "number", si))
            i = j
    return out


def _covers(value: Sequence[str], known: Iterable[Sequence[str]], question: set[str]) -> bool:
    """True when ``value`` (normalized words) is covered: it contains a known answer, lies inside
    one, or every word of it is the question's or a known answer's."""
    known = [tuple(k) for k in known if k]
    v = tuple(value)

    def inside(a: Sequence[str], b: Sequence[str]) -> bool:
        n = len(a)
        return any(tuple(b[i:i + n]) == tuple(a) for i in range(len(b) - n + 1))

    if any(inside(k, v) or inside(v, k) for k in known):
        return True
    pool = question | {w for k in known for w in k}
    return all(w in pool for w in v)


def uncovered(text: str | None, known: Iterable[Sequence[str]], question: Sequence[str], *,
              years: bool = False, normalize=None) -> list[Value]:
    """The names and numbers of ``text`` that neither an annotated answer (``known``: normalized
    words of every acceptable and competing answer) nor the question's words cover. Years
    (1800–2099) count only with ``years`` (a question that asks for a year or a date).
    ``normalize``: the grader's normalizer, applied to numbers so their forms agree."""
    known = [tuple(k) for k in known if k]
    q = set(question)
    out: list[Value] = []
    for v in names(text):
        if not _covers(v.words, known, q):
            out.append(v)
    for v in numbers(text):
        ws = tuple(normalize(v.text)) if normalize else v.words
        if not ws:
            continue
        if not years and len(ws) == 1 and re.fullmatch(r"(?:18|19|20)\d\d", ws[0]):
            continue
        if not _covers(ws, known, q):
            out.append(Value(v.text, ws, "number", v.sentence))
    out.sort(key=lambda v: v.sentence)
    return out


#: Number forms that the grader reads only when a parser turns them into one value.
_UNREADABLE = (
    re.compile(r"^\d{1,3}(?:\.\d{3}){2,}$"),  # 1.374.687 (dots as thousands separators)
    re.compile(r"^\d{1,3}(?: \d{3})+$"),  # 383 726 (spaces as thousands separators)
    re.compile(r"^\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}$"),  # 19/11/2024, 19.11.2024
    re.compile(r"^[A-Za-z]{1,3}\$\d"),  # US$44bn, A$3
    re.compile(r"^\d+(?:[.,]\d+)?(?:k|m|bn|b|tn|mn)$", re.IGNORECASE),  # 44bn, 3.5m
    re.compile(r"^\d+(?:h|hr|hrs|min|mins|s|sec|secs|m)$", re.IGNORECASE),  # 2h, 35s
    re.compile(r"^\d{1,2}:\d{2}(?::\d{2})?$"),  # 2:00:35
    re.compile(r"^\d+,\d{1,2}$"),  # 4,27 (a decimal comma)
)


def unreadable(text: str | None) -> list[str]:
    """The number tokens of ``text`` written in a form the grader's normalizer does not read as
    one value (see :data:`_UNREADABLE`)."""
    out: list[str] = []
    for v in numbers(text):
        raw = v.text.strip(_EDGE)
        if any(p.match(raw) for p in _UNREADABLE):
            out.append(raw)
    return out
