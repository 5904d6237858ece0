"""Titles and captions: which model and which question set a table or figure was made from.

Every title of a figure or table names the models of the runs behind it, each question set with
its count and who judged in which role ("SmolLM2-135M-Instruct-Q4_1; TrekBench-Mini, 36
questions; graded and traced by the exact judge"); numbers made by a scripted demo model are
marked DEMO DATA.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from trek.runs import GRADES, TRACE

__all__ = ["CONDITION_NAMES", "CONDITION_NOTES", "condition_name", "condition_note", "with_conditions", "demo_label", "benchmark_of", "judges_of", "judge_roles", "judges_note", "question_sets", "runs_title",
           "delta_note"]


def delta_note(reference: str) -> str:
    """The one sign convention of every Δ (and ``delta_pp``) in Trek's tables, for a caption:
    accuracy minus the reference's, in points, negative when lower. (The paper's Table 9 gives
    the decrease from OO instead: its Δ is this one's negation.)"""
    return f"Δ = accuracy − {reference} accuracy, in points (negative: lower than {reference})"

#: How the exact judge (``--judge oracle``) is named in titles.
EXACT_JUDGE = "the exact judge"
#: Judges that titles name otherwise than by their model name (the exact judge's is ``oracle``).
JUDGE_TITLES = {"oracle": EXACT_JUDGE}


#: What each Ctrl condition code stands for, for captions (trek.ctrl.conditions has the rules).
CONDITION_NOTES: dict[str, str] = {
    "OO": "Outdated Only (outdated documents + gold)",
    "MND": "Mixed Natural Distractors (outdated and relevant documents + gold)",
    "SAA": "Source-Aware Adversarial (outdated, relevant, republished and fabricated documents + gold; URLs shown)",
    "SBA": "Source-Blind Adversarial (SAA's documents, URLs hidden)",
    "GOLD": "gold documents only",
    "OO:timeswap": "OO with each gold document's date exchanged with an outdated one's",
    "SAA:domainswap": "SAA with the gold shown on a fictitious domain and a synthetic document on the gold's",
}


#: Plain names of the Ctrl condition codes, for a figure's axis (:func:`condition_name`).
CONDITION_NAMES: dict[str, str] = {
    "OO": "Outdated Only (OO)", "MND": "Mixed Natural Distractors (MND)", "SAA": "Source-Aware Adversarial (SAA)",
    "SBA": "Source-Blind Adversarial (SBA)", "GOLD": "gold only (GOLD)", "OO:timeswap": "OO, dates swapped",
    "SAA:domainswap": "SAA, domains swapped",
}


def condition_name(code: str) -> str:
    """A Ctrl condition in words (``OO:gold=first`` -> ``OO, gold first``, ``OO:k=5`` -> ``OO, 5
    outdated documents``); a code it does not know as it is."""
    if code in CONDITION_NAMES:
        return CONDITION_NAMES[code]
    if code.startswith("OO:gold="):
        where = code.split("=", 1)[1]
        return f"OO, gold {where}" if where in ("first", "last") else f"OO, gold at {where}"
    if code.startswith("OO:k="):
        return f"OO, {code.split('=', 1)[1]} outdated documents"
    return code


def _codes_in(source: object) -> list[str]:
    """Every text of ``source`` (names, or a DataFrame's index, columns and text cells), split at
    spaces and ``_`` so that a column such as ``acc_OO`` or ``OO Δ`` names its condition."""
    import re

    import pandas as pd

    texts: list[str] = []
    if isinstance(source, pd.DataFrame):
        for index in (source.index, source.columns):
            for value in index:
                texts += [str(v) for v in (value if isinstance(value, tuple) else (value,))]
        for col in source.columns:
            if not pd.api.types.is_numeric_dtype(source[col]):
                texts += [str(v) for v in source[col]]
    else:
        texts = [str(v) for v in source]  # type: ignore[attr-defined]
    return [w for t in texts for w in re.split(r"[\s_,;()]+", t) if w]


def condition_note(source: object) -> str:
    """A caption's key to the Ctrl condition codes that ``source`` (names, or a DataFrame: its
    index, columns and text cells) holds: ``OO: Outdated Only (...); ...``, in Ctrl's order; the
    ``OO:gold=first``-style positions and ``OO:k=10``-style budgets in one phrase each. Empty
    when it holds none."""
    from trek.ctrl.conditions import ALL_CONDITIONS

    found = set(_codes_in(source))
    parts = [f"{c}: {CONDITION_NOTES[c]}" for c in (*ALL_CONDITIONS, *CONDITION_NOTES) if c in found
             and c in CONDITION_NOTES]
    parts = list(dict.fromkeys(parts))
    if any(c.startswith("OO:gold=") for c in found):
        parts.append("OO:gold=P: OO with the gold block at position P of the documents")
    if any(c.startswith("OO:k=") for c in found):
        parts.append("OO:k=N: OO with N outdated documents")
    return "; ".join(parts)


def with_conditions(title: str, source: object) -> str:
    """``title`` followed by the key to the condition codes ``source`` shows (:func:`condition_note`),
    for a caption; ``title`` alone when it shows none."""
    note = condition_note(source)
    return f"{title}; {note}" if note else title


def demo_label(is_demo: bool, title: str) -> str:
    """Prefix a title with DEMO DATA when the numbers come from a scripted demo model."""
    return f"DEMO DATA (not a result): {title}" if is_demo else title


def benchmark_of(question_ids: Iterable[str], default: str) -> str:
    """``TrekBench-Mini`` when every id is one of the bundled benchmark's (``mini:...``), else ``default``."""
    ids = list(question_ids)
    return "TrekBench-Mini" if ids and all(str(q).startswith("mini:") for q in ids) else default


def judges_of(run_dir: str | os.PathLike[str]) -> list[str]:
    """The judges that decided a run's grades (``grades.jsonl``) and TrekTrace verdicts
    (``trace.jsonl``, its diagnostic and analysis roles), in order of first appearance; the
    exact judge (model ``oracle``) as :data:`EXACT_JUDGE`. :func:`judge_roles` keeps them apart."""
    roles = judge_roles(run_dir)
    return list(dict.fromkeys([*roles["graded"], *roles["traced"]]))


def judge_roles(run_dir: str | os.PathLike[str]) -> dict[str, list[str]]:
    """``{"graded": [...], "traced": [...]}``: the judges of a run's grades (``grades.jsonl``)
    and of its TrekTrace verdicts (``trace.jsonl``: the diagnostic and analysis judges), each in
    order of first appearance, the exact judge (model ``oracle``) as :data:`EXACT_JUDGE`."""
    out: dict[str, list[str]] = {}
    for role, name, pick in (
            ("graded", GRADES, lambda r: [r.get("judge_model")]),
            ("traced", TRACE, lambda r: [str(v).split(" @ ")[0] for k, v in (r.get("models") or {}).items()
                                         if k in ("diagnostic", "analysis")])):
        seen: dict[str, None] = {}
        path = Path(run_dir) / name
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue  # a torn last line: the loaders report it; a title need not
                    for j in pick(rec) if isinstance(rec, dict) else []:
                        if j:
                            seen[JUDGE_TITLES.get(str(j), str(j))] = None
        out[role] = list(seen)
    return out


def judges_note(graded: list[str], traced: list[str]) -> str:
    """Who judged, under the role each played: ``graded and traced by X`` when the same judges did
    both, else ``graded by X`` and ``TrekTrace judged by Y``; empty when nobody judged."""
    if graded and graded == traced:
        return f"graded and traced by {', '.join(graded)}"
    parts = ([f"graded by {', '.join(graded)}"] if graded else []) + \
        ([f"TrekTrace judged by {', '.join(traced)}"] if traced else [])
    return "; ".join(parts)


#: The benchmark a question id of Trek's own sets belongs to (by its prefix); any other question is
#: named by its ``dataset`` (``custom`` for an import of one's own questions).
ID_BENCHMARKS = {"mini:": "TrekBench-Mini"}
#: The datasets of TrekBench-Wild.
WILD_DATASETS = ("freshqa", "infodeepseek", "sealqa")


def question_sets(run_dirs: Iterable[str | os.PathLike[str]], benchmark: str = "TrekBench-Wild") -> dict[str, int]:
    """``{question set: number of distinct questions}`` over the runs: a run's recorded
    ``benchmark`` (``run.json`` config) names all its questions; otherwise each question is
    TrekBench-Mini by its id (``mini:``), ``benchmark`` when its dataset is one of Wild's
    (TrekBench-Wild, or TrekBench-Ctrl for Ctrl runs), and else its own ``dataset`` (``custom``...).
    In order of first appearance."""
    from trek import runs

    ids: dict[str, set[str]] = {}
    for d in run_dirs:
        meta = runs.read_meta(d)
        recorded = str(meta.config["benchmark"]) if meta is not None and meta.config.get("benchmark") else None
        for qid, q in runs.load_questions(d).items():
            name = recorded or next((b for p, b in ID_BENCHMARKS.items() if str(qid).startswith(p)), None) or (
                benchmark if q.dataset in WILD_DATASETS else str(q.dataset or "unnamed"))
            ids.setdefault(name, set()).add(str(qid))
    return {k: len(v) for k, v in ids.items()}


def runs_title(what: str, run_dirs: Mapping[str, str | os.PathLike[str]] | Iterable[str | os.PathLike[str]],
               benchmark: str = "TrekBench-Wild") -> str:
    """``what`` with the models and the question sets of the runs it was made from, e.g.
    ``Accuracy (%) (SmolLM2-135M-Instruct-Q4_1; TrekBench-Mini, 36 questions; graded and traced by
    the exact judge)``: each question set with its own count (:func:`question_sets`: ``TrekBench-Mini,
    12 questions + custom, 3 questions``) and the judges under the role they played
    (:func:`judge_roles`, :func:`judges_note`; none named when no run holds a verdict).
    ``benchmark`` names the questions of Wild's datasets outside Mini (and a set of runs that
    hold no questions). A run made with a scripted demo model
    (``config.demo``) makes the title start with DEMO DATA.
    """
    from trek import runs

    dirs = list(run_dirs.values()) if isinstance(run_dirs, Mapping) else list(run_dirs)
    models: dict[str, None] = {}
    graded: dict[str, None] = {}
    traced: dict[str, None] = {}
    demo = False
    for d in dirs:
        roles = judge_roles(d)
        graded.update(dict.fromkeys(roles["graded"]))
        traced.update(dict.fromkeys(roles["traced"]))
        meta = runs.read_meta(d)
        if meta is not None:
            models[str(meta.model)] = None
            demo = demo or bool(meta.config.get("demo"))
    sets = question_sets(dirs, benchmark)
    data = " + ".join(f"{name}, {n} questions" for name, n in sets.items()) or f"{benchmark}, 0 questions"
    who = ", ".join(models) or "unknown model"
    judged = judges_note(list(graded), list(traced))
    return demo_label(demo, f"{what} ({'scripted ' if demo else ''}{who}; {data}{'; ' + judged if judged else ''})")
