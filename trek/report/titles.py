"""Titles and captions: which model and which question set a table or figure was made from.

Every title of a figure or table names the models of the runs behind it, the question set and
who judged ("SmolLM2-135M-Instruct-Q4_1; TrekBench-Mini, 36 questions; judged by the exact
judge"); numbers made by a scripted demo model are marked DEMO DATA.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from trek.runs import GRADES, TRACE

__all__ = ["demo_label", "benchmark_of", "judges_of", "runs_title", "delta_note"]


def delta_note(reference: str) -> str:
    """The one sign convention of every Δ (and ``delta_pp``) in Trek's tables, for a caption:
    accuracy minus the reference's, in points, negative when lower. (The paper's Table 9 gives
    the decrease from OO instead: its Δ is this one's negation.)"""
    return f"Δ = accuracy − {reference} accuracy, in points (negative: lower than {reference})"

#: How the exact judge (``--judge oracle``) is named in titles.
EXACT_JUDGE = "the exact judge"
#: Judges that titles name otherwise than by their model name (the exact judge's is ``oracle``).
JUDGE_TITLES = {"oracle": EXACT_JUDGE}


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
    exact judge (model ``oracle``) as :data:`EXACT_JUDGE`."""
    seen: dict[str, None] = {}
    for name, pick in ((GRADES, lambda r: [r.get("judge_model")]),
                       (TRACE, lambda r: [str(v).split(" @ ")[0] for k, v in (r.get("models") or {}).items()
                                                  if k in ("diagnostic", "analysis")])):
        path = Path(run_dir) / name
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a torn last line: the loaders report it; a title need not
                for j in pick(rec) if isinstance(rec, dict) else []:
                    if j:
                        seen[JUDGE_TITLES.get(str(j), str(j))] = None
    return list(seen)


def runs_title(what: str, run_dirs: Mapping[str, str | os.PathLike[str]] | Iterable[str | os.PathLike[str]],
               benchmark: str = "TrekBench-Wild") -> str:
    """``what`` with the models and the question set of the runs it was made from, e.g.
    ``Accuracy (%) (SmolLM2-135M-Instruct-Q4_1; TrekBench-Mini, 36 questions; judged by the
    exact judge)`` (the judges from :func:`judges_of`; none named when no run holds a verdict).

    The question set is the runs' recorded ``benchmark`` (``run.json`` config), else
    :func:`benchmark_of` their questions with ``benchmark`` as the fallback. A run made with a
    scripted demo model (``config.demo``) makes the title start with DEMO DATA.
    """
    from trek import runs

    dirs = list(run_dirs.values()) if isinstance(run_dirs, Mapping) else list(run_dirs)
    models: dict[str, None] = {}
    names: dict[str, None] = {}
    ids: set[str] = set()
    judges: dict[str, None] = {}
    demo = False
    for d in dirs:
        judges.update(dict.fromkeys(judges_of(d)))
        meta = runs.read_meta(d)
        if meta is not None:
            models[str(meta.model)] = None
            demo = demo or bool(meta.config.get("demo"))
            if meta.config.get("benchmark"):
                names[str(meta.config["benchmark"])] = None
        ids |= set(runs.load_questions(d))
    data = ", ".join(names) or benchmark_of(ids, benchmark)
    who = ", ".join(models) or "unknown model"
    judged = f"; judged by {', '.join(judges)}" if judges else ""
    return demo_label(demo, f"{what} ({'scripted ' if demo else ''}{who}; {data}, {len(ids)} questions{judged})")
