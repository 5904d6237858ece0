"""Query adequacy by plausibility (paper appendix C.2) for the exact judge.

The paper reads a system's recorded queries for what they aim at; it does not search again. The
exact judge does the same from annotations written per question (``query_targets.yaml`` in the
TrekBench-Mini folder, beside its questions):

* ``entity``: the names of what the question asks about (any one counts). For a multi-hop
  question it is the *bridge* entity, the one the first hop resolves to, and ``hop1`` holds the
  descriptor the question gives instead (``the club that plays at Brackwater Lane``);
* ``attribute``: words that target the asked fact (``head coach``, ``coach``);
* ``time``: ``years`` a query may name, and ``required`` when the question fixes a time that the
  queries must name;
* ``competing``: names of neighbouring entities (a women's team, a rival club).

:func:`assess` takes a question's recorded queries *together*: they are adequate when they name
the entity (for multi-hop: the bridge entity, so the question itself as a query is not), name the
attribute, name the time when it is required, and name no competing entity and no year outside
the window. The verdict never depends on a search, a rank or a depth, and the detail says which
target each query met and which were missed.

The initials of an entity's name written in capitals (``LFC`` for ``Larchfield Football Club``)
name it too. Where the targets cannot support a verdict the value is None (*undecided*, rule
``targets-2``) and the detail's ``undecided`` says why: a missed entity where a query writes a
code, words in another script or a near form of the entity's name (``Estavie``); a missed
attribute where a query has words the targets do not list (a synonym, another language); a year
outside the window beside one inside it, in queries none of which is adequate alone (one that is
makes the others a comparison, and the set adequate); adequate queries that add names or months
no target lists (perhaps over-specific).

Matching works on words: lower case, HTML entities decoded, a possessive ``'s`` dropped,
everything but letters and digits a separator; a phrase matches consecutive words, and a word of
a phrase also matches its forms ending in ``s``, ``es``, ``d``, ``ed`` or ``ing``. A year is a
four-digit word from 1800 to 2099 (``2024-12-31`` names 2024).
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RULE", "FILE", "QueryTargets", "QueryTargetsError", "load", "assess", "adequate_queries", "words", "names"]

#: The rule's name and version, recorded with every verdict.
# targets-2: a verdict the targets cannot support is None (undecided), with the reason in the
# detail's "undecided": a possible abbreviation, synonym or other language where a target was
# missed, a comparison year beside an in-window one, over-specific queries.
RULE = "targets-2"
#: The file name of the annotations, in the TrekBench-Mini folder.
FILE = "query_targets.yaml"

_KEYS = {"entity", "hop1", "attribute", "time", "competing"}
_TIME_KEYS = {"years", "required"}
_ENDINGS = ("", "s", "es", "d", "ed", "ing")
_SPLIT = re.compile(r"[^0-9a-z]+")
_POSSESSIVE = re.compile(r"(\w)['\u2019]s\b")


class QueryTargetsError(ValueError):
    """The query-target file is unreadable or a field is wrong (the message names file, question, field)."""


@dataclass(frozen=True)
class QueryTargets:
    """What a question's queries must aim at (module docstring)."""

    question_id: str
    entity: tuple[str, ...]
    attribute: tuple[str, ...]
    years: frozenset[int]
    required: bool = False
    hop1: tuple[str, ...] = ()
    competing: tuple[str, ...] = ()

    @property
    def multi_hop(self) -> bool:
        return bool(self.hop1)

    def fingerprint(self) -> list[Any]:
        return [RULE, list(self.entity), list(self.hop1), list(self.attribute), sorted(self.years), self.required,
                list(self.competing)]


def words(text: str) -> list[str]:
    """The words of ``text`` as the matcher sees them (module docstring)."""
    text = html.unescape(text).lower()
    text = _POSSESSIVE.sub(r"\1", text)
    return [w for w in _SPLIT.split(text) if w]


def _phrase_at(tokens: Sequence[str], phrase: Sequence[str], i: int) -> bool:
    return all(i + j < len(tokens) and any(tokens[i + j] == p + e for e in _ENDINGS) for j, p in enumerate(phrase))


def names(text: str, phrase: str) -> bool:
    """Whether ``text`` names ``phrase`` (consecutive words, with the endings above)."""
    tokens, want = words(text), words(phrase)
    return bool(want) and any(_phrase_at(tokens, want, i) for i in range(len(tokens)))


def _years(text: str) -> list[int]:
    return [int(w) for w in words(text) if len(w) == 4 and w.isdigit() and 1800 <= int(w) <= 2099]


def _first(queries: Sequence[str], phrases: Sequence[str], skip: Sequence[str] = ()) -> dict[str, str] | None:
    """The first (query, phrase) where a query names a phrase (a name inside a ``skip`` name does not count)."""
    for query in queries:
        for phrase in phrases:
            if names(query, phrase) and not any(names(query, s) and _inside(phrase, s) for s in skip):
                return {"query": query, "names": phrase}
    return None


def _inside(phrase: str, longer: str) -> bool:
    a, b = words(phrase), words(longer)
    return len(b) > len(a) and any(_phrase_at(b, a, i) for i in range(len(b)))


def assess(targets: QueryTargets, queries: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The verdict on ``queries`` taken together: the judge-shaped value (``query_adequate``,
    ``reason``) and the detail (what each target met, ``missed``, the rule)."""
    entity = _first(queries, targets.entity, skip=targets.competing) or _by_initials(queries, targets)
    hop1 = _first(queries, targets.hop1) if targets.multi_hop else None
    attribute = _first(queries, targets.attribute)
    competing = [{"query": q, "names": c} for q in queries for c in targets.competing if names(q, c)]
    named_years = sorted({y for q in queries for y in _years(q)})
    outside = [y for y in named_years if y not in targets.years]
    in_window = [y for y in named_years if y in targets.years]
    missed: list[str] = []
    if entity is None:
        missed.append("bridge entity" if targets.multi_hop else "entity")
    if attribute is None:
        missed.append("attribute")
    if targets.required and not in_window:
        missed.append("time")
    if competing:
        missed.append("no competing entity")
    comparison = None
    if outside and len(queries) > 1 and not missed:
        # one query that is adequate on its own, the others adding earlier or later years: a comparison
        alone = next((q for q in queries if _years(q) and all(y in targets.years for y in _years(q))
                      and assess(targets, [q])[0]["query_adequate"] is True), None)
        comparison = {"query": alone, "years": outside} if alone else None
    if outside and comparison is None:
        missed.append("no date outside the window")
    adequate: bool | None = not missed
    detail = {"rule": RULE, "entity": entity, "hop1": hop1, "attribute": attribute, "competing": competing,
              "years": named_years, "outside_window": outside, "time_required": targets.required,
              "multi_hop": targets.multi_hop, "missed": missed, "undecided": None,
              "comparison": comparison}
    unsure = _unsure(targets, queries, detail)
    if unsure:
        adequate = None
        detail["undecided"] = unsure
    return {"query_adequate": adequate, "reason": _reason(targets, detail)}, detail


def adequate_queries(targets: QueryTargets) -> list[str]:
    """Queries that meet every target (for ``trek trace verify``'s query repair): for a multi-hop
    question first the first hop's descriptor, then the entity with the attribute and the latest
    year of the window (the time the question asks about). Built from the targets' first names only,
    so :func:`assess` reads them as adequate (no competing name, no year outside the window)."""
    main = f"{targets.entity[0]} {targets.attribute[0]}"
    if targets.years:
        main += f" {max(targets.years)}"
    return [*([targets.hop1[0]] if targets.multi_hop else []), main]


_JOINERS = frozenset({"of", "the", "and", "&", "de", "la"})


def initials(phrase: str) -> str | None:
    """The initials of a name of two or more capitalized words (``Larchfield Football Club`` ->
    ``LFC``; ``of`` / ``the`` / ``and`` left out), or None."""
    caps = [w for w in phrase.split() if w.lower() not in _JOINERS]
    if len(caps) < 2 or not all(w[:1].isupper() for w in caps):
        return None
    return "".join(w[0] for w in caps).upper()


def _by_initials(queries: Sequence[str], t: QueryTargets) -> dict[str, str] | None:
    """The first (query, initials) where a query writes an entity's initials in capitals, as a
    word of its own, and no competing entity has the same initials."""
    taken = {initials(c) for c in t.competing}
    for query in queries:
        for phrase in t.entity:
            code = initials(phrase)
            if code and code not in taken and re.search(rf"(?<![\w]){re.escape(code)}(?![\w])", query):
                return {"query": query, "names": code}
    return None


#: A query word that begins with the same this many letters as a word of the entity's name, without
#: being it, may be the name in another language or spelling (``Estavie`` for ``Estavia``).
NEAR_PREFIX = 5


def _distinctive(word: str) -> bool:
    """True for a word of a name that is no common English word (``Estavia``, not ``Airport``)."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en") < 3.5


#: A query word that is not a target, a year or a common word counts as extra (a possible synonym
#: where a target was missed). Adequate queries that add this many capitalized words or months no
#: target lists (names, dates: ``former Meta executive hired March``) may be over-specific.
OVER_SPECIFIC_NAMES = 2
_MONTHS = frozenset({"january", "february", "march", "april", "may", "june", "july", "august", "september",
                     "october", "november", "december"})


def _specific(queries: Sequence[str], known: set[str]) -> list[str]:
    """The capitalized words (not a query's first) and month names the queries add to the targets."""
    out: list[str] = []
    for q in queries:
        for i, tok in enumerate(re.findall(r"[^\W\d_][\w'-]*", html.unescape(q))):
            w = words(tok)
            if not w or w[0] in known or w[0] in _COMMON:
                continue
            if (i and tok[:1].isupper()) or w[0] in _MONTHS:
                out.append(w[0])
    return list(dict.fromkeys(out))
_COMMON = frozenset({
    "the", "a", "an", "of", "in", "on", "at", "for", "to", "by", "with", "and", "or", "is", "are", "was", "were",
    "who", "what", "which", "when", "where", "how", "many", "much", "current", "currently", "now", "latest", "new",
    "newest", "recent", "today", "this", "year", "as", "from", "its", "it", "their", "does", "did", "do", "has",
    "have", "most", "number", "name", "list", "vs", "versus", "than",
})


def _target_words(t: QueryTargets) -> set[str]:
    return {w for phrase in (*t.entity, *t.hop1, *t.attribute, *t.competing) for w in words(phrase)}


def _unsure(t: QueryTargets, queries: Sequence[str], d: dict[str, Any]) -> str | None:
    """Why the verdict cannot be sure, or None (module docstring, rule ``targets-2``)."""
    missed = d["missed"]
    raw = " ".join(queries)
    known = _target_words(t)
    extra = [w for q in queries for w in words(q) if w not in known and w not in _COMMON and not w.isdigit()
             and not any(w.startswith(k) for k in known if len(k) >= 4)]
    codes = [c for c in re.findall(r"\b[A-Z][A-Z0-9]{1,5}\b", raw) if not c.isdigit()]
    foreign = [w for w in re.findall(r"\w+", raw) if any(ch.isalpha() and not ch.isascii() for ch in w)]
    entity_missed = "entity" in missed or "bridge entity" in missed
    stems = {w[:NEAR_PREFIX] for phrase in t.entity for w in words(phrase) if len(w) > NEAR_PREFIX
             and _distinctive(w)}
    entity_words = {w for phrase in t.entity for w in words(phrase)}
    near = [w for q in queries for w in words(q) if w[:NEAR_PREFIX] in stems and w not in entity_words]
    if entity_missed and (codes or foreign or near):
        return ("a query may name the entity in a form the targets do not list: "
                + ", ".join(repr(x) for x in dict.fromkeys([*codes, *foreign, *near])))
    if "attribute" in missed and extra and not entity_missed:
        return ("a query may target the fact with words the targets do not list: "
                + ", ".join(repr(x) for x in dict.fromkeys(extra)))
    if "attribute" in missed and foreign:
        return "a query in another script may target the fact: " + ", ".join(repr(x) for x in dict.fromkeys(foreign))
    if missed == ["no date outside the window"] and [y for y in d["years"] if y in t.years]:
        return ("a query names a year outside the window (" + ", ".join(map(str, d["outside_window"]))
                + ") beside one inside it: it may compare the two")
    specific = _specific(queries, known)
    if not missed and len(specific) >= OVER_SPECIFIC_NAMES:
        return "the queries add names no target lists (" + ", ".join(repr(x) for x in specific) + \
            "): they may be over-specific"
    return None


def _reason(t: QueryTargets, d: dict[str, Any]) -> str:
    parts: list[str] = []
    if d["entity"] is not None:
        parts.append(f"they name {d['entity']['names']!r}")
    elif t.multi_hop:
        hop = f" (they stay at the first hop, {d['hop1']['names']!r})" if d["hop1"] else ""
        parts.append(f"no query names the entity the first hop leads to ({t.entity[0]!r}){hop}")
    else:
        parts.append(f"no query names the entity ({t.entity[0]!r})")
    if d["attribute"] is not None:
        parts.append(f"target {d['attribute']['names']!r}")
    else:
        parts.append(f"no query targets the fact asked ({t.attribute[0]!r})")
    if t.required and "time" in d["missed"]:
        parts.append("no query names the time the question fixes (" + ", ".join(map(str, sorted(t.years))) + ")")
    if d["competing"]:
        parts.append(f"a query names a different entity ({d['competing'][0]['names']!r})")
    if d["outside_window"] and d.get("comparison"):
        parts.append(f"{d['comparison']['query']!r} is adequate on its own; the others add the years "
                     + ", ".join(map(str, d["outside_window"])) + " to compare")
    elif d["outside_window"]:
        parts.append("a query names a year outside the question's window (" + ", ".join(map(str, d["outside_window"]))
                     + ")")
    verdict = "Adequate" if not d["missed"] else "Not adequate"
    if d.get("undecided"):
        return f"Undecided ({d['undecided']}); by the targets alone: {verdict.lower()}: " + "; ".join(parts) + "."
    return f"{verdict}: " + "; ".join(parts) + "."


# -- the file --------------------------------------------------------------------------------------
_LOADED: dict[tuple[str, int, int], dict[str, QueryTargets]] = {}


def load(path: str | os.PathLike[str]) -> dict[str, QueryTargets]:
    """The query targets of ``path`` by question id (read once while the file is unchanged).
    Raises :class:`QueryTargetsError` naming the file, the question and the field."""
    import yaml

    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    if key in _LOADED:
        return _LOADED[key]
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise QueryTargetsError(f"{p}: not readable YAML: {e}") from None
    if not isinstance(raw, Mapping):
        raise QueryTargetsError(f"{p}: expected a mapping of question id to targets")
    out = {str(qid): _entry(p, str(qid), value) for qid, value in raw.items()}
    _LOADED[key] = out
    return out


def _names(p: Path, qid: str, field: str, value: Any, *, empty: bool) -> tuple[str, ...]:
    if value is None and empty:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and words(v) for v in value) or (
            not value and not empty):
        raise QueryTargetsError(f"{p}: {qid}: '{field}' must be a list of names"
                                + ("" if empty else " (at least one)"))
    return tuple(value)


def _entry(p: Path, qid: str, value: Any) -> QueryTargets:
    if not isinstance(value, Mapping):
        raise QueryTargetsError(f"{p}: {qid}: expected a mapping with {', '.join(sorted(_KEYS))}")
    unknown = set(value) - _KEYS
    if unknown:
        raise QueryTargetsError(f"{p}: {qid}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    time = value.get("time")
    if not isinstance(time, Mapping) or set(time) - _TIME_KEYS or "years" not in time:
        raise QueryTargetsError(f"{p}: {qid}: 'time' must be a mapping with 'years' (and 'required')")
    years = time["years"]
    if not isinstance(years, list) or not all(type(y) is int and 1800 <= y <= 2099 for y in years):
        raise QueryTargetsError(f"{p}: {qid}: 'time.years' must be a list of years (1800-2099)")
    required = time.get("required", False)
    if not isinstance(required, bool):
        raise QueryTargetsError(f"{p}: {qid}: 'time.required' must be true or false")
    if required and not years:
        raise QueryTargetsError(f"{p}: {qid}: 'time.required' is true but 'time.years' is empty")
    return QueryTargets(question_id=qid, entity=_names(p, qid, "entity", value.get("entity"), empty=False),
                        attribute=_names(p, qid, "attribute", value.get("attribute"), empty=False),
                        years=frozenset(years), required=required,
                        hop1=_names(p, qid, "hop1", value.get("hop1"), empty=True),
                        competing=_names(p, qid, "competing", value.get("competing"), empty=True))
