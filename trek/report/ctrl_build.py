"""TrekBench-Ctrl builds: tables and figures of a ``trek ctrl build`` folder, one builder per artifact.

``tab14_ctrl_composition``      :func:`composition_table`
``tab2_distraction_examples``   :func:`distraction_examples`
``fig4_shortcuts``              :func:`shortcut_table`, :func:`plot_shortcuts`

:func:`demo_build` builds the offline demo (TrekBench-Mini, no model) that the notebooks read by
default; :func:`load_build` reads any folder written by ``trek ctrl build``.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trek.ctrl.build import CONTEXTS_FILE, MANIFEST_FILE, POOLS_FILE
from trek.ctrl.conditions import ALL_CONDITIONS, MAIN_CONDITIONS
from trek.ctrl.contexts import Context, read_contexts
from trek.ctrl.pools import Pool, read_pools
from trek.ctrl.shortcuts import HEURISTICS, audit
from trek.report.palette import HEURISTICS as HEURISTIC_COLOURS
from trek.report.palette import colours
from trek.report.paths import recorded_dir, resolve
from trek.report.titles import benchmark_of, demo_label

__all__ = [
    "Built",
    "default_build_dir",
    "build_title",
    "load_build",
    "composition_table",
    "distraction_examples",
    "edit_diff",
    "HEURISTIC_NAMES",
    "wilson_share",
    "shortcut_table",
    "plot_shortcuts",
]


@dataclass
class Built:
    """A build folder read back: its pools, its contexts and its ``build.json`` (empty when absent)."""

    folder: Path
    pools: list[Pool]
    contexts: list[Context]
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def answers(self) -> dict[str, list[str]]:
        return {p.question.id: p.question.answers for p in self.pools}


def load_build(folder: str | os.PathLike[str]) -> Built:
    """Read ``pools.jsonl``, ``contexts.jsonl`` (validated) and ``build.json`` from a build folder
    (a relative path is read from the repository root)."""
    f = resolve(folder)
    if not f.is_dir():
        raise FileNotFoundError(f"no Ctrl build folder at {f} (relative paths are read from the repository root; "
                                "`trek ctrl build --out DIR` writes one)")
    manifest_path = f / MANIFEST_FILE
    from trek import jsonio

    manifest = jsonio.load_json(manifest_path, "build manifest (JSON)") if manifest_path.exists() else {}
    return Built(f, read_pools(f / POOLS_FILE), read_contexts(f / CONTEXTS_FILE), manifest)


def default_build_dir() -> Path:
    """The recorded Ctrl build of ``make runs`` (``data/runs/ctrl/build``)."""
    return recorded_dir("ctrl", "build")


def build_title(built: Built, what: str) -> str:
    """``what`` with the question set, and how many fabrications were made and how (exact edits of
    annotated answer spans, a model), from the pools and ``build.json``; DEMO DATA when the build was made by a scripted demo (its ``source`` says
    ``demo``)."""
    manifest = built.manifest
    data = benchmark_of((p.question.id for p in built.pools), "TrekBench-Ctrl")
    made = sum(len(p.role("fabrication")) for p in built.pools)
    by = (["exact edits"] if (manifest.get("fabricators") or {}).get("exact") else []) + \
        ([str(manifest["model"])] if manifest.get("model") else [])
    if by:
        fab = f"{made} fabrications by {' and '.join(by)}"
    else:
        fab = "no fabrications (" + ("--fabricator none" if manifest.get("fabricator") == "none" else "no model") + ")"
    demo = "demo" in str(manifest.get("source", ""))
    return demo_label(demo, f"{what} ({data}, {len(built.pools)} questions; {fab})")


def _order(conditions: list[str]) -> list[str]:
    return [c for c in ALL_CONDITIONS if c in conditions] + sorted(set(conditions) - set(ALL_CONDITIONS))


def composition_table(built: Built, conditions: tuple[str, ...] = MAIN_CONDITIONS) -> pd.DataFrame:
    """Table 14: mean distractors (D, excluding gold) and mean context length (L, thousands of
    o200k tokens, including gold) per condition (rows) and dataset, plus ``All``; columns are
    ``"<dataset> D"``, ``"<dataset> L"`` and ``"<dataset> n"`` (number of questions)."""
    rows = [{"condition": c.condition, "dataset": c.dataset, "D": c.n_distractors,
             "L": (c.tokens or 0) / 1000, "n": 1} for c in built.contexts if c.condition in conditions]
    if not rows:
        raise ValueError(f"{built.folder}: no contexts for conditions {list(conditions)}")
    if any(c.tokens is None for c in built.contexts):
        raise ValueError(f"{built.folder}: contexts were built with --no-tokens; rebuild with token counts")
    df = pd.DataFrame(rows)
    both = pd.concat([df, df.assign(dataset="All")])
    table = both.groupby(["condition", "dataset"]).agg(D=("D", "mean"), L=("L", "mean"), n=("n", "sum"))
    table = table.unstack("dataset")
    table.columns = table.columns.swaplevel(0, 1)
    datasets = sorted(set(df["dataset"])) + ["All"]
    table = table.reindex(columns=pd.MultiIndex.from_product([datasets, ["D", "L", "n"]]))
    table.columns = [f"{d} {m}" for d, m in table.columns]
    return table.reindex(_order(list(table.index)))


def edit_diff(original: str, edited: str, context: int = 1) -> str:
    """A unified diff (by sentence-ish lines) between a source window and its fabricated version."""
    a = original.replace(". ", ".\n").splitlines()
    b = edited.replace(". ", ".\n").splitlines()
    return "\n".join(difflib.unified_diff(a, b, "gold", "fabricated", n=context, lineterm=""))


def _excerpt(text: str, limit: int = 300) -> str:
    t = " ".join(text.split())
    return t if len(t) <= limit else t[: limit - 1].rstrip() + "…"


def _fabrication_why(built: Built, pools: list[Pool]) -> str:
    """Why ``pools`` hold no fabrication, from ``build.json`` and the pools' fabrication notes."""
    m = built.manifest
    if not m:
        return f"the build has no {MANIFEST_FILE}, so whether fabrication ran is not recorded"
    notes = [p.notes.get("fabrication") or {} for p in pools]
    if m.get("fabrication") != "done" or not (m.get("model") or any(n.get("fabricator") == "exact" for n in notes)):
        if m.get("fabricator") == "none":
            return "fabrication was skipped (`trek ctrl build --fabricator none`)"
        return "fabrication was skipped: the build had no model (`trek ctrl build --model`)"
    attempts = [a for n in notes for a in n.get("attempts", [])]
    kinds = Counter(str(a.get("kind") or a.get("outcome") or "?") for a in attempts
                    if a.get("outcome") != "accepted")
    pending = sum(1 for n in notes if n.get("pending"))
    reasons = sorted({str(n["reason"]) for n in notes if n.get("reason")})
    exact_only = bool(notes) and all(n.get("fabricator") == "exact" for n in notes if n)
    who = "the exact fabricator" if exact_only else (m.get("model") or "the fabricator")
    why = f"{who} wrote none that passed the checks"
    if reasons:
        why += f" ({'; '.join(reasons)})"
    if attempts:
        how = ", ".join(f"{k} {v}" for k, v in kinds.most_common())
        why += f" ({len(attempts)} attempts for {len(pools)} questions rejected: {how})"
    if pending:
        why += f"; {pending} questions still pending (run the build again)"
    return why


def _missing_why(built: Built, pools: list[Pool], role: str, question_id: str | None) -> str:
    if question_id is not None and any(p.role(role) for p in built.pools):
        return f"question {question_id} has none (other questions of the build do)"
    if role == "fabrication":
        return _fabrication_why(built, pools)
    if role == "republication":
        return "the build made none (no outdated or relevance document to republish)"
    return f"the pools of this build hold no {role} document"


def distraction_examples(built: Built, question_id: str | None = None) -> pd.DataFrame:
    """Table 2: one example per distractor type (outdated, relevance, republication, fabrication).

    Takes the first question (or ``question_id``) that has a document of the type. Fabrications
    show their edits as a diff against the gold window; a type the build lacks is listed as
    missing with what happened, from ``build.json`` and the pools' notes (no model given; the
    model's fabrications all failed the checks, and how; the pools hold none).
    """
    rows: list[dict[str, Any]] = []
    pools = [p for p in built.pools if question_id is None or p.question.id == question_id]
    if not pools:
        raise KeyError(f"no pool for question {question_id!r} in {built.folder}")
    for role in ("outdated", "relevance", "republication", "fabrication"):
        pool = next((p for p in pools if p.role(role)), None)
        if pool is None:
            why = _missing_why(built, pools, role, question_id)
            rows.append({"type": role, "question": "", "reference": "", "document": "", "date": "",
                         "url": "", "answer": "", "detail": f"(no example: {why})"})
            continue
        d = pool.role(role)[0]
        detail = ""
        if role == "republication":
            detail = f"from {d.metadata.get('source_doc')} dated {d.metadata.get('original_date')}"
        elif role == "fabrication":
            src = next(x for x in pool.documents if x.id == d.metadata["source_doc"])
            lo, hi = d.metadata["window"]
            detail = edit_diff(src.text[lo:hi], d.text)
        rows.append({
            "type": role,
            "question": pool.question.question,
            "reference": pool.question.answers[0],
            "document": _excerpt(d.text),
            "date": d.date.isoformat() if d.date else "",
            "url": d.url,
            "answer": d.supports_answer or "",
            "detail": detail,
        })
    return pd.DataFrame(rows).set_index("type")


#: The shortcut heuristics in words (trek.ctrl.shortcuts says exactly what each does).
HEURISTIC_NAMES = {
    "latest": "latest-dated document's answer",
    "majority": "majority answer",
    "latest_real_domain": "latest document on a real domain",
}


def wilson_share(p: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a mean ``p`` (in [0, 1]) of ``n`` scores in [0, 1]: the usual
    formula with the mean in place of k/n (for 0/1 scores it is :func:`trek.stats.wilson_ci`)."""
    from scipy.stats import norm

    if n <= 0 or p != p:
        return (float("nan"), float("nan"))
    z = float(norm.ppf(0.5 + level / 2))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def shortcut_table(built: Built, conditions: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Mean heuristic accuracy (%) per condition (rows) and heuristic (columns ``latest``,
    ``majority``, ``latest_real_domain``) over the condition's questions (a tie scores its expected
    share), each with its 95% Wilson interval (``<heuristic> low``, ``<heuristic> high``:
    :func:`wilson_share`), and the number of questions ``n``."""
    df = audit(built.contexts, built.answers)
    if conditions is not None:
        df = df[df["condition"].isin(conditions)]
    table = df.pivot_table(index="condition", columns="heuristic", values="score", aggfunc="mean") * 100
    table = table.reindex(columns=list(HEURISTICS))
    n = df.groupby("condition")["question_id"].nunique()
    for h in HEURISTICS:
        bounds = [wilson_share(v / 100, int(n[c])) for c, v in table[h].items()]
        table[f"{h} low"] = [100 * lo for lo, _ in bounds]
        table[f"{h} high"] = [100 * hi for _, hi in bounds]
    table = table[[c for h in HEURISTICS for c in (h, f"{h} low", f"{h} high")]]
    table["n"] = n
    return table.reindex(_order(list(table.index)))


def plot_shortcuts(table: pd.DataFrame, title: str):
    """Horizontal grouped bars: one group per condition (named in words, its ``n`` beside it
    where the conditions' counts differ), one bar per heuristic (accuracy ceiling, %, named in
    words) in the palette's colour with its 95% interval."""
    import matplotlib.pyplot as plt
    import numpy as np

    from trek.report.figures import ZERO_MARK, drawn_legend, wrapped
    from trek.report.titles import condition_name

    conds = list(table.index)
    ns = table["n"].astype(int)
    same_n = ns.nunique() == 1
    names = [condition_name(c) + ("" if same_n else f", n={ns[c]}") for c in conds]
    colour = colours("heuristic", HEURISTICS)
    fig, ax = plt.subplots(figsize=(6.4, 0.42 * len(conds) + 1.6))
    y = np.arange(len(conds))
    each = 0.8 / len(HEURISTICS)
    for i, h in enumerate(HEURISTICS):
        vals = table[h].to_numpy(dtype=float)
        err = np.vstack([vals - table[f"{h} low"].to_numpy(dtype=float),
                         table[f"{h} high"].to_numpy(dtype=float) - vals]).clip(0)
        ys = y - 0.4 + each * (i + 0.5)
        ax.barh(ys, vals, each, color=colour[h], label=HEURISTIC_NAMES[h], xerr=err,
                error_kw={"elinewidth": 0.7, "capsize": 1.5, "ecolor": "#333333"})
        for yi in ys[vals == 0]:
            ax.annotate(ZERO_MARK, (0, yi), xytext=(1.5, 0), textcoords="offset points", ha="left", va="center",
                        fontsize=6, color=colour[h], gid="zero-mark")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.axvline(100, color="grey", lw=0.5, ls=":")
    ax.set_xlim(0, 105)
    ax.set_xlabel("heuristic accuracy (%), 95% Wilson interval" + (f", n={ns.iloc[0]} questions each" if same_n else ""))
    ax.set_title(wrapped(title, 6.0, 10))
    ax.legend(*drawn_legend([ax], [HEURISTIC_NAMES[h] for h in HEURISTIC_COLOURS]), title="heuristic (reads only "
              "dates, answers and domains)", frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.07 if same_n
              else -0.05), ncol=3, fontsize=7, title_fontsize=8)
    fig.tight_layout()
    return fig
