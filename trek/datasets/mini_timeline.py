"""Generated timeline documents for TrekBench-Mini: enough outdated and relevance pages for Ctrl.

TrekBench-Mini's hand-written pages give each question at least 8 outdated and 4 relevance
documents; the Ctrl conditions and ablations need more (OO with 20 outdated documents and budgets
of 5/10/15/20 that differ, Rerank choosing 10 of more than 10). ``data/mini/timelines.yaml``
lists, for the questions Ctrl uses, the answers that held before the gold one (with the dates a
page may carry) and neighbouring questions with their own answers. :func:`generate` turns it into
short pages, deterministically:

* per question, ``20 - (hand-written outdated)`` outdated and ``10 - (hand-written relevance)``
  relevance pages; slot ``i`` takes timeline entry ``i`` (cycling) and the next claim of the
  entry each time the entries come round again;
* the page's date is drawn uniformly inside the entry's dates, seeded by (question id, role,
  slot) through SHA-256 (never Python's salted ``hash``), and kept before the earliest gold date
  (outdated) or after the latest (relevance), on a day no other page of the question has;
* the text is the claim inside one of :data:`FRAMES` (seeded); the source name and site are
  those of the question's hand-written pages of the same role, in turn;
* every page is marked ``metadata.generated = true`` and records where it states its answer,
  ``metadata.answer_span = {"start": s, "end": e}`` (characters of ``text``).

:func:`write` puts them in ``data/mini/generated/documents.jsonl``, which
:func:`trek.datasets.mini.load` reads like any other part. Generating again gives the same bytes
(``trek data mini-generate --check`` says whether the committed file is current).

:func:`format_value` writes a value the way a template field asks for it (``{value}``,
``{value_words}``, ``{value_words_cap}``, ``{value_ordinal}``, ``{value_number}``); the exact
fabricator of TrekBench-Ctrl uses it to write another answer where a gold page states its own.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from num2words import num2words

from trek.datasets import mini
from trek.types import Document, write_jsonl

__all__ = [
    "VERSION",
    "SPEC_FILE",
    "GENERATED_DIR",
    "OUTDATED_TARGET",
    "RELEVANCE_TARGET",
    "FRAMES",
    "VALUE_FIELDS",
    "TimelineError",
    "format_value",
    "fill_value",
    "load_spec",
    "generate",
    "write",
    "check",
]

VERSION = "mini.timeline/1"
SPEC_FILE = "timelines.yaml"
GENERATED_DIR = mini.GENERATED_DIR
OUTDATED_TARGET = 20
RELEVANCE_TARGET = 10

#: The short dated wrappers around a claim (``{claim}`` once; no value field).
FRAMES: tuple[str, ...] = (
    "{claim} This was the position on {date_long}.",
    "Update, {date_long}: {claim}",
    "{claim} {source} confirmed the details on {date_long}.",
    "From the {source} archive, {month_year}. {claim}",
    "{claim} The names and figures above were checked in {month_year}.",
    "Briefing for {date_long}. {claim}",
)

VALUE_FIELDS = mini.VALUE_FIELDS
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]


class TimelineError(ValueError):
    """The timelines file is invalid or does not fit the benchmark; names the file and the entry."""


def _in_words(n: int, to: str = "cardinal") -> str:
    """``n`` in words (``21`` -> ``twenty-one``, ordinal ``twenty-first``), through num2words."""
    if not 0 <= n < 100:
        raise ValueError(f"{n} is outside 0-99, which is all a value in words may be")
    return num2words(n, to=to)


def format_value(field: str, value: str) -> str:
    """``value`` as the template ``field`` writes it: ``value`` as is, ``value_words`` ("4" ->
    "four"), ``value_words_cap`` ("Four"), ``value_ordinal`` ("fourth"), ``value_number`` (the
    first number in it: "$2.50" -> "2.50"). Raises ``ValueError`` when the value does not fit."""
    if field == "value":
        return value
    if field == "value_number":
        m = _NUMBER.search(value)
        if m is None:
            raise ValueError(f"{value!r} holds no number for {{value_number}}")
        return m.group(0)
    if field in ("value_words", "value_words_cap", "value_ordinal"):
        if not value.strip().isdigit():
            raise ValueError(f"{value!r} is not a whole number for {{{field}}}")
        n = int(value)
        if field == "value_ordinal":
            return _in_words(n, "ordinal")
        w = _in_words(n)
        return w[:1].upper() + w[1:] if field == "value_words_cap" else w
    raise ValueError(f"unknown value field {{{field}}}; use one of {', '.join(VALUE_FIELDS)}")


def fill_value(template: str, value: str, **fields: str) -> tuple[str, tuple[int, int]]:
    """``template`` filled in, and the (start, end) of the one value field in the result.

    The template must hold exactly one of :data:`VALUE_FIELDS`; ``fields`` fill the others."""
    names = mini.template_fields(template)
    value_fields = [f for f in names if f in VALUE_FIELDS]
    if len(value_fields) != 1:
        raise ValueError(f"template {template!r} must hold exactly one of "
                         f"{', '.join('{' + f + '}' for f in VALUE_FIELDS)}, holds {len(value_fields)}")
    vf = value_fields[0]
    missing = sorted(set(names) - set(VALUE_FIELDS) - set(fields))
    if missing:
        raise ValueError(f"template {template!r} uses unknown field(s) {missing}")
    head, _, tail = template.partition("{" + vf + "}")
    before = head.format(**fields)
    shown = format_value(vf, value)
    return before + shown + tail.format(**fields), (len(before), len(before) + len(shown))


# -- the specification -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    value: str
    start: dt.date
    end: dt.date
    vars: dict[str, str]


@dataclass(frozen=True)
class Track:
    """Claims and the timeline of one answer kind (the outdated answers, or one neighbour)."""

    claims: tuple[str, ...]
    timeline: tuple[Entry, ...]


@dataclass(frozen=True)
class QuestionSpec:
    question_id: str
    title: str
    outdated: Track
    relevance: tuple[Track, ...]


def _date(v: Any, where: str) -> dt.date:
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return v
    if isinstance(v, str):
        try:
            return dt.date.fromisoformat(v)
        except ValueError:
            pass
    raise TimelineError(f"{where}: {v!r} is not a date (YYYY-MM-DD)")


def _track(raw: Any, where: str) -> Track:
    if not isinstance(raw, dict):
        raise TimelineError(f"{where}: expected a mapping with claims and timeline")
    unknown = set(raw) - {"claims", "timeline"}
    if unknown:
        raise TimelineError(f"{where}: unknown field(s) {sorted(unknown)}")
    claims = raw.get("claims")
    if not isinstance(claims, list) or not claims or not all(isinstance(c, str) and c.strip() for c in claims):
        raise TimelineError(f"{where}.claims: a non-empty list of sentence templates is required")
    timeline = raw.get("timeline")
    if not isinstance(timeline, list) or not timeline:
        raise TimelineError(f"{where}.timeline: a non-empty list of entries is required")
    entries = []
    for i, e in enumerate(timeline, start=1):
        at = f"{where}.timeline[{i}]"
        if not isinstance(e, dict) or not {"value", "from", "to"} <= set(e) or set(e) - {"value", "from", "to", "vars"}:
            raise TimelineError(f"{at}: an entry needs value, from and to (and may have vars), got {e!r}")
        start, end = _date(e["from"], f"{at}.from"), _date(e["to"], f"{at}.to")
        if end < start:
            raise TimelineError(f"{at}: 'to' {end} is before 'from' {start}")
        raw_vars = e.get("vars") or {}
        if not isinstance(raw_vars, dict):
            raise TimelineError(f"{at}.vars: expected a mapping")
        value = e["value"]
        if not isinstance(value, str | int | float) or not str(value).strip():
            raise TimelineError(f"{at}.value: a non-empty value is required")
        entries.append(Entry(str(value), start, end, {str(k): str(v) for k, v in raw_vars.items()}))
    for c in claims:
        for e in entries:
            try:
                fill_value(c, e.value, **_date_fields(e.start), source="x", **e.vars)
            except ValueError as err:
                raise TimelineError(f"{where}.claims: {err}") from None
    return Track(tuple(claims), tuple(entries))


def load_spec(path: str | os.PathLike[str]) -> list[QuestionSpec]:
    """Read and check ``timelines.yaml``; errors name the file and the entry."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TimelineError(f"{p}: timelines file not found") from None
    except yaml.YAMLError as e:
        raise TimelineError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(raw, dict) or not raw:
        raise TimelineError(f"{p}: expected a mapping from question id to its timelines")
    out = []
    for qid, body in raw.items():
        where = f"{p}: {qid}"
        if not isinstance(body, dict) or set(body) != {"title", "outdated", "relevance"}:
            raise TimelineError(f"{where}: needs exactly title, outdated and relevance")
        if not isinstance(body["title"], str) or not body["title"].strip():
            raise TimelineError(f"{where}.title: a non-empty title is required")
        rel = body["relevance"]
        if not isinstance(rel, list) or not rel:
            raise TimelineError(f"{where}.relevance: a non-empty list of neighbouring questions is required")
        out.append(QuestionSpec(str(qid), body["title"].strip(), _track(body["outdated"], f"{where}.outdated"),
                                tuple(_track(r, f"{where}.relevance[{i}]") for i, r in enumerate(rel, start=1))))
    return out


# -- generation ------------------------------------------------------------------------------------
def _rng(*parts: object) -> random.Random:
    key = "\x1f".join(str(p) for p in ("trek-mini-timeline", *parts))
    return random.Random(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big"))


def _date_fields(d: dt.date) -> dict[str, str]:
    month = _MONTHS[d.month - 1]
    return {"year": str(d.year), "month": month, "month_year": f"{month} {d.year}",
            "date_long": f"{d.day} {month} {d.year}"}


def _host(url: str) -> str:
    return re.sub(r"^https?://", "", url).split("/", 1)[0]


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.casefold()).split())


def _pick_date(lo: dt.date, hi: dt.date, taken: set[dt.date], rng: random.Random, where: str) -> dt.date:
    span = (hi - lo).days
    if span < 0:
        raise TimelineError(f"{where}: no day left between {lo} and {hi}")
    for _ in range(20):
        d = lo + dt.timedelta(days=rng.randint(0, span))
        if d not in taken:
            return d
    free = [lo + dt.timedelta(days=k) for k in range(span + 1) if lo + dt.timedelta(days=k) not in taken]
    if not free:
        raise TimelineError(f"{where}: every day between {lo} and {hi} already has a page")
    return free[rng.randrange(len(free))]


def _question_docs(spec: QuestionSpec, bench: Any, where: str) -> list[Document]:
    try:
        q = bench.question(spec.question_id)
    except KeyError:
        raise TimelineError(f"{where}: {spec.question_id}: no such question in TrekBench-Mini") from None
    refs = {_norm(a) for a in q.answers}
    own = bench.documents_for(q.id)
    gold = [d for d in own if d.role == "gold" and d.date is not None]
    if not gold:
        raise TimelineError(f"{where}: {q.id}: the question has no dated gold document")
    first_gold, last_gold = min(d.date for d in gold), max(d.date for d in gold)
    taken = {d.date for d in own if d.date is not None}
    out: list[Document] = []
    for role, target, tracks in (("outdated", OUTDATED_TARGET, (spec.outdated,)),
                                 ("relevance", RELEVANCE_TARGET, spec.relevance)):
        hand = [d for d in own if d.role == role]
        sites = list(dict.fromkeys((d.source or _host(d.url), _host(d.url)) for d in hand))
        if not sites:
            raise TimelineError(f"{where}: {q.id}: no hand-written {role} page to take a source from")
        slots = max(0, target - len(hand))
        entries = [(t, e) for t in tracks for e in t.timeline] if role == "outdated" else None
        for i in range(slots):
            at = f"{where}: {q.id} {role} page {len(hand) + i + 1}"
            if entries is not None:
                track, entry = entries[i % len(entries)]
                claim = track.claims[(i // len(entries)) % len(track.claims)]
                lo, hi = entry.start, min(entry.end, first_gold - dt.timedelta(days=1))
            else:
                track = tracks[i % len(tracks)]
                rnd = i // len(tracks)
                entry = track.timeline[rnd % len(track.timeline)]
                claim = track.claims[rnd % len(track.claims)]
                lo, hi = max(entry.start, last_gold + dt.timedelta(days=1)), entry.end
            if _norm(entry.value) in refs:
                raise TimelineError(f"{at}: {entry.value!r} is a reference answer of {q.id}")
            rng = _rng(q.id, role, i + 1)
            date = _pick_date(lo, hi, taken, rng, at)
            taken.add(date)
            frame = FRAMES[rng.randrange(len(FRAMES))]
            source, host = sites[(i + rng.randrange(len(sites))) % len(sites)]
            fields = {**_date_fields(date), "source": source, **entry.vars}
            try:
                sentence, (a, b) = fill_value(claim, entry.value, **fields)
            except ValueError as e:
                raise TimelineError(f"{at}: {e}") from None
            head, _, tail = frame.partition("{claim}")
            before = head.format(**fields)
            text = before + sentence + tail.format(**fields)
            n = len(hand) + i + 1
            page = hashlib.sha256(f"{q.id}\x1f{role}\x1f{n}".encode()).hexdigest()[:6]  # says nothing of the role
            out.append(Document(
                id=f"{q.id}:{role}:{n}",
                url=f"https://{host}/{date.year}/{date.month:02d}/{page}",
                title=spec.title,
                date=date,
                text=text,
                question_id=q.id,
                role=role,  # type: ignore[arg-type]
                supports_answer=entry.value,
                source=source,
                metadata={
                    "valid_from": entry.start.isoformat(),
                    "note": f"Generated from {SPEC_FILE}: a short page stating {entry.value}.",
                    "generated": True,
                    "generator": VERSION,
                    "answer_span": {"start": len(before) + a, "end": len(before) + b},
                },
            ))
    return out


def generate(mini_dir: str | os.PathLike[str] | None = None) -> list[Document]:
    """The generated pages for every question of ``MINI_DIR/timelines.yaml``, in file order."""
    root = Path(mini_dir) if mini_dir is not None else mini.default_mini_dir()
    spec_path = root / SPEC_FILE
    specs = load_spec(spec_path)
    bench = mini.load(root, generated=False)
    docs: list[Document] = []
    for spec in specs:
        docs += _question_docs(spec, bench, str(spec_path))
    return docs


def output_path(mini_dir: str | os.PathLike[str] | None = None) -> Path:
    """``MINI_DIR/generated/documents.jsonl``."""
    root = Path(mini_dir) if mini_dir is not None else mini.default_mini_dir()
    return root / GENERATED_DIR / mini.DOCUMENTS_FILE


def write(mini_dir: str | os.PathLike[str] | None = None) -> tuple[Path, int]:
    """Generate and write ``MINI_DIR/generated/documents.jsonl`` atomically; (path, pages)."""
    docs = generate(mini_dir)
    return write_jsonl(output_path(mini_dir), docs), len(docs)


def check(mini_dir: str | os.PathLike[str] | None = None) -> bool:
    """True when the file on disk holds exactly what :func:`generate` makes now."""
    path = output_path(mini_dir)
    want = "".join(d.model_dump_json() + "\n" for d in generate(mini_dir)).encode("utf-8")
    return path.is_file() and path.read_bytes() == want
