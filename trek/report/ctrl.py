"""TrekBench-Ctrl evaluation: tables and figures of ``trek ctrl run`` runs, one builder per artifact.

``tab3_ctrl_micro``       :func:`ctrl_micro` (Table 3)
``tab7_ctrl_full``        :func:`ctrl_by_dataset` (Table 7)
``tab9_ctrl_vs_oo``       :func:`ctrl_vs_oo` (Table 9)
``fig5_metadata_swap``    :func:`metadata_swap`, :func:`plot_metadata_swap` (§4.4, finding 3)
``fig6_position_budget``  :func:`position_table`, :func:`position_pairs`, :func:`budget_table`,
                          :func:`budget_cochran`, :func:`plot_position_budget` (appendix A.3)

Everything starts from :func:`load_ctrl`: one row per (run, question) of every graded Ctrl run
(``run.json`` kind ``ctrl``) under a folder, with the run's model, method and condition. Accuracy
is over every question of a run (only a ``correct`` grade counts, as in :mod:`trek.analysis`).
The tests are :mod:`trek.stats`' exact McNemar, Holm and Cochran's Q through
:func:`trek.analysis.paired_comparisons` and :func:`trek.analysis.cochran_table`; Figure 6's
intervals are Wilson score intervals (:func:`trek.stats.wilson_ci`), and its budget axis is the
number of distractors the contexts really hold (:func:`budget_table`), which is below the
budget when a question's pool is smaller. Every title (:func:`ctrl_title`) names the cells whose
answers or grades are not final (:func:`not_final_note`): they count as not correct.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from trek import runs as _runs
from trek import stats
from trek.analysis import cochran_table, paired_comparisons
from trek.report.figures import drawn_legend, finish
from trek.report.palette import CONDITIONS, colours
from trek.report.paths import recorded_dir, repo_root, resolve
from trek.report.titles import runs_title

__all__ = [
    "MAIN",
    "METHOD_ORDER",
    "POSITIONS",
    "BUDGETS",
    "SWAPS",
    "load_ctrl",
    "ctrl_title",
    "not_final_note",
    "ctrl_micro",
    "ctrl_by_dataset",
    "ctrl_vs_oo",
    "metadata_swap",
    "plot_metadata_swap",
    "position_table",
    "position_pairs",
    "CI_NOTE",
    "context_distractors",
    "budget_table",
    "budget_cochran",
    "plot_position_budget",
]

MAIN = ("OO", "MND", "SAA", "SBA")
METHOD_ORDER = ("direct", "rerank", "filter", "structured")
POSITIONS = ("OO:gold=first", "OO:gold=1/3", "OO:gold=2/3", "OO:gold=last")
BUDGETS = ("OO:k=5", "OO:k=10", "OO:k=15", "OO:k=20")
SWAPS = (("OO", "OO:timeswap"), ("SAA", "SAA:domainswap"))
GOLD = "GOLD"
#: How Figure 6's intervals are made (for captions).
CI_NOTE = "95% Wilson score intervals"


def load_ctrl(runs_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None) -> pd.DataFrame:
    """Every graded Ctrl run under ``runs_dir`` (one folder or several; default the recorded
    runs, ``data/runs/ctrl/runs``).

    Returns one row per (run, question): ``run``, ``model``, ``method``, ``condition`` and
    :func:`trek.runs.frame`'s columns (``question_id``, ``dataset``, ``outcome``, ``correct``, ...);
    ``df.attrs["run_dirs"]`` maps each run label to its folder (for :func:`ctrl_title`). Relative
    paths are read from the repository root.
    """
    roots = [runs_dir] if runs_dir is None or isinstance(runs_dir, str | os.PathLike) else list(runs_dir)
    parts = []
    found: dict[str, Path] = {}
    for root in roots:
        base = resolve(root) if root is not None else recorded_dir("ctrl", "runs")
        try:
            dirs = _runs.discover(base, require=_runs.GRADES)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"{e} (relative paths are read from the repository root; `make runs` records "
                                    "the bundled Ctrl runs, `trek ctrl run --judge` makes and grades your own)") from None
        for label, d in dirs.items():
            meta = _runs.read_meta(d)
            if meta is None or meta.kind != "ctrl":
                continue
            df = _runs.frame(d)
            df.insert(0, "condition", meta.config["condition"])
            df.insert(0, "method", meta.config["method"])
            df.insert(0, "model", meta.model)
            df.insert(0, "run", label)
            parts.append(df)
            found[label] = d
    if not parts:
        raise FileNotFoundError(f"no graded Ctrl runs (run.json kind 'ctrl') under {roots}")
    out = pd.concat(parts, ignore_index=True)
    out.attrs["run_dirs"] = found
    return out


def ctrl_title(df: pd.DataFrame, what: str, *, method: str | None = None,
               conditions: Sequence[str] | None = None) -> str:
    """A figure or table title naming the models and the question set of the runs behind ``df``
    (a :func:`load_ctrl` frame; see :func:`trek.report.titles.runs_title`), followed by
    :func:`not_final_note` when some cell has answers or grades that are not final. Given
    ``method`` and/or ``conditions``, the note counts only those cells: the ones the figure or
    table shows."""
    title = runs_title(what, df.attrs.get("run_dirs", {}), benchmark="TrekBench-Ctrl")
    shown = df
    if method is not None:
        shown = shown[shown["method"] == method]
    if conditions is not None:
        shown = shown[shown["condition"].isin(list(conditions))]
    note = not_final_note(shown)
    return f"{title}; {note}" if note else title


#: What :func:`not_final_note` counts: (column, values, how a count of them is written).
_NOT_FINAL = (
    ("answer_status", ("pending",), "pending answer"),
    ("answer_status", ("failed",), "failed answer"),
    ("answer_status", ("missing",), "unanswered"),
    ("outcome", ("pending", "ungraded"), "ungraded answer"),
    ("outcome", ("unparsed",), "unreadable verdict"),
    ("outcome", ("undecided",), "undecided verdict"),
)


def not_final_note(df: pd.DataFrame) -> str:
    """The cells (model, method, condition) of a :func:`load_ctrl` frame holding answers or grades
    that are not final, and how many of each, e.g. ``not final (counted as not correct): direct ·
    SAA: 2 pending answers, 1 failed answer``; ``""`` when every answer and grade is final.

    Not final: a pending, failed or missing answer; a pending or missing grade; a verdict the
    judge's reply did not give (``unparsed``). Accuracy counts them all as not correct (over every
    question), so a table or figure with such a cell must say so. The model is named only when the
    frame holds several.
    """
    several = df["model"].nunique() > 1
    cells = []
    totals: dict[str, int] = {}
    for (model, method, condition), part in df.groupby(["model", "method", "condition"], sort=False):
        counts = []
        answered = part["answer_status"].isin(("ok", "no_answer"))
        for column, values, what in _NOT_FINAL:
            rows = part[column].isin(values) & (answered if column == "outcome" else True)
            n = int(rows.sum())
            if n:
                counts.append(f"{n} {_plural(what, n)}")
                totals[what] = totals.get(what, 0) + n
        if counts:
            who = f"{model} " if several else ""
            cells.append(f"{who}{method} · {condition}: {', '.join(counts)}")
    if len(cells) > NOTE_CELLS:  # a title cannot hold them all: the totals, and where to read the rest
        what = ", ".join(f"{n} {_plural(w, n)}" for w, n in totals.items())
        return f"not final (counted as not correct): {what} in {len(cells)} cells (per cell: trek.report.ctrl.load_ctrl)"
    return f"not final (counted as not correct): {'; '.join(cells)}" if cells else ""


#: Up to this many cells a not-final note names each; beyond, it gives the totals.
NOTE_CELLS = 4


def _plural(what: str, n: int) -> str:
    return f"{what}{'s' if n > 1 and what != 'unanswered' else ''}"


def _methods(df: pd.DataFrame) -> list[str]:
    seen = set(df["method"])
    return [m for m in METHOD_ORDER if m in seen] + sorted(seen - set(METHOD_ORDER))


def _accuracy_rows(df: pd.DataFrame, keys: list[str], conditions: Sequence[str]) -> pd.DataFrame:
    """Accuracy (%) per ``keys`` x condition, the Gold-only accuracy (Direct on GOLD) of the same
    model (and dataset) and each condition's change from it in points (``<cond> Δ``)."""
    acc = df.groupby([*keys, "condition"])["correct"].mean().mul(100)
    gold_keys = [k for k in keys if k != "method"]
    gold = (df[(df["method"] == "direct") & (df["condition"] == GOLD)]
            .groupby(gold_keys)["correct"].mean().mul(100))
    rows = {}
    for idx, part in df[df["condition"].isin(conditions)].groupby(keys, sort=False):
        idx = idx if isinstance(idx, tuple) else (idx,)
        gkey = tuple(v for k, v in zip(keys, idx, strict=True) if k != "method")
        g = gold.get(gkey if len(gkey) > 1 else gkey[0], np.nan)
        row: dict[str, float] = {"Gold-only": g}
        for c in conditions:
            a = acc.get((*idx, c), np.nan)
            row[c] = a
            row[f"{c} Δ"] = a - g
        row["n"] = part.groupby("condition")["question_id"].nunique().max()
        rows[idx] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=keys)
    return out


def ctrl_micro(df: pd.DataFrame, conditions: Sequence[str] = MAIN) -> pd.DataFrame:
    """Table 3: micro accuracy (%) per model x method under each condition, with the change from
    the model's Gold-only accuracy in points (the paper's gray numbers) and ``n`` questions."""
    out = _accuracy_rows(df, ["model", "method"], conditions)
    order = [(m, k) for m in dict.fromkeys(df["model"]) for k in _methods(df) if (m, k) in out.index]
    return out.loc[order].round(1)


def ctrl_by_dataset(df: pd.DataFrame, conditions: Sequence[str] = MAIN) -> pd.DataFrame:
    """Table 7: :func:`ctrl_micro` per dataset, each model x method followed by its micro average."""
    per = _accuracy_rows(df, ["model", "method", "dataset"], conditions).sort_index()
    micro = _accuracy_rows(df, ["model", "method"], conditions)
    rows = []
    for m in dict.fromkeys(df["model"]):
        for k in _methods(df):
            sub = per.loc[(m, k)] if (m, k) in per.index.droplevel(2) else None
            if sub is None:
                continue
            for ds in sorted(sub.index):
                rows.append(((m, k, ds), sub.loc[ds]))
            rows.append(((m, k, "micro"), micro.loc[(m, k)]))
    out = pd.DataFrame([r for _, r in rows], index=pd.MultiIndex.from_tuples([i for i, _ in rows],
                                                                            names=["model", "method", "dataset"]))
    out["n"] = out["n"].astype(int)
    return out.round(1)


def _table(df: pd.DataFrame, model: str, method: str, conditions: Sequence[str]) -> pd.DataFrame:
    """Question x condition booleans of one model and method (conditions it lacks are left out)."""
    sub = df[(df["model"] == model) & (df["method"] == method) & (df["condition"].isin(conditions))]
    t = sub.pivot_table(index="question_id", columns="condition", values="correct", aggfunc="first")
    return t[[c for c in conditions if c in t.columns]]


def ctrl_vs_oo(df: pd.DataFrame, method: str = "direct", conditions: Sequence[str] = ("MND", "SAA", "SBA"),
               reference: str = "OO") -> pd.DataFrame:
    """Table 9: each condition against ``reference`` on the same questions, per model: accuracies
    (%), the change in points (``delta_pp``: condition minus reference, negative when lower),
    discordant counts, exact McNemar p and Holm-adjusted p."""
    parts = []
    for model in dict.fromkeys(df["model"]):
        t = _table(df, model, method, [reference, *conditions])
        if reference not in t.columns or t.shape[1] < 2:
            continue
        res = paired_comparisons(t, reference)
        parts.append(pd.concat({model: res}, names=["model"]))
    if not parts:
        raise ValueError(f"no {method} runs with {reference} and any of {list(conditions)}")
    return pd.concat(parts).round({"acc_ref": 1, "acc_cond": 1, "delta_pp": 1})


def _with_holm(rows: list[dict]) -> list[dict]:
    """``rows`` (one model's comparisons, each with ``p``) with ``p_holm`` across them."""
    if rows:
        for r, h in zip(rows, stats.holm([r["p"] for r in rows]), strict=True):
            r["p_holm"] = float(h)
    return rows


def metadata_swap(df: pd.DataFrame, method: str = "direct",
                  swaps: Sequence[tuple[str, str]] = SWAPS) -> pd.DataFrame:
    """Figure 5: each swapped condition against its unswapped one on the same questions, per model:
    accuracies (%), the change in points, exact McNemar p and Holm across the swaps of a model."""
    rows = []
    for model in dict.fromkeys(df["model"]):
        mrows = []
        for base, swapped in swaps:
            t = _table(df, model, method, [base, swapped])
            if t.shape[1] < 2:
                continue
            r = paired_comparisons(t, base).iloc[0]
            mrows.append({"model": model, "swap": swapped, "unswapped": base, "n": int(r["n"]),
                          "acc_unswapped": r["acc_ref"], "acc_swapped": r["acc_cond"], "delta_pp": r["delta_pp"],
                          "b": int(r["b"]), "c": int(r["c"]), "p": r["p"]})
        rows += _with_holm(mrows)
    if not rows:
        raise ValueError(f"no {method} runs with any of the swaps {list(swaps)}")
    return pd.DataFrame(rows).set_index(["model", "swap"]).round({"acc_unswapped": 1, "acc_swapped": 1, "delta_pp": 1})


def plot_metadata_swap(table: pd.DataFrame, title: str) -> plt.Figure:
    """Paired bars (unswapped, swapped) per swap and model, each in its condition's palette
    colour with its 95% Wilson interval over the pair's ``n`` questions (named under the pair),
    and the McNemar p above each pair."""
    from trek.report.figures import ZERO_MARK, counts_of_shares, wilson_errors, wrapped

    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    several = table.index.get_level_values(0).nunique() > 1
    from trek.report.titles import condition_name

    def named(code: str) -> str:  # "OO, dates swapped" on two lines, so neighbouring labels never touch
        return condition_name(code).replace(", ", ",\n", 1)

    labels = [f"{named(s)}\n({m})\nn={int(r['n'])}" if several else f"{named(s)}\nn={int(r['n'])}"
              for (m, s), r in table.iterrows()]
    colour = colours("condition", [*table["unswapped"], *table.index.get_level_values("swap")])
    for i, ((_, swapped), r) in enumerate(table.iterrows()):
        n = int(r["n"])
        tops = []
        for dx, cond, acc in ((-0.2, r["unswapped"], r["acc_unswapped"]), (0.2, swapped, r["acc_swapped"])):
            k = counts_of_shares([acc], n)
            err = wilson_errors(k, n)
            ax.bar(i + dx, 100.0 * k[0] / n, 0.4, color=colour[cond], label=condition_name(cond), yerr=err,
                   error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"})
            tops.append(100.0 * k[0] / n + err[1, 0])
            if k[0] == 0:  # a zero, told from a missing bar (as grouped_bars marks it)
                ax.annotate(ZERO_MARK, (i + dx, 0), xytext=(0, 1.5), textcoords="offset points", ha="center",
                            va="bottom", fontsize=6, color=colour[cond], gid="zero-mark")
        ax.text(i, min(max(tops) + 3, 104), f"exact McNemar p={r['p']:.3g}", ha="center", fontsize=7)
    ax.set_xticks(np.arange(len(table)), labels)
    ax.set_xlim(-0.6, len(table) - 0.4)
    return finish(fig, ax, title=wrapped(title, 4.6, 10), ylabel="accuracy (%), 95% interval", ylim=(0, 110),
                  legend="condition", order=[condition_name(c) for c in CONDITIONS])


def _acc_table(df: pd.DataFrame, method: str, conditions: Sequence[str], label: str) -> pd.DataFrame:
    """Accuracy (%) with its 95% Wilson interval, correct and n per model x condition."""
    sub = df[(df["method"] == method) & df["condition"].isin(conditions)]
    if sub.empty:
        raise ValueError(f"no {method} runs with any of {list(conditions)}")
    g = sub.groupby(["model", "condition"])["correct"]
    out = pd.DataFrame({"accuracy": g.mean().mul(100), "correct": g.sum().astype(int), "n": g.size()})
    bounds = [stats.wilson_ci(k, n) for k, n in zip(out["correct"], out["n"], strict=True)]
    out.insert(1, "ci_low", [100 * lo for lo, _ in bounds])
    out.insert(2, "ci_high", [100 * hi for _, hi in bounds])
    order = [(m, c) for m in dict.fromkeys(sub["model"]) for c in conditions if (m, c) in out.index]
    out = out.loc[order].round({"accuracy": 1, "ci_low": 1, "ci_high": 1})
    out.index = out.index.set_names(["model", label])
    return out


def _model_tables(df: pd.DataFrame, method: str, conditions: Sequence[str]):
    """``(model, question x condition table)`` for each model with at least two of ``conditions``."""
    for model in dict.fromkeys(df["model"]):
        t = _table(df, model, method, conditions)
        if t.shape[1] >= 2:
            yield model, t


def position_table(df: pd.DataFrame, method: str = "direct", positions: Sequence[str] = POSITIONS) -> pd.DataFrame:
    """Figure 6 (left): accuracy (%) by gold position in OO with its 95% interval, correct and n."""
    return _acc_table(df, method, positions, "position")


def position_pairs(df: pd.DataFrame, method: str = "direct", positions: Sequence[str] = POSITIONS) -> pd.DataFrame:
    """Every pair of gold positions on the same questions, per model: exact McNemar p, Holm over the pairs."""
    rows = []
    for model, t in _model_tables(df, method, positions):
        mrows = []
        for a, b in itertools.combinations(t.columns, 2):
            r = paired_comparisons(t[[a, b]], a).iloc[0]
            mrows.append({"model": model, "a": a, "b": b, "n": int(r["n"]), "acc_a": r["acc_ref"],
                          "acc_b": r["acc_cond"], "p": r["p"]})
        rows += _with_holm(mrows)
    if not rows:
        raise ValueError(f"no two gold positions with {method} runs")
    return pd.DataFrame(rows).set_index(["model", "a", "b"]).round({"acc_a": 1, "acc_b": 1})


def _contexts_file(run_dir: Path, named: str | None) -> Path | None:
    """The ``contexts.jsonl`` a Ctrl run names in ``run.json`` (``config.contexts``, as it was given
    to ``trek ctrl run``): the path itself, else read from the repository root or from a folder
    above the run (the recorded runs name it relative to ``data/runs``)."""
    if not named:
        return None
    p = Path(named).expanduser()
    candidates = [p] if p.is_absolute() else [repo_root() / p, Path.cwd() / p, *(a / p for a in run_dir.parents)]
    return next((c for c in candidates if c.is_file()), None)


def context_distractors(df: pd.DataFrame, conditions: Sequence[str] = BUDGETS,
                        contexts: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """How many distractors the context of each answer of ``conditions`` held.

    Each Ctrl answer records the sha256 of the context it was made from; this looks it up in
    ``contexts`` (a ``contexts.jsonl`` or a build folder; default: the file each run's ``run.json``
    names). Returns one row per (run, question) with ``model``, ``condition``, ``question_id`` and
    ``distractors``. An answer whose context is not in the file is an error (the file is not the
    one the run read); answers without a recorded context (never attempted) are left out.
    """
    from trek.ctrl.build import CONTEXTS_FILE
    from trek.ctrl.contexts import read_contexts

    run_dirs: dict[str, Path] = df.attrs.get("run_dirs", {})
    sub = df[df["condition"].isin(conditions)]
    cache: dict[Path, dict[str, int]] = {}
    rows = []
    for (run, model, condition), _ in sub.groupby(["run", "model", "condition"], sort=False):
        d = run_dirs[run]
        if contexts is not None:
            path = resolve(contexts)
            path = path / CONTEXTS_FILE if path.is_dir() else path
        else:
            meta = _runs.read_meta(d)
            named = meta.config.get("contexts") if meta is not None else None
            path = _contexts_file(d, named)
            if path is None:
                raise FileNotFoundError(f"{d}: run.json names the contexts {named!r}, which is not found from the "
                                        f"repository root, the working folder or a folder above the run; pass the "
                                        "contexts.jsonl the runs read (the notebook's ctrl_contexts parameter)")
        if path not in cache:
            cache[path] = {c.sha256: c.n_distractors for c in read_contexts(path)}
        for qid, t in _runs.load_answers(d).items():
            sha = t.details.get("context_sha256")
            if sha is None:
                continue
            if sha not in cache[path]:
                raise ValueError(f"{d}: the context of {qid} ({sha[:12]}...) is not in {path}: "
                                 "these runs were made from other contexts")
            rows.append({"run": run, "model": model, "condition": condition, "question_id": qid,
                         "distractors": cache[path][sha]})
    return pd.DataFrame(rows, columns=["run", "model", "condition", "question_id", "distractors"])


def budget_table(df: pd.DataFrame, method: str = "direct", budgets: Sequence[str] = BUDGETS,
                 contexts: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """Figure 6 (right): accuracy (%) by OO distractor budget with its 95% interval, correct and
    n, and the distractors the contexts really hold (:func:`context_distractors`): their mean
    ``distractors`` and range ``distractors_min`` / ``distractors_max`` over the questions. A
    question whose pool has fewer outdated documents than the budget holds all it has."""
    out = _acc_table(df, method, budgets, "budget")
    held = context_distractors(df[df["method"] == method], budgets, contexts)
    g = held.groupby(["model", "condition"])["distractors"]
    counts = pd.DataFrame({"distractors": g.mean(), "distractors_min": g.min(), "distractors_max": g.max()})
    counts.index = counts.index.set_names(out.index.names)
    out = out.join(counts)
    return out.round({"distractors": 1})


def budget_cochran(df: pd.DataFrame, method: str = "direct", budgets: Sequence[str] = BUDGETS) -> pd.DataFrame:
    """Cochran's Q across the budgets on the questions every budget has, one row per model."""
    parts = [cochran_table(t.astype(float)).assign(model=model).set_index("model")
             for model, t in _model_tables(df, method, budgets)]
    if not parts:
        raise ValueError(f"no two budgets with {method} runs")
    return pd.concat(parts)


def _with_interval(ax: plt.Axes, x, part: pd.DataFrame, colour: str, label: str) -> None:
    acc = part["accuracy"].to_numpy(dtype=float)
    err = np.vstack([acc - part["ci_low"].to_numpy(dtype=float), part["ci_high"].to_numpy(dtype=float) - acc])
    ax.errorbar(x, acc, yerr=err, marker="o", color=colour, label=label, capsize=2, elinewidth=0.8)


def plot_position_budget(positions: pd.DataFrame, budgets: pd.DataFrame, title: str) -> plt.Figure:
    """Two panels, one line per model with 95% Wilson intervals: accuracy by gold position, and
    accuracy against the mean number of distractors the budget's contexts hold (where a budget is
    more than that, the budgets behind the point are named, e.g. ``k=10, 15, 20``)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 2.8), sharey=True)
    models = list(dict.fromkeys([*positions.index.get_level_values(0), *budgets.index.get_level_values(0)]))
    colour = colours("model", models)
    for model, part in positions.groupby(level=0, sort=False):
        _with_interval(left, [c.split("=", 1)[1] for c in part.index.get_level_values(1)], part, colour[model], model)
    for model, part in budgets.groupby(level=0, sort=False):
        _with_interval(right, part["distractors"].to_numpy(dtype=float), part, colour[model], model)
    by_held: dict[float, list[int]] = {}
    for cond, held in zip(budgets.index.get_level_values(1), budgets["distractors"], strict=True):
        by_held.setdefault(float(held), []).append(int(cond.split("=", 1)[1]))
    for held, ks in by_held.items():  # name the budgets behind a point whose contexts hold fewer
        if any(k != held for k in ks):
            top = budgets.loc[budgets["distractors"] == held, "ci_high"].max()
            right.annotate("k=" + ", ".join(str(k) for k in sorted(set(ks))), (held, top), xytext=(0, 3),
                           textcoords="offset points", ha="center", fontsize=6)
    right.margins(x=0.15)
    left.set_xlabel("gold position in OO")
    right.set_xlabel("distractors in OO (mean per context)")
    for ax in (left, right):
        ax.set_ylim(0, 105)
    left.set_ylabel("accuracy (%), 95% interval")
    handles, labels = drawn_legend([left, right])
    # below the panels, where no point or interval can be
    fig.legend(handles, labels, frameon=False, loc="lower center", ncol=max(1, min(len(labels), 4)), fontsize=7)
    from trek.report.figures import wrapped

    fig.suptitle(wrapped(f"{title}\n({CI_NOTE})", 6.4), fontsize=9)
    fig.tight_layout(rect=(0, 0.07 * ((len(labels) + 3) // 4), 1, 1))
    return fig
