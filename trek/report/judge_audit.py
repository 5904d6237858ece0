"""The judge audit: an LLM judge against the exact judge, role by role (beyond the paper).

* :func:`audit_runs` — the runs to audit: given ones, else every graded run under ``runs_dir``
  (default: the recorded runs, ``data/runs/wild/*`` and ``data/runs/ctrl/runs/*``);
* :func:`audit_data` — the pairs of verdicts and the per-role table (:mod:`trek.audit`);
* :func:`plot_audit` — Cohen's kappa per role, a dot with its 95% interval, ``n`` under each role.

With no verdict given by both judges the table is empty and the figure says so (no error): record
some with ``trek grade RUN --judge oracle --audit-judge MODEL`` (and the same for ``trek trace``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from trek import runs
from trek.audit import ROLES, audit_pairs, audit_table, confusion, disagreements
from trek.report.paths import recorded_dir, resolve

__all__ = ["NO_DATA", "AuditData", "audit_runs", "audit_data", "audit_title", "plot_audit"]

NO_DATA = ("no audit data: no verdict was given by both an LLM judge and the exact judge in these runs "
           "(record some with `trek grade RUN --judge oracle --audit-judge MODEL` or `trek trace RUN --judge "
           "oracle --audit-judge MODEL`)")


@dataclass
class AuditData:
    """The pairs of verdicts (:func:`trek.audit.audit_pairs`) and their per-role table."""

    pairs: pd.DataFrame
    table: pd.DataFrame
    #: runs the exact judge cannot audit (not annotated: not TrekBench-Mini), with the reason
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.pairs.empty

    def describe(self) -> str:
        """What the audit covers: :data:`NO_DATA` when it is empty, and the runs left out, why."""
        lines = [NO_DATA] if self.empty else []
        lines += [f"not audited: {label}: {why}" for label, why in self.skipped.items()]
        return "\n".join(lines)

    def confusion(self, role: str) -> pd.DataFrame:
        return confusion(self.pairs, role)

    def disagreements(self) -> pd.DataFrame:
        return disagreements(self.pairs)

    def roles(self) -> list[str]:
        return [r for r in ROLES if r in set(self.pairs.loc[self.pairs["judge"].notna(), "role"])]


def audit_runs(runs_map: dict[str, str] | None = None,
               runs_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """``{label: run directory}``: ``runs_map`` as given (paths from the repository root), else every
    run with ``grades.jsonl`` directly under ``runs_dir`` or one level down (``wild/<system>``,
    ``ctrl/runs/<run>``), labelled by its path below ``runs_dir``; default ``data/runs``."""
    if runs_map:
        out = {str(k): resolve(v) for k, v in runs_map.items()}
        for label, p in out.items():
            if not p.is_dir():
                raise FileNotFoundError(f"run '{label}': {p} does not exist")
        return out
    root = resolve(runs_dir) if runs_dir else recorded_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"no runs folder at {root}")
    found = sorted({p.parent for p in root.rglob(runs.GRADES)})
    return {str(p.relative_to(root)): p for p in found}


def audit_data(run_dirs: dict[str, Path]) -> AuditData:
    """The audit of ``run_dirs`` (empty when no verdict was given by both judges). A run the exact
    judge cannot audit (its questions or pages are not annotated, e.g. a real Wild run) is left
    out and named in :attr:`AuditData.skipped`; it never counts as agreement or disagreement."""
    from trek.annotations import MissingAnnotation
    from trek.datasets.mini import MiniBenchmarkError

    parts, skipped = [], {}
    for label, d in run_dirs.items():
        try:
            parts.append(audit_pairs({label: d}))
        except (MissingAnnotation, MiniBenchmarkError) as e:
            skipped[label] = str(e)
    pairs = pd.concat(parts, ignore_index=True) if parts else audit_pairs({})
    table = audit_table(pairs).round({"agreement_binary": 1, "agreement_outcomes": 1, "kappa": 3, "kappa_low": 3, "kappa_high": 3,
                                      "exact_yes": 1, "judge_yes": 1})
    return AuditData(pairs, table, skipped)


def audit_title(data: AuditData, run_dirs: dict[str, Path]) -> str:
    """The audit's title, naming the audited judge(s) and the runs (:func:`trek.report.titles.runs_title`):
    ``Judge audit: SmolLM2-135M-Instruct-Q4_1 (audited) vs the exact judge (...)``."""
    from trek.report.titles import runs_title

    judges = sorted({str(m) for m in data.pairs["judge_model"].dropna()}) if not data.empty else []
    who = ", ".join(judges) or "LLM judge"
    return runs_title(f"Judge audit: {who} (audited) vs the exact judge", run_dirs, benchmark="TrekBench-Mini")


def plot_audit(data: AuditData, title: str) -> plt.Figure:
    """Cohen's kappa of the audit judge against the exact judge per role: one encoding, a dot at the
    kappa with its 95% interval as a line, ``n`` under each role. A kappa without an interval (one
    judge gave one verdict throughout) is a dot alone, and an undefined one (both did) draws
    nothing; each says why in a note at its place."""
    from trek.report.figures import wrapped

    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.set_title(wrapped(title, 7, 9), fontsize=9)
    if data.empty:
        ax.text(0.5, 0.5, "no audit data", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    t = data.table
    x = np.arange(len(t))
    k = t["kappa"].to_numpy(dtype=float)
    lo, hi = t["kappa_low"].to_numpy(dtype=float), t["kappa_high"].to_numpy(dtype=float)
    has = ~np.isnan(lo) & ~np.isnan(k)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.errorbar(x[has], k[has], yerr=[k[has] - lo[has], hi[has] - k[has]], fmt="o", color=_DOT, ecolor=_DOT,
                elinewidth=1.4, capsize=4, markersize=6, label="kappa, 95% interval")
    alone = ~has & ~np.isnan(k)
    ax.plot(x[alone], k[alone], "o", color=_DOT, markersize=6)
    notes = t["kappa_note"].fillna("").astype(str).to_numpy() if "kappa_note" in t else np.full(len(t), "")
    judge_yes = t["judge_yes"].to_numpy(dtype=float) if "judge_yes" in t else np.full(len(t), np.nan)
    for i in np.flatnonzero(~has):  # kappa undefined or without an interval: the reason at its place
        undefined = bool(np.isnan(k[i]))
        reason = notes[i].split(": ", 1)[-1].split(" (kappa")[0] if notes[i] else {
            100.0: "judge said yes every time", 0.0: "judge said no every time"}.get(judge_yes[i], "")
        reason = reason.replace("the audited judge", "audited judge").replace("the exact judge", "exact judge")
        why = ("undefined" if undefined else "no interval") + (":\n" + reason.replace(" said", "\nsaid").replace(
            " every time", "\nevery time") if reason else "")
        y = 0.0 if undefined else k[i]
        ax.annotate(why, (x[i], y), xytext=(0, 8), textcoords="offset points", ha="center", va="bottom", fontsize=7,
                    color="#444444")
    ax.set_xticks(x, [f"{r}\nn={n}" for r, n in zip(t.index, t["n"], strict=True)], fontsize=8)
    ax.set_xlim(-0.6, len(t) - 0.4)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Cohen's kappa vs exact judge")
    fig.tight_layout()
    return fig


#: The colour of the audit's dots and intervals.
_DOT = "#4477AA"
