"""TrekTrace: tables and figures of traced runs, one small builder per paper artifact.

* Figure 2 — :func:`label_shares` / :func:`plot_label_shares`: share of traced failures carrying
  each label, per run and dataset. Attribution is multi-label, so the shares of a row need not
  sum to 100%; the figure says so.
  With a random human review (``human``): :func:`corrected_shares` / :func:`plot_corrected_shares`,
  the judge's share beside the share corrected by the review (PPI++, :mod:`trek.trace.shares`)
  with its interval, per run over all its fully traced cases; :func:`corrected_caption` names n
  and N.
  With ``trek trace verify``'s records (``verify.jsonl``) in a run: :func:`verified_shares`, per
  run, dataset and label, the label's share beside the share of its cases the verification
  confirmed (k/n with a 95% Wilson interval), "not tested" for a label no experiment tested;
  :func:`plot_label_shares` writes the same k/n over the label's bars.
* Figure 3 — :func:`model_search_labels` / :func:`plot_model_search`: the same shares across
  model x search combinations (from each run's ``run.json``).
* Table A.4.2 — :func:`post_vs_upstream`: per run, cases with a post-retrieval label vs cases
  with an upstream label, exact McNemar over the same cases and Holm across runs
  (:func:`trek.analysis.multilabel_prevalence_test`).

Only fully traced (``done``) records count; the ``cases`` column gives the denominators,
``incomplete`` and ``pending`` the cases left out, and :func:`coverage_note` says the same in words
for every title and caption ("n=7 fully traced; 2 incomplete (no gold page) left out").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from trek import runs
from trek.analysis import multilabel_prevalence_test
from trek.report.figures import counts_of_shares, drawn_legend, grouped_bars, wilson_errors, wrapped
from trek.report.palette import DATASETS, colours
from trek.report.paths import find_runs, recorded_dir
from trek.trace.labels import LABELS, POST_RETRIEVAL, UPSTREAM
from trek.trace.parts import reason_heading
from trek.trace.pipeline import load_trace

__all__ = [
    "MULTI_LABEL_NOTE",
    "coverage_note",
    "traced_runs",
    "trace_frame",
    "label_shares",
    "plot_label_shares",
    "verified_runs",
    "verified_shares",
    "VERIFIED_COLUMNS",
    "corrected_shares",
    "corrected_caption",
    "plot_corrected_shares",
    "model_search_labels",
    "plot_model_search",
    "post_vs_upstream",
    "query_note",
    "question_as_query_runs",
    "probe_answer_split",
    "probe_answer_note",
    "query_rank_sweep",
]

MULTI_LABEL_NOTE = "multi-label: a case can carry two labels, so shares need not sum to 100%"


def traced_runs(
    runs_map: dict[str, str] | None = None, runs_dir: str | os.PathLike[str] | None = None
) -> dict[str, Path]:
    """``{label: run directory}`` of traced runs: ``runs_map`` as given, else every run with a
    ``trace.jsonl`` under ``runs_dir`` (default: the recorded Wild runs, ``data/runs/wild``).
    Relative paths are read from the repository root."""
    return find_runs(runs.TRACE, runs_map, runs_dir, recorded_dir("wild"),
                     "trace runs with `trek trace RUN_DIR`; `make runs` records the bundled ones")


def coverage_note(run_dirs: dict[str, Path]) -> str:
    """What the numbers of a TrekTrace table or figure are over and what they leave out, for its
    title or caption: ``n=7 fully traced; 2 incomplete (no gold page), 1 pending left out``, or
    ``n=7 fully traced; none left out``.

    ``n`` counts the fully traced (``done``) cases of all ``run_dirs``; incomplete cases are listed
    with the reasons their tests could not run (a case can have several), pending and failed
    cases (a call still to make or that was refused) as ``pending``.
    """
    done = incomplete = pending = 0
    reasons: dict[str, int] = {}
    for d in run_dirs.values():
        for r in load_trace(d):
            if r.status == "done":
                done += 1
            elif r.status == "incomplete":
                incomplete += 1
                for why in dict.fromkeys(map(reason_heading, r.skipped.values())):
                    reasons[why] = reasons.get(why, 0) + 1
            else:
                pending += 1
    left = []
    if incomplete:
        why = ", ".join(k if v == incomplete and len(reasons) == 1 else f"{k}: {v}" for k, v in reasons.items())
        left.append(f"{incomplete} incomplete" + (f" ({why})" if why else ""))
    if pending:
        left.append(f"{pending} pending")
    return f"n={done} fully traced; " + (f"{', '.join(left)} left out" if left else "none left out")


def _system(meta: runs.RunMeta | None) -> tuple[str, str]:
    if meta is None:
        return "?", "?"
    system = meta.config.get("system")
    if not isinstance(system, dict):
        return meta.model or "?", "?"
    search = system.get("search") or "none"
    kind = system.get("system") or ""
    return meta.model or "?", f"{search} ({kind})" if kind else str(search)


def trace_frame(run_dirs: dict[str, Path]) -> pd.DataFrame:
    """One row per traced case: ``run, model, search, dataset, question_id, status, labels`` and one
    boolean column per label (``False`` for pending cases, which have no labels)."""
    rows = []
    for label, d in run_dirs.items():
        model, search = _system(runs.read_meta(d))
        for r in load_trace(d):
            rows.append({"run": label, "model": model, "search": search, "dataset": r.dataset,
                         "question_id": r.question_id, "status": r.status, "labels": tuple(r.labels),
                         "lower_bound": r.evidence_lower_bound,
                         **{lab: lab in r.labels for lab in LABELS}})
    cols = ["run", "model", "search", "dataset", "question_id", "status", "labels", "lower_bound", *LABELS]
    return pd.DataFrame(rows, columns=cols)


#: Count columns beside the label shares: the fully traced cases the shares are over, and the
#: cases left out because a needed test did not run (``incomplete``) or that are not finished.
COUNT_COLUMNS = ["cases", "incomplete", "pending"]


def _shares(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Label shares (%) over the fully traced (``done``) cases of each group, with the counts of
    cases left out beside them; shares are NaN for a group without a fully traced case."""
    if df.empty:
        raise ValueError("no traced cases")
    g = df.groupby(keys, sort=False)
    done = df["status"] == "done"
    out = (100.0 * df[list(LABELS)].where(done).astype(float).groupby([df[k] for k in keys], sort=False).mean())
    out = out.round(1)
    out["cases"] = done.groupby([df[k] for k in keys], sort=False).sum().astype(int)
    out["incomplete"] = (df["status"] == "incomplete").groupby([df[k] for k in keys], sort=False).sum().astype(int)
    out["pending"] = df["status"].isin(["pending", "failed"]).groupby([df[k] for k in keys], sort=False).sum()
    out["pending"] = out["pending"].astype(int)
    if df["lower_bound"].any():  # imported logs that show results only through citations or snippets
        out["lower_bound"] = (done & df["lower_bound"]).groupby([df[k] for k in keys], sort=False).sum().astype(int)
    return out.reindex(g.size().index)


def label_shares(run_dirs: dict[str, Path]) -> pd.DataFrame:
    """Figure 2's table: % of fully traced cases with each label, rows ``(run, dataset)`` plus an
    ``all`` row per run; columns the labels, then ``cases`` (fully traced, what the shares are
    over), ``incomplete`` and ``pending`` (left out)."""
    df = trace_frame(run_dirs)
    per = _shares(df, ["run", "dataset"])
    allrows = _shares(df.assign(dataset="all"), ["run", "dataset"])
    blocks = []
    for run in run_dirs:
        if run in per.index.get_level_values(0):
            blocks += [per.loc[[run]], allrows.loc[[run]]]
    return pd.concat(blocks)


def _n(row: pd.Series) -> str:
    """``n=3`` (fully traced cases), with ``, 2 left out`` when cases were left out."""
    left = int(row["incomplete"]) + int(row["pending"])
    return f"n={int(row['cases'])}" + (f", {left} left out" if left else "")


def plot_label_shares(table: pd.DataFrame, title: str, question_as_query: Sequence[str] = (),
                      verified: pd.DataFrame | None = None) -> plt.Figure:
    """One panel per run: a group of bars per label, one bar per dataset of the run (and ``all``),
    each dataset in its palette colour, each bar with its 95% Wilson interval over that dataset's
    fully traced cases; a panel's title gives those ``n``, and says "question as query" for the
    runs in ``question_as_query`` (:func:`question_as_query_runs`). The legend lists every dataset
    drawn in any panel.

    With ``verified`` (:func:`verified_shares`), each label a run's verification tested gets its
    confirmed share over all the run's datasets written above its bars (``confirmed k/n`` and the
    95% Wilson interval); a label not tested gets nothing, and without ``verified`` the figure is
    the plain one."""
    run_labels = list(dict.fromkeys(table.index.get_level_values(0)))
    colour = colours("dataset", table.index.get_level_values(1))
    width = 4.4 * len(run_labels) + 0.6
    fig, axes = plt.subplots(1, len(run_labels), figsize=(width, 3.9), squeeze=False, sharey=True)
    any_noted = False
    for ax, run in zip(axes[0], run_labels, strict=True):
        sub = table.loc[run]
        series, errors = {}, {}
        for ds, row in sub.iterrows():  # bars at k / n exactly (the table rounds), the interval around them
            n = int(row["cases"])
            k = counts_of_shares(row[list(LABELS)].to_numpy(dtype=float), n)
            series[str(ds)] = 100.0 * k / n if n else k
            errors[str(ds)] = wilson_errors(k, n)
        grouped_bars(ax, LABELS, series, colour, errors=errors)
        noted = verified is not None and _annotate_verified(ax, verified, run, series, errors)
        any_noted = any_noted or noted
        per = ", ".join(f"{ds} {int(row['cases'])}" for ds, row in sub.iterrows() if ds != "all")
        query = "; question as query" if run in question_as_query else ""
        ax.set_title(f"{run} ({_n(table.loc[(run, 'all')])}{query})\nfully traced per dataset: {per}", fontsize=8)
        ax.set_ylim(0, 100)
        if noted:  # room above 100% for the verification notes, the axis still read up to 100%
            ax.set_ylim(0, 122)
            ax.set_yticks(range(0, 101, 20))
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        ax.set_xlabel("")
    axes[0][0].set_ylabel("% of traced failures (95% Wilson interval)")
    handles, names = drawn_legend(axes[0], DATASETS)
    fig.legend(handles, names, title="dataset", frameon=False, loc="lower center", ncol=len(names),
               bbox_to_anchor=(0.5, 0.0), fontsize=8, title_fontsize=8)
    note = MULTI_LABEL_NOTE + ("; above the bars: the label's cases confirmed by trek trace verify, all datasets, "
                               "k/n [95% Wilson interval]" if any_noted else "")
    fig.suptitle(wrapped(f"{title}\n({note})", width, 9), fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def verified_runs(run_dirs: dict[str, Path]) -> list[str]:
    """The runs of ``run_dirs`` that ``trek trace verify`` has verified (a ``verify.jsonl``)."""
    from trek.trace.verified import has_verify

    return [label for label, d in run_dirs.items() if has_verify(d)]


#: The columns of :func:`verified_shares`, after its index ``(run, dataset, label)``.
VERIFIED_COLUMNS = ["share", "cases", "labelled", "experiment", "tested", "confirmed", "refuted", "inconclusive",
                    "skipped", "untested", "confirmed_share", "low", "high", "verification"]


def _verification_text(k: int, n: int, low: float, high: float, skipped: int, level: float = 0.95) -> str:
    if not n:
        return "not tested" + (f" ({skipped} skipped)" if skipped else "")
    return f"confirmed {k}/{n} ({100 * k / n:.0f}%, {100 * level:g}% Wilson CI {100 * low:.0f}-{100 * high:.0f}%)"


def verified_shares(run_dirs: dict[str, Path], level: float = 0.95) -> pd.DataFrame:
    """Figure 2's shares with what ``trek trace verify`` found beside them: one row per run,
    dataset (each, then ``all``) and label, over the run's fully traced (``done``) cases, as
    :func:`label_shares` counts them.

    Columns (:data:`VERIFIED_COLUMNS`): ``share`` (% of the ``cases`` carrying the label, as in
    Figure 2's table), ``cases``, ``labelled`` (cases carrying the label), ``experiment`` (the
    experiment that tests the label, empty for Interpretation and Randomness), then over the
    labelled cases: ``tested`` (a verdict of confirmed, refuted or inconclusive), ``confirmed``,
    ``refuted``, ``inconclusive``, ``skipped`` (the experiment could not test the case, with a
    reason in ``verify.jsonl``), ``untested`` (no current verdict: not verified yet, pending,
    or stale because the labels changed since), ``confirmed_share`` (% of ``tested``) with its
    Wilson interval ``low``/``high`` at ``level`` (%; NaN when nothing was tested) and
    ``verification`` in words: ``confirmed 3/4 (75%, 95% Wilson CI 30-95%)`` or ``not tested``.

    The labels are the trace's, unchanged; a run without ``verify.jsonl`` has every label ``not
    tested``. The verify summary (``trek trace verify``) counts every verified case, incomplete
    ones too; this table counts the cases behind Figure 2's bars only.
    """
    from trek.stats import wilson_ci
    from trek.trace.verified import TESTS_LABELS, state, verify_by_case

    experiment_of = {lab: exp for exp, labs in TESTS_LABELS.items() for lab in labs}
    rows = []
    for run, d in run_dirs.items():
        records = load_trace(d)
        verified = verify_by_case(d, records)
        done = [r for r in records if r.status == "done"]
        datasets = list(dict.fromkeys(r.dataset for r in records))
        for ds in [*datasets, "all"]:
            cases = [r for r in done if ds == "all" or r.dataset == ds]
            for lab in LABELS:
                having = [r for r in cases if lab in r.labels]
                exp = experiment_of.get(lab)
                states = []
                for r in having:
                    v = verified[r.question_id].get(exp) if exp and r.question_id in verified else None
                    states.append(state(v) if v is not None and v.label == lab else None)
                count = {s: states.count(s) for s in ("confirmed", "refuted", "inconclusive", "skipped")}
                n = count["confirmed"] + count["refuted"] + count["inconclusive"]
                low, high = wilson_ci(count["confirmed"], n, level) if n else (np.nan, np.nan)
                rows.append({"run": run, "dataset": ds, "label": lab,
                             "share": round(100.0 * len(having) / len(cases), 1) if cases else np.nan,
                             "cases": len(cases), "labelled": len(having), "experiment": exp or "", "tested": n,
                             **count, "untested": len(having) - n - count["skipped"],
                             "confirmed_share": round(100.0 * count["confirmed"] / n, 1) if n else np.nan,
                             "low": round(100.0 * low, 1) if n else np.nan,
                             "high": round(100.0 * high, 1) if n else np.nan,
                             "verification": _verification_text(count["confirmed"], n, low, high, count["skipped"],
                                                                 level)})
    if not rows:
        raise ValueError(f"no traced cases in {', '.join(str(d) for d in run_dirs.values()) or 'no run'} "
                         "(run trek trace first)")
    return pd.DataFrame(rows).set_index(["run", "dataset", "label"])[VERIFIED_COLUMNS]


def _annotate_verified(ax: plt.Axes, verified: pd.DataFrame, run: str, series: dict[str, np.ndarray],
                       errors: dict[str, np.ndarray]) -> bool:
    """``confirmed k/n`` and its interval above each tested label's bars of ``run`` (all datasets);
    whether any label was tested."""
    noted = False
    flat = verified.reset_index()
    rows = flat[(flat["run"] == run) & (flat["dataset"] == "all")].set_index("label")
    for i, lab in enumerate(LABELS):
        if lab not in rows.index:
            continue
        row = rows.loc[lab]
        if not int(row["tested"]):
            continue
        tops = [float(np.nan_to_num(series[ds][i])) + float(np.nan_to_num(errors[ds][1][i])) for ds in series]
        y = min(max(tops, default=0.0), 100.0) + 2.0
        ax.annotate(f"confirmed {int(row['confirmed'])}/{int(row['tested'])}\n"
                    f"[{row['low']:.0f}-{row['high']:.0f}%]", (i, y), ha="center", va="bottom", fontsize=6,
                    color="#333333", gid="verified")
        noted = True
    return noted


def corrected_shares(run_dirs: dict[str, Path], human: dict[str, str | os.PathLike[str]], *,
                     seed: int | None = None, sample_by: str | None = None, labels_from: str = "trace",
                     alpha: float = 0.05) -> pd.DataFrame:
    """Figure 2 corrected by a random human review: per run with a review file in ``human``
    (``{run label: filled workbook or CSV}``) and label, the rows of
    :func:`trek.trace.shares.shares_table` over all its fully traced cases (shares in %).
    ``seed``/``sample_by``: the draw a CSV reviews (a workbook records its own);
    ``labels_from``: ``trace`` or ``audit`` (:func:`trek.trace.shares.judge_labels`)."""
    from trek.trace.shares import judge_labels, read_human, shares_table

    unknown = sorted(set(human) - set(run_dirs))
    if unknown:
        raise ValueError(f"human names run(s) {unknown} that are not among the traced runs {sorted(run_dirs)}")
    blocks = []
    for run, d in run_dirs.items():
        if run not in human:
            continue
        records = load_trace(d)
        verdicts = read_human(human[run], records, seed=seed, by=sample_by)
        t = shares_table(records, judge_labels(records, labels_from), verdicts, alpha=alpha)
        blocks.append(t.assign(run=run, reviews=verdicts.sample.describe() if verdicts.sample else "",
                               labels_from=labels_from))
    if not blocks:
        raise ValueError("human names no review file")
    out = pd.concat(blocks).set_index(["run", "label"])
    share_cols = ["judge_share", "judge_low", "judge_high", "corrected_share", "low", "high",
                  "human_only_share", "human_low", "human_high"]
    out[share_cols] = (100 * out[share_cols]).round(1)
    return out[["n_traced", "n_reviewed", *share_cols, "lambda", "reviews", "labels_from"]]


def corrected_caption(table: pd.DataFrame) -> str:
    """``corrected (PPI++, 95% interval) by a random review of n=12 of N=36 fully traced cases``,
    one ``run: n of N`` per run when there are several."""
    per = table.groupby(level=0, sort=False)[["n_reviewed", "n_traced"]].first()
    audit = "the audit judge's labels " if (table.get("labels_from") == "audit").any() else ""
    if len(per) == 1:
        n, big_n = per.iloc[0]
        return f"{audit}corrected (PPI++, 95% interval) by a random review of n={n} of N={big_n} fully traced cases"
    parts = ", ".join(f"{run}: n={r.n_reviewed} of N={r.n_traced}" for run, r in per.iterrows())
    return f"{audit}corrected (PPI++, 95% intervals) by random reviews ({parts})"


def plot_corrected_shares(table: pd.DataFrame, title: str) -> plt.Figure:
    """One panel per run: for each label the judge's share and the corrected share with its
    interval (from :func:`corrected_shares`)."""
    run_labels = list(dict.fromkeys(table.index.get_level_values(0)))
    import textwrap

    colour = {"judge": "#9aa5b1", "corrected": "#1f5f99"}
    fig, axes = plt.subplots(1, len(run_labels), figsize=(max(7.0, 3.6 * len(run_labels) + 1.4), 3.8),
                             squeeze=False, sharey=True)
    for ax, run in zip(axes[0], run_labels, strict=True):
        sub = table.loc[run].reindex(list(LABELS))
        est = sub["corrected_share"].to_numpy(dtype=float)
        err = np.vstack([est - sub["low"].to_numpy(dtype=float), sub["high"].to_numpy(dtype=float) - est]).clip(0)
        j = sub["judge_share"].to_numpy(dtype=float)
        j_err = np.vstack([j - sub["judge_low"].to_numpy(dtype=float), sub["judge_high"].to_numpy(dtype=float) - j])
        grouped_bars(ax, LABELS, {"judge": j, "corrected": est}, colour, errors={"judge": j_err, "corrected": err})
        first = sub.iloc[0]
        ax.set_title(f"{run} (n={int(first['n_reviewed'])} of N={int(first['n_traced'])})", fontsize=9)
        ax.set_ylim(0, 100)
        ax.tick_params(axis="x", rotation=35, labelsize=8)
    axes[0][0].set_ylabel("% of traced failures")
    fig.legend(*drawn_legend(axes[0], ["judge", "corrected"]), frameon=False, loc="center right")
    fig.suptitle(textwrap.fill(title, 90) + f"\n({MULTI_LABEL_NOTE})", fontsize=8)
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    return fig


def model_search_labels(run_dirs: dict[str, Path]) -> pd.DataFrame:
    """Figure 3's table: % of finished traced cases with each label, rows ``(model, search)``."""
    return _shares(trace_frame(run_dirs), ["model", "search"])


def plot_model_search(table: pd.DataFrame, title: str) -> plt.Figure:
    """A heat map: model x search combinations (rows) by label (columns), each cell its share (%)
    over the row's ``n`` fully traced cases with the 95% Wilson interval under it; the rows name
    model, search and ``n``, the title is folded to the figure's width."""
    from trek.stats import wilson_ci

    body = table[list(LABELS)]
    width = 8.0
    fig, ax = plt.subplots(figsize=(width, 0.75 * len(body) + 2.2))
    im = ax.imshow(body.to_numpy(dtype=float), vmin=0, vmax=100, cmap="Reds", aspect="auto")
    ax.set_xticks(np.arange(len(LABELS)), labels=list(LABELS), rotation=25, ha="right")
    rows = [f"{m}\n{_question_as_query(s)} ({_n(row)})" for (m, s), row in table.iterrows()]
    ax.set_yticks(np.arange(len(body)), labels=rows, fontsize=8)
    for i, (_, row) in enumerate(table.iterrows()):
        n = int(row["cases"])
        ks = counts_of_shares(row[list(LABELS)].to_numpy(dtype=float), n)
        for j, (v, k) in enumerate(zip(row[list(LABELS)].to_numpy(dtype=float), ks, strict=True)):
            text = "-" if np.isnan(v) else f"{v:.0f}"
            if n and not np.isnan(k):
                lo, hi = wilson_ci(int(k), n)
                text += f"\n[{100 * lo:.0f}-{100 * hi:.0f}]"
            ax.text(j, i, text, ha="center", va="center", fontsize=7.5, color="white" if v > 60 else "black")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="% of traced failures", shrink=0.9)
    fig.suptitle(wrapped(f"{title}\n(cells: share [95% Wilson interval]; {MULTI_LABEL_NOTE})", width, 9), fontsize=9)
    fig.tight_layout()
    return fig


def _question_as_query(search: str) -> str:
    """A search label, with "question as query" for search-then-read (whose one query is the question)."""
    return search[:-1] + "; question as query)" if search.endswith("(search-then-read)") else search


def post_vs_upstream(run_dirs: dict[str, Path]) -> pd.DataFrame:
    """Table A.4.2 shape: per run, % of fully traced cases with a post-retrieval label and with
    an upstream label, exact McNemar p over the same cases, Holm-adjusted across runs; ``n`` the
    fully traced cases, ``excluded`` the cases left out (incomplete, pending, failed). A run
    without a fully traced case has NaN statistics."""
    df = trace_frame(run_dirs)
    if df.empty:
        raise ValueError("no traced cases")
    done = df[df["status"] == "done"]
    runs_ = list(dict.fromkeys(df["run"]))
    if done.empty:
        out = pd.DataFrame(index=pd.Index(runs_, name="run"),
                           columns=["n", "n_post", "n_upstream", "post_pct", "upstream_pct", "b", "c", "p", "p_holm"],
                           dtype=float)
    else:
        out = multilabel_prevalence_test(
            [{"model": r, "labels": list(labs)} for r, labs in zip(done["run"], done["labels"], strict=True)],
            post=POST_RETRIEVAL, upstream=UPSTREAM,
        ).reindex(runs_)
    out.index.name = "run"
    out["n"] = done.groupby("run").size().reindex(runs_).fillna(0).astype(int)
    out["excluded"] = (df["status"] != "done").groupby(df["run"]).sum().reindex(runs_).astype(int)
    return out.round({"post_pct": 1, "upstream_pct": 1})


# -- notes for Figure 2: what the queries were, what the probe answers named ------------------------
#: The label each probe's wrong answer gives, and the step that graded that answer.
PROBE_STEPS = {"Interpretation": "gold_only_grade", "Distraction": "noise_grade"}


def question_as_query_runs(run_dirs: dict[str, Path]) -> list[str]:
    """The runs whose one query is the question itself (search-then-read, from ``run.json``)."""
    return [label for label, d in run_dirs.items() if _system(runs.read_meta(d))[1].endswith("(search-then-read)")]


def query_note(run_dirs: dict[str, Path]) -> str:
    """Which runs' queries were the question itself (search-then-read sends the question as its one
    query, so its Pre-retrieval/Retrieval split reads the question as the query); ``""`` when none."""
    named = question_as_query_runs(run_dirs)
    return ("" if not named else f"{', '.join(named)}: question as query (search-then-read sends the question "
            "itself, so its Pre-retrieval/Retrieval split judges the question as a query)")


def probe_answer_split(run_dirs: dict[str, Path]) -> pd.DataFrame:
    """Per run and probe label (Interpretation, Distraction), what the wrong probe answers named,
    where the exact judge graded them: ``competing`` (an annotated wrong answer), ``unannotated``,
    ``no answer``; ``cases`` is how many fully traced cases carry the label, ``exact`` how many of
    them the exact judge graded (the split is over those)."""
    import json

    from trek.trace.exact import ANSWER_KINDS, decided

    kinds = [k for k in ANSWER_KINDS if k != "reference"]
    rows = []
    for label, d in run_dirs.items():
        for lab, step_name in PROBE_STEPS.items():
            row: dict[str, object] = {"run": label, "label": lab, "cases": 0, "exact": 0, **dict.fromkeys(kinds, 0)}
            for r in load_trace(d):
                if r.status != "done" or lab not in r.labels:
                    continue
                row["cases"] = int(row["cases"]) + 1  # type: ignore[call-overload]
                step = next((s for s in reversed(r.steps) if s.name == step_name), None)
                if step is None or not decided(step) or not step.raw:
                    continue
                kind = json.loads(step.raw[0]).get("answer_kind")
                if kind in kinds:
                    row["exact"] = int(row["exact"]) + 1  # type: ignore[call-overload]
                    row[kind] = int(row[kind]) + 1  # type: ignore[call-overload]
            rows.append(row)
    return pd.DataFrame(rows, columns=["run", "label", "cases", "exact", *kinds]).set_index(["run", "label"])


def probe_answer_note(run_dirs: dict[str, Path]) -> str:
    """:func:`probe_answer_split` in words, for Figure 2's notes (``""`` when the exact judge graded
    no probe answer of a labelled case)."""
    split = probe_answer_split(run_dirs)
    parts = []
    for (run, lab), row in split.iterrows():
        if row["exact"]:
            said = ", ".join(f"{int(row[k])} {k}" for k in ("competing", "unannotated", "no answer") if row[k])
            parts.append(f"{run} {lab}: {said}")
    return "" if not parts else "wrong probe answers named (exact judge): " + "; ".join(parts)


#: Depths of the rank diagnostic's sweep (:func:`query_rank_sweep`).
SWEEP_DEPTHS = (1, 2, 5, 10, 20, 50)


def query_rank_sweep(run_dirs: dict[str, Path], depths: tuple[int, ...] = SWEEP_DEPTHS) -> pd.DataFrame:
    """The rank diagnostic beside the query verdict, per run: of the fully traced cases whose
    query test the exact judge decided (``cases``), the % judged adequate by the plausibility rule
    (``adequate``, which decides the label) and the % where a gold page is retrievable by the
    recorded queries at depth d on the local index (one column per depth; a diagnostic that
    decides nothing). ``not taken`` counts cases without the diagnostic (not a local-index run)."""
    import json

    from trek.trace.exact import decided

    rows = []
    for label, d in run_dirs.items():
        n = adequate = not_taken = 0
        ranks: list[int | None] = []
        for r in load_trace(d):
            step = next((s for s in reversed(r.steps) if s.name == "query_adequacy"), None)
            if r.status != "done" or step is None or not decided(step) or not step.raw:
                continue
            n += 1
            adequate += bool(step.value.get("query_adequate"))
            diag = json.loads(step.raw[0]).get("retrievable") or {}
            if "best_rank" not in diag or diag.get("not_taken"):
                not_taken += 1
            else:
                ranks.append(diag["best_rank"])
        row: dict[str, object] = {"run": label, "cases": n,
                                  "adequate": round(100.0 * adequate / n, 1) if n else float("nan")}
        for depth in depths:
            row[f"rank<={depth}"] = (round(100.0 * sum(1 for x in ranks if x is not None and x <= depth) / len(ranks), 1)
                                     if ranks else float("nan"))
        row["not taken"] = not_taken
        rows.append(row)
    return pd.DataFrame(rows).set_index("run")
