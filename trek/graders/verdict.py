"""Reading the judge's *final* verdict out of a free-text reply (shared by the three graders).

A judge, and a reasoning model above all, rarely answers with the bare label it was asked for.
It reasons first, may mention the other label on the way ("at first this looks incorrect,
but ..."), may change its mind, and may wrap the verdict in markdown, JSON or a ``\\boxed{}``.
:func:`read_verdict` reads such replies with one set of rules, parameterized per grader by a
:class:`Scheme` (which labels exist and how they may be written):

1. Hidden reasoning (``<think>...</think>``, or everything before a lone ``</think>``) is
   ignored, and markdown marks (``**``, ``#``, backticks, emphasis underscores) are blanked.
2. *Verdict statements* are collected in reply order:

   * a JSON object with a verdict field (``{"evaluation": "correct"}``, ``{"grade": "A"}``,
     and for yes/no schemes a boolean ``{"correct": true}``);
   * ``\\boxed{X}``;
   * a key and its value: ``Verdict: correct``, ``evaluation - incorrect``,
     ``Final answer: B``, ``grade: c``, ``The grade is B (INCORRECT)``,
     ``the response is correct``, ``Answer: Yes, because ...``;
   * a sentence that is only a label (``Correct.``, ``**No**``, ``(B)``, ``A: CORRECT``) or
     that opens with one followed by a comma, colon or dash (``No, the candidate ...``).

   A value counts only when the label is the whole value, possibly followed by punctuation or
   a reason (``because``, ``since``, ...). A letter followed by a word is the start of a
   sentence, never a grade (``Answer: A refusal to answer`` gives nothing). Alternatives
   (``correct or incorrect``, ``A or B``) are not statements.
3. A negated statement (``not correct``, ``Not yes``, ``This is not CORRECT``) never becomes
   the verdict; it only constrains: it must not contradict the verdict chosen.
4. The verdict is the **last** non-negated statement. Everything after it must agree: a later
   negated statement of the same label, a later unreadable value of a verdict key
   (``Final verdict: unclear``), or a later mention of another label in running prose (where
   the scheme counts prose mentions) makes the reply unreadable.
5. When nothing qualifies, or a rule above rejects the reply, the result is ``None`` (the
   caller re-asks and finally records ``unparsed``). The reader never guesses.

Lists of letter definitions (``A: CORRECT, B: INCORRECT, C: NOT_ATTEMPTED``, an echo of the
scale) are ignored as a whole, so an echoed scale never yields its last letter; so are letters
used as list markers on two or more lines (``A. ...`` / ``B. ...``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Scheme", "read_verdict", "clean_reply"]


@dataclass(frozen=True)
class Scheme:
    """How one grader's verdicts may be written.

    ``labels`` maps a phrase (lowercase, words separated by one space; ``_`` and ``-`` in a
    reply count as spaces) to the verdict it stands for; ``letters`` maps an uppercase letter to
    a verdict (SealQA's A/B/C). ``prose`` lists the phrases whose mentions in running prose
    count for the consistency check of rule 4, and ``prose_case_sensitive`` requires those
    mentions to be written exactly as listed (SealQA's ``CORRECT`` in capitals). ``json_true``
    and ``json_false`` are the verdicts of a boolean ``correct`` field, if the scheme has them.
    """

    labels: Mapping[str, str]
    letters: Mapping[str, str] = field(default_factory=dict)
    prose: tuple[str, ...] = ()
    prose_case_sensitive: bool = False
    json_true: str | None = None
    json_false: str | None = None


# -- cleaning ---------------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_MARKS = re.compile(r"[*`#>~]|(?<!\w)_+|_+(?!\w)")


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` replaced by spaces (newlines kept), so offsets survive."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def clean_reply(text: str | None) -> str:
    """The reply with hidden reasoning and markdown marks blanked out, same length as before."""
    t = text or ""
    close = t.lower().rfind("</think>")
    if close >= 0 and "<think>" not in t.lower()[:close]:
        t = _blank(t, 0, close + len("</think>"))
    for m in list(_THINK.finditer(t)):
        t = _blank(t, m.start(), m.end())
    return _MARKS.sub(lambda m: " " * len(m.group()), t)


# -- statements -------------------------------------------------------------------------------


@dataclass
class _Statement:
    pos: int
    end: int
    kind: str  # "ok", "neg" (negated label) or "bad" (unreadable value of a verdict key)
    verdict: str | None = None


_NEGATION = r"(?:not|never|hardly|n't|isn't|wasn't|cannot\s+be|can't\s+be)"
_NEG_BEFORE = re.compile(rf"(?:\b{_NEGATION}|n't)(?:\s+(?:really|entirely|fully|quite|exactly|be))?\s*$", re.IGNORECASE)
_OPEN = r"[\s\"'\u201c\u2018(\[{]*"
_CLOSE = r"[\"'\u201d\u2019)\]}]*"
# What may follow a value: the end, punctuation, or a reason.
_TERMINATOR = re.compile(
    r"\s*(?:$|[.,;:!?)\]}\-\u2013\u2014(/]|(?:because|since|as|given|per|according|so|based)\b)",
    re.IGNORECASE,
)
_ALTERNATIVE_AFTER = re.compile(r"\s*(?:/|\bor\b|\bnor\b|\band\b)", re.IGNORECASE)
_ALTERNATIVE_BEFORE = re.compile(r"(?:/|\bor|\beither|\bnor|\bbetween|\band)\s*[\"'\u201c(]*$", re.IGNORECASE)

# Keys whose value is a verdict. A "strong" key with an unreadable value makes a later
# verdict impossible to trust; a weak key is simply ignored when its value is not a label.
_STRONG_KEYS = (
    r"(?:final\s+|overall\s+|my\s+)?(?:evaluation|verdict|grade|grading|judge?ment|decision|conclusion)"
    r"|final\s+(?:answer|result|label|assessment|output)"
)
_WEAK_KEYS = (
    r"answer|result|assessment|rating|label|classification|output|letter|choice|option|outcome|status"
)
_SUBJECT = (
    r"(?:the\s+|this\s+|my\s+)?(?:candidate(?:'s)?(?:\s+answer)?|predicted\s+answer|prediction"
    r"|response|answer|grade|verdict|evaluation)|it|this|that"
)
_KEY = re.compile(
    rf"(?<![\w-])(?:(?P<strong>{_STRONG_KEYS})|(?P<weak>{_WEAK_KEYS}))[\"']?\s*(?:\([^)]*\)\s*)?"
    rf"(?:is\s*[:=]?|was|[:=]|-(?!\w)|\u2013|\u2014)"
    rf"|(?<![\w-])(?P<subject>(?:{_SUBJECT})\s+(?:is|was|should\s+be)|it's|it\u2019s|that's|that\u2019s)\s+"
    rf"(?:graded\s+(?:as\s+)?)?"
    rf"|(?<![\w-])(?P<conn>so|thus|therefore|hence|consequently)\s*[:,]?\s+"
    rf"|(?<![\w-])(?:i\s+(?:would\s+)?(?:grade|rate|mark|judge|classify)\s+(?:it|this|the\s+\w+(?:\s+answer)?)"
    rf"|graded|marked|rated|classified)\s+(?:as\s+)?",
    re.IGNORECASE,
)
# A key preceded by one of these words names an echoed prompt field, not the verdict.
_ECHO_BEFORE = re.compile(
    r"\b(?:reference|candidate|candidate's|predicted|gold|ground[\s-]?truth|correct|expected|true|accepted)\s*$",
    re.IGNORECASE,
)
# A subject ("the response is ...") counts only at the start of a sentence or clause.
_CLAUSE_START = re.compile(
    r"(?:^|[,;:(\u2013\u2014]|\s-)\s*(?:(?:so|thus|therefore|hence|overall|consequently|accordingly|and|but|"
    r"which\s+means|meaning|in\s+conclusion|in\s+short|in\s+summary|finally|then)\s*,?\s*)*$",
    re.IGNORECASE,
)
_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")
_JSON_VERDICT_KEYS = {
    "evaluation", "verdict", "grade", "final_answer", "answer", "judgment", "judgement", "result",
    "decision", "label", "final_verdict", "final_grade", "final_evaluation", "rating",
    "classification", "assessment", "output", "outcome",
}
_JSON_BOOL_KEYS = {"correct", "is_correct", "iscorrect"}


class _Reader:
    def __init__(self, scheme: Scheme) -> None:
        self.scheme = scheme
        phrases = sorted(scheme.labels, key=len, reverse=True)
        alts = "|".join(r"[\s_\-]+".join(re.escape(w) for w in p.split()) for p in phrases)
        self.label = re.compile(rf"(?<![\w-])(?:{alts})(?![\w-])", re.IGNORECASE)
        letters = "".join(scheme.letters)
        self.letter_pair = (
            re.compile(
                rf"(?<![\w-])\(?([{letters}])\)?\s*(?:[:=)\-\u2013\u2014]|is)?\s*{_OPEN}((?i:{alts})){_CLOSE}(?![\w-])",
            )
            if letters
            else None
        )
        self.letter = re.compile(rf"([{letters}])(?![\w'\u2019-])", re.IGNORECASE) if letters else None
        if scheme.prose:
            palts = "|".join(r"[\s_\-]+".join(re.escape(w) for w in p.split()) for p in scheme.prose)
            flags = 0 if scheme.prose_case_sensitive else re.IGNORECASE
            self.prose = re.compile(rf"(?<![\w-])(?:{palts})(?![\w-])", flags)
        else:
            self.prose = None

    # values ------------------------------------------------------------------------------------
    def _phrase_verdict(self, phrase: str) -> str | None:
        key = " ".join(re.sub(r"[_\-]+", " ", phrase.lower()).split())
        return self.scheme.labels.get(key)

    def value(self, s: str, *, lower_letters: bool, whole: bool) -> tuple[str, str | None, int] | None:
        """Read a value at the start of ``s``: ``(kind, verdict, length)`` or ``None``.

        ``kind`` is ``ok`` or ``neg``. With ``whole``, the value must be all of ``s`` (bar
        closing punctuation); otherwise it must be followed by a terminator.
        """
        m = re.match(_OPEN, s)
        i = m.end() if m else 0
        negated = False
        n = re.match(rf"(?:{_NEGATION})\s+", s[i:], re.IGNORECASE)
        if n and not self.label.match(s, i):  # "not attempted" is a label, not a negation
            negated = True
            i += n.end()
            i += re.match(_OPEN, s[i:]).end()  # type: ignore[union-attr]
        verdict = None
        lm = self.label.match(s, i)
        if lm:
            verdict = self._phrase_verdict(lm.group())
            j = lm.end()
            if self.letter is not None:  # "CORRECT (A)": the letter must agree
                pm = re.match(rf"\s*\(\s*([{''.join(self.scheme.letters)}])\s*\)", s[j:])
                if pm:
                    if self.scheme.letters[pm.group(1)] != verdict:
                        return None
                    j += pm.end()
        elif self.letter is not None:
            pm = self.letter_pair.match(s, i) if self.letter_pair else None
            if pm:
                verdict = self.scheme.letters[pm.group(1)]
                if self._phrase_verdict(pm.group(2)) != verdict:
                    return None
                j = pm.end()
            else:
                lm2 = self.letter.match(s, i)
                if not lm2 or (not lower_letters and lm2.group(1).islower()):
                    return None
                verdict = self.scheme.letters[lm2.group(1).upper()]
                j = lm2.end()
        else:
            return None
        j += re.match(_CLOSE, s[j:]).end()  # type: ignore[union-attr]
        rest = s[j:]
        if whole:
            if re.sub(r"[\s.!?;:,\"'\u201d\u2019)\]}]", "", rest):
                return None
        else:
            if _ALTERNATIVE_AFTER.match(rest) or not _TERMINATOR.match(rest):
                return None
        return ("neg" if negated else "ok"), verdict, j

    # statements --------------------------------------------------------------------------------
    def statements(self, text: str) -> tuple[list[_Statement], str]:
        out: list[_Statement] = []
        # JSON objects
        dec = json.JSONDecoder()
        i = text.find("{")
        while i >= 0:
            try:
                obj, end = dec.raw_decode(text, i)
            except ValueError:
                i = text.find("{", i + 1)
                continue
            if isinstance(obj, dict):
                st = self._json_statement(obj, i, end)
                if st is not None:
                    out.append(st)
            text = _blank(text, i, end)
            i = text.find("{", end)
        for m in list(_BOXED.finditer(text)):
            v = self.value(m.group(1).strip(), lower_letters=True, whole=True)
            out.append(_Statement(m.start(), m.end(), v[0], v[1]) if v else _Statement(m.start(), m.end(), "bad"))
            text = _blank(text, m.start(), m.end())
        text = self._blank_scale_echo(text)
        for start, end in _sentences(text):
            out.extend(self._sentence(text, start, end))
        out.sort(key=lambda s: s.pos)
        return out, text

    def _json_statement(self, obj: dict, start: int, end: int) -> _Statement | None:
        norm = {re.sub(r"[\s\-]+", "_", str(k).strip().lower()): v for k, v in obj.items()}
        for k, v in norm.items():
            if k in _JSON_VERDICT_KEYS and isinstance(v, str):
                r = self.value(v, lower_letters=True, whole=True)
                return _Statement(start, end, r[0], r[1]) if r else _Statement(start, end, "bad")
        for k, v in norm.items():
            if k in _JSON_BOOL_KEYS and isinstance(v, bool):
                verdict = self.scheme.json_true if v else self.scheme.json_false
                return _Statement(start, end, "ok", verdict) if verdict else _Statement(start, end, "bad")
        for v in norm.values():  # one level down: {"result": {"evaluation": "correct"}}
            if isinstance(v, dict):
                st = self._json_statement(v, start, end)
                if st is not None:
                    return st
        return None

    def _blank_scale_echo(self, text: str) -> str:
        """Blank runs of letter definitions (``A: CORRECT, B: INCORRECT``) naming 2+ letters."""
        if self.letter_pair is None:
            return text
        pairs = [m for m in self.letter_pair.finditer(text)
                 if self.scheme.letters[m.group(1)] == self._phrase_verdict(m.group(2))]
        groups: list[list[re.Match[str]]] = []
        for m in pairs:
            if groups and re.fullmatch(r"[\s,;|/()\-\u2013\u2014]*(?:or)?[\s,;|/()]*", text[groups[-1][-1].end():m.start()]):
                groups[-1].append(m)
            else:
                groups.append([m])
        for g in groups:
            if len({m.group(1) for m in g}) >= 2:
                text = _blank(text, g[0].start(), g[-1].end())
        # Letters used as list markers ("A. The count matches.\nB. Nothing contradicts it.")
        letters = "".join(self.scheme.letters)
        markers = list(re.finditer(rf"(?m)^[ \t]*\(?([{letters}])[.)][ \t]+(?=\S)", text))
        if len({m.group(1) for m in markers}) >= 2:
            for m in markers:
                text = _blank(text, m.start(), m.end())
        return text

    def _sentence(self, text: str, start: int, end: int) -> list[_Statement]:
        s = text[start:end]
        out: list[_Statement] = []
        lead = re.match(r"\s*(?:[-+\u2022]\s+|\d+[.)]\s+)?", s)
        off = lead.end() if lead else 0
        body = s[off:]
        if not body.strip():
            return out
        v = self.value(body, lower_letters=True, whole=True)
        if v is not None:
            return [_Statement(start + off, end, v[0], v[1])]
        # a sentence opening with a label: "No, the candidate ...", "B - the prediction ..."
        v = self.value(body, lower_letters=False, whole=False)
        if v is not None and re.match(r"\s*[,:;\-\u2013\u2014)]", body[v[2]:]):
            out.append(_Statement(start + off, start + off + v[2], v[0], v[1]))
        for m in _KEY.finditer(s):
            before = s[: m.start()]
            if _ALTERNATIVE_BEFORE.search(before) or _ECHO_BEFORE.search(before):
                continue
            prose_key = m.group("subject") is not None or m.group("conn") is not None
            if prose_key and not _CLAUSE_START.search(before):
                continue
            rest = s[m.end():]
            subject = prose_key or not re.search(r"[:=\-\u2013\u2014]\s*$", m.group())
            r = self.value(rest, lower_letters=not subject, whole=False)
            if r is not None:
                if any(o.pos == start + m.end() for o in out):
                    continue
                out.append(_Statement(start + m.end(), start + m.end() + r[2], r[0], r[1]))
            elif m.group("strong") and not re.match(r"\s*$", rest) and not _is_reasoning(rest):
                out.append(_Statement(start + m.end(), end, "bad"))
        return out

    def prose_mentions(self, text: str) -> list[tuple[int, str, bool]]:
        """``(position, verdict, negated)`` of every prose mention of a label."""
        if self.prose is None:
            return []
        out = []
        for m in self.prose.finditer(text):
            before, after = text[: m.start()], text[m.end():]
            if _ALTERNATIVE_BEFORE.search(before) or _ALTERNATIVE_AFTER.match(after):
                continue
            if re.match(r"\s+(?:answers?|references?|values?|ones?|dates?|names?|years?|numbers?|"
                        r"figures?|results?|facts?|information|spelling|form|version|target|"
                        r"labels?|grades?|options?|choices?|formats?|units?|premise)\b", after, re.IGNORECASE):
                continue
            verdict = self._phrase_verdict(m.group())
            if verdict is None:
                continue
            out.append((m.start(), verdict, bool(_NEG_BEFORE.search(before[-40:]))))
        return out


def _is_reasoning(rest: str) -> bool:
    """A verdict key followed by prose ("Evaluation: the response names ...") is not a value."""
    words = re.findall(r"[A-Za-z']+", rest)
    return len(words) > 3


_SPLIT = re.compile(r"\n|[.!?\u2026]+(?=\s|$)|\u2026+|\.{3,}")


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _SPLIT.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


_READERS: dict[int, tuple[Scheme, _Reader]] = {}


def read_verdict(text: str | None, scheme: Scheme) -> str | None:
    """The final verdict of ``text`` under ``scheme``, or ``None`` when it cannot be read safely.

    See the module docstring for the rules.
    """
    cached = _READERS.get(id(scheme))
    if cached is None or cached[0] is not scheme:
        cached = _READERS[id(scheme)] = (scheme, _Reader(scheme))
    reader = cached[1]
    cleaned = clean_reply(text)
    if not cleaned.strip():
        return None
    statements, rest = reader.statements(cleaned)
    final = next((s for s in reversed(statements) if s.kind == "ok"), None)
    if final is None or final.verdict is None:
        return None
    for s in statements:
        if s.pos < final.end or s is final:
            continue
        if s.kind == "bad" or (s.kind == "neg" and s.verdict == final.verdict):
            return None
    for pos, verdict, negated in reader.prose_mentions(rest):
        if pos < final.end:
            continue
        if (verdict == final.verdict) == negated:
            return None
    return final.verdict
