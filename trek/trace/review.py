"""The review workbook (paper appendices B.6 and C.4): ``trek trace review RUN_DIR`` -> ``review.xlsx``.

Three sheets, each with a frozen header row, filters and readable column widths:

* ``checklist`` — one row per traced case (cases flagged by the stale-reference check first):
  what TrekTrace saw and decided (question, references, prediction, the flags E/Q/G/N, the
  labels, the evidence and probe answers), then empty columns for the reviewer: is the
  reference valid at the target time, was the original judge right, yes/no for each label,
  and notes. The reviewer columns accept ``yes``/``no`` (a drop-down).
* ``retrieval_audit`` — one row per gold URL: the retrieved URL with the same identity, the
  key evidence, the equivalent URLs and matched evidence the diagnostic judge reported, with a
  reviewer verdict and notes.
* ``taxonomy`` — the definitions of the labels and of the two system-independent outcomes.
* ``sample`` — with ``--sample N`` (:func:`trek.trace.shares.draw_sample`): how the checklist's
  cases were chosen (uniformly at random, the seed, the stratification, the population drawn
  from) and their question ids. The checklist then holds only those cases. Without it the
  workbook lists every fully traced case and records no sample: reviewing only some of them is a
  hand-picked set, which ``trek trace shares`` refuses for correction.

:func:`read_checklist` reads a filled workbook back (used by :mod:`trek.trace.agreement`) and
:func:`read_sample` its sample. With an ``--out`` ending in ``.csv`` the sample is written as the
CSV ``trek trace shares --human`` reads instead (``question_id``, ``dataset`` and one 0/1 column
per label, blank for the reviewer, or filled with the trace's own labels with ``prefill``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek.outputs import atomic_write, check_out
from trek.trace.labels import DEFINITIONS, LABELS
from trek.trace.pipeline import load_trace
from trek.trace.records import TraceRecord

#: How the cases of a random review sample were chosen (:func:`trek.trace.shares.draw_sample`).
RANDOM = "uniform random"


@dataclass(frozen=True)
class Sample:
    """How a review sample was drawn (:func:`trek.trace.shares.draw_sample`): ``selection`` (``uniform random``), the ``seed``, ``by``
    (``dataset`` when stratified, else ``None``), the ``population`` it was drawn from (fully
    traced cases), the ``question_ids`` drawn (sorted) and, per stratum, ``(population, drawn)``."""

    selection: str
    seed: int | None
    by: str | None
    population: int
    question_ids: tuple[str, ...]
    strata: dict[str, tuple[int, int]] = field(default_factory=dict)

    def describe(self) -> str:
        how = self.selection + (f", seed {self.seed}" if self.seed is not None else "")
        how += f", stratified by {self.by}" if self.by else ""
        return f"{len(self.question_ids)} of {self.population} fully traced case(s), {how}"



__all__ = [
    "CHECKLIST",
    "AUDIT",
    "TAXONOMY",
    "REFERENCE_VALID",
    "JUDGE_CORRECT",
    "NOTES",
    "TREKTRACE_LABELS",
    "reviewer_column",
    "checklist_rows",
    "write_review",
    "count_verdicts",
    "check_overwrite",
    "duplicate_columns",
    "read_checklist",
    "read_sample",
    "SAMPLE",
    "RANDOM",
    "Sample",
]

CHECKLIST, AUDIT, TAXONOMY, SAMPLE = "checklist", "retrieval_audit", "taxonomy", "sample"
REFERENCE_VALID = "reviewer: reference valid"
JUDGE_CORRECT = "reviewer: original judge correct"
NOTES = "reviewer: notes"
TREKTRACE_LABELS = "trektrace labels"
LABEL_SEPARATOR = "; "

SYSTEM_INDEPENDENT = {
    "Reference error": (
        "The reference answer is not valid at the question's target time (the fact moved on, or the "
        "gold pages never supported it). Record it with 'reference valid' = no; no stage label applies."
    ),
    "Judge error": (
        "The reference is valid and the model's answer is right, but the original judge rejected it. "
        "Record it with 'original judge correct' = no; no stage label applies."
    ),
}


def reviewer_column(label: str) -> str:
    return f"reviewer: {label}"


def _flag(v: bool | None) -> str:
    return "unknown" if v is None else ("yes" if v else "no")


def checklist_rows(records: list[TraceRecord], run: str) -> list[dict[str, Any]]:
    """One dict per fully traced case, in review order (stale-flagged first, then trace order);
    incomplete cases have labels from partial tests only, so they are not offered for review."""
    done = [r for r in records if r.status == "done"]
    done.sort(key=lambda r: 0 if r.stale_reference else 1)
    rows = []
    for r in done:
        rows.append({
            "run": run,
            "question_id": r.question_id,
            "dataset": r.dataset,
            "stale reference flag": "" if r.stale_reference is None else _flag(r.stale_reference),
            "stale reason": r.stale_reason or "",
            "question": r.question,
            "reference answers": " | ".join(r.answers),
            "effective year": r.effective_year or "",
            "prediction": r.prediction or "",
            "E evidence retrieved": _flag(r.evidence_retrieved),
            "Q queries adequate": _flag(r.query_adequate) if r.evidence_retrieved is not True else "not asked",
            "G gold-only correct": _flag(r.gold_only_correct),
            "N gold-plus-noise correct": _flag(r.noise_correct) if r.noise_was_run else "not run",
            TREKTRACE_LABELS: LABEL_SEPARATOR.join(r.labels),
            "tests not run": "; ".join(f"{k}: {why}" for k, why in r.skipped.items()),
            "queries": "\n".join(r.queries),
            "key evidence": r.key_evidence or "",
            "evidence reason": r.evidence_reason or "",
            "query reason": r.query_reason or "",
            "gold-only answer": r.gold_only_answer or "",
            "gold-only grade reason": r.gold_only_grade_reason or "",
            "gold-plus-noise answer": r.noise_answer or "",
            "gold-plus-noise grade reason": r.noise_grade_reason or "",
            REFERENCE_VALID: "",
            JUDGE_CORRECT: "",
            **{reviewer_column(lab): "" for lab in LABELS},
            NOTES: "",
        })
    return rows


def _audit_rows(records: list[TraceRecord], run: str) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        if r.status != "done":
            continue
        for m in r.url_matches:
            rows.append({
                "run": run,
                "question_id": r.question_id,
                "gold URL": m.gold_url,
                "retrieved URL (same identity)": m.matched_url or "",
                "retrieval basis": r.retrieval_basis or "",
                "key evidence": r.key_evidence or "",
                "equivalent URLs": "\n".join(r.equivalent_urls),
                "matched evidence": r.retrieved_key_evidence or "",
                "judge reason": r.evidence_reason or "",
                "retrieved URLs": len(r.retrieved_urls),
                "reviewer: audit agrees": "",
                NOTES: "",
            })
    return rows


#: Excel's limit on the characters of one cell; longer text is cut with a marker.
CELL_CHARS = 32_767
_CUT = " [... cut: Excel holds at most 32,767 characters in a cell]"
#: First characters that make a spreadsheet read typed text as a formula.
_FORMULA_START = ("=", "+", "-", "@")


def _cell_value(value: Any) -> Any:
    """A value for a cell: text without the control characters a workbook cannot hold (each
    becomes U+FFFD), cut to :data:`CELL_CHARS`."""
    if not isinstance(value, str):
        return value
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    text = ILLEGAL_CHARACTERS_RE.sub("\ufffd", value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - len(_CUT)] + _CUT


def _as_text(cell: Any) -> None:
    """Keep a text cell text: an answer or page text starting with ``=`` is written as a string,
    never as a live formula (a HYPERLINK in a model's answer must not run when the workbook is
    opened), and text a spreadsheet would read as a formula when edited gets a quote prefix."""
    cell.data_type = "s"
    if cell.value.startswith(_FORMULA_START):
        cell.quotePrefix = True


def _sheet(ws: Any, rows: list[dict[str, Any]], columns: list[str], yes_no: list[str], wide: set[str]) -> None:
    from openpyxl.styles import Alignment, Font, PatternFill
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.datavalidation import DataValidation

    ws.append(columns)
    for row in rows:
        ws.append([_cell_value(row.get(c, "")) for c in columns])
        for cell in ws[ws.max_row]:
            if isinstance(cell.value, str):
                _as_text(cell)
    header_fill = PatternFill("solid", fgColor="DDE5F0")
    reviewer_fill = PatternFill("solid", fgColor="FFF4CC")
    for i, c in enumerate(columns, start=1):
        cell = ws.cell(row=1, column=i)
        cell.font = Font(bold=True)
        cell.fill = reviewer_fill if c.startswith("reviewer") else header_fill
        cell.alignment = Alignment(wrap_text=True, vertical="top")
        width = max([len(c)] + [min(len(str(r.get(c, ""))), 80) for r in rows]) + 2
        ws.column_dimensions[get_column_letter(i)].width = min(60 if c in wide else 40, max(10, width))
    for row_cells in ws.iter_rows(min_row=2):
        for cell in row_cells:
            cell.alignment = Alignment(wrap_text=True, vertical="top")
    ws.freeze_panes = "C2"
    ws.auto_filter.ref = ws.dimensions
    if rows and yes_no:
        dv = DataValidation(type="list", formula1='"yes,no"', allow_blank=True)
        ws.add_data_validation(dv)
        for c in yes_no:
            letter = get_column_letter(columns.index(c) + 1)
            dv.add(f"{letter}2:{letter}{len(rows) + 1}")


def _sample_rows(sample: Sample) -> list[dict[str, Any]]:
    rows = [{"field": "selection", "value": sample.selection},
            {"field": "seed", "value": sample.seed},
            {"field": "stratified by", "value": sample.by or "none"},
            {"field": "population", "value": sample.population},
            {"field": "sample size", "value": len(sample.question_ids)}]
    rows += [{"field": f"stratum {k}", "value": f"{drawn} of {pop}"} for k, (pop, drawn) in sample.strata.items()]
    rows.append({"field": "note", "value": "review every case of the checklist: PPI needs the whole random sample"})
    rows += [{"field": "question_id", "value": q} for q in sample.question_ids]
    return rows


def read_sample(path: str | os.PathLike[str]) -> Sample | None:
    """The sample a review workbook records (its ``sample`` sheet), or ``None`` without one."""
    from trek.jsonio import open_workbook, sheet_rows

    p = Path(path)
    with open_workbook(p, "review workbook (.xlsx)") as wb:
        if SAMPLE not in wb.sheetnames:
            return None
        rows = sheet_rows(wb, SAMPLE, p)[1:]
    fields: dict[str, Any] = {}
    ids: list[str] = []
    strata: dict[str, tuple[int, int]] = {}
    try:
        for key, value, *_ in rows:
            key = str(key or "")
            if key == "question_id":
                ids.append(str(value))
            elif key.startswith("stratum "):
                drawn, _, pop = str(value).partition(" of ")
                strata[key[len("stratum "):]] = (int(pop), int(drawn))
            else:
                fields[key] = value
        sample = Sample(selection=str(fields["selection"]), seed=_whole(fields["seed"], "seed"),
                        by=None if fields["stratified by"] in (None, "none") else str(fields["stratified by"]),
                        population=int(fields["population"]), question_ids=tuple(ids), strata=strata)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{p}: the {SAMPLE!r} sheet is damaged ({type(e).__name__}: {e}); write the workbook "
                         "again with trek trace review RUN --sample N --seed S") from None
    size = fields.get("sample size", len(ids))
    if size is None or str(size).strip() == "":
        raise ValueError(f"{p}: the {SAMPLE!r} sheet's 'sample size' is blank; it should be {len(ids)} (the question "
                         "ids it lists)")
    try:
        n = _whole(size, "sample size")
    except ValueError as e:
        raise ValueError(f"{p}: the {SAMPLE!r} sheet's {e}") from None
    if n != len(ids):
        raise ValueError(f"{p}: the {SAMPLE!r} sheet lists {len(ids)} question id(s) for a sample of {size}")
    return sample


#: The largest seed a workbook cell keeps exactly (a number there is a double).
MAX_SEED = 2**53


def _whole(value: Any, name: str) -> int:
    """A whole number from a cell (an int, a float without fraction, or its text)."""
    if isinstance(value, bool):
        raise ValueError(f"{name!r} is {value!r}, not a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{name!r} is {value!r}, not a whole number")
        value = int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"{name!r} is {value!r}, not a whole number") from None


def check_seed(seed: int | None) -> None:
    """Refuse a seed a workbook cannot keep exactly (outside 0..2^53): stored as a double it
    would be read back as another number, which draws another sample."""
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed {seed}: give a whole number from 0 to 2^53 ({MAX_SEED:,}), which a workbook keeps "
                         "exactly")


def _write_sample_csv(path: Path, records: list[TraceRecord], sample: Sample, prefill: bool, force: bool) -> Path:
    import csv
    import io

    by_id = {r.question_id: r for r in records}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["question_id", "dataset", *LABELS])
    for q in sample.question_ids:
        r = by_id[q]
        w.writerow([q, r.dataset, *((int(lab in r.labels) if prefill else "") for lab in LABELS)])
    text = buf.getvalue()
    check_overwrite(path, force, text.encode("utf-8"))
    return atomic_write(path, text)


def write_review(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                 sample: Sample | None = None, prefill: bool = False, force: bool = False) -> Path:
    """Write the workbook for a traced run (default ``RUN_DIR/review.xlsx``); returns its path.

    ``sample`` (:func:`trek.trace.shares.draw_sample`): only its cases, and a ``sample`` sheet.
    An ``out`` ending in ``.csv`` (with a ``sample``) writes the human-verdict CSV instead, blank
    or (``prefill``) with the trace's own labels. An existing file that holds a reviewer's
    verdicts is replaced only with ``force`` (:func:`check_overwrite`)."""
    from openpyxl import Workbook

    rd = Path(run_dir)
    csv_out = out is not None and Path(out).suffix.lower() == ".csv"
    if csv_out and sample is None:
        raise ValueError(f"{out}: a CSV review is written for a random sample only: add --sample N")
    if prefill and not csv_out:
        raise ValueError("--prefill fills the label columns of a CSV review: give --out FILE.csv")
    path = check_out(Path(out) if out else rd / "review.xlsx", runs=[rd], example="review.xlsx")
    check_seed(sample.seed if sample is not None else None)
    if not csv_out:
        check_overwrite(path, force)
    records = load_trace(rd)
    if not records:
        raise FileNotFoundError(f"{rd}: no trace.jsonl records (run `trek trace {rd}` first)")
    if csv_out and sample is not None:
        return _write_sample_csv(path, records, sample, prefill, force)
    run = rd.resolve().name
    rows = checklist_rows(records, run)
    if sample is not None:
        chosen = set(sample.question_ids)
        rows = [r for r in rows if r["question_id"] in chosen]
    columns = list(rows[0]) if rows else list(checklist_rows([_blank()], run)[0])
    yes_no = [REFERENCE_VALID, JUDGE_CORRECT, *(reviewer_column(lab) for lab in LABELS)]
    wb = Workbook()
    ws = wb.active
    ws.title = CHECKLIST
    _sheet(ws, rows, columns, yes_no, {"question", "key evidence", NOTES, "evidence reason", "query reason"})
    audit = _audit_rows([r for r in records if sample is None or r.question_id in set(sample.question_ids)], run)
    audit_cols = list(audit[0]) if audit else ["run", "question_id", "gold URL"]
    _sheet(wb.create_sheet(AUDIT), audit, audit_cols, ["reviewer: audit agrees"] if audit else [],
           {"key evidence", "matched evidence", "judge reason", "gold URL"})
    tax = [{"category": k, "kind": "system-related (TrekTrace label)", "definition": v} for k, v in DEFINITIONS.items()]
    tax += [{"category": k, "kind": "system-independent (excluded from agreement)", "definition": v}
            for k, v in SYSTEM_INDEPENDENT.items()]
    _sheet(wb.create_sheet(TAXONOMY), tax, ["category", "kind", "definition"], [], {"definition"})
    if sample is not None:
        _sheet(wb.create_sheet(SAMPLE), _sample_rows(sample), ["field", "value"], [], {"value"})
    return atomic_write(path, wb.save)


def _blank() -> TraceRecord:
    return TraceRecord(question_id="-", dataset="-", question="-", answers=["-"], original_outcome="-", status="done")


def read_checklist(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The checklist sheet of a (filled) workbook as one dict per row, keyed by header."""
    from trek.jsonio import open_workbook, sheet_rows

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no workbook at {p}")
    if p.is_dir():
        raise ValueError(f"{p}: is a folder, not a review workbook (give the .xlsx file `trek trace review` wrote)")
    if p.suffix.lower() != ".xlsx":
        raise ValueError(f"{p}: not a review workbook (an .xlsx file written by `trek trace review` is expected)")
    with open_workbook(p, "review workbook (.xlsx)") as wb:
        if CHECKLIST not in wb.sheetnames:
            raise ValueError(f"{p}: no sheet named {CHECKLIST!r}")
        rows = sheet_rows(wb, CHECKLIST, p)
    if not rows:
        raise ValueError(f"{p}: the {CHECKLIST!r} sheet is empty")
    header = [str(h).strip() if h is not None else "" for h in rows[0]]
    twice = duplicate_columns(header)
    if twice:
        raise ValueError(f"{p}: the {CHECKLIST!r} sheet has column {twice[0]!r} twice; keep one (which one holds the "
                         "verdicts cannot be guessed)")
    needed = [TREKTRACE_LABELS, REFERENCE_VALID, JUDGE_CORRECT, *(reviewer_column(lab) for lab in LABELS)]
    missing = [c for c in needed if c not in header]
    if missing:
        raise ValueError(f"{p}: the {CHECKLIST!r} sheet lacks column(s) {missing}")
    out = []
    for r in rows[1:]:
        if r is None or all(v is None for v in r):
            continue
        out.append({h: ("" if v is None else v) for h, v in zip(header, r, strict=False)})
    return out


def duplicate_columns(header: list[str]) -> list[str]:
    """The non-blank column names ``header`` holds more than once, in order."""
    seen: set[str] = set()
    twice: list[str] = []
    for h in header:
        if h and h in seen and h not in twice:
            twice.append(h)
        seen.add(h)
    return twice


# -- a reviewer's work is never overwritten ---------------------------------------------------------------
def count_verdicts(path: str | os.PathLike[str]) -> int:
    """How many verdicts the review file ``path`` holds: the filled reviewer cells of a
    workbook's checklist and retrieval audit, or the filled label cells of a CSV (0 when there
    is no file). A file that cannot be read is a :class:`ValueError` (what it holds is unknown)."""
    p = Path(path)
    if not p.exists():
        return 0
    if p.suffix.lower() == ".csv":
        return _csv_verdicts(p)
    from trek.jsonio import check_regular, open_workbook, sheet_rows

    check_regular(p, "review workbook (.xlsx)")
    with p.open("rb") as fh:
        magic = fh.read(8)
    if not magic.startswith((b"PK", _OLE_MAGIC)):
        return 0  # neither a zip nor an encrypted workbook (an OLE file): no spreadsheet holds verdicts in it
    n = 0
    with open_workbook(p, "review workbook (.xlsx)") as wb:
        for name in (CHECKLIST, AUDIT):
            if name not in wb.sheetnames:
                continue
            rows = sheet_rows(wb, name, p)
            if not rows:
                continue
            cols = [i for i, h in enumerate(rows[0]) if str(h or "").startswith("reviewer")]
            n += sum(1 for r in rows[1:] for i in cols if i < len(r) and str(r[i] if r[i] is not None else "").strip())
    return n


#: The first bytes of an OLE compound file (what Excel saves a password-protected workbook as).
_OLE_MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")


def _csv_verdicts(p: Path) -> int:
    import csv
    import io

    from trek.jsonio import read_text

    try:
        reader = csv.reader(io.StringIO(read_text(p, "review CSV"), newline=""))
        header = next(reader, [])
        cols = [i for i, h in enumerate(header) if h.strip() in LABELS]
        return sum(1 for row in reader for i in cols if i < len(row) and row[i].strip())
    except csv.Error as e:
        raise ValueError(f"{p}: cannot be read as CSV ({e})") from None


def check_overwrite(path: Path, force: bool, new: bytes | None = None) -> None:
    """Refuse to replace the review file ``path`` when it holds any verdict, unless ``force``
    (or the new content ``new`` is byte for byte what it holds: nothing is lost)."""
    if force or not path.exists():
        return
    try:
        n = count_verdicts(path)
    except ValueError as e:
        raise ValueError(f"{path}: exists and cannot be read to check for a reviewer's verdicts ({e}); pass --force "
                         "to replace it, or give another --out") from None
    if n and not (new is not None and path.is_file() and path.read_bytes() == new):
        raise ValueError(f"{path}: holds {n} verdict(s) of a reviewer; not replaced (pass --force to replace it, or "
                         "give another --out)")
