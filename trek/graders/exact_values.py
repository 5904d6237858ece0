"""The values a response names, annotated or not: what the exact grader must know before it decides.

:mod:`trek.graders.exact` finds the *annotated* answers a response names. A careful grader also
sees everything else the response offers as a value: a person's or a place's name, a number, a
date. When such a value stands where the answer goes and no annotation covers it, the grader
cannot tell an unlisted alias from a wrong answer, and the exact judge says ``undecided``
instead of guessing. This module finds those values:

* :func:`names` — runs of capitalized words (and words in scripts without case, such as Chinese),
  in their sentence. A sentence's first word (after any list marker) is a name only when it is not
  a common English word (word frequencies from :mod:`wordfreq`, zipf below :data:`COMMON_ZIPF`) or
  another name word follows it; a lone word as common as ``It`` (:data:`VERY_COMMON_ZIPF`) is
  never one. Titles, pronouns, months and role codes (``CEO``) are no names.
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

__all__ = ["COMMON_ZIPF", "Value", "names", "numbers", "uncovered", "unreadable", "sentences", "canonical",
           "transliterate"]

#: A sentence's first word written capitalized is a name only below this word frequency (zipf
#: scale of :mod:`wordfreq`: 3 is once per million words, 4 ten times; ``Dana`` 3.8, ``Answer`` 5.2).
COMMON_ZIPF = 4.0
#: A lone capitalized word anywhere is no name at or above this frequency (``It``, ``Each`` after
#: a list marker or a quote).
VERY_COMMON_ZIPF = 5.5

#: Capitalized words that never name an answer on their own.
_NOT_VALUES = frozenset({
    "i", "im", "ive", "id", "ill", "mr", "mrs", "ms", "dr", "sir", "prof", "st", "the", "a", "an", "and", "or", "of",
    "yes", "no", "ok", "okay", "ceo", "cfo", "coo", "cto", "fc", "ai", "tv", "am", "pm", "utc", "gmt", "faq", "pdf",
    "url", "html", "q", "note", "answer", "source", "sources", "update", "edit",
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
})
#: Function words that open a sentence before a name (``When Dunsmarrow voted``): no part of it.
_OPENERS = frozenset({
    "when", "since", "after", "before", "while", "if", "as", "in", "on", "at", "by", "for", "from", "with", "this",
    "that", "these", "those", "then", "however", "although", "though", "because", "during", "under", "according",
    "meanwhile", "also", "but", "so", "yet", "today", "yesterday", "currently", "now", "until", "once", "both",
    "neither", "either", "every", "each", "all", "some", "many", "most", "its", "their", "his", "her", "our", "my",
    "your", "it", "he", "she", "they", "we", "you", "there", "here", "where", "who", "which", "what", "whose",
})
#: Initials that spell a word at least this frequent (zipf) are no alias (``IS``, ``DO``, ``CAT``).
INITIALISM_ZIPF = 2.5
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
    if at_start and len(run) > 1 and run[0].lower() in _OPENERS:
        run = run[1:]  # "When Dunsmarrow voted": the sentence's common first word is no part of the name
        at_start = False
    ws = tuple(normalize_answer(" ".join(run)).split())
    if not ws or all(w in _NOT_VALUES for w in ws):
        return None
    if len(run) == 1 and not _caseless(run[0]) and _zipf(ws[0]) >= (COMMON_ZIPF if at_start else VERY_COMMON_ZIPF):
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
        lead = 0  # list markers and bullets before the sentence's first word
        while lead < len(toks) and re.fullmatch(r"[-*\u2022>#]+|\(?\d{1,2}[.)]|\[\d{1,3}\]", toks[lead]):
            lead += 1
        for i, (tok, core) in enumerate(zip(toks, cores, strict=True)):
            if i < lead:
                continue
            if _name_word(core) and not (i == lead and core.lower() in _NOT_VALUES):
                if not run:
                    start = i - lead
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
    re.compile(r"^\d{1,3}\.\d{3}$"),  # 383.726 (a decimal, or a thousands group)
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


# -- reading values with parsers: dates, grouped numbers, money, durations -------------------------
#: A date written with numbers only (``19/11/2024``, ``19.11.2024``); read by :mod:`dateparser`.
_NUMERIC_DATE = re.compile(r"(?<![\w/.])(\d{1,2})([/.-])(\d{1,2})\2(\d{4})(?![\w/]|\.\d)")
#: A number in digit groups (``383 726``, ``1.374.687``, ``1,374,687``), perhaps with a currency
#: mark before it and a scale after it (``US$44bn``, ``USD 44,000,000,000``, ``€4.2 billion``);
#: read by :mod:`price_parser`.
_GROUPED = re.compile(
    r"(?<![\w.,])(?P<cur>(?:[A-Z]{1,3})?[$€£¥]|(?:USD|EUR|GBP|JPY)\s?)?"
    r"(?P<num>\d{1,3}(?:(?P<sep>[ \u00a0\u202f.,])\d{3})(?:(?P=sep)\d{3})*(?:[.,]\d+)?|\d+(?:[.,]\d+)?)"
    r"(?P<scale>\s?(?:bn|billion|mn|million|m|k|thousand|tn|trillion)\b)?(?![\w])")
#: A duration: one or more ``number unit`` parts of hours, minutes and seconds (units read by
#: :mod:`pint`), or a clock form ``2:00:35``.
_DUR_UNIT = r"(?:hours?|hrs?|h|minutes?|mins?|min|m|seconds?|secs?|s)"
_DURATION = re.compile(rf"(?<![\w.])(\d+(?:\.\d+)?)\s?({_DUR_UNIT})\b(?:(?:,?\s(?:and\s)?)(\d+(?:\.\d+)?)\s?({_DUR_UNIT})\b)*",
                       re.IGNORECASE)
_DUR_PART = re.compile(rf"(\d+(?:\.\d+)?)\s?({_DUR_UNIT})\b", re.IGNORECASE)
_CLOCK = re.compile(r"(?<![\w:.])(\d{1,2}):(\d{2}):(\d{2})(?![\w:])")
_SCALES = {"k": 3, "thousand": 3, "m": 6, "mn": 6, "million": 6, "bn": 9, "billion": 9, "tn": 12, "trillion": 12}
_CURRENCY_MARKS = {"$": "$", "€": "€", "£": "£", "¥": "¥", "USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}
_PINT_UNITS = {"h": "hour", "hr": "hour", "hrs": "hour", "hour": "hour", "hours": "hour", "m": "minute",
               "min": "minute", "mins": "minute", "minute": "minute", "minutes": "minute", "s": "second",
               "sec": "second", "secs": "second", "second": "second", "seconds": "second"}


@functools.lru_cache(maxsize=1)
def _units():
    import pint

    return pint.UnitRegistry()


def _date(m: re.Match[str]) -> str:
    """A numeric date in words (``19 november 2024``), or the text as written when it is not a date
    or its day and month could be read either way (``03/04/2024``)."""
    import dateparser

    readings = set()
    for order in ("DMY", "MDY"):
        d = dateparser.parse(m.group(0), languages=["en"], settings={"DATE_ORDER": order, "STRICT_PARSING": True})
        if d is not None:
            readings.add(d.date())
    if len(readings) != 1:
        return m.group(0)
    d = readings.pop()
    return f"{d.day} {d.strftime('%B')} {d.year}"


def _grouped(m: re.Match[str]) -> str:
    """A grouped number, money amount or scaled amount in one plain form (``$44000000000``)."""
    from decimal import Decimal

    from price_parser import Price

    num, sep, cur, scale = m.group("num"), m.group("sep"), m.group("cur"), m.group("scale")
    if sep is None and not cur and not scale:
        return m.group(0)
    if sep == "." and num.count(".") == 1 and not cur and not scale:
        return m.group(0)  # 383.726: a decimal or a thousands group; left for unreadable()
    if sep == "," and num.count(",") == 1 and "." not in num and not cur:
        return m.group(0)  # 1,240: the normalizer reads it already
    if sep is None and scale and not cur and scale.strip() in ("m", "k"):
        return m.group(0)  # 35 m: metres or minutes as likely as millions
    amount = Price.fromstring(num, decimal_separator="," if (sep == "." or (sep in (" ", "\u00a0", "\u202f") and ","
                                                                              in num)) else ".").amount
    if amount is None:
        return m.group(0)
    if scale:
        amount = Decimal(amount).scaleb(_SCALES[scale.strip().lower()])
    text = format(amount.normalize(), "f") if amount == amount.to_integral_value() else format(amount, "f")
    mark = ""
    if cur:
        c = cur.strip()
        mark = _CURRENCY_MARKS.get(c, c[-1] if c[-1] in "$€£¥" else "")
    return f"{mark}{text}"


def _seconds(parts: list[tuple[str, str]]) -> str:
    from decimal import Decimal

    ureg = _units()
    total = sum(Decimal(str(ureg.Quantity(float(n), _PINT_UNITS[u.lower()]).to("second").magnitude)) for n, u in parts)
    total = total.quantize(Decimal("0.001")).normalize()
    return f"{format(total, 'f')} seconds"


def _duration(m: re.Match[str]) -> str:
    parts = _DUR_PART.findall(m.group(0))
    units = [_PINT_UNITS[u.lower()] for _, u in parts]
    if len(parts) < 2 and units[0] == "minute" and parts[0][1].lower() == "m":
        return m.group(0)  # "35 m": metres as likely as minutes
    if len(set(units)) != len(units):
        return m.group(0)
    return _seconds(parts)


def transliterate(text: str) -> str:
    """``text`` with words in other cased scripts (Cyrillic, Greek, Armenian…) written in Latin
    letters by :mod:`anyascii` (``Юки Танабе`` -> ``Yuki Tanabe``); scripts without case (Chinese,
    Japanese, Arabic…) are kept, since their romanization rarely gives the name's usual spelling."""
    if text.isascii():
        return text

    def latin(m: re.Match[str]) -> str:
        from anyascii import anyascii

        w = m.group(0)
        if any(ch.isalpha() and not ch.isascii() and ch.lower() != ch.upper() and not _latin(ch) for ch in w):
            return anyascii(w)
        return w

    return re.sub(r"\w+", latin, text)


def _latin(ch: str) -> bool:
    import unicodedata

    return unicodedata.name(ch, "").startswith("LATIN")


def canonical(text: str) -> str:
    """``text`` with every date, grouped number, money amount and duration it writes put in one
    plain form, by the parsers (``19/11/2024`` -> ``19 November 2024`` by :mod:`dateparser`,
    ``383 726`` and ``1.374.687`` -> digits and ``US$44bn`` -> ``$44000000000`` by
    :mod:`price_parser`, ``2 h 00 min 35 s`` and ``2:00:35`` -> ``7235 seconds`` with units by
    :mod:`pint`). A form that can be read two ways (``03/04/2024``, ``383.726``) is left as written."""
    if not _HAS_DIGIT.search(text):
        return text
    text = _NUMERIC_DATE.sub(_date, text)
    text = _CLOCK.sub(lambda m: _seconds([(m.group(1), "h"), (m.group(2), "min"), (m.group(3), "s")]), text)
    text = _DURATION.sub(_duration, text)
    return _GROUPED.sub(_grouped, text)


# -- aliases an annotation allows --------------------------------------------------------------------
_CAP_RUN = re.compile(r"\b[A-Z][\w-]*(?:\s+(?:of|the|and|&|de|la)?\s*[A-Z][\w-]*)+")
_JOINER_WORDS = frozenset({"of", "the", "and", "&", "de", "la"})
_PARTS = re.compile(r"\s*,\s*(?:and\s+|&\s+)?|\s+(?:and|&)\s+")


def aliases(answer: str, *, main_part: bool = False) -> list[str]:
    """Other forms of an annotated answer that name the same thing:

    * a name of three or more capitalized words by its initials (``United Arab Provinces`` ->
      ``UAP``), also inside a longer answer (``Estavia and the UAP``), unless the initials spell a
      word (zipf :data:`INITIALISM_ZIPF` or more: ``Dana Okafor`` is never ``DO``, the grader
      compares lower-cased words);
    * a person's name of two or three words with its given names as initials (``Priya
      Castellan`` -> ``P. Castellan``);
    * a list of two to four items (``Sorrel, Tine and Wend``) in any order;
    * with ``main_part`` (SealQA's rule that the main part of a name suffices), the part before
      the first comma (``San Lorenzo, Calvera`` -> ``San Lorenzo``).
    """
    import itertools

    out: list[str] = []
    for m in _CAP_RUN.finditer(answer):
        words = m.group(0).split()
        caps = [w for w in words if w.lower() not in _JOINER_WORDS]
        code = "".join(w[0] for w in caps).upper()
        if len(caps) >= 3 and _zipf(code.lower()) < INITIALISM_ZIPF:
            out.append(answer[:m.start()] + code + answer[m.end():])
    words = answer.split()
    if 2 <= len(words) <= 3 and all(w[:1].isupper() and w.isalpha() for w in words):
        out.append(" ".join(w[0] + "." for w in words[:-1]) + " " + words[-1])
    listed = bool(re.search(r"\s(?:and|&)\s", answer))
    parts = [p for p in _PARTS.split(answer.strip().rstrip(".")) if p]
    if listed and 2 <= len(parts) <= 4 and len(parts) == len(set(parts)):
        for order in itertools.permutations(parts):
            if list(order) != parts:
                out.append(", ".join(order[:-1]) + " and " + order[-1])
    if main_part and "," in answer and not listed:
        head = answer.split(",")[0].strip()
        if head:
            out.append(head)
    return [a for a in dict.fromkeys(out) if a != answer]
