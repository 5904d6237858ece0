"""Round 6 of bad inputs (issue 53): one writer per run folder for ``trek import --replace``,
a filled review never overwritten, and the bounded readers of the review and backend paths.
No network."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.imports import import_run, parse_mapping
from trek.runs import RunLockedError, run_lock

EX = Path(__file__).resolve().parents[1] / "examples"
MAP = "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"

HOLD = textwrap.dedent("""
    import sys
    from trek.runs import run_lock
    with run_lock(sys.argv[1]):
        print("held", flush=True)
        sys.stdin.readline()
""")

TRY = textwrap.dedent("""
    import sys
    from trek.runs import RunLockedError, run_lock
    try:
        with run_lock(sys.argv[1]):
            print("free")
    except RunLockedError as e:
        print("refused:", e)
""")


def _import(out: Path, *extra: str) -> object:
    return CliRunner().invoke(app, ["import", "gemini", str(EX / "gemini.json"), "--questions",
                                    str(EX / "questions.csv"), "--map", MAP, "--out", str(out), *extra])


def test_import_replace_is_refused_while_another_process_writes_the_run(tmp_path):
    out = tmp_path / "run"
    assert _import(out).exit_code == 0
    (out / "grades.jsonl").write_text('{"paid": "work"}\n')  # what a running `trek grade` has written so far
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = _import(out, "--replace")
        flat = " ".join(r.output.split())
        assert r.exit_code == 2, r.output
        assert f"is being written by process {holder.pid}" in flat and "Traceback" not in r.output
        after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != runs.LOCK}
        assert after == before  # nothing swapped away
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.")]  # no staging left
    finally:
        holder.kill()
        holder.wait()
    r = _import(out, "--replace")  # the holder is gone: the replace goes ahead
    assert r.exit_code == 0, r.output
    assert not (out / "grades.jsonl").exists()


def test_an_import_holds_the_run_while_it_writes_and_a_new_folder_is_locked_too(tmp_path, monkeypatch):
    from trek.imports import gemini

    seen: list[str] = []
    parse = gemini.parse

    def probing(record):  # while the import is under way, another process tries to take the run
        seen.append(subprocess.run([sys.executable, "-c", TRY, str(out)], capture_output=True, text=True,
                                   check=True).stdout.strip())
        return parse(record)

    monkeypatch.setattr(gemini, "parse", probing)
    out = tmp_path / "new"
    import_run("gemini", [EX / "gemini.json"], out, questions=EX / "questions.csv", mapping=parse_mapping(MAP))
    assert seen and all(s.startswith("refused:") and "being written by process" in s for s in seen), seen
    seen.clear()
    import_run("gemini", [EX / "gemini.json"], out, questions=EX / "questions.csv", mapping=parse_mapping(MAP),
               replace=True)
    assert seen and all(s.startswith("refused:") for s in seen), seen
    assert runs.load_answers(out)
    with run_lock(out):  # free once the import is done
        pass


def test_a_failed_import_leaves_no_folder_and_a_killed_ones_staging_is_cleaned(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["import", "gemini", str(bad), "--questions", str(EX / "questions.csv"), "--map", MAP,
                                 "--out", str(out)])
    assert r.exit_code == 2 and not out.exists()
    # what an import killed with -9 leaves: its hidden staging folder and the lock's folder
    stale = tmp_path / ".run.import-k1ll3d"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "big.bin").write_bytes(b"x" * 1000)
    out.mkdir()
    (out / runs.LOCK).write_text("12345\n")
    other = tmp_path / ".other.import-keep"  # another folder's staging is not ours to remove
    other.mkdir()
    assert _import(out).exit_code == 0  # only a lock file: not a run, so no --replace needed
    assert not stale.exists() and other.exists()
    assert runs.load_answers(out)


def test_lock_refusal_is_a_run_locked_error_in_the_library(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"process {holder.pid}"):
            import_run("gemini", [EX / "gemini.json"], out, questions=EX / "questions.csv",
                       mapping=parse_mapping(MAP))
        assert sorted(p.name for p in out.iterdir()) == [runs.LOCK]  # the holder's folder is left alone
    finally:
        holder.kill()
        holder.wait()


# -- a reviewer's work is never overwritten ----------------------------------------------------------------
def _traced(tmp_path: Path, n: int = 12) -> Path:
    from trek.trace.records import TraceRecord
    from trek.types import write_jsonl

    rd = tmp_path / "traced"
    rd.mkdir()
    labs = (["Retrieval"], ["Distraction"], ["Interpretation", "Randomness"])
    write_jsonl(rd / runs.TRACE, [TraceRecord(question_id=f"q{i:02d}", dataset=("freshqa", "sealqa")[i % 2],
                                              question=f"Question {i}?", answers=["A"], original_outcome="incorrect",
                                              status="done", labels=labs[i % 3]) for i in range(n)])
    return rd


def _fill(path: Path, verdicts: int) -> None:
    from openpyxl import load_workbook

    from trek.trace.review import CHECKLIST, REFERENCE_VALID

    wb = load_workbook(path)
    ws = wb[CHECKLIST]
    col = [c.value for c in ws[1]].index(REFERENCE_VALID) + 1
    for row in range(2, 2 + verdicts):
        ws.cell(row=row, column=col, value="yes")
    wb.save(path)


def test_a_filled_review_workbook_survives_a_second_trek_trace_review(tmp_path):
    rd = _traced(tmp_path)
    review = ["trace", "review", str(rd), "--sample", "5", "--seed", "0"]
    assert CliRunner().invoke(app, review).exit_code == 0
    book = rd / "review.xlsx"
    assert CliRunner().invoke(app, review).exit_code == 0  # a blank workbook is simply written again
    _fill(book, 3)
    filled = book.read_bytes()
    r = CliRunner().invoke(app, review)
    assert r.exit_code == 2 and "Traceback" not in r.output
    flat = " ".join(r.output.split())
    assert "review.xlsx: holds 3 verdict(s) of a reviewer; not replaced" in flat and "--force" in flat
    assert book.read_bytes() == filled
    r = CliRunner().invoke(app, [*review, "--force"])
    assert r.exit_code == 0, r.output
    from trek.trace.review import count_verdicts

    assert count_verdicts(book) == 0


def test_a_filled_review_csv_survives_and_an_identical_prefill_is_no_loss(tmp_path):
    rd = _traced(tmp_path)
    out = tmp_path / "filled.csv"
    review = ["trace", "review", str(rd), "--sample", "5", "--seed", "0", "--out", str(out)]
    assert CliRunner().invoke(app, review).exit_code == 0
    assert CliRunner().invoke(app, review).exit_code == 0  # blank: written again
    lines = out.read_text().splitlines()
    lines[1] = lines[1] + "1"  # the reviewer marks one case's last label
    lines[2] = lines[2].replace(",,", ",0,", 1)
    out.write_text("\n".join(lines) + "\n")
    filled = out.read_bytes()
    r = CliRunner().invoke(app, review)
    assert r.exit_code == 2 and "filled.csv: holds 2 verdict(s) of a reviewer; not replaced" in " ".join(r.output.split())
    assert out.read_bytes() == filled
    # a prefilled CSV written again with the same content loses nothing: allowed
    pre = tmp_path / "pre.csv"
    prefill = ["trace", "review", str(rd), "--sample", "5", "--seed", "0", "--prefill", "--out", str(pre)]
    assert CliRunner().invoke(app, prefill).exit_code == 0
    assert CliRunner().invoke(app, prefill).exit_code == 0
    # ... but another draw over it would lose the verdicts
    r = CliRunner().invoke(app, [*prefill[:6], "1", *prefill[7:]])
    from trek.trace.labels import LABELS

    assert r.exit_code == 2 and f"pre.csv: holds {5 * len(LABELS)} verdict(s)" in " ".join(r.output.split()), r.output


def test_a_seed_beyond_2_to_the_53_is_refused_and_one_within_it_round_trips(tmp_path):
    from trek.trace.review import read_sample

    rd = _traced(tmp_path)
    r = CliRunner().invoke(app, ["trace", "review", str(rd), "--sample", "3", "--seed", str(2**53 + 1)])
    assert r.exit_code == 2 and not (rd / "review.xlsx").exists()
    r = CliRunner().invoke(app, ["trace", "review", str(rd), "--sample", "3", "--seed", str(2**53)])
    assert r.exit_code == 0, r.output
    assert read_sample(rd / "review.xlsx").seed == 2**53


def _set_sample_field(path: Path, field: str, value) -> None:
    from openpyxl import load_workbook

    from trek.trace.review import SAMPLE

    wb = load_workbook(path)
    for row in wb[SAMPLE].iter_rows(min_row=2):
        if row[0].value == field:
            row[1].value = value
    wb.save(path)


def test_a_blank_sample_size_is_an_error_naming_the_sheet(tmp_path):
    rd = _traced(tmp_path)
    assert CliRunner().invoke(app, ["trace", "review", str(rd), "--sample", "4"]).exit_code == 0
    book = rd / "review.xlsx"
    _set_sample_field(book, "sample size", None)
    r = CliRunner().invoke(app, ["trace", "shares", str(rd), "--human", str(book)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "the 'sample' sheet's 'sample size' is blank" in " ".join(r.output.split())
    _set_sample_field(book, "sample size", "four")
    r = CliRunner().invoke(app, ["trace", "shares", str(rd), "--human", str(book)])
    assert r.exit_code == 2 and "'sample size' is 'four', not a whole number" in " ".join(r.output.split())


# -- bounded readers on the review paths -------------------------------------------------------------------
def _fifo(path: Path) -> Path:
    import os

    os.mkfifo(path)
    return path


@pytest.mark.parametrize("name", ["human.csv", "human.xlsx"])
def test_a_fifo_or_a_device_as_the_human_file_is_refused_without_opening(tmp_path, name):
    rd = _traced(tmp_path)
    fifo = _fifo(tmp_path / name)
    r = CliRunner().invoke(app, ["trace", "shares", str(rd), "--human", str(fifo), "--seed", "0"])
    assert r.exit_code == 2 and "named pipe" in r.output, r.output
    r = CliRunner().invoke(app, ["trace", "agreement", str(fifo)])  # a .csv is refused by its name already
    assert r.exit_code == 2 and ("named pipe" in r.output or name.endswith(".csv")), r.output
    r = CliRunner().invoke(app, ["trace", "shares", str(rd), "--human", "/dev/zero", "--seed", "0"])
    assert r.exit_code == 2 and "is a device" in r.output and "Traceback" not in r.output, r.output


def test_runs_list_refuses_a_fifo_run_json(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    _fifo(run / runs.META)
    r = CliRunner().invoke(app, ["runs", "list", str(tmp_path / "runs")])
    assert "named pipe" in r.output and "Traceback" not in r.output, r.output


def _rezip(src: Path, dst: Path, edit) -> Path:
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info))
            zout.writestr(info.filename, data)
    return dst


def test_workbook_dimensions_and_members_are_bounded(tmp_path, monkeypatch):
    import re
    import time

    from trek import jsonio
    from trek.trace.review import read_checklist

    rd = _traced(tmp_path)
    assert CliRunner().invoke(app, ["trace", "review", str(rd)]).exit_code == 0
    book = rd / "review.xlsx"
    huge = _rezip(book, tmp_path / "huge.xlsx", lambda name, data: re.sub(
        rb'<dimension ref="[^"]*"/>', b'<dimension ref="A1:XFD1048576"/>', data) if "worksheets/" in name else data)
    t = time.monotonic()
    assert len(read_checklist(huge)) == 12  # the declared dimension pads nothing
    assert time.monotonic() - t < 10
    monkeypatch.setattr(jsonio, "MAX_WORKBOOK_MEMBER", 1 << 16)  # stands for the 64 MiB of a 300 MiB cell
    big = _rezip(book, tmp_path / "big.xlsx", lambda name, data: data.replace(
        b"Question 1?", b"Question " + b"1" * 200_000 + b"?") if "sheet1" in name else data)
    with pytest.raises(ValueError, match=r"big\.xlsx: member xl/worksheets/sheet1\.xml is larger than 0\.0625 MiB"):
        read_checklist(big)


def test_duplicate_columns_are_refused_in_a_human_csv_and_a_workbook(tmp_path):
    from openpyxl import load_workbook

    from trek.trace.review import CHECKLIST, reviewer_column

    rd = _traced(tmp_path)
    csv_path = tmp_path / "h.csv"
    assert CliRunner().invoke(app, ["trace", "review", str(rd), "--sample", "3", "--prefill", "--out",
                                    str(csv_path)]).exit_code == 0
    lines = csv_path.read_text().splitlines()
    lines = [lines[0] + ",Retrieval"] + [ln + ",0" for ln in lines[1:]]
    csv_path.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["trace", "shares", str(rd), "--human", str(csv_path), "--seed", "0"])
    assert r.exit_code == 2 and "column 'Retrieval' is given twice" in " ".join(r.output.split()), r.output
    assert CliRunner().invoke(app, ["trace", "review", str(rd)]).exit_code == 0
    book = rd / "review.xlsx"
    wb = load_workbook(book)
    ws = wb[CHECKLIST]
    ws.cell(row=1, column=ws.max_column + 1, value=reviewer_column("Retrieval"))
    wb.save(book)
    r = CliRunner().invoke(app, ["trace", "agreement", str(book)])
    assert r.exit_code == 2 and "column 'reviewer: Retrieval' twice" in " ".join(r.output.split()), r.output


def test_a_review_file_that_may_hold_verdicts_but_cannot_be_read_is_kept(tmp_path):
    rd = _traced(tmp_path)
    book = rd / "review.xlsx"
    book.write_bytes(bytes.fromhex("d0cf11e0a1b11ae1") + b"\0" * 600)  # how Excel saves a password-protected workbook
    r = CliRunner().invoke(app, ["trace", "review", str(rd)])
    assert r.exit_code == 2 and "cannot be read to check for a reviewer's verdicts" in " ".join(r.output.split())
    assert book.read_bytes().startswith(bytes.fromhex("d0cf11e0"))
    assert CliRunner().invoke(app, ["trace", "review", str(rd), "--force"]).exit_code == 0


# -- trek retry reads run.json, it does not trust it -------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"limit": -5}, "field 'invocation.options.limit': -5 is below the option's least value 1"),
    ({"limit": "ten"}, "field 'invocation.options.limit': 'ten' is not an int"),
    ({"max_rounds": None}, "field 'invocation.options.max_rounds': missing (null)"),
    ({"hints": "yes"}, "field 'invocation.options.hints': 'yes' is not a bool"),
    ({"epochs": 0}, "field 'invocation.options.epochs': 0 is below the option's least value 1"),
    ({"limit": True}, "field 'invocation.options.limit': True is not an int"),
])
def test_retry_on_a_damaged_run_json_is_one_clear_line(tmp_path, options, message):
    import json

    run = tmp_path / "run"
    run.mkdir()
    (run / runs.META).write_text(json.dumps({"run_id": "run", "kind": "wild", "config": {
        "invocation": {"model": "demo", "params": {}, "options": {"questions": "mini", "search": "local", **options}}}}))
    r = CliRunner().invoke(app, ["retry", str(run), "--base-url", "http://127.0.0.1:9/v1"])
    assert r.exit_code == 2 and message in " ".join(r.output.split()) and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in run.iterdir()) == [runs.META]


@pytest.mark.parametrize("invocation, message", [
    ({"params": {}, "options": {}}, "field 'invocation.model': missing"),
    ({"model": "demo", "params": [1], "options": {}}, "field 'invocation.params'"),
    ({"model": "demo", "params": {}, "options": "limit=5"}, "field 'invocation.options'"),
])
def test_retry_refuses_a_badly_typed_invocation(tmp_path, invocation, message):
    import json

    run = tmp_path / "run"
    run.mkdir()
    (run / runs.META).write_text(json.dumps({"run_id": "run", "kind": "wild", "config": {"invocation": invocation}}))
    r = CliRunner().invoke(app, ["retry", str(run)])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


# -- trek fake-server ----------------------------------------------------------------------------------------
def test_fake_server_on_a_busy_port_an_out_of_range_port_or_a_nan_latency_is_one_line():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = CliRunner().invoke(app, ["fake-server", "--port", str(port)])
        assert r.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in r.output + (r.stderr or ""), r.output
        assert r.exception is None or isinstance(r.exception, SystemExit)
    for args, message in ((["--port", "70000"], "--port 70000: a TCP port is from 0"),
                          (["--port", "-1"], "--port -1: a TCP port is from 0"),
                          (["--latency", "nan"], "latency must be a non-negative number of seconds, got nan"),
                          (["--latency", "inf"], "latency must be a non-negative number of seconds, got inf")):
        r = CliRunner().invoke(app, ["fake-server", *args])
        assert r.exit_code == 2 and message in r.output + (r.stderr or ""), (args, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit)


def test_validate_reads_the_page_store_of_a_read_only_run(tmp_path, monkeypatch):
    """A WAL page store in a folder nobody may write to cannot be opened ``mode=ro`` (SQLite
    wants its -shm file); the run is valid all the same. The tests run as root, for whom no
    folder is read-only, so the refusal is made by hand: ``mode=ro`` fails as it does there."""
    import sqlite3

    from trek.imports.schema import validate_run

    out = tmp_path / "run"
    assert _import(out).exit_code == 0
    real = sqlite3.connect

    def read_only_folder(database, *a, **kw):
        if isinstance(database, str) and "mode=ro" in database:
            raise sqlite3.OperationalError("unable to open database file")
        return real(database, *a, **kw)

    monkeypatch.setattr(sqlite3, "connect", read_only_folder)
    assert validate_run(out) == []
    (out / "pages.sqlite").write_bytes(b"not a database at all" * 100)
    problems = validate_run(out)
    assert [p.message for p in problems if "pages.sqlite" in p.file][0].startswith("not a Trek page store")


# -- the grade review's human files go through the bounded reader too ------------------------------------------
@pytest.mark.parametrize("name", ["grades.csv", "grades.xlsx"])
def test_a_grade_review_file_that_is_a_fifo_or_a_device_is_refused_unopened(tmp_path, name):
    import os

    from trek.grade_review import read_grade_review

    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="named pipe"):
        read_grade_review(fifo, tmp_path)


def test_a_grade_review_csv_with_a_column_twice_is_refused(tmp_path):
    from trek.grade_review import read_grade_review

    p = tmp_path / "h.csv"
    p.write_text("question_id,reviewer_correct,sample_seed,reviewer_correct\nq01,yes,0,no\n")
    with pytest.raises(ValueError, match="column 'reviewer_correct' is given twice"):
        read_grade_review(p, tmp_path)
