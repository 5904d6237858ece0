"""The exact grader: a verdict read from the annotations, with no model (``--judge oracle``).

On an annotated benchmark (TrekBench-Mini, Ctrl contexts built from its pools) every page of a
question states which answer it supports, so the answers a response can name are known: the
question's acceptable answers (``Question.answers``, its aliases) and the *competing* ones (every
other answer a page of the question supports: older answers, neighbouring questions' answers,
fabricated ones). The grader finds which of them a response names and decides by rule, so a
grade is reproducible, free and never unreadable. This departs from the paper, whose grades come
from LLM judges; :mod:`trek.audit` measures an LLM judge against it.

**Naming.** Response and answers are normalized alike (:func:`normalize`: case, punctuation,
articles and thousands separators as in :func:`trek.graders.freshqa.normalize_answer`, HTML
entities decoded, then
number words read as digits, ``thirty-one`` -> ``31``), and an answer is *named* where its words
occur as a contiguous run of the words of one sentence of the response, never inside a URL or a
slug (:func:`trek.graders.exact_rules.words`). Where two named answers overlap, the longer
one is the one named (``Norvale Mobile Business`` names that, not ``Norvale Mobile``). An answer
that also appears in the question (the options of "which of A, B and C") is not counted where the
response only repeats the question (a run of :data:`ECHO_WORDS` or more words it shares with it).

**Deciding** (``rule``, default :data:`DEFAULT_RULE`):

* ``first`` — correct when the answer the response commits to is acceptable: its first annotated
  answer that is not negated, with every answer it offers beside it as an alternative
  (:func:`trek.graders.exact_rules.commitment`: a hedge "A or B" or a list "A, B, C" that includes
  a wrong candidate is not correct); earlier values mentioned after it in another role, as in
  "17 stations, up from 15", do not count;
* ``any`` — correct only when it names an acceptable answer and no competing one (strict: any
  competing value anywhere makes it wrong), and does not hedge;
* ``mention`` — correct when it names an acceptable answer anywhere (the judge-free check of
  :func:`trek.analysis.mentions_answer`, most lenient).

**Each dataset's protocol on top of it:**

* FreshQA and InfoDeepSeek: ``correct`` or ``incorrect``; a response that declines to answer
  (:func:`trek.graders.exact_rules.abstains`, "no information"-style replies included) is
  incorrect;
* SealQA (and the generic grader's datasets): ``correct`` (A), ``incorrect`` (B) or
  ``not_attempted`` (C) — C when the response declines to answer and names no annotated answer (an
  empty response too) or offers no value at all, B for any other response that is not correct;
* false-premise questions (FreshQA's and InfoDeepSeek's ``false_premise``): correct when the
  response rejects the premise with a statement that denies it
  (:func:`trek.graders.exact_rules.rejects_premise`: a negation anywhere is not enough; a
  correction aimed at one candidate, "X, not Y", accepts the premise; a clause that declines
  denies nothing); the reference's wording need not be repeated.

**Undecided** (``exact-5``). The grader decides only what the annotations and its rules support;
anything else is ``undecided``, with the reason in :attr:`Decision.undecided` (which rule could not
decide, and what the response named that no annotation covers), so a guess never enters the
records as a verdict. It abstains when

* the response names a value no annotation covers where the answer goes
  (:func:`trek.graders.exact_values.uncovered`: a capitalized name or a number that is neither an
  annotated answer, nor one of their forms, nor the question's): the value may be an alias the
  annotations lack (``rule commitment``); beside a right answer such a name only counts when it is
  listed with it or stands in another sentence that speaks in the question's terms. One readable
  number or date that is not the reference's (or only numbers where a name is asked) is wrong,
  not undecided;
* it is long (more than :data:`LONG_WORDS` words) and names anything but one acceptable answer
  (``rule length``);
* it narrates a change of state (a word of :data:`CHANGE_WORDS`) among two or more values and
  does not end on the one it commits to (``rule several states``), unless the others are context
  after it (``A, who replaced B``) or the change is ``X … until <time>, when Y …`` between two
  annotated answers (then Y counts);
* it hedges (:data:`HEDGE_WORDS`) around a right answer (``rule hedge``; SealQA's protocol allows
  a hedge around its one right answer), or bounds or approximates a number (``at least 14``,
  ``about 15`` for 14: ``rule approximate``);
* it writes a number form no parser reads as one value (``383.726``, ``03/04/2024``: ``rule format``);
* under a false premise, it denies the premise and also states an answer the reference does not
  give (or states one first and denies later: ``X tried, but the bid was withdrawn; no company
  bought it``), hedges its denial, or names an unannotated value and neither denies nor asserts
  (``rule premise``).

Before naming, dates, grouped numbers, money and durations are put in one form by their parsers
(:func:`trek.graders.exact_values.canonical`: :mod:`dateparser`, :mod:`price_parser`, :mod:`pint`)
and other cased scripts are transliterated (:mod:`anyascii`), in the response and the annotations
alike. The forms an annotation allows count as its answer (:func:`trek.graders.exact_values.aliases`):
initials of a name (``UAP``, ``P. Castellan``), the items of a listed answer in any order, and for
SealQA the main part of a name (``San Lorenzo`` for ``San Lorenzo, Calvera``); a form two answers
share counts for neither. A SealQA response that offers no value at all (no name, no number) is
not attempted (C), as SealQA's protocol reads a reply that neither gives nor contradicts the answer.

Every grade says ``method="exact"``, ``grader="exact"``, ``grader_version`` :data:`VERSION`, judge
model ``oracle``; ``judge_raw`` holds the decision as JSON (what was named, which rule decided, the
unannotated values and why it is undecided).
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trek.graders import exact_rules, exact_values
from trek.graders.exact_rules import abstains
from trek.graders.freshqa import normalize_answer
from trek.types import Grade, Question, Usage

__all__ = [
    "GRADER",
    "VERSION",
    "RULES",
    "DEFAULT_RULE",
    "ECHO_WORDS",
    "LONG_WORDS",
    "HEDGE_WORDS",
    "CHANGE_WORDS",
    "Decision",
    "normalize",
    "abstains",
    "decide",
    "exact_grade",
]

GRADER = "exact"
# Version history: exact-1 first release; exact-2 premise rejection by a denying statement,
# "no information"-style abstentions, hedges and lists, no answer inside a URL or slug
# (trek.graders.exact_rules); exact-3 a clause denying existence ("there isn't one") rejects a
# false premise.
# exact-4 the round-2 rules (trek.graders.exact_rules): negation after a name, narrated changes,
# self-correction, lists "all and only", count-versus-list, list markers, false-premise rules
# (another time, InfoDeepSeek's third rule, restated corrections), more declining phrases, number,
# money and date forms, possessives, reordered multi-entity answers.
# exact-5 says "undecided" (with its reason) where the annotations cannot support a verdict: an
# unannotated name or number where the answer goes, a long response, hedges, narrated changes of state,
# number forms it cannot read, a false-premise answer that both denies and asserts (trek.graders.exact_values).
VERSION = "exact-5"
#: How a response's named answers decide (see the module docstring).
RULES = ("first", "any", "mention")
DEFAULT_RULE = "first"
#: A response run of at least this many words shared with the question is an echo of it.
ECHO_WORDS = 4
#: Datasets graded with three outcomes (A/B/C); the others are correct / incorrect.
THREE_WAY = ("sealqa", "generic")

_UNITS = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"))}
_TENS = {w: 10 * i for i, w in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
                                           "ninety"), start=2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


def _numbers(words: list[str]) -> list[str]:
    """Runs of number words replaced by their digits (``twenty five`` -> ``25``, ``one hundred and
    five`` -> ``105``); every other word kept. A word that cannot continue the number before it
    (``two ninety``) starts a new one."""
    out: list[str] = []
    i = 0
    while i < len(words):
        if words[i] not in _UNITS and words[i] not in _TENS:
            out.append(words[i])
            i += 1
            continue
        total, current, last, j = 0, 0, "", i
        while j < len(words):
            w = words[j]
            if w in _UNITS and (last in ("", "hundred", "scale", "and") or (last == "tens" and 0 < _UNITS[w] < 10)):
                current, last = current + _UNITS[w], "unit"
            elif w in _TENS and last in ("", "hundred", "scale", "and"):
                current, last = current + _TENS[w], "tens"
            elif w == "hundred" and last in ("unit", "tens") and current < 100:
                current, last = current * 100, "hundred"
            elif w in _SCALES and w != "hundred" and last in ("unit", "tens", "hundred"):
                total, current, last = total + current * _SCALES[w], 0, "scale"
            elif (w == "and" and last in ("hundred", "scale") and j + 1 < len(words)
                  and (words[j + 1] in _UNITS or words[j + 1] in _TENS)):
                last = "and"
            else:
                break
            j += 1
        out.append(str(total + current))
        i = j
    return exact_rules.formats(out)


def normalize(text: str | None) -> list[str]:
    """The words of ``text`` as the exact grader compares them (see the module docstring)."""
    return list(_normalized(text or ""))


@functools.lru_cache(maxsize=8192)
def _normalized(text: str) -> tuple[str, ...]:
    return tuple(_numbers(normalize_answer(exact_rules.prepare(html.unescape(text))).split()))


def _runs(hay: list[str], needle: list[str]) -> list[int]:
    n = len(needle)
    return [i for i in range(len(hay) - n + 1) if n and hay[i:i + n] == needle]


def _echo_mask(words: list[str], question: list[str]) -> list[bool]:
    """True for the response words inside a run of :data:`ECHO_WORDS`+ words shared with the question."""
    mask = [False] * len(words)
    grams = {tuple(question[i:i + ECHO_WORDS]) for i in range(len(question) - ECHO_WORDS + 1)}
    for i in range(len(words) - ECHO_WORDS + 1):
        if tuple(words[i:i + ECHO_WORDS]) in grams:
            for k in range(i, i + ECHO_WORDS):
                mask[k] = True
    return mask


@dataclass
class Decision:
    """What the exact grader found in a response and the outcome it gave."""

    outcome: str
    rule: str
    protocol: str
    named: list[str] = field(default_factory=list)  # annotated answers named, in order of first mention
    acceptable: list[str] = field(default_factory=list)  # which of them are acceptable
    abstained: bool = False
    rejects_premise: bool | None = None
    committed: list[str] = field(default_factory=list)  # the answers it commits to (rule first/any)
    hedged: bool = False  # it offers an unannotated alternative too ("A or someone else")
    #: the round-2 rules that decided against an otherwise committed answer (exact_rules: "unlisted
    #: extra", "count mismatch", "premise answer missing")
    ruled: list[str] = field(default_factory=list)
    #: the values the response names that no annotation covers (names, numbers), as written
    unannotated: list[str] = field(default_factory=list)
    #: why the outcome is ``undecided`` (which rule could not decide, and what the response named
    #: that no annotation covers); None for a decided outcome
    undecided: str | None = None

    @property
    def correct(self) -> bool:
        return self.outcome == "correct"

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    def explain(self) -> str:
        """One sentence a person can check (an undecided one says why)."""
        text = self._explain()
        return f"undecided: {self.undecided}; {text}" if self.undecided else text

    def _explain(self) -> str:
        if self.rejects_premise is not None:
            return ("rejects the false premise" if self.rejects_premise else "does not reject the false premise") + (
                " (declines to answer)" if self.abstained else "") + "".join(f"; {r}" for r in self.ruled)
        if not self.named:
            return "names no annotated answer" + (" and declines to answer" if self.abstained else "")
        wrong = [n for n in self.named if n not in self.acceptable]
        parts = [f"names {', '.join(repr(n) for n in self.named)}"]
        if self.acceptable:
            parts.append(f"acceptable: {', '.join(repr(n) for n in self.acceptable)}")
        if wrong:
            parts.append(f"competing: {', '.join(repr(n) for n in wrong)}")
        if self.committed and self.committed != self.named[:len(self.committed)] or len(self.committed) > 1:
            parts.append(f"commits to: {', '.join(repr(n) for n in self.committed)}")
        if self.hedged:
            parts.append("hedges with an unannotated alternative")
        parts.extend(self.ruled)
        return "; ".join(parts) + f" (rule {self.rule})"


def _named(response: str | None, question: Question, competing: Sequence[str]
           ) -> tuple[list[exact_rules.Word], list[tuple[int, int, str, bool]]]:
    """The response's words and ``(start, end, answer, acceptable)`` of every annotated answer it
    names (maximal spans within one sentence, echoes of the question left out), by position."""
    ws = exact_rules.words(response, _numbers)
    words = [w.text for w in ws]
    qwords = normalize(question.question)
    accepted = {tuple(normalize(a)): a for a in question.answers if normalize(a)}
    others: dict[tuple[str, ...], str] = {}
    for a in competing:
        key = tuple(normalize(a))
        if key and key not in accepted:
            others.setdefault(key, a)
    # the forms the annotations allow (exact_values.aliases), unless a form is shared by two answers
    main = (question.grader or question.dataset) in THREE_WAY
    forms: dict[tuple[str, ...], set[tuple[str, bool]]] = {}
    for table, ok in ((accepted, True), (others, False)):
        for text in list(table.values()):
            for alias in exact_values.aliases(text, main_part=main and ok):
                key = tuple(normalize(alias))
                if key:
                    forms.setdefault(key, set()).add((text, ok))
    for key, owners in forms.items():
        if len(owners) == 1 and key not in accepted and key not in others:
            text, ok = next(iter(owners))
            (accepted if ok else others)[key] = text
    mask = _echo_mask(words, qwords)
    spans: list[tuple[int, int, str, bool]] = []
    for table, ok in ((accepted, True), (others, False)):
        for key, text in table.items():
            in_question = bool(_runs(qwords, list(key)))
            for i in _runs(words, list(key)):
                if ws[i].sentence != ws[i + len(key) - 1].sentence:
                    continue
                if in_question and all(mask[i:i + len(key)]):
                    continue
                spans.append((i, i + len(key), text, ok))
    for key, text in accepted.items():
        for i, j in exact_rules.reordered(ws, list(key)):
            spans.append((i, j, text, True))
    kept = [s for s in spans if not any(o is not s and o[0] <= s[0] and s[1] <= o[1] and (o[1] - o[0]) > (s[1] - s[0])
                                        for o in spans)]
    kept.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    return ws, kept


#: A response longer than this many words is undecided unless every value it names is one
#: acceptable answer: a long answer weighs possibilities, and its conclusion is not read.
LONG_WORDS = 60
#: Words that hedge a claim (``may`` only where it is not a month).
HEDGE_WORDS = frozenset({
    "maybe", "perhaps", "possibly", "possible", "probably", "likely", "unlikely", "might", "may", "could",
    "unclear", "uncertain", "unconfirmed", "reportedly", "apparently", "seems", "seem", "seemed", "appears",
    "appear", "believe", "think", "guess", "suppose", "presumably", "allegedly", "rumoured", "rumored", "either",
    "if", "unsure", "expected", "speculated", "assume", "assuming",
})
#: Words that narrate a change of state (a response naming two values with one of them tells a story).
CHANGE_WORDS = frozenset({
    "until", "till", "replaced", "replacing", "replace", "replaces", "succeeded", "succeeds", "succeeding",
    "successor", "predecessor", "took", "takes", "taken", "stepped", "resigned", "left", "leaves", "returned",
    "returns", "back", "previously", "formerly", "former", "previous", "earlier", "later", "then", "since", "before",
    "after", "now", "longer", "anymore", "interim", "acting", "appointed", "became", "becomes", "changed",
    "switched", "moved", "handed", "elected", "ousted", "fired", "sacked", "departed", "retired", "originally",
    "initially", "once", "revised", "updated", "rose", "fell", "increased", "decreased", "grew", "dropped",
    "broken", "broke", "beat", "bettered", "improved", "surpassed", "overtook", "overtaken", "lost", "won", "again",
})
#: Words that make a number approximate (``about 400000``).
APPROXIMATE_WORDS = frozenset({"about", "around", "approximately", "roughly", "nearly", "almost", "over", "under",
                               "some", "circa", "ca", "estimated", "least", "most", "than", "up", "upwards"})
_HAS_DIGIT = re.compile(r"\d")
_MONTH_WORDS = frozenset({"january", "february", "march", "april", "june", "july", "august", "september", "october",
                          "november", "december"})
#: Words after an answer that put a later value in a role of context (``A, who replaced B``; ``17, up
#: from 15``), unless a word of :data:`_STORY_WORDS` tells a story between them.
_CONTEXT_AFTER = frozenset({"replaced", "replacing", "succeeded", "succeeding", "from", "after", "predecessor",
                            "who", "whose", "which"})
_STORY_WORDS = frozenset({"until", "till", "then", "later", "now", "but", "however", "back", "returned", "since",
                          "took", "when"})
_ASKS_TIME = ("when", "what year", "which year", "what date", "which date", "in what year", "what month",
              "which month", "how long ago")


def _quote(values) -> str:
    return ", ".join(repr(v) for v in values)


def _asks_time(question: str) -> bool:
    q = " ".join(normalize_answer(question).split())
    return any(q.startswith(p) or f" {p} " in f" {q} " for p in _ASKS_TIME)


def _hedges(ws: list[exact_rules.Word]) -> list[str]:
    out = []
    for i, w in enumerate(ws):
        if w.text not in HEDGE_WORDS:
            continue
        if w.text == "may" and any(0 <= k < len(ws) and (ws[k].text.isdigit() or ws[k].text in _MONTH_WORDS)
                                   for k in (i - 2, i - 1, i + 1, i + 2)):
            continue  # the month
        out.append(w.text)
    return out


def _gap_is_list(ws: list[exact_rules.Word], a: tuple[int, int], b: tuple[int, int]) -> bool:
    """True when the word spans ``a`` and ``b`` stand in one sentence with only list words between."""
    (s1, e1), (s2, e2) = sorted([a, b])
    if e1 > s2 or ws[s1].sentence != ws[s2].sentence:
        return False
    return all(w.text in ("and", "or", "&", "/", "nor", "either", "also", "as", "well") for w in ws[e1:s2])


#: Words that bound a number rather than state it (``at least 14``, ``more than 14``).
BOUND_WORDS = frozenset({"least", "most", "more", "over", "under", "fewer", "less", "nearly", "almost", "upwards",
                         "exceeding", "below", "above", "beyond"})
_QUESTION_FILLER = frozenset({"who", "what", "which", "when", "where", "how", "many", "much", "the", "of", "is", "are",
                              "was", "were", "does", "did", "do", "has", "have", "in", "on", "at", "a", "an", "to",
                              "for", "and", "or", "its", "it", "as"})


def _bound(ws: list[exact_rules.Word], start: int) -> str | None:
    """The bounding word within three words before ``start`` in its phrase, if any."""
    for k in range(max(0, start - 3), start):
        if ws[k].phrase == ws[start].phrase and ws[k].text in BOUND_WORDS:
            return ws[k].text
    return None


def _rival_sentence(ws: list[exact_rules.Word], extra, first, qwords: Sequence[str]) -> bool:
    """True when an unannotated name stands in another sentence than the committed answer and that
    sentence uses a word of the question (``Ossian Gray is the current mayor``): a rival answer."""
    content = {w for w in qwords if w not in _QUESTION_FILLER and len(w) >= 3}
    here = ws[first[0]].sentence
    # exact_values counts sentences its own way: compare by the words of each rival name instead
    for v in extra:
        if v.kind != "name":
            continue
        for s, _ in _positions(ws, v.words):
            sent = ws[s].sentence
            if sent != here and any(w.text in content for w in ws if w.sentence == sent):
                return True
    return False


def _ended_until(ws: list[exact_rules.Word], found, chosen, last) -> bool | None:
    """For ``X ... until <time>, when Y ...`` (two annotated answers, ``until`` between them, nothing
    said of a return): whether Y, the value the change ends on, is acceptable; else None."""
    if len({f[2] for f in found}) != 2:
        return None
    firsts = [f for f in found if f[2] != last[2]]
    if any(f[0] > last[0] for f in firsts):
        return None
    gap = {w.text for w in ws[max(f[1] for f in firsts):last[0]]}
    story = {w.text for w in ws}
    if not gap & {"until", "till"} or story & {"back", "returned", "again", "interim", "acting", "not", "no"}:
        return None
    return bool(last[3])


def _context_after(ws: list[exact_rules.Word], found, chosen) -> bool:
    """True when every annotated answer after the committed one stands in its sentence after a word
    that makes it context (``A, who replaced B``), with no word of a story between."""
    s0, e0 = found[chosen[0]][0], found[chosen[0]][1]
    later = [f for k, f in enumerate(found) if k not in chosen and f[0] >= e0]
    if any(f[0] < s0 for k, f in enumerate(found) if k not in chosen):
        return False
    for s, _, _, _ in later:
        gap = {w.text for w in ws[e0:s]}
        if ws[s].sentence != ws[e0 - 1].sentence or not gap & _CONTEXT_AFTER or gap & _STORY_WORDS:
            return False
    return True


def _positions(ws: list[exact_rules.Word], value: Sequence[str]) -> list[tuple[int, int]]:
    texts = [w.text for w in ws]
    return [(i, i + len(value)) for i in _runs(texts, list(value))]


def decide(question: Question, response: str | None, competing: Sequence[str] = (), *,
           rule: str = DEFAULT_RULE, protocol: str | None = None) -> Decision:
    """The exact verdict on ``response`` (see the module docstring). ``competing``: the answers the
    question's annotated pages support (acceptable ones among them are recognised as such);
    ``protocol``: the dataset whose outcomes apply (default ``question.dataset``). The outcome is
    ``undecided`` (with the reason in :attr:`Decision.undecided`) where the annotations and the
    rules cannot support a verdict."""
    if rule not in RULES:
        raise ValueError(f"exact grading rule must be one of {', '.join(RULES)}, not {rule!r}")
    protocol = protocol or question.grader or question.dataset
    d = _decide(question, response, competing, rule=rule, protocol=protocol)
    if d.outcome != "undecided":
        d.undecided = None
    return d


def _undecided(d: Decision, rule_name: str, why: str) -> Decision:
    d.outcome = "undecided"
    d.undecided = f"rule {rule_name}: {why}"
    return d


def _decide(question: Question, response: str | None, competing: Sequence[str], *, rule: str,
            protocol: str) -> Decision:
    three_way = protocol in THREE_WAY
    declined = abstains(response)
    ws, found = _named(response, question, competing)
    names = list(dict.fromkeys(a for _, _, a, _ in found))
    good = [a for a in names if any(a == b and ok for _, _, b, ok in found)]
    qwords = normalize(question.question)
    main = protocol in THREE_WAY
    known = [normalize(a) for a in (*question.answers, *competing)]
    known += [normalize(x) for a in question.answers for x in exact_values.aliases(a, main_part=main)]
    known += [normalize(x) for a in competing for x in exact_values.aliases(a)]
    asks_time = _asks_time(question.question)
    numeric = any(normalize(a)[:1] and normalize(a)[0].replace(".", "").isdigit() for a in question.answers)
    canon = exact_values.canonical(exact_values.transliterate(html.unescape(response or "")))
    extra = exact_values.uncovered(canon, known, qwords, years=asks_time, normalize=normalize)
    if not numeric and not asks_time:
        # a number beside a name answer is context (a date, a count), unless it is the only value offered
        extra = [v for v in extra if v.kind == "name"] or ([] if names else extra)
    length = len((response or "").split())
    unreadable = exact_values.unreadable(canon)
    hedges = _hedges(ws)
    change = sorted({w.text for w in ws} & CHANGE_WORDS)
    if question.false_premise:
        return _decide_premise(question, response, competing, ws, names, good, declined, extra, length, hedges,
                               rule=rule, protocol=protocol, three_way=three_way)
    chosen, hedged = exact_rules.commitment(ws, [(s, e, ok) for s, e, _, ok in found])
    committed = list(dict.fromkeys(found[k][2] for k in chosen))
    d = Decision(outcome="incorrect", rule=rule, protocol=protocol, named=names, acceptable=good, abstained=declined,
                 committed=committed, hedged=hedged, unannotated=[v.text for v in extra])
    if rule == "first":
        ok = bool(chosen) and all(found[k][3] for k in chosen) and not hedged
    elif rule == "any":
        ok = bool(good) and len(good) == len(names) and not hedged
    else:
        ok = bool(good)
    if ok and rule != "mention":
        if exact_rules.unlisted_extra(ws, [(s, e, ok_) for s, e, _, ok_ in found], chosen,
                                      exact_rules.proper_words(response), set(qwords)):
            ok = False
            d.ruled.append("lists an unannotated name beside it")
        value = normalize(found[chosen[0]][2])
        if ok and value and value[0].isdigit():
            n = exact_rules.list_count(response, value[0], normalize)
            if n is not None and n != int(value[0]):
                ok = False
                d.ruled.append(f"count mismatch: says {value[0]}, lists {n}")
    if ok:
        d.outcome = "correct"
    elif three_way and declined and not names:
        d.outcome = "not_attempted"
    if rule == "mention":
        return d  # the lenient check reads mentions only; it has nothing to abstain from
    # -- where the verdict above is a guess, say so --------------------------------------------------
    if unreadable:
        return _undecided(d, "format", f"the response writes {_quote(unreadable)}, a form the grader cannot read "
                                       "as one value")
    if declined and not names:
        if extra:
            return _undecided(d, "commitment", f"the response declines but names {_quote(d.unannotated)}, which "
                                               "no annotation covers")
        return d
    if length > LONG_WORDS and not (names == good and len(names) == 1 and not extra and not hedges and not change):
        return _undecided(d, "length", f"a long response ({length} words, more than {LONG_WORDS}) whose "
                                       "conclusion the rules do not read")
    if not chosen:
        if extra and numeric and not names and all(v.kind == "number" for v in extra) and len(
                {v.words for v in extra}) == 1 and not hedges and not change:
            if any(w.text in APPROXIMATE_WORDS for w in ws):
                return _undecided(d, "approximate", f"the response gives {extra[0].text!r} as an approximate value")
            d.ruled.append(f"gives the value {extra[0].text!r}, which is not the reference's")
            return d  # one readable number that is not the reference's value
        if extra and all(v.kind == "number" for v in extra) and not any(
                _HAS_DIGIT.search(a) for a in question.answers) and not hedges and not exact_values.names(canon):
            d.ruled.append("gives only numbers, and no form of the reference has one")
            return d  # a date or a count where a name is asked: no alias of the answer
        if extra:
            return _undecided(d, "commitment", f"the response names {_quote(d.unannotated)}, which no annotation "
                                               "covers")
        if three_way and not names and not declined and not exact_values.names(canon) and not any(
                _HAS_DIGIT.search(w.text) for w in ws):
            d.outcome = "not_attempted"  # it offers no value at all (not even one of the question's): no answer
        return d
    first = found[chosen[0]]
    values = len(set(committed) | set(names)) + len(extra)
    if change and values >= 2:
        last = max(found, key=lambda f: f[1])
        until = _ended_until(ws, found, chosen, last) if not extra else None
        if until is not None:
            # "X ... until 2024, when Y took office": the value after "until" is the one now
            d.committed, d.outcome = [last[2]], "correct" if until else "incorrect"
            d.ruled.append(f"a change narrated with 'until' ends on {last[2]!r}")
            committed, first = [last[2]], last
        elif extra or (last[2] not in committed and not _context_after(ws, found, chosen)):
            return _undecided(d, "several states", "the response narrates a change (" + ", ".join(change) + ") "
                              "among " + _quote([*names, *d.unannotated]) + " and does not end on what it commits to")
    if d.outcome == "correct":
        bound = _bound(ws, first[0])
        if numeric and bound:
            return _undecided(d, "approximate", f"the response bounds {first[2]!r} ({bound}) rather than stating it")
        if extra and _rival_sentence(ws, extra, first, qwords):
            return _undecided(d, "commitment", f"another sentence names {_quote(d.unannotated)} in terms of the "
                                               "question, and no annotation covers it")
        if hedges and not (three_way and not extra and names == good and len(good) == 1):
            # SealQA's protocol allows a hedge around the one right answer; the others do not say
            return _undecided(d, "hedge", f"it hedges ({', '.join(dict.fromkeys(hedges))}) around "
                                          f"{_quote(committed)}")
        for v in extra:
            for pos in _positions(ws, v.words):
                end = pos[1]
                item = end >= len(ws) or ws[end].phrase != ws[end - 1].phrase or ws[end].text in (
                    "and", "or", "&", "/", "are", "were", "both", "share", "shared", "jointly")
                if item and any(_gap_is_list(ws, (s, e), pos) for s, e, _, _ in (found[k] for k in chosen)):
                    return _undecided(d, "commitment", f"the response lists {v.text!r} beside {first[2]!r}, and "
                                                       "no annotation covers it")
    else:
        if numeric and any(w.text in APPROXIMATE_WORDS for w in ws):
            return _undecided(d, "approximate", "the response gives an approximate value other than the reference's")
        if extra and (hedges or change or any(v.sentence != ws[first[0]].sentence for v in extra)):
            return _undecided(d, "commitment", f"besides {_quote(committed)} the response names "
                                               f"{_quote(d.unannotated)}, which no annotation covers")
    return d


def _decide_premise(question: Question, response: str | None, competing: Sequence[str], ws, names, good,
                    declined: bool, extra, length: int, hedges, *, rule: str, protocol: str,
                    three_way: bool) -> Decision:
    """The false-premise protocol (module docstring), with its abstentions."""
    alternatives = [normalize(a) for a in competing if a not in question.answers]
    kinds = exact_rules.premise_clauses(question.question, response, alternatives, references=question.answers)
    decided = [k for k in kinds if k is not None]
    rejects = bool(decided) and decided[0] == "denies"
    ruled: list[str] = []
    if rejects and protocol == "infodeepseek":
        required = exact_rules.premise_answers(question.answers, alternatives)
        said = [w.text for w in ws]
        if required and not any(_runs(said, list(r)) for r in required):
            rejects = False
            ruled.append("premise answer missing: the reference also gives " + " / ".join(
                " ".join(r) for r in required))
    outcome = "correct" if rejects else ("not_attempted" if three_way and declined else "incorrect")
    d = Decision(outcome=outcome, rule=rule, protocol=protocol, named=names, acceptable=good, abstained=declined,
                 rejects_premise=rejects, ruled=ruled, unannotated=[v.text for v in extra])
    if rule == "mention":
        return d
    if length > LONG_WORDS:
        return _undecided(d, "length", f"a long response ({length} words, more than {LONG_WORDS}) whose "
                                       "conclusion about the premise the rules do not read")
    if rejects:
        given = [a for a in alternatives if any(_runs(normalize(r), list(a)) for r in question.answers)]
        strange = [a for a in alternatives if a not in given]
        unknown = [list(v.words) for v in extra if v.kind == "name"]
        again = exact_rules.premise_clauses(question.question, response, [*strange, *unknown],
                                            references=question.answers)
        if "asserts" in again:
            also = f" ({_quote(d.unannotated)}, which no annotation covers)" if unknown and not [
                k for k in exact_rules.premise_clauses(question.question, response, strange,
                                                       references=question.answers) if k == "asserts"] else ""
            return _undecided(d, "premise", f"the response denies the premise and also states an answer to it{also}")
    if not rejects and not ruled and "denies" in decided:
        return _undecided(d, "premise", "the response states an answer to the premise and also denies it")
    if rejects and hedges:
        return _undecided(d, "hedge", f"it hedges ({', '.join(dict.fromkeys(hedges))}) while it denies the premise")
    if not decided and not declined and extra:
        return _undecided(d, "premise", f"the response names {_quote(d.unannotated)}, which no annotation covers, "
                                        "and neither denies the premise nor names an annotated answer")
    return d


def exact_grade(question: Question, response: str | None, competing: Sequence[str], *,
                rule: str = DEFAULT_RULE, source: str = "", protocol: str | None = None,
                model: str = "oracle") -> Grade:
    """The :class:`~trek.types.Grade` of :func:`decide` (``source`` names the annotations)."""
    d = decide(question, response, competing, rule=rule, protocol=protocol)
    settings: dict[str, Any] = {"rule": rule, "annotations": source}
    return Grade(question_id=question.id, dataset=question.dataset, response=response, outcome=d.outcome,  # type: ignore[arg-type]
                 method="exact", grader=GRADER, grader_version=VERSION, judge_model=model, judge_settings=settings,
                 judge_raw=[d.to_json()], error=d.undecided if d.outcome == "undecided" else None, usage=Usage())

