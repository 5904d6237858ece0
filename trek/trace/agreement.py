"""Agreement between a reviewer and TrekTrace (paper appendix B.7): ``trek trace agreement``.

Reads the checklist of a filled review workbook (:mod:`trek.trace.review`). Rows are sorted
into:

* not reviewed — no reviewer cell filled; left out and counted;
* reference errors — ``reference valid`` = no; system-independent, left out and counted;
* judge errors — ``original judge correct`` = no (and the reference valid); likewise;
* system-related cases — everything else. The reviewer's labels are the label columns marked
  ``yes`` (a blank label cell counts as no).

Over the system-related cases: Cohen's kappa overall, over every (case, label) yes/no decision
(labels flattened per case, :func:`trek.stats.multilabel_kappa`), and per label
(:func:`trek.stats.cohens_kappa`), a confusion table per label (both, TrekTrace only, reviewer
only, neither) and the list of cases where the label sets differ.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from trek import textable
from trek.stats import cohens_kappa, multilabel_kappa
from trek.trace.labels import LABELS
from trek.trace.review import (
    JUDGE_CORRECT,
    LABEL_SEPARATOR,
    NOTES,
    REFERENCE_VALID,
    TREKTRACE_LABELS,
    read_checklist,
    reviewer_column,
)

__all__ = ["Agreement", "agreement", "agreement_from_rows"]


@dataclass
class Agreement:
    """The result of :func:`agreement` (see the module docstring)."""

    cases: int
    kappa: float
    per_label: pd.DataFrame
    disagreements: pd.DataFrame
    not_reviewed: int = 0
    reference_errors: int = 0
    judge_errors: int = 0
    excluded_ids: dict[str, list[str]] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [
            f"Cohen's kappa, reviewer vs TrekTrace, over {self.cases} system-related case(s) "
            f"x {len(LABELS)} labels: {self.kappa:.3f}",
            f"excluded: {self.reference_errors} reference error(s), {self.judge_errors} judge error(s) "
            f"(system-independent); {self.not_reviewed} row(s) not reviewed",
            "",
            textable.frame(self.per_label, float_format=lambda v: f"{v:.3f}"),
            "",
        ]
        if self.disagreements.empty:
            lines.append("no disagreements")
        else:
            lines.append(f"{len(self.disagreements)} disagreement(s):")
            lines.append(textable.frame(self.disagreements, index=False))
        return "\n".join(lines)


def _yes(value: Any) -> bool | None:
    s = str(value).strip().lower()
    if s in ("yes", "y", "true", "1", "x"):
        return True
    if s in ("no", "n", "false", "0"):
        return False
    if s == "":
        return None
    raise ValueError(f"reviewer cell {value!r}: use yes or no")


def agreement_from_rows(rows: list[dict[str, Any]]) -> Agreement:
    """:func:`agreement` over checklist rows (dicts keyed by the workbook's headers)."""
    system: list[tuple[str, frozenset[str], frozenset[str], str]] = []
    excluded: dict[str, list[str]] = {"not reviewed": [], "reference error": [], "judge error": []}
    label_cols = [reviewer_column(lab) for lab in LABELS]
    for i, row in enumerate(rows, start=2):
        case = f"{row.get('run', '')}:{row.get('question_id', '')}".strip(":") or f"row {i}"
        try:
            ref_ok = _yes(row.get(REFERENCE_VALID, ""))
            judge_ok = _yes(row.get(JUDGE_CORRECT, ""))
            marks = {lab: _yes(row.get(col, "")) for lab, col in zip(LABELS, label_cols, strict=True)}
        except ValueError as e:
            raise ValueError(f"checklist row {i} ({case}): {e}") from None
        if ref_ok is None and judge_ok is None and all(v is None for v in marks.values()):
            excluded["not reviewed"].append(case)
        elif ref_ok is False:
            excluded["reference error"].append(case)
        elif judge_ok is False:
            excluded["judge error"].append(case)
        else:
            cell = str(row.get(TREKTRACE_LABELS, ""))
            trek = frozenset(x.strip() for x in cell.split(LABEL_SEPARATOR.strip()) if x.strip())
            unknown = trek - set(LABELS)
            if unknown:
                raise ValueError(f"checklist row {i} ({case}): unknown TrekTrace label(s) {sorted(unknown)}")
            reviewer = frozenset(lab for lab, v in marks.items() if v)
            system.append((case, trek, reviewer, str(row.get(NOTES, ""))))
    if not system:
        raise ValueError("no reviewed system-related case: fill in the reviewer columns of the checklist")
    kappa = multilabel_kappa([s[1] for s in system], [s[2] for s in system], LABELS)
    rows_out = []
    for lab in LABELS:
        t = [lab in s[1] for s in system]
        r = [lab in s[2] for s in system]
        rows_out.append({
            "label": lab,
            "kappa": cohens_kappa(t, r),
            "both": sum(a and b for a, b in zip(t, r, strict=True)),
            "trektrace only": sum(a and not b for a, b in zip(t, r, strict=True)),
            "reviewer only": sum(b and not a for a, b in zip(t, r, strict=True)),
            "neither": sum(not a and not b for a, b in zip(t, r, strict=True)),
        })
    per_label = pd.DataFrame(rows_out).set_index("label")
    dis = pd.DataFrame(
        [{"case": c, "trektrace": ", ".join(x for x in LABELS if x in t), "reviewer": ", ".join(x for x in LABELS if x in r),
          "notes": n} for c, t, r, n in system if t != r],
        columns=["case", "trektrace", "reviewer", "notes"],
    )
    return Agreement(
        cases=len(system),
        kappa=kappa,
        per_label=per_label,
        disagreements=dis,
        not_reviewed=len(excluded["not reviewed"]),
        reference_errors=len(excluded["reference error"]),
        judge_errors=len(excluded["judge error"]),
        excluded_ids=excluded,
    )


def agreement(workbook: str | os.PathLike[str]) -> Agreement:
    """Cohen's kappa and the disagreements of a filled review workbook (see the module docstring)."""
    return agreement_from_rows(read_checklist(workbook))
