"""Judge-corrected accuracy and paired comparisons from a random human review of a run's grades.

An LLM judge's grades carry its errors into every accuracy and every paired test. A person who
reviews a **uniformly random** sample of a run's questions (is this answer correct?) makes it
possible to correct them, with intervals that hold whatever the judge's errors: prediction-powered
inference (:func:`trek.stats.ppi_mean`, :func:`trek.stats.ppi_paired_difference`). The estimand is
the system's accuracy in the population the questions come from (the run's questions a sample of
it).

* :func:`draw_grade_sample` — ``n`` of the run's questions drawn uniformly at random with a seed
  (``numpy.random.default_rng(seed)`` over the question ids in sorted order), optionally stratified
  by dataset (proportional allocation), as :func:`trek.trace.shares.draw_sample` draws traced
  cases. The same seed over the same question set draws the same questions, so two runs of the
  same questions reviewed with one seed form the pairs :func:`compare_runs` needs.
* :func:`write_grade_review` — the review file: a workbook (``.xlsx``: a ``grades`` sheet with the
  question, the reference answers, the system's answer, the judge's outcome and a blank
  ``reviewer_correct`` column; a ``sample`` sheet recording the draw) or a CSV (``question_id``,
  ``dataset``, ``judge_outcome``, ``reviewer_correct``, and the draw's ``sample_seed`` and
  ``sample_by`` on every row). An existing file is never replaced without ``force``.
* :func:`read_grade_review` — the person's verdicts, checked against the run and the draw: unknown
  or repeated ids, ids outside the sample, sampled questions left blank and values other than
  yes/no/1/0 are each an error naming the file, row and field.
* :func:`corrected_accuracy` — per dataset and overall: the judge's accuracy, the corrected
  accuracy with its interval and the review-only accuracy.
* :func:`compare_runs` — per pair of runs: the judge-only difference with the exact McNemar test,
  and the corrected difference with its interval and p-value; Holm's correction across the pairs.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trek import stats, textable
from trek.runs import load_questions
from trek.trace.review import RANDOM, Sample

__all__ = [
    "GRADES_SHEET",
    "REVIEWER",
    "HumanGrades",
    "draw_grade_sample",
    "describe_sample",
    "write_grade_review",
    "read_grade_review",
    "corrected_accuracy",
    "compare_runs",
    "describe_accuracy",
    "describe_comparisons",
]

GRADES_SHEET = "grades"
REVIEWER = "reviewer_correct"
CSV_COLUMNS = ["question_id", "dataset", "judge_outcome", REVIEWER, "sample_seed", "sample_by"]
_YES = {"1", "yes", "y", "true", "correct"}
_NO = {"0", "no", "n", "false", "incorrect"}


def describe_sample(sample: Sample) -> str:
    """``12 of 36 question(s), uniform random, seed 3[, stratified by dataset]``."""
    how = sample.selection + (f", seed {sample.seed}" if sample.seed is not None else "")
    how += f", stratified by {sample.by}" if sample.by else ""
    return f"{len(sample.question_ids)} of {sample.population} question(s), {how}"


def _allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of ``n`` draws over strata (largest remainders, ties by name)."""
    total = sum(sizes.values())
    exact = {k: n * v / total for k, v in sizes.items()}
    out = {k: int(np.floor(x)) for k, x in exact.items()}
    for k in sorted(sizes, key=lambda k: (-(exact[k] - out[k]), k))[: n - sum(out.values())]:
        out[k] += 1
    return out


def _question_frame(run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per question of the run, sorted by id: ``question_id``, ``dataset``, ``outcome``,
    ``correct`` (the judge's grade; anything but a ``correct`` grade is 0), ``answer``."""
    from trek.runs import frame

    rd = Path(run_dir)
    if not rd.is_dir():
        raise FileNotFoundError(f"no run folder at {rd}")
    df = frame(rd, ["question_id", "dataset", "answer", "outcome", "correct"])
    if df.empty:
        raise ValueError(f"{rd}: the run has no questions")
    return df.sort_values("question_id", kind="stable").reset_index(drop=True)


def draw_grade_sample(run_dir: str | os.PathLike[str], n: int, seed: int = 0, by: str | None = None) -> Sample:
    """``n`` of the run's questions drawn uniformly at random (see the module docstring)."""
    if by not in (None, "dataset"):
        raise ValueError(f"--by must be 'dataset' (or left out), got {by!r}")
    df = _question_frame(run_dir)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"--sample must be a positive number of questions, got {n!r}")
    if n > len(df):
        raise ValueError(f"--sample {n}: the run has only {len(df)} question(s)")
    ids = df["question_id"].tolist()
    rng = np.random.default_rng(seed)
    if by is None:
        picked = rng.choice(len(ids), size=n, replace=False)
        return Sample(RANDOM, seed, None, len(ids), tuple(sorted(ids[int(i)] for i in picked)))
    groups: dict[str, list[str]] = {}
    for q, d in zip(ids, df["dataset"], strict=True):
        groups.setdefault(str(d), []).append(q)
    alloc = _allocate({k: len(v) for k, v in groups.items()}, n)
    chosen: list[str] = []
    for k in sorted(groups):
        picked = rng.choice(len(groups[k]), size=alloc[k], replace=False)
        chosen += [groups[k][int(i)] for i in picked]
    strata = {k: (len(groups[k]), alloc[k]) for k in sorted(groups)}
    return Sample(RANDOM, seed, by, len(ids), tuple(sorted(chosen)), strata)


# -- the review file --------------------------------------------------------------------------------------
def _outcome(value: Any) -> str:
    return value if isinstance(value, str) and value else "ungraded"


def write_grade_review(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None, sample: Sample, *,
                       force: bool = False) -> Path:
    """Write the review file of ``sample`` (default ``RUN_DIR/grade-review.xlsx``; a ``.csv`` path
    writes the CSV form); returns its path. An existing file is refused unless ``force``: it may
    hold a person's verdicts."""
    from trek.outputs import atomic_write, check_out

    rd = Path(run_dir)
    path = check_out(Path(out) if out is not None else rd / "grade-review.xlsx", runs=[rd],
                     example="grade-review.xlsx")
    if path.exists() and not force:
        raise ValueError(f"{path} exists (it may hold a person's verdicts); give a new --out, or --force to replace it")
    df = _question_frame(rd).set_index("question_id")
    questions = load_questions(rd)
    chosen = list(sample.question_ids)
    if path.suffix.lower() == ".csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for q in chosen:
            w.writerow([q, df.at[q, "dataset"], _outcome(df.at[q, "outcome"]), "", sample.seed, sample.by or ""])
        return atomic_write(path, buf.getvalue())
    from openpyxl import Workbook

    from trek.trace.review import SAMPLE, _sample_rows, _sheet

    rows = []
    for q in chosen:
        question = questions.get(q)
        answer = df.at[q, "answer"]
        rows.append({"question_id": q, "dataset": df.at[q, "dataset"],
                     "question": question.question if question else "",
                     "reference_answers": " | ".join(question.answers) if question else "",
                     "answer": "" if answer is None or answer != answer else str(answer),
                     "judge_outcome": _outcome(df.at[q, "outcome"]), REVIEWER: "", "reviewer_notes": ""})
    columns = ["question_id", "dataset", "question", "reference_answers", "answer", "judge_outcome", REVIEWER,
               "reviewer_notes"]
    wb = Workbook()
    ws = wb.active
    ws.title = GRADES_SHEET
    _sheet(ws, rows, columns, [REVIEWER], {"question", "answer", "reference_answers"})
    _sheet(wb.create_sheet(SAMPLE), _sample_rows(sample), ["field", "value"], [], set())
    buf = io.BytesIO()
    wb.save(buf)
    return atomic_write(path, buf.getvalue())


@dataclass(frozen=True)
class HumanGrades:
    """A person's verdicts (``{question_id: correct}``), the file they came from and the draw."""

    correct: dict[str, bool]
    source: Path
    sample: Sample


def _verdict(value: Any, where: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", ):
        return None
    if text in _YES or text in ("1.0",):
        return True
    if text in _NO or text in ("0.0",):
        return False
    raise ValueError(f"{where}: {value!r}; use yes or no (or 1 or 0)")


def _read_rows(p: Path) -> tuple[list[tuple[int, str, bool | None]], Sample | None, int | None, str | None]:
    """(rows as (row number, question id, verdict or None), the recorded sample, CSV seed, CSV by)."""
    from trek.trace.review import duplicate_columns

    if p.suffix.lower() == ".xlsx":
        from trek.jsonio import open_workbook, sheet_rows
        from trek.trace.review import read_sample

        # the bounded reader: a pipe or device refused unopened, members and rows bounded
        with open_workbook(p, "grade review workbook (.xlsx)") as wb:
            if GRADES_SHEET not in wb.sheetnames:
                raise ValueError(f"{p}: no {GRADES_SHEET!r} sheet (write the file with trek grade review RUN "
                                 "--sample N)")
            values = sheet_rows(wb, GRADES_SHEET, p)
        header = [str(c or "").strip() for c in (values[0] if values else [])]
        twice = duplicate_columns(header)
        if twice:
            raise ValueError(f"{p}: the {GRADES_SHEET!r} sheet has column {twice[0]!r} twice; keep one")
        for col in ("question_id", REVIEWER):
            if col not in header:
                raise ValueError(f"{p}: the {GRADES_SHEET!r} sheet has no {col!r} column")
        qi, ri = header.index("question_id"), header.index(REVIEWER)
        rows = []
        for i, row in enumerate(values[1:], start=2):
            qid = str(row[qi] or "").strip()
            if not qid:
                raise ValueError(f"{p}: {GRADES_SHEET} row {i}: question_id is empty")
            rows.append((i, qid, _verdict(row[ri], f"{p}: {GRADES_SHEET} row {i} ({qid}), {REVIEWER}")))
        return rows, read_sample(p), None, None
    import io

    from trek.jsonio import read_bytes

    try:
        with io.StringIO(read_bytes(p, "grade review CSV").decode("utf-8-sig"), newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            twice = duplicate_columns([h.strip() for h in header])
            if twice:
                raise ValueError(f"{p}: column {twice[0]!r} is given twice; keep one")
            missing = [c for c in ("question_id", REVIEWER, "sample_seed") if c not in header]
            if missing:
                raise ValueError(f"{p}: missing column(s) {', '.join(missing)} (write the file with trek grade "
                                 "review RUN --sample N --out FILE.csv)")
            rows, seeds, bys = [], set(), set()
            for i, row in enumerate(reader, start=2):
                qid = (row.get("question_id") or "").strip()
                if not qid:
                    raise ValueError(f"{p}: row {i}: question_id is empty")
                rows.append((i, qid, _verdict(row.get(REVIEWER), f"{p}: row {i} ({qid}), {REVIEWER}")))
                seed_text = (row.get("sample_seed") or "").strip()
                try:
                    seeds.add(int(seed_text))
                except ValueError:
                    raise ValueError(f"{p}: row {i} ({qid}), sample_seed: {seed_text!r} is not a whole number") from None
                bys.add((row.get("sample_by") or "").strip() or None)
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not a UTF-8 text CSV ({e.reason})") from None
    except csv.Error as e:
        raise ValueError(f"{p}: cannot be read as CSV ({e})") from None
    if len(seeds) > 1 or len(bys) > 1:
        raise ValueError(f"{p}: the rows name different draws (sample_seed {sorted(seeds)}, sample_by "
                         f"{sorted(map(str, bys))}); one file reviews one draw")
    return rows, None, next(iter(seeds), None), next(iter(bys), None)


def read_grade_review(path: str | os.PathLike[str], run_dir: str | os.PathLike[str]) -> HumanGrades:
    """The verdicts of a filled review file, checked against the run and its draw (module docstring).
    A CSV's draw is made again from its ``sample_seed`` and ``sample_by`` and must give exactly its ids."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no review file at {p}")
    if p.is_dir():
        raise ValueError(f"{p}: is a folder; give the filled review file (.xlsx or .csv)")
    rows, sample, seed, by = _read_rows(p)
    if not rows:
        raise ValueError(f"{p}: no question to review")
    if sample is None:
        if seed is None:
            raise ValueError(f"{p}: the workbook records no sample (write it with trek grade review RUN --sample N)")
        sample = draw_grade_sample(run_dir, len(rows), seed, by)
    df = _question_frame(run_dir)
    known = set(df["question_id"])
    if sample.population != len(known):
        raise ValueError(f"{p}: the sample was drawn from {sample.population} question(s) but {run_dir} has "
                         f"{len(known)}; draw a new sample (trek grade review RUN --sample N)")
    drawn = set(sample.question_ids)
    seen: dict[str, int] = {}
    out: dict[str, bool] = {}
    for i, qid, verdict in rows:
        if qid in seen:
            raise ValueError(f"{p}: row {i}: {qid} is given again (first on row {seen[qid]})")
        seen[qid] = i
        if qid not in known:
            raise ValueError(f"{p}: row {i}: unknown question_id {qid!r} (not a question of {run_dir})")
        if qid not in drawn:
            raise ValueError(f"{p}: row {i}: {qid} is not in the sample ({describe_sample(sample)}); corrected accuracy "
                             "needs the randomly drawn questions, not others")
        if verdict is None:
            raise ValueError(f"{p}: row {i} ({qid}), {REVIEWER}: blank; every sampled question needs the reviewer's "
                             "verdict (a sample with skipped questions is no longer random)")
        out[qid] = verdict
    absent = sorted(drawn - set(out))
    if absent:
        raise ValueError(f"{p}: {len(absent)} sampled question(s) not in the file, e.g. {absent[0]}; review every "
                         "sampled question")
    return HumanGrades(out, p, sample)


# -- corrected accuracy -----------------------------------------------------------------------------------
ACCURACY_COLUMNS = ["dataset", "n", "n_reviewed", "judge_accuracy", "judge_low", "judge_high", "estimand",
                    "corrected_accuracy", "low", "high", "human_only_accuracy", "human_low", "human_high", "lambda"]


def _strata_kw(ids_u: list[str], ids_n: list[str], dataset: dict[str, str], human: HumanGrades) -> dict[str, Any]:
    if human.sample.by != "dataset":
        return {}
    if {dataset[q] for q in ids_n} != {dataset[q] for q in ids_n + ids_u}:
        return {}  # a dataset without a reviewed question: the unstratified form (a proportional draw)
    return {"strata_unreviewed": [dataset[q] for q in ids_u], "strata_reviewed": [dataset[q] for q in ids_n]}


def corrected_accuracy(run_dir: str | os.PathLike[str], human: HumanGrades, alpha: float = 0.05) -> pd.DataFrame:
    """Per dataset and ``all``: :data:`ACCURACY_COLUMNS` (proportions in [0, 1]). ``judge_*``: the
    judge's accuracy over every question with its Wilson interval; ``corrected_*``: :func:`trek.stats.ppi_mean`
    of the judge's grades on the unreviewed questions and the judge's and the person's on the
    reviewed ones (the ``all`` row of a draw stratified by dataset takes the stratified form);
    ``human_only_*``: the reviewed questions' accuracy with its Wilson interval."""
    df = _question_frame(run_dir)
    judge = dict(zip(df["question_id"], df["correct"].astype(int), strict=True))
    dataset = dict(zip(df["question_id"], df["dataset"].astype(str), strict=True))
    groups = [(d, [q for q in judge if dataset[q] == d]) for d in sorted(set(dataset.values()))] + \
        [("all", list(judge))]
    rows = []
    for name, ids in groups:
        ids_n = [q for q in ids if q in human.correct]
        ids_u = [q for q in ids if q not in human.correct]
        k = sum(judge[q] for q in ids)
        j_low, j_high = stats.wilson_ci(k, len(ids), 1 - alpha)
        row: dict[str, Any] = {"dataset": name, "n": len(ids), "n_reviewed": len(ids_n), "judge_accuracy": k / len(ids),
                               "judge_low": j_low, "judge_high": j_high, "estimand": "population"}
        nan = float("nan")
        row.update(corrected_accuracy=nan, low=nan, high=nan, human_only_accuracy=nan, human_low=nan,
                   human_high=nan, **{"lambda": nan})
        if ids_n:
            y = [int(human.correct[q]) for q in ids_n]
            kw = _strata_kw(ids_u, ids_n, dataset, human) if name == "all" else {}
            r = stats.ppi_mean([judge[q] for q in ids_u], [judge[q] for q in ids_n], y, alpha=alpha, result=True, **kw)
            h_low, h_high = stats.wilson_ci(sum(y), len(y), 1 - alpha)
            row.update(corrected_accuracy=r.estimate, low=r.low, high=r.high, human_only_accuracy=sum(y) / len(y),
                       human_low=h_low, human_high=h_high, **{"lambda": r.lam})
        rows.append(row)
    return pd.DataFrame(rows, columns=ACCURACY_COLUMNS)


def _ci(v: float, lo: float, hi: float, scale: float = 100.0) -> str:
    return "-" if v != v else f"{scale * v:.1f} [{scale * lo:.1f}, {scale * hi:.1f}]"


def _stacked(cell: str) -> str:
    """``"41.7 [19.3, 68.0]"`` as two lines of one table cell: the estimate, then its interval."""
    return cell.replace(" ", "\n", 1)


def describe_accuracy(table: pd.DataFrame, human: HumanGrades, alpha: float) -> str:
    """The corrected-accuracy table in words and percentages."""
    pct = int(round(100 * (1 - alpha)))
    show = pd.DataFrame({
        "dataset": table["dataset"], "n": table["n"], "reviewed": table["n_reviewed"],
        # each estimate above its interval, so that three of them fit 80 columns side by side
        f"judge %\n[{pct}% CI]": [_stacked(_ci(*r)) for r in
                                 table[["judge_accuracy", "judge_low", "judge_high"]].to_numpy()],
        f"corrected %\n[{pct}% CI]": [_stacked(_ci(*r)) for r in table[["corrected_accuracy", "low", "high"]].to_numpy()],
        f"review only %\n[{pct}% CI]": [_stacked(_ci(*r)) for r in
                                      table[["human_only_accuracy", "human_low", "human_high"]].to_numpy()],
        "lambda": [f"{v:.2f}" if v == v else "-" for v in table["lambda"]]})
    return (f"judge-corrected accuracy (prediction-powered, PPI++; the estimand: accuracy in the population the "
            f"questions come from) from {human.source.name}: {describe_sample(human.sample)}\n"
            + textable.frame(show, index=False))


# -- paired comparisons -----------------------------------------------------------------------------------
COMPARE_COLUMNS = ["run_a", "run_b", "n", "n_reviewed", "judge_difference", "judge_p", "judge_p_holm",
                   "corrected_difference", "low", "high", "p", "p_holm", "significant", "lambda"]


def compare_runs(runs: dict[str, str | os.PathLike[str]], human: dict[str, HumanGrades],
                 alpha: float = 0.05) -> pd.DataFrame:
    """Every pair of ``runs`` (``{name: run folder}``, two or more over the same questions): the
    judge-only difference of accuracies (A minus B) with the exact McNemar p-value, and the corrected
    difference (:func:`trek.stats.ppi_paired_difference`) with its interval and p-value; both sets
    of p-values Holm-adjusted across the pairs, ``significant`` the corrected test's verdict at
    ``alpha`` after Holm. Each run needs its review (``human``: ``{name: HumanGrades}``), and the
    two runs of a pair must be reviewed on the same questions (one draw: the same seed over the
    same question set). Differences are proportions in [-1, 1]."""
    if len(runs) < 2:
        raise ValueError("give two or more runs to compare")
    missing = [name for name in runs if name not in human]
    if missing:
        raise ValueError(f"{missing[0]}: no review; give one --human FILE per run, in the order of the runs")
    frames = {name: _question_frame(d) for name, d in runs.items()}
    names = list(runs)
    ref = names[0]
    for name in names[1:]:
        if frames[name]["question_id"].tolist() != frames[ref]["question_id"].tolist():
            raise ValueError(f"{runs[name]} and {runs[ref]} do not hold the same questions; a paired comparison "
                             "needs the same question set")
    ids = frames[ref]["question_id"].tolist()
    dataset = dict(zip(ids, frames[ref]["dataset"].astype(str), strict=True))
    judge = {name: dict(zip(ids, f["correct"].astype(int), strict=True)) for name, f in frames.items()}
    rows = []
    for a, b in combinations(names, 2):
        if set(human[a].correct) != set(human[b].correct):
            raise ValueError(f"the reviews of {a} ({human[a].source.name}) and {b} ({human[b].source.name}) cover "
                             "different questions; review both runs on one draw (the same --seed and --by)")
        ids_n = [q for q in ids if q in human[a].correct]
        ids_u = [q for q in ids if q not in human[a].correct]
        kw = _strata_kw(ids_u, ids_n, dataset, human[a])
        r = stats.ppi_paired_difference(
            [judge[a][q] for q in ids_u], [judge[b][q] for q in ids_u], [judge[a][q] for q in ids_n],
            [judge[b][q] for q in ids_n], [int(human[a].correct[q]) for q in ids_n],
            [int(human[b].correct[q]) for q in ids_n], alpha=alpha, result=True, **kw)
        ja = np.array([judge[a][q] for q in ids])
        jb = np.array([judge[b][q] for q in ids])
        rows.append({"run_a": a, "run_b": b, "n": len(ids), "n_reviewed": len(ids_n),
                     "judge_difference": float(ja.mean() - jb.mean()), "judge_p": stats.mcnemar(ja, jb).p,
                     "corrected_difference": r.estimate, "low": r.low, "high": r.high, "p": r.p_value,
                     "lambda": r.lam})
    table = pd.DataFrame(rows)
    table["judge_p_holm"] = stats.holm(table["judge_p"].to_numpy())
    table["p_holm"] = stats.holm(table["p"].to_numpy())
    table["significant"] = table["p_holm"] < alpha
    return table[COMPARE_COLUMNS]


def describe_comparisons(table: pd.DataFrame, alpha: float) -> str:
    """The comparison table in words and percentage points: each pair of runs on a line of its own
    above its figures, each p-value above its Holm-adjusted one, so the table fits 80 columns."""
    pct = int(round(100 * (1 - alpha)))
    headers = ["n", "reviewed", "judge only\n(points)", "McNemar p\n(Holm)", f"corrected (points)\n[{pct}% CI]",
               "p\n(Holm)", f"differ\nat {alpha:g}"]
    rows = [[n, k, f"{100 * jd:+.1f}", f"{jp:.3g}\n({jh:.3g})", f"{100 * v:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]",
             f"{p:.3g}\n({h:.3g})", "yes" if sig else "no"]
            for n, k, jd, jp, jh, v, lo, hi, p, h, sig in table[[
                "n", "n_reviewed", "judge_difference", "judge_p", "judge_p_holm", "corrected_difference", "low", "high",
                "p", "p_holm", "significant"]].itertuples(index=False)]
    pairs = [f"{a} - {b}" for a, b in zip(table["run_a"], table["run_b"], strict=True)]
    return ("paired differences of accuracy (A minus B), judge-only and corrected by the human review "
            "(prediction-powered, PPI++; p-values Holm-adjusted across the pairs)\n"
            + textable.render(headers, rows, right=(0, 1), above=["A - B", *pairs]))
