"""A judge audit: an LLM judge's verdicts against the exact judge's, role by role.

On an annotated benchmark the exact judge (:mod:`trek.exact`, ``--judge oracle``) decides every
judge role from the annotations; an LLM judge asked the same questions can be measured against
it for a few cents before it is trusted where there are no annotations (TrekBench-Wild).

**Recording both.** The exact judge decides; the audit judge's verdicts are kept beside its
verdicts and change nothing:

* grading — ``trek grade RUN --judge oracle --audit-judge M`` (:func:`audit_grading`) writes the
  grades model ``M`` gives with each dataset's own protocol to ``RUN_DIR/audit-grading.jsonl``
  (ordinary :class:`~trek.types.Grade` records, resumable and cached like ``grades.jsonl``);
* TrekTrace — ``trek trace RUN --judge oracle --audit-judge M`` asks ``M`` every step the exact
  judge answered, with the same template and inputs, into each record's ``audit_steps``.

A run judged by an LLM (``grades.jsonl`` by a model, ``trace.jsonl`` steps by a model) needs no
audit file: :func:`audit_pairs` works the exact verdicts out from the annotations for it.

**Comparing.** :func:`audit_pairs` lists one row per verdict both judges gave (role, run,
question, the two labels, what was judged); :func:`audit_table` gives per role ``n``,
``agreement_binary`` (credit or not) and ``agreement_outcomes`` (the same outcome of up to three),
Cohen's kappa with a 95% interval and the verdicts the audit judge left unreadable
or pending (not in ``n``); :func:`confusion` the exact-by-LLM table of one role and
:func:`disagreements` the cases that differ. Roles: ``grading`` (the dataset's outcome),
``evidence`` (evidence match), ``query_adequacy``, ``gold_only`` and ``noise`` (probe verdicts),
``stale`` (the gold pages still support the reference); the flags are ``yes``/``no``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from trek import runs
from trek.judges import UNDECIDED
from trek.llm.client import LLMClient
from trek.stage import execute
from trek.types import Grade, RecordError, iter_jsonl

__all__ = [
    "AUDIT_GRADING",
    "ROLES",
    "STEP_ROLES",
    "PAIR_COLUMNS",
    "AuditReport",
    "audit_grading",
    "aaudit_grading",
    "audit_pairs",
    "audit_table",
    "kappa_note",
    "show_kappa",
    "confusion",
    "disagreements",
]

#: The audit judge's grades beside ``grades.jsonl``.
AUDIT_GRADING = runs.AUDIT
#: The audited roles, in table order.
ROLES = ("grading", "evidence", "query_adequacy", "gold_only", "noise", "stale")
#: TrekTrace step name -> (audited role, the value field that holds its verdict).
STEP_ROLES = {
    "evidence_match": ("evidence", "evidence_match"),
    "query_adequacy": ("query_adequacy", "query_adequate"),
    "gold_only_grade": ("gold_only", "correct"),
    "noise_grade": ("noise", "correct"),
    "stale_reference": ("stale", "supports_reference"),
}
PAIR_COLUMNS = ["run", "role", "question_id", "dataset", "exact", "judge", "status", "judge_model", "subject",
                "exact_reason", "judge_reason"]
_DECIDED = ("correct", "incorrect", "not_attempted")


def _yes(v: Any) -> str | None:
    return None if v is None else ("yes" if bool(v) else "no")


# -- recording the audit judge's grades ------------------------------------------------------------------
@dataclass
class AuditReport:
    """What :func:`audit_grading` did: the audit judge's grades now in ``audit-grading.jsonl``."""

    grades: list[Grade]
    kept: int
    made: int
    path: Path
    http_calls: int = 0
    cache_hits: int = 0

    @property
    def pending(self) -> int:
        return sum(g.outcome in ("pending", "failed") for g in self.grades)

    def describe(self) -> str:
        by: dict[str, int] = {}
        for g in self.grades:
            by[g.outcome] = by.get(g.outcome, 0) + 1
        counts = ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
        text = (f"audit: {len(self.grades)} grade(s) by the audit judge ({self.kept} kept, {self.made} made now; "
                f"{self.http_calls} requests, {self.cache_hits} cache hits) -> {self.path}" + (f": {counts}" if counts else ""))
        if self.pending:
            text += f"\naudit: {self.pending} pending or failed: run again to retry them (they decide nothing)"
        return text


async def aaudit_grading(run_dir: str | os.PathLike[str], judge: LLMClient, *, limit: int | None = None,
                         progress: bool = True, checkpoint_seconds: float = 1.0, **settings: Any) -> AuditReport:
    """Grade the answers the exact judge graded again with ``judge`` (each dataset's LLM protocol)
    into ``RUN_DIR/audit-grading.jsonl``; ``limit``: the first that many (question order). The
    exact grades are untouched. A judge without a cache uses the run's."""
    from trek.grading import GradeStage, _grading_context

    rd = Path(run_dir)
    questions = runs.load_questions(rd)
    answers = runs.load_answers(rd, questions)
    grades = runs.load_grades(rd, questions)
    items = [(questions[qid], answers[qid]) for qid, g in grades.items()
             if g.method == "exact" and g.outcome in (*_DECIDED, UNDECIDED) and qid in answers]
    if limit is not None:
        items = items[:limit]

    class AuditStage(GradeStage):
        name = "audit"

        def slot(self, item: Any) -> Any:
            from trek.stage import Slot

            return Slot(rd / AUDIT_GRADING, item[0].id)

    calls0, hits0 = judge.http_calls, judge.cache_hits
    with _grading_context(rd, judge, None):
        stage = AuditStage(rd, judge, settings)
        tally = await execute(stage, items, outputs=[rd / AUDIT_GRADING], limit=judge.max_connections,
                              progress=progress, checkpoint_seconds=checkpoint_seconds)
    return AuditReport(grades=tally.of(rd / AUDIT_GRADING), kept=tally.kept, made=tally.made, path=rd / AUDIT_GRADING,
                       http_calls=judge.http_calls - calls0, cache_hits=judge.cache_hits - hits0)


def audit_grading(run_dir: str | os.PathLike[str], judge: LLMClient, **kw: Any) -> AuditReport:
    """Synchronous :func:`aaudit_grading` (closes ``judge`` at the end)."""
    from trek.aio import closing_run

    return closing_run(aaudit_grading(run_dir, judge, **kw), judge)


# -- pairs of verdicts -----------------------------------------------------------------------------------
def _grade_reason(g: Grade) -> str | None:
    if g.method == "exact" and g.grader == "exact" and g.judge_raw:
        try:
            from trek.graders.exact import Decision

            return Decision(**json.loads(g.judge_raw[0])).explain()
        except (ValueError, TypeError):
            return None
    return g.judge_raw[-1][:200] if g.judge_raw else None


def _grading_pairs(label: str, rd: Path, exact: Any) -> list[dict[str, Any]]:
    questions = runs.load_questions(rd)
    grades = runs.load_grades(rd, questions)
    out = []
    audit_path = rd / AUDIT_GRADING
    if audit_path.exists():
        llm = {g.question_id: g for g in iter_jsonl(audit_path, Grade)}
        for qid, g in grades.items():
            a = llm.get(qid)
            if a is None or not (g.method == "exact" and g.outcome in (*_DECIDED, UNDECIDED)):
                continue
            out.append(_pair(label, "grading", questions[qid], _exact_outcome(g.outcome), a.outcome if a.outcome in _DECIDED else None,
                             a.outcome, a.judge_model, g.response, _grade_reason(g), _grade_reason(a)))
        return out
    # graded by an LLM judge: the exact verdicts worked out now (when the annotations cover the run)
    judged = {qid: g for qid, g in grades.items() if g.method != "exact"}
    if not judged or exact is None:
        return out
    ann = exact.bind(rd)
    for qid, g in judged.items():
        q = questions[qid]
        try:
            ann.question(q)
        except ValueError:
            return []  # not an annotated run: nothing to compare with
        e = exact.grade(q, g.response)
        out.append(_pair(label, "grading", q, _exact_outcome(e.outcome), g.outcome if g.outcome in _DECIDED else None, g.outcome,
                         g.judge_model, g.response, _grade_reason(e), _grade_reason(g)))
    return out


def _exact_outcome(outcome: str) -> str | None:
    """The exact judge's verdict as a pair holds it (``None``: it left the verdict undecided)."""
    return None if outcome == UNDECIDED else outcome


def _pair(run: str, role: str, q: Any, exact: str | None, judge: str | None, status: str, model: str | None,
          subject: Any, exact_reason: str | None, judge_reason: str | None) -> dict[str, Any]:
    qid = getattr(q, "question_id", None) or q.id  # a TraceRecord or a Question
    return {"run": run, "role": role, "question_id": qid, "dataset":
            getattr(q, "dataset", None), "exact": exact, "judge": judge,
            "status": "ok" if judge is not None else status, "judge_model": model,
            "subject": None if subject is None else str(subject)[:300], "exact_reason": exact_reason,
            "judge_reason": judge_reason}


def _subject(rec: Any, name: str) -> Any:
    return {"evidence_match": rec.retrieved_urls, "query_adequacy": rec.queries, "gold_only_grade": rec.gold_only_answer,
            "noise_grade": rec.noise_answer, "stale_reference": rec.gold_urls}.get(name)


def _trace_pairs(label: str, rd: Path, exact: Any) -> list[dict[str, Any]]:
    from trek.trace.exact import decided, exact_undecided
    from trek.trace.pipeline import load_trace

    out: list[dict[str, Any]] = []
    derived: Any = None  # for an LLM-judged trace: the exact verdicts worked out now (made once)
    try:
        for rec in load_trace(rd):
            exact_steps = {s.name: s for s in rec.steps if decided(s) or exact_undecided(s)}
            for s in rec.audit_steps:  # recorded beside the exact judge
                if s.name in STEP_ROLES and s.name in exact_steps:
                    e = exact_steps[s.name]
                    out.append(_step_pair(label, rec, s, e.value if e.status == "ok" else {}))
            judged = [s for s in rec.steps if s.name in STEP_ROLES and not (decided(s) or exact_undecided(s))
                      and s.role != "evaluated"]
            if not judged or exact is None or derived is False:
                continue
            if derived is None:
                derived = _derive(rd, exact)
                if derived is False:
                    continue
            for s in judged:
                value = derived(rec, s.name)
                if value is not None:
                    out.append(_step_pair(label, rec, s, value))
    finally:
        if derived:
            derived.store.close()
    return out


def _step_pair(label: str, rec: Any, s: Any, exact_value: dict[str, Any]) -> dict[str, Any]:
    """The pair of one TrekTrace step: the exact judge's value and the LLM judge's step ``s``."""
    role, key = STEP_ROLES[s.name]
    status = {"ok": "ok", "unknown": "unparsed"}.get(s.status, s.status)
    return _pair(label, role, rec, _yes(exact_value.get(key)), _yes(s.value.get(key)) if s.status == "ok" else None,
                 status, s.model, _subject(rec, s.name), exact_value.get("reason"), s.value.get("reason"))


def _derive(rd: Path, exact: Any) -> Any:
    """``f(record, step name) -> exact value`` for a run traced by LLM judges; ``False`` when the
    annotations do not cover the run."""
    from trek.pages import PageStore
    from trek.runs import default_pages_path
    from trek.trace.exact import for_trace

    questions = runs.load_questions(rd)
    pages = default_pages_path(rd)
    store = PageStore(pages) if Path(pages).exists() else PageStore(None)
    oracle = for_trace(exact, store, rd)
    try:
        for q in questions.values():
            oracle.annotations.question(q)
    except ValueError:
        store.close()
        return False

    def value(rec: Any, name: str) -> dict[str, Any] | None:
        q = questions[rec.question_id]
        try:
            if name == "evidence_match":
                if oracle.annotations.unknown_urls(rec.retrieved_urls):
                    return None
                return oracle.evidence_match(q, rec.retrieved_urls)[0]
            if name == "query_adequacy":
                return oracle.query_adequacy(q, rec.queries)[0]
            if name == "gold_only_grade":
                return oracle.verdict(q, rec.gold_only_answer)[0]
            if name == "noise_grade":
                return oracle.verdict(q, rec.noise_answer)[0]
            if name == "stale_reference":
                return oracle.stale(q)[0]
        except ValueError:
            return None  # e.g. a run without the local search its query test needs
        return None

    value.store = store  # type: ignore[attr-defined]  # closed by the caller
    return value


def audit_pairs(run_dirs: Mapping[str, str | os.PathLike[str]] | Iterable[str | os.PathLike[str]],
                exact: Any = None) -> pd.DataFrame:
    """One row per verdict both judges gave (:data:`PAIR_COLUMNS`), over every run given
    (``{label: run directory}`` or a list, labelled by folder name). ``exact``: the exact judge
    that works out verdicts for LLM-judged runs (default: a new :class:`~trek.exact.ExactJudge`).
    ``judge`` is ``None`` where the audit judge's reply was unreadable or its call pending
    (``status`` says which); such rows are not counted in :func:`audit_table`'s ``n``."""
    from trek.exact import ExactJudge

    items = run_dirs.items() if isinstance(run_dirs, Mapping) else ((Path(d).name, d) for d in run_dirs)
    exact = exact if exact is not None else ExactJudge()
    rows: list[dict[str, Any]] = []
    for label, d in items:
        rd = Path(d)
        if not rd.is_dir():
            raise RecordError(rd, None, "run directory does not exist")
        if (rd / runs.GRADES).exists():
            rows += _grading_pairs(str(label), rd, exact)
        if (rd / runs.TRACE).exists():
            rows += _trace_pairs(str(label), rd, exact)
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


# -- the tables -----------------------------------------------------------------------------------------
TABLE_COLUMNS = ["n", "agreement_binary", "agreement_outcomes", "kappa", "kappa_low", "kappa_high", "exact_yes", "judge_yes", "unreadable",
                 "exact_undecided", "judge_model", "kappa_note"]


def kappa_note(exact: Any, judge: Any, kappa: float, low: float) -> str:
    """Why a kappa of the audit is undefined or has no interval ("" when it has both): both judges
    gave one verdict throughout (kappa 0/0, undefined), or one of them did (kappa 0 by
    construction, no interval)."""
    import math

    ex, ju = pd.unique(pd.Series(exact, dtype=object)), pd.unique(pd.Series(judge, dtype=object))
    if not len(ex):
        return "no verdicts"
    if math.isnan(kappa):
        return f"undefined: both judges said {ex[0]!r} every time (kappa 0/0)"
    if not math.isnan(low):
        return ""
    if len(ju) == 1:
        return f"no interval: the audited judge said {ju[0]!r} every time (kappa 0)"
    if len(ex) == 1:
        return f"no interval: the exact judge said {ex[0]!r} every time (kappa 0)"
    return "no interval: standard error 0"


def show_kappa(table: pd.DataFrame, digits: int = 2, column: str = "kappa") -> pd.DataFrame:
    """A copy of ``table`` to show: ``column`` (a kappa) written with ``digits`` decimals and an
    undefined kappa (NaN) written ``undefined``, so it never reads as a number (the reason is the
    table's ``kappa_note``)."""
    import math

    out = table.copy()
    if column in out:
        out[column] = [("undefined" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}")
                       for v in out[column]]
    return out


def audit_table(pairs: pd.DataFrame, by: str | list[str] = "role", level: float = 0.95) -> pd.DataFrame:
    """Per role (``by``: columns to group by, default ``role``): ``n`` verdicts both judges gave,
    ``agreement_binary`` (%: both give credit or both do not, ``correct``/``yes`` against the rest,
    the split of ``exact_yes``/``judge_yes``), ``agreement_outcomes`` (%: the same outcome, of the
    three a SealQA-style grade has, correct / incorrect / not attempted; for the yes/no roles the
    same as the binary one), Cohen's kappa over the outcomes with its ``level`` interval (:func:`trek.stats.cohens_kappa_ci`),
    the share of ``correct``/``yes`` verdicts of each judge (%), the audit judge's ``unreadable``
    (unparsed or pending) verdicts, left out of ``n``, ``exact_undecided``: the verdicts the exact
    judge left undecided (it abstains rather than guess), left out of ``n`` and kappa, the audit judge model(s) and ``kappa_note``
    (:func:`kappa_note`: why a kappa is undefined, NaN, or has no interval). Empty when there are no
    pairs."""
    from trek.stats import cohens_kappa_ci

    keys = [by] if isinstance(by, str) else list(by)
    if pairs.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS, index=pd.MultiIndex.from_tuples([], names=keys) if len(keys) > 1
                            else pd.Index([], name=keys[0]))
    rows = {}
    for key, g in pairs.groupby(keys if len(keys) > 1 else keys[0], sort=False):
        ok = g[g["judge"].notna() & g["exact"].notna()]
        n = len(ok)
        pos = lambda s: 100.0 * s.isin(["yes", "correct"]).mean() if len(s) else float("nan")  # noqa: E731
        kappa, lo, hi = cohens_kappa_ci(ok["exact"].to_numpy(), ok["judge"].to_numpy(), level) if n else (float("nan"),) * 3
        credit = lambda s: s.isin(["yes", "correct"])  # noqa: E731
        rows[key] = {"n": n,
                     "agreement_binary": 100.0 * (credit(ok["exact"]) == credit(ok["judge"])).mean() if n else float("nan"),
                     "agreement_outcomes": 100.0 * (ok["exact"] == ok["judge"]).mean() if n else float("nan"),
                     "kappa": kappa, "kappa_low": lo, "kappa_high": hi, "exact_yes": pos(ok["exact"]),
                     "judge_yes": pos(ok["judge"]), "unreadable": int((g["judge"].isna() & g["exact"].notna()).sum()),
                     "exact_undecided": int(g["exact"].isna().sum()),
                     "judge_model": ", ".join(sorted({str(m) for m in g["judge_model"].dropna()})),
                     "kappa_note": kappa_note(ok["exact"], ok["judge"], kappa, lo)}
    out = pd.DataFrame.from_dict(rows, orient="index", columns=TABLE_COLUMNS)
    if len(keys) > 1:
        out.index = pd.MultiIndex.from_tuples(out.index, names=keys)
    else:
        out.index.name = keys[0]
    order = {r: i for i, r in enumerate(ROLES)}
    if "role" in keys:
        pos_ = keys.index("role")
        out = out.iloc[sorted(range(len(out)), key=lambda i: order.get(
            out.index[i][pos_] if len(keys) > 1 else out.index[i], len(order)))]
    out["n"] = out["n"].astype(int)
    out["unreadable"] = out["unreadable"].astype(int)
    out["exact_undecided"] = out["exact_undecided"].astype(int)
    return out


def confusion(pairs: pd.DataFrame, role: str) -> pd.DataFrame:
    """The exact (rows) by audit judge (columns) counts of one role, over the pairs both decided."""
    g = pairs[(pairs["role"] == role) & pairs["judge"].notna() & pairs["exact"].notna()]
    labels = sorted(set(g["exact"]) | set(g["judge"]))
    table = pd.crosstab(pd.Categorical(g["exact"], labels), pd.Categorical(g["judge"], labels), dropna=False)
    table.index.name, table.columns.name = "exact", "judge"
    return table


def disagreements(pairs: pd.DataFrame) -> pd.DataFrame:
    """The verdicts the two judges gave differently (both decided), with what was judged and why."""
    d = pairs[pairs["judge"].notna() & pairs["exact"].notna() & (pairs["exact"] != pairs["judge"])]
    return d[["run", "role", "question_id", "exact", "judge", "subject", "exact_reason", "judge_reason"]].reset_index(
        drop=True)


def _short(value: Any, width: int = 60) -> str:
    text = " ".join(str(value).split()) if value is not None and value == value else ""
    return text if len(text) <= width else text[: width - 3] + "..."


def describe(pairs: pd.DataFrame) -> str:
    """The plain-text audit: the table, each role's confusion table and the disagreements."""
    if pairs.empty:
        return ("no audit data: no verdict was given by both an LLM judge and the exact judge in these runs "
                "(record some with `trek grade RUN --judge oracle --audit-judge MODEL` or "
                "`trek trace RUN --judge oracle --audit-judge MODEL`, or judge an annotated run with an LLM)")
    from trek import textable

    parts = ["Judge audit: the audit judge against the exact judge (Cohen's kappa with a 95% interval; none "
             "where a judge gave one verdict throughout, as kappa then has no standard error)",
             textable.frame(show_kappa(audit_table(pairs).round(3), 3)), ""]
    for role in [r for r in ROLES if r in set(pairs.loc[pairs["judge"].notna(), "role"])]:
        parts += [f"{role}:", textable.frame(confusion(pairs, role)), ""]
    d = disagreements(pairs)
    parts.append(f"{len(d)} disagreement(s)" + (":" if len(d) else ""))
    width = textable.width()
    for row in d.to_dict("records"):  # one block per case: its texts cut to the width, not a wide table
        parts.append(f"- {row['run']} {row['role']} {row['question_id']}: exact {row['exact']}, judge {row['judge']}")
        for col in ("subject", "exact_reason", "judge_reason"):
            if col in row and _short(row[col]):
                parts.append(f"    {col}: " + _short(row[col], max(20, width - len(col) - 6)))
    return "\n".join(parts)


def write_pairs(pairs: pd.DataFrame, out: str | os.PathLike[str], run_dirs: Iterable[str | os.PathLike[str]],
                force: bool = False) -> Path:
    """Write ``pairs`` as CSV to ``out`` by the output rule (:mod:`trek.outputs`): never over a
    record of the runs read, a device or a folder; an existing file that is not an earlier audit
    CSV only with ``force``; text cells a spreadsheet would evaluate are made inert."""
    from trek.outputs import atomic_write, check_out, csv_safe

    header = ",".join(PAIR_COLUMNS).encode()
    path = check_out(out, runs=list(run_dirs), example="audit.csv", owner=header, command="trek judge audit",
                     force=force)
    return atomic_write(path, csv_safe(pairs).to_csv(index=False))
