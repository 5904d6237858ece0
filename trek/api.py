"""Trek's face for notebooks and scripts: a run as an object, read from its folder.

``import trek`` is cheap; these names load on first use (``trek.load`` imports this module, and
this module imports pandas)::

    import trek

    run = trek.load("data/runs/wild/agentic")   # a Run
    run.frame()                                  # one row per question: answer, grade, labels, tests
    run.accuracy()                               # accuracy with n and 95% intervals, per dataset
    run.label_shares()                           # Figure 2's shares with their Wilson intervals
    run.cases(label="Retrieval")                 # the traced cases carrying a label
    run.case("mini:01")                          # one case, shown inline in JupyterLab
    run.verified_shares()                        # what `trek trace verify` confirmed, per label
    trek.runs_frame("data/runs")                 # the table of `trek runs list`
    trek.compare("data/runs/wild/no-search", "data/runs/wild/agentic")   # paired McNemar

Nothing here computes a statistic of its own: accuracy is :func:`trek.analysis.accuracy_by_dataset`
(the table ``trek grade`` prints and Table 1 draws), label shares are
:func:`trek.report.trace.label_shares` (Figure 2's table) with the figure's Wilson intervals,
the comparison is :func:`trek.report.wild.significance` (the paired-runs table). The inline case
is the case viewer's block (:func:`trek.trace.view.case_html`), escaped as the viewer escapes it.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trek import runs as _runs
from trek.trace.labels import LABELS, in_c4_order
from trek.trace.pipeline import load_trace
from trek.trace.records import TESTS, TraceRecord
from trek.trace.verified import CaseVerification, has_verify, state, verify_by_case
from trek.types import Grade, GradeOutcome, Question, Trajectory, TrajectoryStatus

__all__ = ["Run", "Case", "Cases", "load", "runs_frame", "compare", "LABELS", "FRAME_COLUMNS", "VERIFY_COLUMNS",
           "VERIFY_STATES", "OUTCOMES", "TRACE_STATES"]

PathLike = str | os.PathLike[str]

#: Every grade outcome a frame's ``outcome`` column knows, in this order: a grade's outcomes
#: (:data:`trek.types.GradeOutcome`, ``undecided`` among them: a judge that could not support a
#: verdict) and ``ungraded`` (no grade yet). An outcome outside the list (a newer Trek's) is added
#: after them, never dropped.
OUTCOMES: tuple[str, ...] = tuple(dict.fromkeys([*typing.get_args(GradeOutcome), "undecided", "ungraded"]))
#: The ``answer_status`` categories: a trajectory's status, or ``missing`` (no trajectory).
ANSWER_STATES: tuple[str, ...] = (*typing.get_args(TrajectoryStatus), "missing")
#: The ``trace_status`` categories: a trace record's status, or ``not_traced`` (no record: a right
#: answer, or a failure ``trek trace`` has not reached).
TRACE_STATES: tuple[str, ...] = ("done", "incomplete", "pending", "failed", "not_traced")
#: The categories of each ``test_<name>`` column (NA: the case has no record of that test).
TEST_STATES: tuple[str, ...] = ("ran", "skipped", "not_needed")

#: The columns of :meth:`Run.frame`, in order (the labels' own columns sit after ``labels``).
FRAME_COLUMNS: list[str] = [
    "question_id", "dataset", "question", "references", "effective_year",
    "answer_status", "answer", "outcome", "correct", "grader", "grade_method", "judge", "grade_reason",
    "trace_status", "labels", *LABELS,
    *(f"test_{t}" for t in TESTS), "skipped",
    "evidence_retrieved", "query_adequate", "gold_only_correct", "noise_correct",
    "evidence_reason", "query_reason", "gold_only_reason", "noise_reason", "log_coverage",
    "prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd", "judge_cost_usd", "trace_cost_usd",
]
#: The columns :meth:`Run.frame` adds after ``log_coverage`` when the run has a ``verify.jsonl``
#: (``trek trace verify``): each experiment's state and reason, then what it found.
VERIFY_COLUMNS: list[str] = [
    "verify_distractor_search", "verify_distractor_search_reason", "minimal_set", "minimal_set_ctrl_kinds",
    "verify_query_repair", "verify_query_repair_reason", "repaired_queries", "repair_gold_found",
]
#: The categories of the ``verify_*`` columns: a verdict, or the state of an experiment without one.
VERIFY_STATES: tuple[str, ...] = ("confirmed", "refuted", "inconclusive", "skipped", "pending", "failed")


def _categorical(values: Sequence[Any], known: Iterable[str]) -> pd.Categorical:
    """``values`` as a categorical over ``known`` (in that order) and any other value seen after
    them; ``None`` stays missing."""
    cats = list(dict.fromkeys([*known, *(v for v in values if v is not None)]))
    return pd.Categorical(values, categories=cats)


def _label_set(labels: Sequence[str]) -> str:
    """A case's labels as one category, in the order of :data:`~trek.trace.labels.LABELS`."""
    return " + ".join(in_c4_order(labels))


def _grade_reason(g: Grade) -> str | None:
    """What the grader said: its error when it recorded one, else its last reply (for the exact
    judge, the decision it read from the annotations)."""
    if g.error:
        return g.error
    return g.judge_raw[-1] if g.judge_raw else None


def _coverage(r: TraceRecord) -> str:
    if r.coverage is None:
        return "everything"
    c = r.coverage
    text = f"queries {c.queries}, results {c.results}, page text {c.page_text}, URLs {c.url_identity}"
    return "; ".join([text, *r.coverage_notes])


class Run:
    """One run folder (``trek wild run``, ``trek import``, ``trek ctrl run``), read on demand.

    Nothing is read when the object is made beyond checking that the folder is a run; every
    method reads the files again, so a run that is still being graded or traced shows its
    progress on the next call.
    """

    def __init__(self, path: PathLike) -> None:
        p = Path(path).expanduser()
        if not p.is_dir():
            raise FileNotFoundError(f"trek.load: {p} is not a folder (give a run folder: the one holding "
                                    f"{_runs.QUESTIONS} and {_runs.ANSWERS})")
        if not (p / _runs.QUESTIONS).is_file():
            raise FileNotFoundError(f"trek.load: {p / _runs.QUESTIONS} does not exist, so {p} is not a run folder "
                                    f"(`trek wild run` and `trek import` write one)")
        self.path = p
        #: The run's label in tables: its folder name.
        self.name = p.resolve().name

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def traced(self) -> bool:
        """Whether ``trek trace`` has written any record for the run yet."""
        return bool(load_trace(self.path))

    @property
    def meta(self) -> _runs.RunMeta | None:
        """The run's ``run.json`` (model, endpoint, system, versions), ``None`` when it has none."""
        return _runs.read_meta(self.path)

    # -- records ----------------------------------------------------------------------------
    def questions(self) -> dict[str, Question]:
        """``{question id: Question}`` of the run's question set, in file order."""
        return _runs.load_questions(self.path)

    def answers(self) -> dict[str, Trajectory]:
        """``{question id: Trajectory}`` (empty before the run has answered)."""
        return _runs.load_answers(self.path) if (self.path / _runs.ANSWERS).exists() else {}

    def grades(self) -> dict[str, Grade]:
        """``{question id: Grade}`` (empty before ``trek grade``)."""
        return _runs.load_grades(self.path) if (self.path / _runs.GRADES).exists() else {}

    def traces(self) -> dict[str, TraceRecord]:
        """``{question id: TraceRecord}`` of the traced failures (empty before ``trek trace``)."""
        return {r.question_id: r for r in load_trace(self.path)}

    # -- the frame --------------------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        """One row per question of the run's question set, in question order (:data:`FRAME_COLUMNS`).

        * the question: ``question_id``, ``dataset`` (categorical), ``question``, ``references``
          (the reference answers, a tuple), ``effective_year``;
        * the answer: ``answer_status`` (categorical: ``ok``, ``pending``, ``failed``,
          ``no_answer``, or ``missing`` without a trajectory) and ``answer``;
        * the grade: ``outcome`` (categorical, :data:`OUTCOMES`; ``ungraded`` without a grade),
          ``correct`` (``True`` only for ``correct``: its mean is accuracy over every question),
          ``grader`` (the grader or judge that decided; with a cascade, the one that did) and
          ``grade_method`` (categoricals), ``judge`` (the judge model;
          ``oracle`` for the exact judge) and ``grade_reason`` (the grader's error, else its
          last reply);
        * TrekTrace: ``trace_status`` (categorical, :data:`TRACE_STATES`), ``labels`` (the
          case's labels as one category, e.g. ``Pre-retrieval + Interpretation``; missing
          without labels) and one nullable boolean column per label: ``True`` when the case
          carries it, ``False`` when the case is fully traced without it, missing otherwise
          (over the rows with ``trace_status == "done"`` its mean is the label's share, as
          Figure 2 gives it);
        * the tests: ``test_retrieval``, ``test_queries``, ``test_gold_only``, ``test_noise``,
          ``test_stale`` (categoricals: ``ran``, ``skipped``, ``not_needed``; missing when the
          case has no record of the test) and ``skipped`` (every test that could not run with
          its reason, ``noise: no gold page``; missing when none was skipped);
        * the judges' findings: the flags ``evidence_retrieved``, ``query_adequate``,
          ``gold_only_correct`` and ``noise_correct`` (nullable booleans; missing: unknown or
          not asked), their reasons ``evidence_reason``, ``query_reason``, ``gold_only_reason``,
          ``noise_reason``, and ``log_coverage`` (what the run's log let TrekTrace see);
        * usage: the answer's ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens`` and
          ``cost_usd``, the grade's ``judge_cost_usd`` and the trace's ``trace_cost_usd``
          (dollars; NaN when a model has no price or the stage has not run).

        * verification, only when the run has a ``verify.jsonl`` (``trek trace verify``; the
          columns of :data:`VERIFY_COLUMNS`, after ``log_coverage``): ``verify_distractor_search``
          and ``verify_query_repair`` (categoricals, :data:`VERIFY_STATES`: the verdict, or
          ``pending``/``failed`` while an experiment has none; missing when the case was not put
          to that experiment, or its record is stale because the case's labels changed since),
          ``verify_distractor_search_reason`` and ``verify_query_repair_reason`` (why, for every
          verdict but confirmed), ``minimal_set`` (the URLs of the minimal distracting set, a
          tuple) with ``minimal_set_ctrl_kinds`` (each page's Ctrl kind or ``None``, a tuple),
          ``repaired_queries`` (a tuple) and ``repair_gold_found`` (nullable boolean: whether the
          gold page or its equivalent came back for them; missing when nothing was searched).
          The label columns stay the trace's.

        Text columns are pandas strings (missing values ``<NA>``).
        """
        base = _runs.frame(self.path)
        ids = base["question_id"].tolist()
        questions = self.questions()
        grades = self.grades()
        traces = {q: r for q, r in self.traces().items() if q in questions}
        out: dict[str, Any] = {"question_id": pd.array(ids, dtype="string")}
        out["dataset"] = _categorical(base["dataset"].tolist(), [])
        out["question"] = pd.array([questions[q].question for q in ids], dtype="string")
        out["references"] = pd.Series([tuple(questions[q].answers) for q in ids], dtype=object)
        out["effective_year"] = pd.array([questions[q].effective_year for q in ids], dtype="Int64")
        out["answer_status"] = _categorical(base["answer_status"].tolist(), ANSWER_STATES)
        out["answer"] = pd.array(base["answer"].tolist(), dtype="string")
        out["outcome"] = _categorical(base["outcome"].tolist(), OUTCOMES)
        out["correct"] = base["correct"].to_numpy(dtype=bool)
        g = [grades.get(q) for q in ids]
        out["grader"] = _categorical([x.grader if x else None for x in g], [])
        out["grade_method"] = _categorical([x.method if x else None for x in g], ("exact", "judge", "none"))
        out["judge"] = _categorical([x.judge_model if x else None for x in g], [])
        out["grade_reason"] = pd.array([_grade_reason(x) if x else None for x in g], dtype="string")
        t = [traces.get(q) for q in ids]
        out["trace_status"] = _categorical([r.status if r else "not_traced" for r in t], TRACE_STATES)
        out["labels"] = _categorical([_label_set(r.labels) if r and r.labels else None for r in t], [])
        for lab in LABELS:
            out[lab] = pd.array([True if r and lab in r.labels else (False if r and r.status == "done" else None)
                                 for r in t], dtype="boolean")
        for name in TESTS:
            out[f"test_{name}"] = _categorical(
                [r.tests[name].state if r and name in r.tests else None for r in t], TEST_STATES)
        out["skipped"] = pd.array(["; ".join(f"{k}: {why}" for k, why in r.skipped.items()) if r and r.skipped
                                   else None for r in t], dtype="string")
        for col in ("evidence_retrieved", "query_adequate", "gold_only_correct"):
            out[col] = pd.array([getattr(r, col) if r else None for r in t], dtype="boolean")
        out["noise_correct"] = pd.array([r.noise_correct if r and r.noise_was_run else None for r in t],
                                        dtype="boolean")
        for col, field in (("evidence_reason", "evidence_reason"), ("query_reason", "query_reason"),
                           ("gold_only_reason", "gold_only_grade_reason"), ("noise_reason", "noise_grade_reason")):
            out[col] = pd.array([getattr(r, field) if r else None for r in t], dtype="string")
        out["log_coverage"] = pd.array([_coverage(r) if r else None for r in t], dtype="string")
        for col in ("prompt_tokens", "completion_tokens", "reasoning_tokens"):
            out[col] = base[col].to_numpy(dtype=np.int64)
        out["cost_usd"] = base["cost_usd"].to_numpy(dtype=float)
        out["judge_cost_usd"] = base["judge_cost_usd"].to_numpy(dtype=float)
        out["trace_cost_usd"] = np.array([np.nan if r is None or r.usage.cost_usd is None else r.usage.cost_usd
                                          for r in t], dtype=float)
        columns = FRAME_COLUMNS
        if has_verify(self.path):
            out.update(_verify_columns(self.path, ids, traces))
            at = FRAME_COLUMNS.index("log_coverage") + 1
            columns = [*FRAME_COLUMNS[:at], *VERIFY_COLUMNS, *FRAME_COLUMNS[at:]]
        return pd.DataFrame(out, columns=columns)

    def verification(self) -> dict[str, CaseVerification]:
        """``{question id: CaseVerification}``: the experiments of ``trek trace verify`` per case
        (:func:`trek.trace.verified.verify_by_case`; empty when the run has no ``verify.jsonl``)."""
        return verify_by_case(self.path, self.traces())

    # -- cases ------------------------------------------------------------------------------
    def case(self, question_id: str) -> Case:
        """One question of the run with everything recorded about it (:class:`Case`); in
        JupyterLab it shows as the case viewer shows it. An id the run does not hold is a
        ``KeyError`` naming the run's questions file."""
        questions = self.questions()
        if question_id not in questions:
            near = ", ".join(list(questions)[:5])
            raise KeyError(f"{self.path / _runs.QUESTIONS} has no question {question_id!r} "
                           f"({len(questions)} questions: {near}{', ...' if len(questions) > 5 else ''})")
        answers, grades = self._records_of({question_id})
        return Case(question=questions[question_id], answer=answers.get(question_id),
                    grade=grades.get(question_id), trace=self.traces().get(question_id), run=self.name,
                    verification=self.verification().get(question_id))

    def _records_of(self, ids: set[str]) -> tuple[dict[str, Trajectory], dict[str, Grade]]:
        """The answers and grades of the questions ``ids`` alone, the files read line by line (a
        later line for a question wins), so a case of a large run holds one trajectory."""
        answers = {t.question_id: t for t in _runs.iter_answers(self.path) if t.question_id in ids}
        grades = {g.question_id: g for g in _runs.iter_grades(self.path) if g.question_id in ids}
        return answers, grades

    def cases(self, label: str | None = None, dataset: str | None = None) -> Cases:
        """The traced cases (questions with a ``trace.jsonl`` record), in the order of the
        questions file: those carrying ``label`` (one of :data:`~trek.trace.labels.LABELS`) and
        of ``dataset`` when given. An unknown label or a dataset the run does not hold is a
        ``ValueError`` naming the ones there are."""
        if label is not None and label not in LABELS:
            raise ValueError(f"label {label!r} is not a TrekTrace label; the labels are {', '.join(LABELS)}")
        questions = self.questions()
        if dataset is not None:
            held = sorted({q.dataset for q in questions.values()})
            if dataset not in held:
                raise ValueError(f"dataset {dataset!r} is not in {self.path / _runs.QUESTIONS} (it holds "
                                 f"{', '.join(held)})")
        traces = self.traces()
        chosen = [qid for qid, q in questions.items()
                  if qid in traces and (label is None or label in traces[qid].labels)
                  and (dataset is None or q.dataset == dataset)]
        answers, grades = self._records_of(set(chosen))
        verified = verify_by_case(self.path, traces)
        return Cases(Case(question=questions[qid], answer=answers.get(qid), grade=grades.get(qid), trace=traces[qid],
                          run=self.name, verification=verified.get(qid)) for qid in chosen)

    def case_per_label(self) -> dict[str, Case]:
        """``{label: case}``: for each label some fully traced case carries, one such case, in
        the order of :data:`~trek.trace.labels.LABELS`; a case not shown for an earlier label
        when there is one (the first in question order otherwise)."""
        done = [c for c in self.cases() if c.trace is not None and c.trace.status == "done"]
        out: dict[str, Case] = {}
        for lab in LABELS:
            having = [c for c in done if lab in c.labels]
            if having:
                shown = {c.question_id for c in out.values()}
                out[lab] = next((c for c in having if c.question_id not in shown), having[0])
        return out

    # -- the numbers of the CLI and the figures ------------------------------------------------
    def accuracy(self) -> pd.DataFrame:
        """Accuracy (%) over every question, per dataset, then ``micro`` and ``macro``: the table
        ``trek grade`` prints and Table 1 draws (:func:`trek.analysis.accuracy_by_dataset`).

        Columns ``dataset``, the counts (:data:`trek.analysis.COUNT_COLUMNS`: ``n``,
        ``answered``, ``graded``, ``correct``, ``undecided``, ``unparsed``, ``pending``), then
        ``accuracy`` with its 95% interval ``low``/``high``
        (Wilson; Jeffreys for macro) and ``acc_graded`` (over decided grades only, never the
        headline)."""
        from trek.analysis import accuracy_by_dataset

        if not (self.path / _runs.GRADES).exists():
            raise FileNotFoundError(f"{self.path / _runs.GRADES} does not exist: grade the run first "
                                    f"(`trek grade {self.path} --judge ...`)")
        t = accuracy_by_dataset(self.path)
        t.columns = [{"ci_low": "low", "ci_high": "high"}.get(c, c) for c in t.columns]
        return t.reset_index()

    def label_shares(self, by_dataset: bool = True) -> pd.DataFrame:
        """The share (%) of fully traced cases carrying each label, with its 95% Wilson interval:
        Figure 2's table (:func:`trek.report.trace.label_shares`) and the intervals its bars draw.

        One row per label and dataset, then per label over ``all`` datasets (only those rows when
        ``by_dataset`` is false, and no ``dataset`` column). Columns ``dataset``, ``label``
        (categoricals), ``share``, ``low``, ``high`` (percent, to 0.1), ``n`` (the fully traced
        cases the share is over), ``count`` (those carrying the label), and ``incomplete`` and
        ``pending`` (the cases left out). A case may carry two labels, so shares need not sum to
        100."""
        from trek.report.figures import counts_of_shares
        from trek.report.trace import label_shares
        from trek.stats import wilson_ci

        if not load_trace(self.path):
            raise FileNotFoundError(f"{self.path / _runs.TRACE} holds no traced case: trace the run first "
                                    f"(`trek trace {self.path} --judge ...`)")
        table = label_shares({self.name: self.path}).loc[self.name]
        rows = []
        for ds, row in table.iterrows():
            if not by_dataset and ds != "all":
                continue
            n = int(row["cases"])
            counts = counts_of_shares(row[list(LABELS)].to_numpy(dtype=float), n)
            for lab, k in zip(LABELS, counts, strict=True):
                low, high = wilson_ci(int(k), n) if n else (np.nan, np.nan)
                rows.append({"dataset": str(ds), "label": lab, "share": float(row[lab]),
                             "low": round(100.0 * low, 1), "high": round(100.0 * high, 1), "n": n,
                             "count": int(k) if n else 0, "incomplete": int(row["incomplete"]),
                             "pending": int(row["pending"])})
        out = pd.DataFrame(rows)
        out["dataset"] = _categorical(out["dataset"].tolist(), [])
        out["label"] = pd.Categorical(out["label"], categories=list(LABELS))
        return out if by_dataset else out.drop(columns="dataset")

    def verified_shares(self, by_dataset: bool = True) -> pd.DataFrame:
        """What ``trek trace verify`` confirmed beside each label's share: Figure 2's verification
        table (:func:`trek.report.trace.verified_shares`) for this run, one row per dataset and
        label, then per label over ``all`` datasets (only those when ``by_dataset`` is false).
        Columns ``dataset``, ``label``, then :data:`trek.report.trace.VERIFIED_COLUMNS` (``share``,
        ``tested``, ``confirmed``, ``confirmed_share`` with ``low``/``high`` in percent,
        ``verification`` in words: ``confirmed k/n (...)`` or ``not tested``). A run without
        ``verify.jsonl`` gives every label ``not tested``."""
        from trek.report.trace import verified_shares

        if not load_trace(self.path):
            raise FileNotFoundError(f"{self.path / _runs.TRACE} holds no traced case: trace the run first "
                                    f"(`trek trace {self.path} --judge ...`)")
        out = verified_shares({self.name: self.path}).loc[self.name].reset_index()
        if not by_dataset:
            out = out[out["dataset"] == "all"].drop(columns="dataset").reset_index(drop=True)
        else:
            out["dataset"] = _categorical(out["dataset"].tolist(), [])
        out["label"] = pd.Categorical(out["label"], categories=list(LABELS))
        return out

    def plot_label_shares(self, title: str | None = None) -> Any:
        """Figure 2's panel for this run (:func:`trek.report.trace.plot_label_shares`): bars per
        label and dataset with their Wilson intervals, ``n`` in the title, and, when the run has
        a ``verify.jsonl``, each tested label's confirmed k/n above its bars. Returns the figure;
        nothing is saved."""
        from trek.report.trace import coverage_note, label_shares, plot_label_shares, verified_shares

        runs_map = {self.name: self.path}
        verified = verified_shares(runs_map) if has_verify(self.path) else None
        return plot_label_shares(label_shares(runs_map), title or f"{self.name}: {coverage_note(runs_map)}",
                                 verified=verified)


@dataclass(frozen=True)
class Case:
    """One question of a run with its answer, grade and trace record (each ``None`` when the run
    has none). In JupyterLab it renders as the case viewer's block (:meth:`_repr_html_`)."""

    question: Question
    answer: Trajectory | None
    grade: Grade | None
    trace: TraceRecord | None
    run: str = ""
    #: The case's experiments of ``trek trace verify`` (``None``: not verified).
    verification: CaseVerification | None = None

    @property
    def question_id(self) -> str:
        return self.question.id

    @property
    def labels(self) -> list[str]:
        """The TrekTrace labels (empty when untraced or not labelled)."""
        return list(self.trace.labels) if self.trace else []

    def __repr__(self) -> str:
        outcome = self.grade.outcome if self.grade else "ungraded"
        status = self.trace.status if self.trace else "not traced"
        return (f"Case({self.question_id!r}, {self.question.dataset}, {outcome}, {status}"
                + (f", labels={self.labels}" if self.labels else "") + ")")

    def _repr_html_(self) -> str:
        """The case as HTML: the grade (outcome, judge, reason), then the viewer's block of a
        traced case (question, references, queries, retrieved pages with the gold ones marked,
        key evidence, probe answers, labels and reasons), or for an untraced one its question,
        references, answer and queries. Every recorded text is escaped; the fragment has no
        script and its style applies only inside it."""
        from trek.trace.view import case_html, scoped_css

        e = _e
        g = self.grade
        grade_rows = [("Run", self.run or "-"), ("Grade", g.outcome if g else "ungraded"),
                      ("Judge", f"{g.judge_model or '-'} ({g.grader} {g.grader_version}, {g.method})" if g else "-"),
                      ("Grade reason", (_grade_reason(g) or "-") if g else "-")]
        if self.trace is not None:
            body = case_html(self.trace, self.run, verification=self.verification)
        else:
            t = self.answer
            queries = "".join(f"<li>{e(c.query)}</li>" for c in t.search_calls) if t else ""
            rows = [("Question", self.question.question), ("Dataset", self.question.dataset),
                    ("Reference answers", " | ".join(self.question.answers)),
                    ("Gold URLs", " | ".join(self.question.gold_urls) or "-"),
                    ("Answer", (t.final_answer or "(none)") if t else "(no answer recorded)"),
                    ("Answer status", t.status if t else "missing"),
                    ("TrekTrace", "not traced (only wrong answers are traced, by `trek trace`)")]
            body = (f"<h4>{e(self.question_id)}</h4><table>"
                    + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows)
                    + f"</table><h4>Queries</h4><ol>{queries or '<li>(none)</li>'}</ol>")
        grade = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in grade_rows)
        return (f'<div class="trek-case"><style>{scoped_css(".trek-case")}</style>'
                f"<table>{grade}</table>{body}</div>")


def _e(text: object) -> str:
    return escape("" if text is None else str(text), quote=True)


def _verify_columns(path: Path, ids: Sequence[str], traces: dict[str, TraceRecord]) -> dict[str, Any]:
    """The :data:`VERIFY_COLUMNS` of :meth:`Run.frame`, one value per question of ``ids``."""
    verified = verify_by_case(path, traces)
    out: dict[str, Any] = {}
    for exp in ("distractor_search", "query_repair"):
        recs = [verified[q].get(exp) if q in verified else None for q in ids]
        out[f"verify_{exp}"] = _categorical([state(v) if v else None for v in recs], VERIFY_STATES)
        out[f"verify_{exp}_reason"] = pd.array(
            [(v.reason if v.status == "done" else v.error) if v else None for v in recs], dtype="string")
        if exp == "distractor_search":
            out["minimal_set"] = pd.Series([tuple(p.url for p in v.minimal_set) if v and v.minimal_set else None
                                            for v in recs], dtype=object)
            out["minimal_set_ctrl_kinds"] = pd.Series(
                [tuple(p.ctrl_kind for p in v.minimal_set) if v and v.minimal_set else None for v in recs],
                dtype=object)
        else:
            out["repaired_queries"] = pd.Series([tuple(v.repaired_queries) if v and v.repaired_queries else None
                                                 for v in recs], dtype=object)
            out["repair_gold_found"] = pd.array([_gold_found(v) if v else None for v in recs], dtype="boolean")
    return out


def _gold_found(v: Any) -> bool | None:
    """Whether the repaired queries brought the gold page (or its equivalent) back; ``None`` when
    they were not searched."""
    if v.results is None or v.found_urls is None:  # not searched, or the evidence match could not tell
        return None
    return bool(v.found_urls)


class Cases(list[Case]):
    """A list of :class:`Case`; in JupyterLab a table of them (id, dataset, status, labels,
    question), escaped. Show one with ``cases[0]``."""

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{i}</td><td>{_e(c.question_id)}</td><td>{_e(c.question.dataset)}</td>"
            f"<td>{_e(c.trace.status if c.trace else 'not traced')}</td><td>{_e(', '.join(c.labels))}</td>"
            f"<td>{_e(c.question.question)}</td></tr>" for i, c in enumerate(self))
        return (f"<p>{len(self)} case(s)</p><table><tr><th></th><th>question id</th><th>dataset</th><th>status</th>"
                f"<th>labels</th><th>question</th></tr>{rows}</table>")


def load(path: PathLike) -> Run:
    """The run in folder ``path`` (relative to the current folder) as a :class:`Run`.

    A folder that is not a run (no ``questions.jsonl``) is a ``FileNotFoundError`` naming the
    file looked for; records are read (and checked) by the methods that need them."""
    return Run(path)


#: The columns of :func:`runs_frame`.
RUNS_COLUMNS = ["run", "system", "model", "n", "accuracy", "traced", "failures", "cost", "status", "path"]


def runs_frame(folder: PathLike = ".") -> pd.DataFrame:
    """The table ``trek runs list FOLDER`` prints, as a DataFrame: one row per run folder (a
    folder with ``run.json``) at most four levels below ``folder``, in path order.

    Columns ``run`` (the path below ``folder``), ``system``, ``model``, ``n`` (questions),
    ``accuracy`` (% over every question; NaN before grading), ``traced`` and ``failures``
    (wrong answers with a finished trace, of all wrong answers), ``cost`` (US dollars of the
    answers and grades; NaN when a model has no price), ``status`` (categorical) and ``path``."""
    from trek.listing import describe_run, find_runs

    base = Path(folder)
    rows = []
    for d in find_runs(base):
        rows.append({"run": d.relative_to(base).as_posix() if d != base else ".", **describe_run(d), "path": d})
    if not rows:
        raise FileNotFoundError(f"no run folders (with a {_runs.META}) under {base}")
    out = pd.DataFrame(rows, columns=RUNS_COLUMNS)
    out["status"] = out["status"].astype("category")
    return out


def compare(a: Run | PathLike, b: Run | PathLike, labels: tuple[str, str] | None = None,
            human: tuple[PathLike, PathLike] | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """The paired comparison of run ``b`` against run ``a`` on the questions both hold.

    Without ``human``: the row of the paired-runs table (:func:`trek.report.wild.significance`):
    ``n``, ``acc_ref`` (a), ``acc_cond`` (b), ``delta_pp`` (b minus a, in points), ``b`` (a right,
    b wrong), ``c`` (the reverse), the exact McNemar ``p`` and ``p_holm`` (the same, one
    comparison).

    With ``human`` (the filled reviews of a and of b, drawn with the same seed by ``trek grade
    review RUN --sample N --seed S``): the table of ``trek compare A B --human HA --human HB``
    (:func:`trek.grade_review.compare_runs`): the judge-only difference (a minus b, a proportion)
    with its McNemar p, and the difference corrected by the reviews with its interval at level
    ``1 - alpha`` and p-value.

    ``labels`` name the two runs (default: their folder names, ``a: NAME`` and ``b: NAME``
    when those are the same)."""
    ra = a if isinstance(a, Run) else Run(a)
    rb = b if isinstance(b, Run) else Run(b)
    for r in (ra, rb):
        if not (r.path / _runs.GRADES).exists():
            raise FileNotFoundError(f"{r.path / _runs.GRADES} does not exist: a comparison needs graded runs")
    if labels is None:
        labels = (ra.name, rb.name) if ra.name != rb.name else (f"a: {ra.name}", f"b: {rb.name}")
    if len(labels) != 2 or labels[0] == labels[1]:
        raise ValueError(f"labels must be two different names, got {labels!r}")
    if human is None:
        from trek.report.wild import significance

        return significance({labels[0]: ra.path, labels[1]: rb.path}, reference=labels[0])
    from trek.grade_review import compare_runs, read_grade_review

    if isinstance(human, (str, os.PathLike)) or len(human) != 2:
        raise ValueError(f"human must be the two review files, of a and of b, got {human!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    reviews = {labels[0]: read_grade_review(human[0], ra.path), labels[1]: read_grade_review(human[1], rb.path)}
    return compare_runs({labels[0]: ra.path, labels[1]: rb.path}, reviews, alpha)
