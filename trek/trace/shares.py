"""Label shares of a traced run, corrected by a small random human review (``trek trace shares``).

TrekTrace's headline numbers are the shares of traced failures that carry each label. A judge
decides them; a person who reviews a **uniformly random** sample of the traced cases makes it
possible to correct the judge's shares and give intervals that hold whatever the judge's errors:
prediction-powered inference (:func:`trek.stats.prediction_powered_share`, PPI++ weight).

The pieces:

* :func:`draw_sample` — the review sample: ``n`` fully traced cases drawn uniformly at random with
  a seed (``numpy.random.default_rng(seed)`` over the cases sorted by question id), optionally
  stratified by dataset (proportional allocation, largest remainders). The same seed and trace
  give the same ids. :class:`Sample` records how the cases were chosen; the review workbook keeps
  it in its ``sample`` sheet (:mod:`trek.trace.review`).
* :func:`read_human` — the human verdicts, from a filled review workbook or from a CSV with
  ``question_id`` and one 0/1 column per label (:data:`~trek.trace.labels.LABELS`), validated
  against the trace and the sample: unknown ids, ids outside the sample, sampled cases left
  unreviewed and values other than 0/1 are each an error naming the row.
* :func:`judge_labels` — the judge's labels per case: the trace's own, or (``judge="audit"``)
  the labels the audit judge's verdicts give (``trek trace RUN --judge oracle --audit-judge M``),
  so that on an exactly judged Mini run the exact judge is the truth and the audit judge the
  judge being corrected.
* :func:`shares_table` — per label (and dataset): ``n_traced``, ``n_reviewed``, the judge's share
  with a Wilson interval, the corrected share with its PPI++ interval and the human-only share
  with a Wilson interval over the reviewed cases. The corrected share estimates, by default, the
  label's rate in the population the questions come from (:func:`trek.stats.ppi_mean`: the N
  traced cases are a sample of it, the reviewed and the unreviewed ones two disjoint parts);
  ``estimand="traced"`` gives the share among the N traced cases instead
  (:func:`trek.stats.prediction_powered_share`). The ``estimand`` column says which.

A hand-picked set of reviewed cases (a workbook without a random sample, a CSV whose ids are not
the sample its seed draws) is refused: PPI's intervals need a random sample. ``allow_unsampled``
takes it anyway and flags every row (``sample`` column ``not random``).
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trek import textable
from trek.stats import ppi_mean, prediction_powered_share, wilson_ci
from trek.trace.labels import LABELS, assign_labels
from trek.trace.records import TraceRecord
from trek.trace.review import RANDOM, Sample

__all__ = [
    "Sample",
    "HumanLabels",
    "draw_sample",
    "judge_labels",
    "audit_labels",
    "read_human",
    "shares_table",
    "SHARE_COLUMNS",
    "describe_shares",
    "write_shares",
    "plan_reviews",
    "describe_plan",
]

NOT_RANDOM = "not random"
BY_CHOICES = (None, "dataset")

SHARE_COLUMNS = ["dataset", "label", "n_traced", "n_reviewed", "judge_share", "judge_low", "judge_high",
                 "estimand", "corrected_share", "low", "high", "human_only_share", "human_low", "human_high",
                 "lambda", "sample"]

#: What a corrected share estimates. ``population``: the rate of the label among the failures of
#: the population the questions come from (:func:`trek.stats.ppi_mean`; the N traced cases are a
#: sample of it). ``traced``: the share among these N traced cases only
#: (:func:`trek.stats.prediction_powered_share`), narrower, but a statement about this run alone.
ESTIMANDS = ("population", "traced")
ESTIMAND_WORDS = {"population": "population (the label's rate among failures of the population the questions "
                                "come from; these N traced cases a sample of it)",
                  "traced": "traced (the label's share among these N traced cases only)"}


def _done(records: list[TraceRecord]) -> list[TraceRecord]:
    return sorted((r for r in records if r.status == "done"), key=lambda r: r.question_id)


def _allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of ``n`` draws over strata (largest remainders, ties by name)."""
    total = sum(sizes.values())
    exact = {k: n * v / total for k, v in sizes.items()}
    out = {k: int(np.floor(x)) for k, x in exact.items()}
    rest = n - sum(out.values())
    for k in sorted(sizes, key=lambda k: (-(exact[k] - out[k]), k))[:rest]:
        out[k] += 1
    return out


def draw_sample(records: list[TraceRecord], n: int, seed: int = 0, by: str | None = None) -> Sample:
    """A uniformly random sample of ``n`` fully traced cases (see the module docstring)."""
    if by not in BY_CHOICES:
        raise ValueError(f"--by must be 'dataset' (or left out), got {by!r}")
    done = _done(records)
    if not done:
        raise ValueError("no fully traced case to sample (run `trek trace RUN` until its cases are done)")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"--sample must be a positive number of cases, got {n!r}")
    if n > len(done):
        raise ValueError(f"--sample {n}: the run has only {len(done)} fully traced case(s)")
    rng = np.random.default_rng(seed)
    if by is None:
        picked = rng.choice(len(done), size=n, replace=False)
        ids = tuple(sorted(done[int(i)].question_id for i in picked))
        return Sample(RANDOM, seed, None, len(done), ids)
    groups: dict[str, list[TraceRecord]] = {}
    for r in done:
        groups.setdefault(r.dataset, []).append(r)
    alloc = _allocate({k: len(v) for k, v in groups.items()}, n)
    ids_list: list[str] = []
    for k in sorted(groups):
        picked = rng.choice(len(groups[k]), size=alloc[k], replace=False)
        ids_list += [groups[k][int(i)].question_id for i in picked]
    strata = {k: (len(groups[k]), alloc[k]) for k in sorted(groups)}
    return Sample(RANDOM, seed, by, len(done), tuple(sorted(ids_list)), strata)


# -- the judge's labels -----------------------------------------------------------------------------------
def _audit_value(rec: TraceRecord, name: str, key: str, fallback: bool | None) -> bool | None:
    for s in rec.audit_steps:
        if s.name == name:
            if s.status != "ok":
                return None
            v = s.value.get(key)
            return None if v is None else bool(v)
    return fallback


def audit_labels(rec: TraceRecord) -> tuple[str, ...]:
    """The labels the audit judge's verdicts give one case (C.4 rules, :func:`assign_labels`).

    The audit judge answered every step the exact judge answered; where it was not asked (the
    retrieval decided by URL identity, the query test or the gold-plus-noise probe the exact
    schedule did not need) the recorded flag stands. An unreadable audit verdict is unknown
    (``None``), placed as the rules place unknowns."""
    e = _audit_value(rec, "evidence_match", "evidence_match", rec.evidence_retrieved)
    q = _audit_value(rec, "query_adequacy", "query_adequate", rec.query_adequate)
    g = _audit_value(rec, "gold_only_grade", "correct", rec.gold_only_correct)
    nz = _audit_value(rec, "noise_grade", "correct", rec.noise_correct)
    return assign_labels(e, q, g, rec.noise_was_run, nz)


def judge_labels(records: list[TraceRecord], judge: str = "trace") -> dict[str, frozenset[str]]:
    """``{question_id: labels}`` of the fully traced cases: the trace's labels (``judge="trace"``)
    or those of the audit judge's verdicts (``judge="audit"``, :func:`audit_labels`)."""
    if judge not in ("trace", "audit"):
        raise ValueError(f"--labels-from must be 'trace' or 'audit', got {judge!r}")
    done = _done(records)
    if judge == "audit":
        missing = [r.question_id for r in done if not r.audit_steps]
        if missing:
            raise ValueError(f"--labels-from audit: {len(missing)} fully traced case(s) have no audit verdicts (e.g. "
                             f"{missing[0]}); trace with --judge oracle --audit-judge MODEL and no --audit-limit")
        return {r.question_id: frozenset(audit_labels(r)) for r in done}
    return {r.question_id: frozenset(r.labels) for r in done}


# -- the human verdicts ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HumanLabels:
    """The reviewed cases' human labels (``{question_id: labels}``), the file they came from and
    the sample they were checked against (``None``: not shown to be random)."""

    labels: dict[str, frozenset[str]]
    source: Path
    sample: Sample | None


def _cell01(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text in ("0", "1", "0.0", "1.0"):
        return text.startswith("1")
    shown = "a blank cell" if text == "" else repr(value)
    raise ValueError(f"{where}: {shown}; use 0 or 1")


def _read_csv(path: Path) -> list[tuple[int, str, frozenset[str]]]:
    from trek.jsonio import read_bytes
    from trek.trace.review import duplicate_columns

    try:
        with io.StringIO(read_bytes(path, "human review CSV").decode("utf-8-sig"), newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            twice = duplicate_columns([h.strip() for h in header])
            if twice:
                raise ValueError(f"{path}: column {twice[0]!r} is given twice; keep one (which one holds the "
                                 "verdicts cannot be guessed)")
            missing = [c for c in ("question_id", *LABELS) if c not in header]
            if missing:
                raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (expected question_id and "
                                 f"one 0/1 column per label: {', '.join(LABELS)})")
            out = []
            for i, row in enumerate(reader, start=2):
                qid = (row.get("question_id") or "").strip()
                if not qid:
                    raise ValueError(f"{path}: row {i}: question_id is empty")
                labs = frozenset(lab for lab in LABELS if _cell01(row.get(lab), f"{path}: row {i} ({qid}), {lab}"))
                out.append((i, qid, labs))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a UTF-8 text CSV ({e.reason})") from None
    except csv.Error as e:
        raise ValueError(f"{path}: cannot be read as CSV ({e})") from None
    return out


def _read_workbook(path: Path) -> tuple[list[tuple[int, str, frozenset[str]]], list[tuple[int, str]], Sample | None]:
    """(reviewed rows, unreviewed rows, the recorded sample) of a filled review workbook."""
    from trek.trace.agreement import _yes
    from trek.trace.review import JUDGE_CORRECT, REFERENCE_VALID, read_checklist, read_sample, reviewer_column

    rows = read_checklist(path)
    out, blank = [], []
    for i, row in enumerate(rows, start=2):
        qid = str(row.get("question_id", "")).strip()
        if not qid:
            raise ValueError(f"{path}: checklist row {i}: question_id is empty")
        where = f"{path}: checklist row {i} ({qid})"
        try:
            ref_ok = _yes(row.get(REFERENCE_VALID, ""))
            judge_ok = _yes(row.get(JUDGE_CORRECT, ""))
            marks = {lab: _yes(row.get(reviewer_column(lab), "")) for lab in LABELS}
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if ref_ok is None and judge_ok is None and all(v is None for v in marks.values()):
            blank.append((i, qid))
            continue
        # A reference or judge error is system-independent: the case keeps no stage label.
        labs = frozenset() if ref_ok is False or judge_ok is False else frozenset(k for k, v in marks.items() if v)
        out.append((i, qid, labs))
    return out, blank, read_sample(path)


def read_human(path: str | os.PathLike[str], records: list[TraceRecord], *, seed: int | None = None,
               by: str | None = None, allow_unsampled: bool = False) -> HumanLabels:
    """The human verdicts of ``path`` (a filled review workbook, ``.xlsx``, or a CSV), checked
    against the trace ``records`` and the sample (see the module docstring).

    The sample of a workbook is the one its ``sample`` sheet records; a workbook without one
    whose every fully traced case is reviewed is a census (valid: n = N). A CSV names none:
    ``seed`` (and ``by``) say which draw of :func:`draw_sample` it reviews, and its ids must be
    exactly the ``len(rows)`` cases that draw gives. Without a sample the file is refused unless
    ``allow_unsampled`` (then :attr:`HumanLabels.sample` is ``None``)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no human review file at {p}")
    if p.is_dir():
        raise ValueError(f"{p}: is a folder; give the filled workbook (.xlsx) or a CSV")
    blank: list[tuple[int, str]] = []
    if p.suffix.lower() == ".xlsx":
        rows, blank, sample = _read_workbook(p)
        if sample is not None and seed is not None and seed != sample.seed:
            raise ValueError(f"{p}: the workbook's sample was drawn with seed {sample.seed}, not {seed}")
    else:
        rows, sample = _read_csv(p), None
    if not rows:
        raise ValueError(f"{p}: no reviewed case (fill in the reviewer's columns)")
    done = _done(records)
    done_ids = {r.question_id for r in done}
    every = {r.question_id: r for r in records}
    seen: dict[str, int] = {}
    for i, qid, _ in rows:
        if qid in seen:
            raise ValueError(f"{p}: row {i}: {qid} is given again (first on row {seen[qid]})")
        seen[qid] = i
        if qid not in every:
            raise ValueError(f"{p}: row {i}: unknown question_id {qid!r} (not a traced case of this run)")
        if qid not in done_ids:
            raise ValueError(f"{p}: row {i}: {qid} is not fully traced (status {every[qid].status}); only fully "
                             "traced cases are sampled")
    if sample is None and seed is not None:
        sample = draw_sample(records, len(rows), seed, by)
    if sample is None and not blank and set(seen) == done_ids:
        sample = Sample("every case (census)", None, None, len(done), tuple(sorted(seen)))
    if sample is not None:
        drawn = set(sample.question_ids)
        for i, qid, _ in rows:
            if qid not in drawn:
                raise ValueError(f"{p}: row {i}: {qid} is not in the sample ({sample.describe()}); PPI needs the "
                                 "randomly drawn cases, not others")
        for i, qid in blank:
            if qid in drawn:
                raise ValueError(f"{p}: checklist row {i} ({qid}): not reviewed; every sampled case needs the "
                                 "reviewer's verdict (a sample with skipped cases is no longer random)")
        absent = sorted(drawn - set(seen))
        if absent:
            raise ValueError(f"{p}: {len(absent)} sampled case(s) not in the file, e.g. {absent[0]}; review every "
                             "sampled case (skipping some makes the sample non-random)")
        if sample.population != len(done):
            raise ValueError(f"{p}: the sample was drawn from {sample.population} fully traced case(s) but the run "
                             f"now has {len(done)}; draw a new sample (trek trace review RUN --sample N)")
    elif not allow_unsampled:
        raise ValueError(f"{p}: these {len(rows)} reviewed case(s) are not shown to be a random sample (a workbook "
                         "written without --sample, or a CSV without --seed), so corrected intervals would not be "
                         "valid; draw one with `trek trace review RUN --sample N --seed S`, or pass "
                         "--allow-unsampled to get the shares flagged 'not random'")
    return HumanLabels({qid: labs for _, qid, labs in rows}, p, sample)


# -- the table --------------------------------------------------------------------------------------------
def _row(dataset: str, label: str, ids: list[str], judge: dict[str, frozenset[str]],
         human: HumanLabels | None, alpha: float, estimand: str = "population",
         strata: dict[str, str] | None = None) -> dict[str, Any]:
    f_all = np.array([label in judge[q] for q in ids], dtype=int)
    k = int(f_all.sum())
    j_low, j_high = wilson_ci(k, len(ids), 1 - alpha)
    row: dict[str, Any] = {"dataset": dataset, "label": label, "n_traced": len(ids), "n_reviewed": 0,
                           "judge_share": k / len(ids), "judge_low": j_low, "judge_high": j_high}
    nan = float("nan")
    row.update(estimand="", corrected_share=nan, low=nan, high=nan, human_only_share=nan, human_low=nan,
               human_high=nan, **{"lambda": nan}, sample="")
    if human is None:
        return row
    reviewed = [q for q in ids if q in human.labels]
    row["sample"] = RANDOM if human.sample is not None else NOT_RANDOM
    row["n_reviewed"] = len(reviewed)
    if not reviewed:
        return row
    f_n = np.array([label in judge[q] for q in reviewed], dtype=int)
    y_n = np.array([label in human.labels[q] for q in reviewed], dtype=int)
    if estimand == "traced":
        est, low, high, lam = prediction_powered_share(f_all, f_n, y_n, alpha=alpha, with_weight=True)
    else:
        unreviewed = [q for q in ids if q not in human.labels]
        f_u = np.array([label in judge[q] for q in unreviewed], dtype=int)
        kw: dict[str, Any] = {}
        if strata is not None:
            kw = {"strata_unreviewed": [strata[q] for q in unreviewed], "strata_reviewed": [strata[q] for q in reviewed]}
        r = ppi_mean(f_u, f_n, y_n, alpha=alpha, result=True, **kw)
        est, low, high, lam = r.estimate, r.low, r.high, r.lam
    h_low, h_high = wilson_ci(int(y_n.sum()), y_n.size, 1 - alpha)
    row.update(estimand=estimand, corrected_share=est, low=low, high=high, human_only_share=float(y_n.mean()),
               human_low=h_low, human_high=h_high, **{"lambda": lam})
    return row


def shares_table(records: list[TraceRecord], judge: dict[str, frozenset[str]], human: HumanLabels | None = None,
                 by: str | None = None, alpha: float = 0.05, estimand: str = "population") -> pd.DataFrame:
    """One row per label (per dataset and ``all`` with ``by="dataset"``): :data:`SHARE_COLUMNS`.
    Shares and bounds are proportions in [0, 1]; without ``human`` only the judge's columns are
    filled. ``judge``: :func:`judge_labels`. ``estimand`` (:data:`ESTIMANDS`, written in the
    ``estimand`` column): ``population`` corrects by :func:`trek.stats.ppi_mean` (the unreviewed
    cases' judge labels and the reviewed cases' pairs; the ``all`` row of a sample stratified by
    dataset takes its stratified form), ``traced`` by :func:`trek.stats.prediction_powered_share`.
    ``lambda`` is the judge's weight in the corrected share (0: the judge added nothing and the
    corrected share is the review's own, with its interval; the size-weighted mean of the
    datasets' weights for a stratified row)."""
    if by not in BY_CHOICES:
        raise ValueError(f"--by must be 'dataset' (or left out), got {by!r}")
    if estimand not in ESTIMANDS:
        raise ValueError(f"--estimand must be one of {', '.join(ESTIMANDS)}, got {estimand!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"--alpha must lie strictly between 0 and 1, got {alpha!r}")
    done = [r for r in _done(records) if r.question_id in judge]
    if not done:
        raise ValueError("no fully traced case: nothing to share out")
    groups: list[tuple[str, list[str]]] = []
    if by == "dataset":
        for ds in sorted({r.dataset for r in done}):
            groups.append((ds, [r.question_id for r in done if r.dataset == ds]))
    groups.append(("all", [r.question_id for r in done]))
    # A sample stratified by dataset: the all row combines the datasets' corrected rates by size
    # (when every dataset has a reviewed case; a proportional draw is close to self-weighting).
    strata = None
    if human is not None and human.sample is not None and human.sample.by == "dataset":
        strata = {r.question_id: r.dataset for r in done}
        if {strata[q] for q in human.labels if q in strata} != set(strata.values()):
            strata = None
    rows = [_row(ds, lab, ids, judge, human, alpha, estimand, strata if ds == "all" else None)
            for ds, ids in groups for lab in LABELS]
    return pd.DataFrame(rows, columns=SHARE_COLUMNS)


def describe_shares(table: pd.DataFrame, human: HumanLabels | None, alpha: float, run: str) -> str:
    """The table of ``trek trace shares`` in words and percentages."""
    pct = int(round(100 * (1 - alpha)))
    show = table.copy()

    def ci(a: str, b: str, c: str) -> pd.Series:
        return show.apply(lambda r: "" if pd.isna(r[a]) else f"{100 * r[a]:.1f} [{100 * r[b]:.1f}, {100 * r[c]:.1f}]",
                          axis=1)

    out = pd.DataFrame({"dataset": show["dataset"], "label": show["label"], "n_traced": show["n_traced"]})
    out[f"judge % [{pct}% CI]"] = ci("judge_share", "judge_low", "judge_high")
    lines = []
    if human is None:
        lines.append(f"{run}: judge's label shares (% of fully traced cases, Wilson {pct}% intervals; these "
                     "intervals count only sampling, not the judge's errors)")
        lines.append(textable.frame(out, index=False))
        lines.append("")
        lines.append("to correct them for the judge's errors: draw a random review sample "
                     f"(trek trace review {run} --sample 50 --seed 0), have a person fill it in, then "
                     f"trek trace shares {run} --human review.xlsx")
        return "\n".join(lines)
    # three estimates with their intervals fit 80 columns only stacked: the dataset above the label,
    # each estimate above its interval (the headers on two lines too)
    out = pd.DataFrame({"dataset\nlabel": show["dataset"] + "\n" + show["label"], "n_traced": show["n_traced"]})

    def stacked(a: str, b: str, c: str) -> pd.Series:
        return ci(a, b, c).str.replace(" ", "\n", n=1)

    out[f"judge %\n[{pct}% CI]"] = stacked("judge_share", "judge_low", "judge_high")
    out["n_reviewed"] = show["n_reviewed"]
    out[f"corrected %\n[{pct}% CI]"] = stacked("corrected_share", "low", "high")
    out[f"human only %\n[{pct}% CI]"] = stacked("human_only_share", "human_low", "human_high")
    how = human.sample.describe() if human.sample is not None else "NOT a random sample: intervals not valid"
    lines.append(f"{run}: label shares (% of fully traced cases); corrected = prediction-powered (PPI++) from "
                 f"{human.source.name}: {how}")
    estimand = next((e for e in show["estimand"] if e), "population")
    lines.append(f"corrected estimand: {ESTIMAND_WORDS[estimand]}")
    lines.append(textable.frame(out, index=False))
    return "\n".join(lines)


def write_shares(run_dir: str | os.PathLike[str], human: str | os.PathLike[str] | None = None, *,
                 by: str | None = None, alpha: float = 0.05, out: str | os.PathLike[str] | None = None,
                 judge: str = "trace", seed: int | None = None, sample_by: str | None = None,
                 allow_unsampled: bool = False, estimand: str = "population") -> tuple[str, Path | None]:
    """``trek trace shares``: (the text to print, the CSV written or ``None``)."""
    from trek.outputs import atomic_write, check_out
    from trek.trace.pipeline import load_trace

    if not 0 < alpha < 1:
        raise ValueError(f"--alpha must lie strictly between 0 and 1, got {alpha}")
    if estimand not in ESTIMANDS:
        raise ValueError(f"--estimand must be one of {', '.join(ESTIMANDS)}, got {estimand!r}")
    if human is None and (seed is not None or sample_by is not None or allow_unsampled):
        raise ValueError("--seed, --sample-by and --allow-unsampled go with --human FILE")
    records = load_trace(run_dir)
    if not records:
        raise FileNotFoundError(f"{run_dir}: no trace.jsonl records (run `trek trace {run_dir}` first)")
    target = check_out(out, runs=[run_dir], reads=[human], example="shares.csv") if out is not None else None
    labels = judge_labels(records, judge)
    verdicts = read_human(human, records, seed=seed, by=sample_by, allow_unsampled=allow_unsampled) \
        if human is not None else None
    table = shares_table(records, labels, verdicts, by=by, alpha=alpha, estimand=estimand)
    if target is not None:
        atomic_write(target, table.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    return describe_shares(table, verdicts, alpha, str(run_dir)), target


# -- the review planner -----------------------------------------------------------------------------------
PLAN_COLUMNS = ["label", "n_traced", "judge_share", "pilot_reviewed", "reviews_alone", "reviews_with_judge"]


def plan_reviews(records: list[TraceRecord], judge: dict[str, frozenset[str]], half_width: float,
                 pilot: HumanLabels | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """How many random reviews buy ``+/- half_width`` (a proportion) on each label's population rate
    (:func:`trek.stats.ppi_reviews_needed`). Without a ``pilot`` review the person's rate is
    guessed as the judge's share and only the review-alone count is given (what the judge is worth
    is unknown until someone checks it); with one, the pilot's (person, judge) table (with the
    guards' pseudo-observations) gives both counts. ``None``: not reachable within the run."""
    from trek.stats import PSEUDO_OBSERVATIONS, ppi_reviews_needed

    ids = [r.question_id for r in _done(records) if r.question_id in judge]
    if not ids:
        raise ValueError("no fully traced case: nothing to plan")
    rows = []
    for lab in LABELS:
        q = float(np.mean([lab in judge[i] for i in ids]))
        row: dict[str, Any] = {"label": lab, "n_traced": len(ids), "judge_share": q, "pilot_reviewed": 0,
                               "reviews_alone": None, "reviews_with_judge": None}
        if pilot is None:
            table = np.array([[1 - q, 0.0], [0.0, q]])
            row["reviews_alone"] = ppi_reviews_needed(half_width, len(ids), table, alpha)[0]
        else:
            rev = [i for i in ids if i in pilot.labels]
            counts = np.full((2, 2), PSEUDO_OBSERVATIONS / 4)
            for i in rev:
                counts[int(lab in pilot.labels[i]), int(lab in judge[i])] += 1
            alone, with_judge = ppi_reviews_needed(half_width, len(ids), counts / counts.sum(), alpha)
            row.update(pilot_reviewed=len(rev), reviews_alone=alone, reviews_with_judge=with_judge)
        rows.append(row)
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def describe_plan(table: pd.DataFrame, half_width: float, pilot: HumanLabels | None, run: str) -> str:
    """The plan of ``trek trace review --plan`` in words."""
    def n(v: Any) -> str:
        return "more than the run" if v is None or v != v else str(int(v))

    show = pd.DataFrame({"label": table["label"], "N": table["n_traced"],
                         "judge %": [f"{100 * v:.1f}" for v in table["judge_share"]],
                         "reviews (review alone)": [n(v) for v in table["reviews_alone"]]})
    head = f"{run}: random reviews for a 95% interval of +/- {100 * half_width:g} points on each label's population rate"
    if pilot is None:
        return (head + " (the person's rate guessed as the judge's share)\n" + textable.frame(show, index=False)
                + "\n\nwhat the judge saves depends on how often it is right: review a small random pilot "
                "(trek trace review RUN --sample 20), then plan again with --human PILOT")
    show["reviews (with the judge, PPI++)"] = [n(v) for v in table["reviews_with_judge"]]
    return (head + f" (the judge's worth from the pilot {pilot.source.name}: {int(table['pilot_reviewed'].iloc[0])} "
            "reviewed cases)\n" + textable.frame(show, index=False))


def review_plan_text(run_dir: str | os.PathLike[str], points: float | None, pilot: str | os.PathLike[str] | None,
                     alpha: float = 0.05, *, seed: int | None = None, by: str | None = None) -> str:
    """``trek trace review RUN --plan POINTS [--human PILOT]``: the plan in words."""
    from trek.trace.pipeline import load_trace

    if points is None:
        raise ValueError("--human goes with --plan POINTS (trek trace shares reads a full review)")
    if not 0 < points < 100:
        raise ValueError(f"--plan takes the half-width in points, between 0 and 100, got {points:g}")
    records = load_trace(run_dir)
    if not records:
        raise FileNotFoundError(f"{run_dir}: no trace.jsonl records (run `trek trace {run_dir}` first)")
    csv_pilot = pilot is not None and Path(pilot).suffix.lower() == ".csv"
    human = read_human(pilot, records, seed=seed if csv_pilot else None, by=by if csv_pilot else None) \
        if pilot is not None else None
    table = plan_reviews(records, judge_labels(records), points / 100, human, alpha)
    return describe_plan(table, points / 100, human, str(run_dir))
