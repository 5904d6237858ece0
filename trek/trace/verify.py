"""``trek trace verify``: put TrekTrace's labels to the test by intervening (``RUN_DIR/verify.jsonl``).

A label is a reading of a case; verification changes one thing and looks again. Two experiments,
each a record of its own beside the trace (never a relabelling):

* **Distractor search** (cases labelled Distraction). The gold-plus-noise probe's own question
  (:data:`trek.trace.probes.NOISE`, same template, same page order, the probe's own context
  ``noise_context``) is asked again with the gold pages (and the pages the evidence test found
  equivalent) kept and a subset of the noise pages; the analysis judge checks each answer with the
  probes' answer check (:data:`trek.trace.verdict.VERDICT`), through the judge protocol. First the
  whole context is asked again as a fresh draw (:data:`RERUN_DRAW`): right this time, the label
  was chance (``refuted``). Then the gold pages with no noise page (wrong too: no noise page is
  needed, ``inconclusive``). Then a binary split looks for one page that flips the answer (one
  probe per halving, assuming the flip needs one page), the page found is checked on a fresh draw
  (:data:`CHECK_DRAW`), and when it does not flip, delta debugging (ddmin) over all noise pages
  finds a 1-minimal flipping set, checked the same way. ``confirmed``: a 1-minimal set whose flip
  was seen again on a fresh draw.
* **Query repair** (cases labelled Pre-retrieval or Retrieval). The diagnostic judge writes
  adequate queries (:data:`REPAIR`; the exact judge builds them from the question's query
  targets), the run's own search backend is asked them again, and a gold page (URL identity) or
  a page the diagnostic judge's evidence match accepts among the results means the queries were at
  fault (Pre-retrieval); none means even adequate queries do not bring the evidence up
  (Retrieval). The label is ``confirmed`` when the outcome is the label, else ``refuted``. A live
  web backend is not asked again unless ``live_repair`` (a new search at a later date tests the
  web of today, not the run's): the record is ``skipped`` and says so.

**Fresh draws.** The response cache keys every request by an explicit sample index; every prompt
of the search is asked at index 0 (each subset is a new prompt), the re-run of the whole context
at :data:`RERUN_DRAW` and each check at :data:`CHECK_DRAW` and above, so none of them is the
recorded reply served again. An endpoint that samples gives a new draw; a deterministic one
(temperature 0, the fake server) gives the same reply, and then a re-run can show only that the
label was not a sampling accident. When the evaluated role sends a ``seed``, a draw ``d`` sends
``seed + d`` (the same seed would be the same draw).

The stage executor (:mod:`trek.stage`) keeps finished records while their input key (the trace
record's input key and labels, the roles and versions, :data:`VERSION`) is unchanged, so a second
run sends nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from trek import runs
from trek.llm.ledger import ledger_path
from trek.llm.structured import TEXT_MAX, object_schema
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS, PageStore, normalize_url
from trek.stage import Slot, Stage, borrowed_cache, digest, execute
from trek.templates import register
from trek.trace.common import REPLY_JSON, RoleModel, as_text, fetch_pages
from trek.trace.evidence import KEY_EVIDENCE, MATCH
from trek.trace.inputs import TraceInput, select_cases
from trek.trace.parts import CaseRun, JudgeQuestion, Pending, Undecided
from trek.trace.pipeline import TraceConfig, _check_roles, begin_judges, load_trace
from trek.trace.probes import NOISE, probe
from trek.trace.records import Step, TraceRecord
from trek.types import Record, RecordError, iter_jsonl, utcnow

__all__ = [
    "VERSION",
    "EXPERIMENTS",
    "VERDICTS",
    "RERUN_DRAW",
    "CHECK_DRAW",
    "REPAIR_TEMPLATE",
    "REPAIR_PROMPT",
    "REPAIR",
    "VerifyRecord",
    "VerifyReport",
    "bisect_one",
    "ddmin",
    "averify_run",
]

#: Version of the experiments' logic (part of every record and of the resume key).
VERSION = "verify-1"
EXPERIMENTS = ("distractor_search", "query_repair")
VERDICTS = ("confirmed", "refuted", "inconclusive", "skipped")
#: Which labels each experiment tests.
TESTS_LABELS = {"distractor_search": ("Distraction",), "query_repair": ("Pre-retrieval", "Retrieval")}
#: The sample index of the re-run of the whole context, and of the first check of a found set.
RERUN_DRAW = 1
CHECK_DRAW = 2
#: At most this many repaired queries are searched.
REPAIR_QUERIES_MAX = 3

REPAIR_TEMPLATE = "trace.repair_queries"
REPAIR_PROMPT = """\
[TrekTrace: query repair]
A search-augmented system answered the question below wrongly, and the pages it retrieved did not \
hold the evidence it needed. Write the search queries a careful searcher would issue for this \
question: each aimed at the right entity, the right time and the fact asked, with one query per \
step a multi-hop question needs. Do not put a guess at the answer into a query. At most three.

Question: {question}
Effective year: {effective_year}

The system's own queries, in the order issued:
{queries}

""" + REPLY_JSON + """{{"queries": ["one search query per line of work"], "reason": "one sentence on what they aim at"}}"""

register(REPAIR_TEMPLATE, REPAIR_PROMPT)
REPAIR_SCHEMA = object_schema({"queries": {"type": "array", "items": {"type": "string", "maxLength": TEXT_MAX},
                                           "minItems": 1, "maxItems": REPAIR_QUERIES_MAX},
                               "reason": "text"})


def validate_repair(value: dict[str, Any]) -> dict[str, Any]:
    raw = value.get("queries")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(q, str) for q in raw):
        raise ValueError("field 'queries' must be a list of strings")
    queries = [q.strip() for q in raw if q.strip()][:REPAIR_QUERIES_MAX]
    if not queries:
        raise ValueError("field 'queries' is empty")
    return {"queries": queries, "reason": as_text(value.get("reason"), "reason")}


#: The diagnostic judge's question: adequate queries for the case (the exact judge: from the query targets).
REPAIR = JudgeQuestion("repair_queries", "diagnostic", REPAIR_TEMPLATE, REPAIR_PROMPT, VERSION, REPAIR_SCHEMA,
                       validate_repair, exact="repair_queries")


# -- records -------------------------------------------------------------------------------------
class ProbeTest(Record):
    """One ask of the gold-plus-noise probe during a distractor search: the noise pages it kept
    (the gold pages are always there), the draw, and whether the answer was graded right
    (``None``: unreadable or undecided)."""

    noise: list[str]
    draw: int = 0
    correct: bool | None = None
    answer: str | None = None


class MinimalPage(Record):
    """A page of a minimal distracting set: its URL and, where it is a Ctrl document, its kind
    (the role Ctrl gave it: outdated, relevance, republication, fabrication)."""

    url: str
    ctrl_kind: str | None = None


class VerifyRecord(Record):
    """One experiment on one labelled case (see the module docstring)."""

    question_id: str
    experiment: Literal["distractor_search", "query_repair"]
    label: str
    labels: list[str] = Field(default_factory=list)
    status: Literal["done", "pending", "failed"] = "done"
    verdict: Literal["confirmed", "refuted", "inconclusive", "skipped"] | None = None
    reason: str | None = None
    #: Questions asked (probes and judge checks); ``probe_calls``: the probes among them.
    calls: int = 0
    probe_calls: int = 0
    # distractor search
    noise_pages: int | None = None
    minimal_set: list[MinimalPage] | None = None
    search: str | None = None
    tests: list[ProbeTest] = Field(default_factory=list)
    # query repair
    backend: str | None = None
    live: bool | None = None
    repaired_queries: list[str] | None = None
    results: dict[str, list[str]] | None = None
    found_urls: list[str] | None = None
    found_by: str | None = None
    outcome: str | None = None
    steps: list[Step] = Field(default_factory=list)
    error: str | None = None
    input_key: str = ""
    version: str = VERSION
    created_at: str = Field(default_factory=utcnow)


# -- the searches (pure: a test of a subset of indices says whether the answer flips) --------------
Test = Callable[[tuple[int, ...]], Awaitable[bool | None]]


async def bisect_one(items: Sequence[int], flips: Test) -> tuple[tuple[int, ...], bool]:
    """One page that flips the answer, found by halving ``items`` (a set known to flip): the
    first half is asked; when it flips the search goes on in it, otherwise in the second half,
    unasked. Returns the page and whether it was seen flipping (``False``: inferred). Right when
    one page alone flips the answer; a flip that needs pages of both halves ends on a page that
    does not flip alone, which the caller's check finds."""
    s, seen = tuple(items), True
    while len(s) > 1:
        half = s[: len(s) // 2]
        if await flips(half) is True:
            s, seen = half, True
        else:
            s, seen = s[len(s) // 2:], False
    return s, seen


def _chunks(items: Sequence[int], n: int) -> list[tuple[int, ...]]:
    size, rest = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < rest else 0)
        out.append(tuple(items[at: at + step]))
        at += step
    return [c for c in out if c]


async def ddmin(items: Sequence[int], flips: Test) -> tuple[int, ...]:
    """Zeller's delta debugging: a 1-minimal subset of ``items`` (a set known to flip) that still
    flips: removing any one of its pages stops the flip (given that no page at all does not flip).
    An unreadable answer (``None``) counts as no flip."""
    c = tuple(items)
    n = 2
    while len(c) >= 2:
        parts = _chunks(c, n)
        for part in parts:
            if await flips(part) is True:
                c, n = part, 2
                break
        else:
            for part in (parts if n > 2 else []):
                rest = tuple(x for x in c if x not in part)
                if await flips(rest) is True:
                    c, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c


# -- one case ------------------------------------------------------------------------------------
@dataclass
class VerifyItem:
    """One experiment to run: the trace record, its case and the label tested."""

    case: TraceInput
    rec: TraceRecord
    experiment: str
    label: str

    @property
    def id(self) -> str:
        return f"{self.rec.question_id}|{self.experiment}"


@dataclass
class VerifyConfig:
    """The roles (as a :class:`TraceConfig`), the run and the options of one verification."""

    trace: TraceConfig
    run_dir: Path
    live_repair: bool = False
    backend: Any = None
    search_spec: str | None = None
    results_per_search: int = 5
    ctrl_kinds: Any = None
    #: At most this many gold-plus-noise probes per distractor search (``None``: no limit).
    max_probes: int | None = None

    def settings(self) -> dict[str, Any]:
        out = {"verify": VERSION, "trace": self.trace.settings(), "live_repair": self.live_repair,
               "draws": [RERUN_DRAW, CHECK_DRAW], "templates": {REPAIR.template: REPAIR.versioned()}}
        if self.max_probes is not None:  # a limit changes which searches finish (no limit: the keys as before)
            out["max_probes"] = self.max_probes
        return out


class _ProbeLimit(Exception):
    """A distractor search reached its limit of probes (:attr:`VerifyConfig.max_probes`)."""


def _draw(who: RoleModel, draw: int) -> RoleModel:
    """``who`` asking draw ``draw``: the sample index in the cache key, and ``seed + draw`` when a seed is sent."""
    if draw == 0:
        return who
    params = {**who.params, "sample": draw}
    if isinstance(who.params.get("seed"), int):
        params["seed"] = who.params["seed"] + draw
    return dataclasses.replace(who, params=params)


class _Asker:
    """Asks a case's questions through :class:`CaseRun` (so every judge answers through the
    judge protocol), one CaseRun per draw, all steps in one list."""

    def __init__(self, item: VerifyItem, config: VerifyConfig):
        self.item, self.config = item, config
        self.steps: list[Step] = []
        self.runs: dict[int, CaseRun] = {}

    def run(self, draw: int = 0) -> CaseRun:
        if draw not in self.runs:
            cfg = self.config.trace
            if draw:
                cfg = dataclasses.replace(cfg, evaluated=_draw(cfg.evaluated, draw))
            self.runs[draw] = CaseRun(self.item.case, cfg, {"coverage_notes": []}, steps=self.steps)
        return self.runs[draw]

    @property
    def probes(self) -> int:
        return sum(s.name == NOISE.name for s in self.steps)


async def distractor_search(item: VerifyItem, config: VerifyConfig, out: dict[str, Any]) -> None:
    rec, asker = item.rec, _Asker(item, config)
    context = list(rec.noise_context or [])
    out["search"] = None
    if not rec.noise_was_run or not context:
        out.update(verdict="skipped", reason="the gold-plus-noise probe did not run for this case")
        return
    kept_keys = {normalize_url(u) for u in [*rec.gold_urls, *rec.equivalent_urls]}
    noise = [i for i, u in enumerate(context) if normalize_url(u) not in kept_keys]
    kept = [i for i, u in enumerate(context) if normalize_url(u) in kept_keys]
    out["noise_pages"] = len(noise)
    pages = await fetch_pages(config.trace.store, context)
    tests: list[ProbeTest] = out.setdefault("tests", [])
    memo: dict[tuple[tuple[int, ...], int], bool | None] = {}

    async def ask(subset: tuple[int, ...], draw: int = 0) -> bool | None:
        """Whether the answer from the gold pages and the noise pages ``subset`` (in the probe's
        order) is wrong: ``None`` when the reply or its check could not be read or decided."""
        key = (tuple(sorted(subset)), draw)
        if key in memo:
            return memo[key]
        if config.max_probes is not None and asker.probes >= config.max_probes:
            raise _ProbeLimit
        chosen = sorted({*kept, *subset})
        c = asker.run(draw)
        c.rec.pop("noise_answer", None)
        try:
            right, _ = await probe(c, NOISE, [pages[i] for i in chosen])
        except Undecided:
            right = None
        tests.append(ProbeTest(noise=[context[i] for i in sorted(subset)], draw=draw, correct=right,
                               answer=c.rec.get("noise_answer")))
        memo[key] = None if right is None else not right
        return memo[key]

    try:
        again = await ask(tuple(noise), RERUN_DRAW)
        if again is None:
            out.update(verdict="inconclusive", reason="the re-run's answer could not be read or checked")
        elif again is False:
            out.update(verdict="refuted", reason="asked again (a fresh draw), the gold-plus-noise probe answers "
                       "right: the wrong answer was chance")
        elif not noise:
            out.update(verdict="inconclusive", reason="the probe's context holds no noise page: nothing to search")
        else:
            await _search(noise, ask, out)
    except _ProbeLimit:
        out.update(verdict="inconclusive", minimal_set=None,
                   reason=f"stopped at the limit of {config.max_probes} probes before a 1-minimal set was checked")
    finally:
        out.update(calls=len(asker.steps), probe_calls=asker.probes, steps=asker.steps)
    if out.get("minimal_set") is not None:
        kinds = config.ctrl_kinds
        out["minimal_set"] = [MinimalPage(url=context[i], ctrl_kind=kinds(context[i]) if kinds else None)
                              for i in out["minimal_set"]]


async def _search(noise: list[int], ask: Callable[..., Awaitable[bool | None]], out: dict[str, Any]) -> None:
    """The search proper, once the whole context is known to flip again (module docstring)."""
    alone = await ask(())
    if alone is not False:
        out.update(verdict="inconclusive", reason=(
            "the gold pages alone, under the same template, are answered wrong too: no noise page is needed"
            if alone else "the answer from the gold pages alone could not be read or checked"))
        return
    flips = ask
    found, _ = await bisect_one(noise, flips)
    out["search"] = "bisect"
    if await ask(found, CHECK_DRAW) is True:
        out.update(verdict="confirmed", reason=None, minimal_set=list(found))
        return
    out["search"] = "ddmin"
    found = await ddmin(noise, flips)
    if await ask(found, CHECK_DRAW + 1) is True:
        out.update(verdict="confirmed", reason=None, minimal_set=list(found))
        return
    out.update(verdict="inconclusive", minimal_set=list(found),
               reason="the 1-minimal set delta debugging found did not flip the answer again on a fresh draw")


async def query_repair(item: VerifyItem, config: VerifyConfig, out: dict[str, Any]) -> None:
    asker = _Asker(item, config)
    q, spec = item.case.question, config.search_spec
    out.update(backend=spec, live=None if spec is None else spec != "local")
    try:
        if spec in (None, "", "none"):
            out.update(verdict="skipped", reason="the run records no search backend to ask again")
            return
        if spec != "local" and not config.live_repair:
            out.update(verdict="skipped", reason=f"live web backend ({spec}): a new search now tests today's web, "
                       "not the run's; --live-repair searches and counts it")
            return
        if config.backend is None:
            out.update(verdict="skipped", reason=f"the search backend {spec!r} cannot be asked again here")
            return
        c = asker.run()
        queries = "\n".join(f"{i}. {s}" for i, s in enumerate(item.case.queries, 1)) or "(none)"
        try:
            st = await c.ask(REPAIR, {"question": q.question, "effective_year": c.year, "queries": queries},
                             facts=(q,))
        except Undecided as u:
            out.update(verdict="skipped", reason=u.reason)
            return
        if st.status != "ok":
            out.update(verdict="inconclusive", reason="the judge's repaired queries could not be read")
            return
        repaired = st.value["queries"]
        out["repaired_queries"] = repaired
        results: dict[str, list[str]] = {}
        for query in repaired:
            results[query] = [r.url for r in await config.backend.asearch(query, config.results_per_search)]
        out["results"] = results
        urls = list(dict.fromkeys(u for rs in results.values() for u in rs))
        # as the retrieval test reads a collection: every gold URL among the results, or the
        # evidence of the gold pages still missing matched on them
        keys = {normalize_url(u) for u in urls}
        missing = [g for g in q.gold_urls if normalize_url(g) not in keys]
        found = [u for u in urls if normalize_url(u) in {normalize_url(g) for g in q.gold_urls}]
        out["found_by"] = "url-identity" if not missing else None
        if missing:
            equivalent, why = await _equivalent(c, item, urls, missing) if urls else ([], None)
            if why is not None:
                out.update(verdict="inconclusive", reason=why)
                return
            found = list(dict.fromkeys([*found, *equivalent])) if equivalent else []
            out["found_by"] = "evidence-match" if equivalent else None
        out["found_urls"] = found
        outcome = "Pre-retrieval" if found else "Retrieval"
        out["outcome"] = outcome
        if outcome == item.label:
            out.update(verdict="confirmed", reason=None)
        elif found:
            out.update(verdict="refuted", reason="adequate queries bring the evidence back ("
                       + ", ".join(found[:3]) + "): the queries were at fault (Pre-retrieval)")
        else:
            out.update(verdict="refuted", reason="even adequate queries do not bring the gold page or its "
                       "evidence up: the index, not the queries, kept it out (Retrieval)")
    finally:
        out.update(calls=len(asker.steps), probe_calls=0, steps=asker.steps)


async def _equivalent(c: CaseRun, item: VerifyItem, urls: list[str], missing: list[str]) -> tuple[list[str], str | None]:
    """The result URLs the diagnostic judge's evidence match accepts for the gold pages ``missing``
    from the results (the evidence test's own questions; the trace's key evidence when it was
    taken from the same missing pages, else asked of them)."""
    q = item.case.question
    pages = await fetch_pages(c.config.store, urls)
    if not any(p.available for p in pages):
        return [], None
    before = [m.gold_url for m in item.rec.url_matches if m.matched_url is None]
    evidence = item.rec.key_evidence if set(before) == set(missing) else None
    try:
        if not evidence:
            gold = await fetch_pages(c.config.store, missing)
            if not any(p.available for p in gold):
                return [], "no gold page missing from the results has text in the page store: nothing to match"
            ke = await c.ask(KEY_EVIDENCE, c.judge_fields(gold_pages=c.pages(gold)), facts=(q, missing))
            if ke.status != "ok":
                return [], "the key evidence of the gold pages could not be read"
            evidence = ke.value["key_evidence"]
        em = await c.ask(MATCH, c.judge_fields(key_evidence=evidence, retrieved_pages=c.pages(pages)),
                         facts=(q, urls))
    except Undecided as u:
        return [], u.reason
    if em.status != "ok":
        return [], "the evidence match over the new results could not be read"
    if not em.value["evidence_match"]:
        return [], None
    by_key = {normalize_url(u): u for u in urls}
    named = [by_key[k] for k in map(normalize_url, em.value["equivalent_urls"]) if k in by_key]
    return list(dict.fromkeys(named)) or urls[:1], None


EXPERIMENT_RUNNERS = {"distractor_search": distractor_search, "query_repair": query_repair}


# -- the stage -----------------------------------------------------------------------------------
def _key(item: VerifyItem, config: VerifyConfig) -> str:
    return digest({"experiment": item.experiment, "label": item.label, "trace": item.rec.input_key,
                   "labels": item.rec.labels, "context": item.rec.noise_context,
                   "equivalent": item.rec.equivalent_urls, "settings": config.settings(),
                   "backend": [config.search_spec, config.results_per_search]}, 16)


class VerifyStage(Stage[VerifyItem, VerifyRecord]):
    """Verification on :mod:`trek.stage`: one record per (case, experiment) in ``verify.jsonl``."""

    record = VerifyRecord
    name = "verify"
    unit = "experiment"
    head_fields = ("question_id", "experiment", "status", "input_key", "error")

    def __init__(self, root: Path, config: VerifyConfig, clients: Sequence[Any]):
        self.root, self.config, self.clients = root, config, clients

    def slot(self, item: VerifyItem) -> Slot:
        return Slot(self.root / runs.VERIFY, item.id)

    def record_id(self, record: VerifyRecord) -> str:
        return f"{record.question_id}|{record.experiment}"

    def input_key(self, item: VerifyItem) -> str:
        return _key(item, self.config)

    def finished(self, record: VerifyRecord) -> bool:
        return record.status == "done"

    async def produce(self, item: VerifyItem, key: str) -> VerifyRecord:
        out: dict[str, Any] = {}
        base = {"question_id": item.rec.question_id, "experiment": item.experiment, "label": item.label,
                "labels": list(item.rec.labels), "input_key": key}
        try:
            await EXPERIMENT_RUNNERS[item.experiment](item, self.config, out)
        except Pending as p:  # a call failed: what was asked so far is kept, the verdict waits for the next run
            kept = {k: out[k] for k in ("calls", "probe_calls", "steps", "tests", "noise_pages") if k in out}
            return VerifyRecord(**base, **kept, status="pending", error=f"{p.step.name}: {p.step.error}")
        return VerifyRecord(**base, **out)

    def failure(self, item: VerifyItem, key: str, error: str) -> VerifyRecord:
        return VerifyRecord(question_id=item.rec.question_id, experiment=item.experiment,  # type: ignore[arg-type]
                            label=item.label, labels=list(item.rec.labels), status="failed", error=error,
                            input_key=key)

    def llm_clients(self) -> Sequence[Any]:
        return self.clients


def items_of(run_dir: Path, records: Sequence[TraceRecord]) -> list[VerifyItem]:
    """The experiments a traced run calls for, in question order: a distractor search for each
    case labelled Distraction, a query repair for each labelled Pre-retrieval or Retrieval."""
    cases = {c.question_id: c for c in select_cases(run_dir).cases}
    out = []
    for r in records:
        if r.status not in ("done", "incomplete") or r.question_id not in cases:
            continue
        for experiment, labels in TESTS_LABELS.items():
            label = next((lb for lb in labels if lb in r.labels), None)
            if label is not None:
                out.append(VerifyItem(cases[r.question_id], r, experiment, label))
    return out


# -- the report ----------------------------------------------------------------------------------
@dataclass
class VerifyReport:
    """What :func:`averify_run` did, and the summary of ``verify.jsonl``."""

    path: Path
    kept: int = 0
    made: int = 0
    http_calls: int = 0
    cache_hits: int = 0
    records: list[VerifyRecord] = field(default_factory=list)

    @property
    def statuses(self) -> Counter[str]:
        return Counter(r.status for r in self.records)

    def by_label(self) -> dict[tuple[str, str], list[VerifyRecord]]:
        out: dict[tuple[str, str], list[VerifyRecord]] = {}
        for r in self.records:
            if r.status == "done":
                out.setdefault((r.label, r.experiment), []).append(r)
        return out

    def rows(self, level: float = 0.95) -> list[dict[str, Any]]:
        """Per label tested: ``n`` (tested: confirmed, refuted or inconclusive), ``confirmed``,
        ``share`` with its Wilson interval (``low``, ``high``; ``None`` when nothing was tested),
        ``refuted`` and ``inconclusive`` counts, ``skipped``, and the refuted cases' ids."""
        from trek.stats import wilson_ci
        from trek.trace.labels import in_c4_order

        by_label = self.by_label()
        order = {lb: i for i, lb in enumerate(in_c4_order(lb for lb, _ in by_label))}
        rows = []
        for (label, experiment), recs in sorted(by_label.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
            v = Counter(r.verdict for r in recs)
            n = v["confirmed"] + v["refuted"] + v["inconclusive"]
            low, high = wilson_ci(v["confirmed"], n, level) if n else (None, None)
            rows.append({"label": label, "experiment": experiment, "n": n, "confirmed": v["confirmed"],
                         "share": v["confirmed"] / n if n else None, "low": low, "high": high,
                         "refuted": v["refuted"], "inconclusive": v["inconclusive"], "skipped": v["skipped"],
                         "refuted_cases": [r.question_id for r in recs if r.verdict == "refuted"]})
        return rows

    def describe(self) -> str:
        st = self.statuses
        lines = [f"{len(self.records)} experiment(s) ({self.kept} kept, {self.made} run now; {self.http_calls} model "
                 f"requests, {self.cache_hits} cache hits) -> {self.path}"]
        if not self.records:
            lines.append("no case is labelled Distraction, Pre-retrieval or Retrieval: nothing to verify")
        for row in self.rows():
            head = f"{row['label']} ({row['experiment'].replace('_', ' ')}): "
            if row["n"]:
                head += (f"confirmed {row['confirmed']}/{row['n']} ({100 * row['share']:.1f}%, 95% CI "
                         f"{100 * row['low']:.1f}-{100 * row['high']:.1f}%), refuted {row['refuted']}, "
                         f"inconclusive {row['inconclusive']}")
            else:
                head += "nothing tested"
            if row["skipped"]:
                head += f", skipped {row['skipped']}"
            lines.append(head)
            if row["refuted_cases"]:
                lines.append("  refuted: " + ", ".join(row["refuted_cases"]))
        skipped = Counter(r.reason for r in self.records if r.status == "done" and r.verdict == "skipped")
        if skipped:
            lines.append("skipped (not tested, not counted): "
                         + "; ".join(f"{k} ({v})" for k, v in sorted(skipped.items(), key=lambda kv: str(kv[0]))))
        searches = [r for r in self.records if r.experiment == "distractor_search" and r.status == "done"
                    and r.noise_pages]
        if searches:
            calls = sum(r.probe_calls for r in searches) / len(searches)
            bound = sum(math.ceil(math.log2(r.noise_pages)) + 3 for r in searches if r.noise_pages) / len(searches)
            lines.append(f"distractor search: {calls:.1f} probe call(s) a case on average "
                         f"(ceil(log2 noise pages) + 3 averages {bound:.1f})")
        if st["pending"]:
            lines.append(f"{st['pending']} experiment(s) pending (a call failed or the budget ran out): run again")
        if st["failed"]:
            first = min((r.error or "") for r in self.records if r.status == "failed")
            lines.append(f"{st['failed']} experiment(s) failed (e.g. {first}): run again")
        return "\n".join(lines)


def load_verify(run_dir: str | os.PathLike[str]) -> list[VerifyRecord]:
    """The records of ``RUN_DIR/verify.jsonl`` (empty when the run is not verified yet)."""
    path = Path(run_dir) / runs.VERIFY
    if not path.exists():
        return []
    return list({f"{r.question_id}|{r.experiment}": r
                 for r in iter_jsonl(path, VerifyRecord, torn_tail=True)}.values())


def _ctrl_kinds(rd: Path) -> Callable[[str], str | None] | None:
    """The Ctrl role of a page by URL, for a Ctrl run (one whose run.json names its contexts)."""
    meta = runs.read_meta(rd)
    if meta is None or not meta.config.get("contexts"):
        return None
    from trek.annotations import for_run

    try:
        ann = for_run(rd)
    except (OSError, ValueError):
        return None

    def kind(url: str) -> str | None:
        page = ann.page(url)
        return page.role if page is not None and page.role != "gold" else None
    return kind


def _search_spec(rd: Path) -> tuple[str | None, int]:
    """The run's search backend as recorded (``system.search``) and its results per search."""
    meta = runs.read_meta(rd)
    system = meta.config.get("system") if meta is not None else None
    system = system if isinstance(system, dict) else {}
    spec = system.get("search")
    return (spec if isinstance(spec, str) else None), system.get("results_per_search") or 5


def _backend(rd: Path, store: PageStore, live_repair: bool) -> tuple[str | None, int, Any]:
    """The run's search backend as recorded (:func:`_search_spec`), its results per search, and the
    backend to ask (``None``: a live one without ``live_repair``, or one that cannot be rebuilt)."""
    spec, k = _search_spec(rd)
    if not isinstance(spec, str) or spec in ("", "none") or (spec != "local" and not live_repair):
        return spec, k, None
    from trek.search import make_backend

    try:
        backend = make_backend(spec, store=store, **({} if spec == "local" else {"cache": runs.RunDir(rd).search_cache}))
    except (ValueError, ImportError):
        backend = None
    return spec, k, backend


async def averify_run(
    run_dir: str | os.PathLike[str], *, diagnostic: RoleModel, analysis: RoleModel, evaluated: RoleModel,
    store: PageStore | None = None, fetch: bool = False, live_repair: bool = False, budget_usd: float | None = None,
    max_probes: int | None = None, max_concurrent: int = 8, gold_chars: int = GOLD_CHARS, other_chars: int = NON_GOLD_CHARS, progress: bool = True,
) -> VerifyReport:
    """Run the experiments of every labelled case of ``run_dir``'s ``trace.jsonl`` and write
    ``verify.jsonl`` (module docstring). The roles are those of ``trek trace``; the caller owns
    their clients. ``max_probes``: a distractor search that would ask more gold-plus-noise probes
    stops there, ``inconclusive`` (``None``: no limit)."""
    rd = Path(run_dir)
    trace_path = rd / runs.TRACE
    if not trace_path.exists():
        raise RecordError(trace_path, None, "not traced yet: run trek trace on the run first")
    unique = _check_roles(diagnostic, analysis, evaluated, {})
    own_store = store is None
    if store is None:
        from trek.trace.ctrl import trace_store

        store = trace_store(rd, fetch=fetch)
    calls0, hits0 = sum(c.http_calls for c in unique), sum(c.cache_hits for c in unique)
    spec, k, backend = _backend(rd, store, live_repair)
    try:
        with borrowed_cache(unique, runs.default_cache_path(rd)):
            tconfig = TraceConfig(diagnostic, analysis, evaluated, store, gold_chars=gold_chars,
                                  other_chars=other_chars)
            config = VerifyConfig(tconfig, rd, live_repair, backend, spec, k, _ctrl_kinds(rd), max_probes)
            items = items_of(rd, load_trace(rd))
            begin_judges(rd, tconfig, [it.case for it in items])
            stage = VerifyStage(rd, config, unique)
            tally = await execute(stage, items, outputs=[rd / runs.VERIFY], limit=max_concurrent, progress=progress,
                                  ledger=ledger_path(rd / runs.VERIFY), budget_usd=budget_usd)
    finally:
        if backend is not None:
            await backend.aclose()
        if own_store:
            store.close()
    return VerifyReport(path=rd / runs.VERIFY, kept=tally.kept, made=tally.made,
                        http_calls=sum(c.http_calls for c in unique) - calls0,
                        cache_hits=sum(c.cache_hits for c in unique) - hits0, records=load_verify(rd))
