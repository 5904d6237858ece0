"""TrekBench-Wild: the fast-changing subsets of FreshQA, InfoDeepSeek and SealQA.

The paper (§3.2, appendix B.1) keeps

* FreshQA: ``fact_type == fast-changing`` and ``num_hops == multi-hop``, TEST and DEV splits (49);
* InfoDeepSeek: ``time_sensitive`` and ``freshness`` both true, English fields (31);
* SealQA ``seal_hard``: ``freshness == fast-changing`` (64);

144 questions in all. :func:`load` reads the three source files from a data directory laid out as
``freshqa/*.csv``, ``infodeepseek/*.json`` and ``sealqa/sealqa_seal_hard.parquet`` and applies those
filters; :func:`summarize` turns the result into the tables of the paper (counts per dataset and
the distribution of reference years, Table 10).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trek.datasets.common import (
    DATA_DIR_ENV,
    LAYOUT,
    DatasetError,
    LoadReport,
    LoadResult,
    MissingDataError,
    default_data_dir,
)
from trek.datasets.freshqa import load_freshqa
from trek.datasets.infodeepseek import load_infodeepseek
from trek.datasets.sealqa import load_sealqa
from trek.types import Document, Question

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "DATASETS",
    "PAPER_COUNTS",
    "FILTERS",
    "WildBenchmark",
    "WildSummary",
    "find_source_files",
    "IncompleteDataError",
    "check_complete",
    "load",
    "select",
    "summarize",
    "year_distribution",
    "year_label",
    "describe_corpus",
]

DATASETS = ("freshqa", "infodeepseek", "sealqa")
#: Question counts of TrekBench-Wild reported in the paper.
PAPER_COUNTS = {"freshqa": 49, "infodeepseek": 31, "sealqa": 64}
UNSPECIFIED_YEAR = "unspecified"


def _freshqa_keep(q: Question) -> bool:
    md = q.metadata
    return (
        str(md.get("fact_type", "")).strip().lower() == "fast-changing"
        and str(md.get("num_hops", "")).strip().lower() == "multi-hop"
        and (q.split or "").strip().upper() in {"TEST", "DEV"}
    )


def _infodeepseek_keep(q: Question) -> bool:
    return q.metadata.get("time_sensitive") is True and q.metadata.get("freshness") is True


def _sealqa_keep(q: Question) -> bool:
    return str(q.metadata.get("freshness", "")).strip().lower() == "fast-changing"


@dataclass(frozen=True)
class WildFilter:
    description: str
    keep: Callable[[Question], bool]


FILTERS: dict[str, WildFilter] = {
    "freshqa": WildFilter(
        "fact_type == fast-changing and num_hops == multi-hop, splits TEST+DEV", _freshqa_keep
    ),
    "infodeepseek": WildFilter("time_sensitive and freshness", _infodeepseek_keep),
    "sealqa": WildFilter("seal_hard, freshness == fast-changing", _sealqa_keep),
}

_LOADERS: dict[str, Callable[..., LoadResult]] = {
    "freshqa": load_freshqa,
    "infodeepseek": load_infodeepseek,
    "sealqa": load_sealqa,
}


@dataclass
class WildBenchmark:
    """The TrekBench-Wild questions with one report per source dataset.

    Each report counts the rows read, the rows skipped as unreadable (non-strict loads only),
    the rows the paper's filter left out, and the rows kept.
    """

    questions: list[Question]
    reports: dict[str, LoadReport]
    files: dict[str, Path]
    data_dir: Path
    paper_counts: dict[str, int] = field(default_factory=lambda: dict(PAPER_COUNTS))

    def by_dataset(self) -> dict[str, list[Question]]:
        out: dict[str, list[Question]] = {name: [] for name in self.reports}
        for q in self.questions:
            out.setdefault(q.dataset, []).append(q)
        return out

    def counts(self) -> dict[str, int]:
        return {name: len(qs) for name, qs in self.by_dataset().items()}

    def matches_paper(self) -> bool:
        return self.counts() == self.paper_counts


def _missing_message(data_dir: Path, missing: list[str]) -> str:
    lines = [f"TrekBench-Wild source files missing under {data_dir}:"]
    for name in missing:
        lay = LAYOUT[name]
        lines.append(f"  - {name}: put the {lay.description} at {lay.relpath}")
        lines.append(f"    (looked for {', '.join(lay.patterns)})")
    lines.append(
        f"Fetch them with `trek data download --data-dir {data_dir}`, or copy them there by hand. "
        f"The data directory is --data-dir, else ${DATA_DIR_ENV}, else ./datasets."
    )
    return "\n".join(lines)


def find_source_files(
    data_dir: str | os.PathLike[str], datasets: Iterable[str] = DATASETS
) -> dict[str, Path]:
    """Locate each dataset's file by glob; raise MissingDataError listing what is missing.

    When a pattern matches several files the one at the standard relative path wins; if none
    of them is at that path the choice is ambiguous and reported as an error.
    """
    root = Path(data_dir)
    found: dict[str, Path] = {}
    missing: list[str] = []
    ambiguous: list[str] = []
    for name in datasets:
        lay = LAYOUT[name]
        chosen: Path | None = None
        for pattern in lay.patterns:
            hits = sorted(p for p in root.glob(pattern) if p.is_file())
            if not hits:
                continue
            standard = root / lay.relpath
            if len(hits) == 1:
                chosen = hits[0]
            elif standard in hits:
                chosen = standard
            else:
                ambiguous.append(f"{name}: several files match {pattern}: {', '.join(h.name for h in hits)}")
            break
        if chosen is not None:
            found[name] = chosen
        elif not any(a.startswith(f"{name}:") for a in ambiguous):
            missing.append(name)
    if ambiguous:
        raise MissingDataError(
            "cannot tell which source file to use under "
            f"{root} (keep only one, or name it as in the standard layout):\n  " + "\n  ".join(ambiguous)
        )
    if missing:
        raise MissingDataError(_missing_message(root, missing))
    return found


def select(name: str, result: LoadResult) -> tuple[list[Question], LoadReport]:
    """Apply the paper's filter for dataset ``name`` to a loader's result."""
    flt = FILTERS[name]
    kept = [q for q in result.questions if flt.keep(q)]
    rep = result.report
    report = LoadReport(
        dataset=rep.dataset,
        path=rep.path,
        row_kind=rep.row_kind,
        rows_read=rep.rows_read,
        rows_kept=len(kept),
        skipped=list(rep.skipped),
        rows_filtered_out=rep.rows_kept - len(kept),
        filter=flt.description,
    )
    return kept, report


def load(data_dir: str | os.PathLike[str] | None = None, *, strict: bool = True) -> WildBenchmark:
    """Load TrekBench-Wild from ``data_dir`` (default: ``$TREK_DATA_DIR``, else ``./datasets``).

    With ``strict=True`` any unreadable row raises :class:`~trek.datasets.common.DatasetError`;
    with ``strict=False`` such rows are skipped and listed in the reports.
    """
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    files = find_source_files(root)
    questions: list[Question] = []
    reports: dict[str, LoadReport] = {}
    for name in DATASETS:
        kwargs = {"subset": "seal_hard"} if name == "sealqa" else {}
        result = _LOADERS[name](files[name], strict=strict, **kwargs)
        kept, reports[name] = select(name, result)
        questions.extend(kept)
    return WildBenchmark(questions=questions, reports=reports, files=files, data_dir=root)


class IncompleteDataError(DatasetError):
    """A source file holds fewer TrekBench-Wild questions than the paper's benchmark (a file cut
    at a row boundary, an older export): the message names each short dataset and its file."""


def check_complete(benchmark: WildBenchmark) -> None:
    """Raise :class:`IncompleteDataError` when a dataset yields fewer questions than the paper's
    TrekBench-Wild (:data:`PAPER_COUNTS`); a file that reads cleanly but ends early (a CSV cut
    between two rows, a JSON list cut between two items) would otherwise run part of the
    benchmark without a word. Commands accept it with ``--allow-partial``."""
    counts = benchmark.counts()
    short = [(name, counts.get(name, 0), want) for name, want in benchmark.paper_counts.items()
             if counts.get(name, 0) < want]
    if not short:
        return
    parts = []
    for name, have, want in short:
        rep = benchmark.reports.get(name)
        where = f"{rep.path}: {rep.rows_read} rows read" if rep else str(benchmark.files.get(name, "?"))
        parts.append(f"{name} has {have} of its {want} questions ({want - have} missing; {where})")
    total = sum(counts.values())
    raise IncompleteDataError(
        "TrekBench-Wild is incomplete: " + "; ".join(parts) + ". Is a source file cut short or another version? "
        "Fetch it again with `trek data download --force`, or pass --allow-partial to run on the "
        f"{total} question(s) there are."
    )


# --------------------------------------------------------------------------------------------
# Summaries (pure functions over loaded records; used by `trek data info` and the notebooks).


def year_label(q: Question) -> str:
    """The reference year as written in the source (``2024``, ``before 2022``), or ``unspecified``."""
    if q.effective_year_raw:
        return q.effective_year_raw
    if q.effective_year is not None:
        return str(q.effective_year)
    return UNSPECIFIED_YEAR


def _year_order(label: str) -> tuple[float, int, str]:
    m = re.match(r"^(before|until)\s+(\d{4})$", label, re.I)
    if m:
        return (int(m.group(2)), 0, label)
    m = re.match(r"^(\d{4})$", label)
    if m:
        return (int(m.group(1)), 1, label)
    m = re.match(r"^(after|since)\s+(\d{4})$", label, re.I)
    if m:
        return (int(m.group(2)), 2, label)
    return (math.inf, 0, label)


def year_distribution(questions: Iterable[Question], datasets: Iterable[str] | None = None) -> pd.DataFrame:
    """Count questions per reference year (rows, ordered in time) and dataset (columns).

    ``before 2022`` sorts before ``2022``; questions without a year are counted under
    ``unspecified`` (last row). Missing combinations are 0.
    """
    import pandas as pd

    qs = list(questions)
    cols = list(datasets) if datasets is not None else sorted({q.dataset for q in qs}, key=_dataset_order)
    counts: dict[str, dict[str, int]] = {}
    for q in qs:
        counts.setdefault(year_label(q), {}).setdefault(q.dataset, 0)
        counts[year_label(q)][q.dataset] += 1
    rows = sorted(counts, key=_year_order)
    df = pd.DataFrame(
        [[counts[r].get(c, 0) for c in cols] for r in rows], index=pd.Index(rows, name="year"), columns=cols
    )
    return df.astype("int64")


def _dataset_order(name: str) -> tuple[int, str]:
    return (DATASETS.index(name), name) if name in DATASETS else (len(DATASETS), name)


@dataclass
class WildSummary:
    """Tables describing a loaded benchmark.

    ``overview``: one row per dataset (file, rows read/skipped/filtered out/kept, false-premise
    count, questions with an integer year, the paper's count). ``years``: Table 10 shape (years as
    rows, datasets as columns). ``skipped``: one row per skipped source row with the reason.
    """

    overview: pd.DataFrame
    years: pd.DataFrame
    skipped: pd.DataFrame


def summarize(benchmark: WildBenchmark) -> WildSummary:
    import pandas as pd

    by_ds = benchmark.by_dataset()
    names = sorted(benchmark.reports, key=_dataset_order)
    records = []
    for name in names:
        rep = benchmark.reports[name]
        qs = by_ds.get(name, [])
        records.append(
            {
                "dataset": name,
                "file": Path(rep.path).name,
                "filter": rep.filter or "",
                "rows_read": rep.rows_read,
                "rows_skipped": len(rep.skipped),
                "rows_filtered_out": rep.rows_filtered_out,
                "rows_kept": rep.rows_kept,
                "false_premise": sum(1 for q in qs if q.false_premise),
                "with_year": sum(1 for q in qs if q.effective_year is not None),
                "paper_count": benchmark.paper_counts.get(name),
            }
        )
    overview = pd.DataFrame.from_records(records).set_index("dataset") if records else pd.DataFrame()
    skipped = pd.DataFrame.from_records(
        [
            {
                "dataset": name,
                "where": f"{benchmark.reports[name].row_kind} {s.row}" if s.row is not None else "",
                "id": s.id,
                "field": s.field,
                "reason": s.reason,
            }
            for name in names
            for s in benchmark.reports[name].skipped
        ],
        columns=["dataset", "where", "id", "field", "reason"],
    )
    years = year_distribution(benchmark.questions, datasets=names)
    return WildSummary(overview=overview, years=years, skipped=skipped)


def describe_corpus(questions: Iterable[Question], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    """Counts for a question set with its documents (e.g. the bundled demo benchmark).

    Returns ``questions`` (per dataset, with false-premise count), ``documents`` (per role, with
    dated and undated counts) and ``years`` (as :func:`year_distribution`).
    """
    import pandas as pd

    qs = list(questions)
    docs = list(documents)
    q_rows: dict[str, dict[str, int]] = {}
    for q in qs:
        row = q_rows.setdefault(q.dataset, {"questions": 0, "false_premise": 0})
        row["questions"] += 1
        row["false_premise"] += int(q.false_premise)
    q_df = pd.DataFrame.from_dict(q_rows, orient="index", columns=["questions", "false_premise"])
    q_df = q_df.reindex(sorted(q_rows, key=_dataset_order))
    q_df.index.name = "dataset"
    d_rows: dict[str, dict[str, int]] = {}
    for d in docs:
        row = d_rows.setdefault(d.role, {"documents": 0, "dated": 0, "undated": 0})
        row["documents"] += 1
        row["dated" if d.date is not None else "undated"] += 1
    d_df = pd.DataFrame.from_dict(d_rows, orient="index", columns=["documents", "dated", "undated"])
    d_df = d_df.reindex(sorted(d_rows))
    d_df.index.name = "role"
    return {"questions": q_df, "documents": d_df, "years": year_distribution(qs)}
