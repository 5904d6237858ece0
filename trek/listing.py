"""What ``trek runs list`` shows: one line per run folder under a root (like ``inspect log
list``), read from the run's files without any model call."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from trek import runs

__all__ = ["find_runs", "describe_run", "MAX_DEPTH"]

#: How deep below the root run folders are looked for (epoch folders sit one level inside a run).
MAX_DEPTH = 4


def find_runs(root: str | os.PathLike[str]) -> list[Path]:
    """Every folder at most :data:`MAX_DEPTH` levels below ``root`` (``root`` included) that holds a
    ``run.json``, in path order; hidden folders (``.venv``, ``.git``) are not entered."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"{base} is not a folder")
    found = []
    for here, dirs, files in os.walk(base):
        depth = len(Path(here).relative_to(base).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < MAX_DEPTH else []
        if runs.META in files:
            found.append(Path(here))
    return sorted(found)


def _system(meta: Any) -> str:
    cfg = meta.config
    if meta.kind == "ctrl":
        return f"{cfg.get('method', '?')} {cfg.get('condition', '')}".strip()
    system = cfg.get("system") if isinstance(cfg.get("system"), dict) else {}
    name = system.get("system") or meta.kind
    search = system.get("search")
    return f"{name}/{search}" if search and name != "no-search" else str(name)


def _status(df: Any, traced: int, failures: int, has_trace: bool) -> str:
    unfinished = int((~df["answer_status"].isin(("ok", "no_answer"))).sum())
    if unfinished:
        return f"answering ({unfinished} left)"
    if (df["outcome"] == "ungraded").all():
        return "answered"
    if df["outcome"].isin(("ungraded", "pending", "unparsed", "undecided")).any():
        return "grading"
    if not has_trace:
        return "graded"
    return "traced" if traced >= failures else "tracing"


def describe_run(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The listing of one run: ``system``, ``model``, ``n`` (questions), ``accuracy`` (percent over
    every question; NaN before any grade), ``traced`` / ``failures`` (decided wrong answers with a
    finished trace, of all of them), ``cost`` (answers and grades, US dollars; NaN when a model has
    no price) and ``status`` (answering, answered, grading, graded, tracing, traced)."""
    from trek.types import iter_json_lines

    rd = Path(run_dir)
    meta = runs.read_meta(rd)
    if meta is None:
        raise FileNotFoundError(f"{rd / runs.META} does not exist")
    if not (rd / runs.QUESTIONS).exists():
        return {"system": _system(meta), "model": meta.model or "?", "n": 0, "accuracy": math.nan, "traced": 0,
                "failures": 0, "cost": math.nan, "status": "started"}
    df = runs.frame(rd, ["question_id", "answer_status", "outcome", "correct", "cost_usd", "judge_cost_usd"])
    graded = df["outcome"] != "ungraded"
    failures = set(df.loc[df["outcome"].isin(("incorrect", "not_attempted")), "question_id"])
    done = set()
    if (rd / runs.TRACE).exists():
        for _, rec in iter_json_lines(rd / runs.TRACE, torn_tail=True):
            (done.add if rec.get("status") == "done" else done.discard)(rec.get("question_id"))
    cost = float(df["cost_usd"].sum(min_count=1)) + float(df["judge_cost_usd"].fillna(0).sum())
    return {"system": _system(meta), "model": meta.model or "?", "n": len(df),
            "accuracy": 100.0 * df["correct"].mean() if graded.any() else math.nan,
            "traced": len(done & failures), "failures": len(failures), "cost": cost,
            "status": _status(df, len(done & failures), len(failures), (rd / runs.TRACE).exists())}
