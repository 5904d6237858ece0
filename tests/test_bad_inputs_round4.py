"""The fourth round of bad inputs (issue 34): every case is a test on an input written for it
that must end with a clear one-line error or the right result, nothing damaged, no traceback,
memory bounded for the bombs, no hang. The case ids (O, B, T, V, X, D) are the rows of the
case list (notes/issue34-cases.md)."""

from __future__ import annotations

import errno
import gzip
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.imports import import_run, parse_mapping
from trek.imports.schema import validate_run
from trek.trace.records import TraceRecord
from trek.types import Grade, Question, Trajectory, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
MAP = "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"
DEEP = "[" * 100_000 + "]" * 100_000
runner = CliRunner()


def trek(*args: object) -> tuple[int, str]:
    r = runner.invoke(app, [str(a) for a in args])
    out = " ".join(r.output.split())
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), \
        f"{r.exception!r}\n{r.output}"
    return r.exit_code, out


def refused(*args: object, says: str) -> str:
    code, out = trek(*args)
    assert code == 2, out
    assert says in out, out
    assert out.startswith("error: "), out
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def tmp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or ".old-" in p.name
                  or ".import-" in p.name)


@pytest.fixture
def graded(tmp_path) -> Path:
    """A small graded run (exact grades), the target of the audit and viewer cases."""
    rd = tmp_path / "graded"
    qs = [Question(id=f"q{i}", dataset="freshqa", question=f"question {i}?", answers=["x"]) for i in range(3)]
    runs.write_records(rd, runs.QUESTIONS, qs)
    runs.write_records(rd, runs.ANSWERS, [Trajectory(question_id=q.id, model="m", final_answer="y") for q in qs])
    write_jsonl(rd / runs.GRADES, [Grade(question_id=q.id, dataset="freshqa", response="y", outcome="incorrect",
                                         method="exact", grader="exact", grader_version="v") for q in qs])
    write_jsonl(rd / runs.TRACE, [TraceRecord(question_id="q0", dataset="freshqa", question="?", answers=["x"],
                                              original_outcome="incorrect", status="done")])
    runs.write_meta(rd, runs.RunMeta(run_id="graded", kind="wild"))
    return rd


def imported(out: Path, fmt: str = "openai-responses", file: str = "openai-responses.jsonl", **kw) -> Path:
    import_run(fmt, [EX / file], out, questions=EX / "questions.csv", mapping=parse_mapping(MAP), **kw)
    return out


def log_with(tmp_path: Path, edit) -> Path:
    """The example Responses log with ``edit(record)`` applied to its first record."""
    lines = (EX / "openai-responses.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    edit(first)
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    return p


def import_cli(tmp_path: Path, log: Path, out: Path | None = None, *extra: str, fmt: str = "openai-responses"):
    return trek("import", fmt, log, "--questions", EX / "questions.csv", "--map", MAP,
                "--out", out or tmp_path / "out", *extra)


# == O: the output rule ==============================================================================
@pytest.mark.parametrize("name", [runs.GRADES, "audit-grading.jsonl", runs.ANSWERS, "run.json"])
def test_O1_judge_audit_never_writes_over_a_record_of_the_run(graded, name):
    before = snapshot(graded)
    refused("judge", "audit", graded, "--out", graded / name, says="records of")
    assert snapshot(graded) == before


def test_O2_judge_audit_out_through_dotdot_and_a_symlink(graded, tmp_path):
    before = snapshot(graded)
    refused("judge", "audit", graded, "--out", graded / "new" / ".." / runs.GRADES, says="records of")
    (tmp_path / "link").symlink_to(graded)
    refused("judge", "audit", graded, "--out", tmp_path / "link" / runs.GRADES, says="records of")
    assert snapshot(graded) == before and not (graded / "new").exists()


def test_O3_judge_audit_out_a_device_a_folder_a_path_under_a_file(graded, tmp_path):
    refused("judge", "audit", graded, "--out", "/dev/null", says="a device")
    assert Path("/dev/null").is_char_device()
    (tmp_path / "folder").mkdir()
    refused("judge", "audit", graded, "--out", tmp_path / "folder", says="is a folder")
    (tmp_path / "file").write_text("keep")
    refused("judge", "audit", graded, "--out", tmp_path / "file" / "o.csv", says="is a file, not a folder")
    assert (tmp_path / "file").read_text() == "keep" and tmp_files(tmp_path) == []


def test_O4_judge_audit_out_an_unrelated_file_needs_force(graded, tmp_path):
    mine = tmp_path / "notes.csv"
    mine.write_text("my,own\n1,2\n")
    refused("judge", "audit", graded, "--out", mine, says="not an output of trek judge audit")
    assert mine.read_text() == "my,own\n1,2\n"
    code, out = trek("judge", "audit", graded, "--out", tmp_path / "audit.csv")
    assert code == 0, out
    code, out = trek("judge", "audit", graded, "--out", tmp_path / "audit.csv")  # its own output: replaced
    assert code == 0, out
    code, out = trek("judge", "audit", graded, "--out", mine, "--force")
    assert code == 0 and mine.read_text().startswith("run,role,question_id"), out


@pytest.mark.parametrize("err, says", [(errno.EROFS, "read-only"), (errno.ENOSPC, "no space left")])
def test_O5_judge_audit_on_a_read_only_mount_or_a_full_disk(graded, tmp_path, monkeypatch, err, says):
    from trek.audit import PAIR_COLUMNS

    out = tmp_path / "audit.csv"
    old = ",".join(PAIR_COLUMNS) + "\nan,earlier,audit\n"
    out.write_text(old)
    real_open = os.open

    def failing(path, flags, *a, **kw):
        if str(path).endswith(".tmp"):
            raise OSError(err, os.strerror(err), str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", failing)
    refused("judge", "audit", graded, "--out", out, says=says)
    assert out.read_text() == old and tmp_files(tmp_path) == []


@pytest.mark.parametrize("command, name", [("view", runs.TRACE), ("review", runs.ANSWERS), ("view", "run.json")])
def test_O6_trace_outputs_through_a_folder_that_does_not_exist(graded, command, name):
    before = snapshot(graded)
    refused("trace", command, graded, "--out", graded / "newsub" / ".." / name, says="records of")
    assert snapshot(graded) == before


def test_O7_import_replace_never_deletes_the_folder_holding_the_input(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "log.jsonl").write_bytes((EX / "openai-responses.jsonl").read_bytes())
    before = snapshot(logs)
    refused("import", "openai-responses", logs / "log.jsonl", "--questions", EX / "questions.csv", "--map", MAP,
            "--out", logs, "--replace", says="--out")
    assert snapshot(logs) == before


def test_O8_import_replace_never_deletes_a_folder_that_is_not_an_import(tmp_path, graded):
    docs = tmp_path / "documents"
    docs.mkdir()
    (docs / "thesis.txt").write_text("years of work")
    refused("import", "openai-responses", EX / "openai-responses.jsonl", "--questions", EX / "questions.csv",
            "--map", MAP, "--out", docs, "--replace", says="not a Trek run")
    assert (docs / "thesis.txt").read_text() == "years of work"
    before = snapshot(graded)
    refused("import", "openai-responses", EX / "openai-responses.jsonl", "--questions", EX / "questions.csv",
            "--map", MAP, "--out", graded, "--replace", says="kind 'wild'")
    assert snapshot(graded) == before


def test_O9_import_out_dot_replace_is_refused_cleanly(tmp_path, monkeypatch):
    run = imported(tmp_path / "imp")
    monkeypatch.chdir(run)
    before = snapshot(run)
    refused("import", "openai-responses", EX / "openai-responses.jsonl", "--questions", EX / "questions.csv",
            "--map", MAP, "--out", ".", "--replace", says="current folder")
    assert snapshot(run) == before and tmp_files(tmp_path) == []


def test_O10_import_replace_replaces_an_import(tmp_path):
    run = imported(tmp_path / "imp")
    code, out = trek("import", "anthropic-messages", EX / "anthropic-messages.jsonl", "--questions",
                     EX / "questions.csv", "--map", MAP, "--out", run, "--replace")
    assert code == 0, out
    assert runs.read_meta(run).config["format"] == "anthropic-messages" and tmp_files(tmp_path) == []


def test_O11_ctrl_calibrate_json_and_discover_out_keep_unrelated_files(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "data"}\n')
    refused("ctrl", "calibrate", "--json", mine, says="not an output of trek ctrl calibrate")
    refused("ctrl", "discover", "--source", "mini", "--discovery", "m", "--out", mine,
            says="not an output of trek ctrl discover")
    assert mine.read_text() == '{"my": "data"}\n'


@pytest.mark.parametrize("where, says", [("data/mini", "bundled TrekBench-Mini"), ("data/mini/new", "bundled"),
                                         ("trek", "the trek package")])
def test_O12_wild_run_never_writes_into_the_bundled_data(where, says):
    before = snapshot(ROOT / "data" / "mini")
    refused("wild", "run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--questions", "mini",
            "--search", "none", "--run", ROOT / where, says=says)
    assert snapshot(ROOT / "data" / "mini") == before and not (ROOT / "data" / "mini" / "new").exists()


def test_O13_wild_run_into_a_folder_that_is_not_a_run(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("a project")
    monkeypatch.chdir(tmp_path)
    refused("wild", "run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--questions", "mini",
            "--search", "none", "--run", ".", says="not a Trek run")
    assert sorted(os.listdir(tmp_path)) == ["README.md"]


def test_O14_ctrl_run_never_writes_into_a_recorded_build_or_a_run(tmp_path, graded):
    build = ROOT / "data" / "runs" / "ctrl" / "build"
    before = snapshot(build)
    for target, says in ((build, "Ctrl build"), (build / "grid", "Ctrl build"), (graded, "run directory")):
        refused("ctrl", "run", build / "contexts.jsonl", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                "--runs", target, says=says)
    assert snapshot(build) == before


def test_O15_csv_cells_that_a_spreadsheet_would_evaluate_are_inert(tmp_path):
    import pandas as pd

    from trek.report.latex import save_table

    df = pd.DataFrame({"run": ['=HYPERLINK("http://x")', "+A1", "@SUM(A1)", "-x", "plain"], "n": [1, -2, 3, 4, 5],
                       "kappa": ["-0.117", "+1", "0.5", "-1e-3", "1"]})
    save_table(df, "t", tmp_path)
    text = (tmp_path / "t.csv").read_text()
    assert "'=HYPERLINK" in text and "'+A1" in text and "'@SUM" in text and "'-x" in text
    assert ",-2," in text and ",plain," in text  # numbers stay numbers, plain text stays as it is
    # a number written as text is a number, not a formula: left alone, read back as a number
    back = pd.read_csv(tmp_path / "t.csv")
    assert back["kappa"].dtype.kind == "f" and list(back["kappa"]) == [-0.117, 1.0, 0.5, -0.001, 1.0]


# == B: the bounded reader ===========================================================================
def _deep(tmp_path: Path, name: str, text: str = DEEP) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("name, body", [
    ("log.json", DEEP), ("log.jsonl", '{"record": ' + DEEP + ', "question_id": "q1"}\n'),
])
def test_B1_deep_nesting_in_an_imported_log(tmp_path, name, body):
    refused("import", "openai-responses", _deep(tmp_path, name, body), "--questions", EX / "questions.csv",
            "--map", MAP, "--out", tmp_path / "o", says="nested deeper than")


def test_B2_deep_nesting_in_an_inspect_eval_zip(tmp_path):
    p = tmp_path / "log.eval"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("header.json", '{"eval": {"task": "t"}}')
        z.writestr("samples/1_epoch_1.json", DEEP)
    refused("import", "inspect-ai", p, "--out", tmp_path / "o", says="nested deeper than")


@pytest.mark.parametrize("where", ["answers", "pages", "requests", "prices", "cost-prices", "pools", "contexts",
                                   "calibration"])
def test_B3_deep_nesting_everywhere_else(tmp_path, graded, where):
    deep_line = '{"a": ' + DEEP + "}\n"
    if where == "answers":
        (graded / runs.ANSWERS).write_text(deep_line)
        code, out = trek("validate", graded)
        assert code == 2 and "nested deeper than" in out, out
        return
    if where == "pages":
        args = ("pages", "add", graded, _deep(tmp_path, "p.jsonl", deep_line))
    elif where == "requests":
        args = ("llm", "run", _deep(tmp_path, "r.jsonl", deep_line), "--out", tmp_path / "o.jsonl", "--model", "m",
                "--base-url", "http://127.0.0.1:9/v1")
    elif where == "prices":
        (tmp_path / "r.jsonl").write_text('{"id": "a", "messages": [{"role": "user", "content": "x"}]}\n')
        args = ("llm", "run", tmp_path / "r.jsonl", "--out", tmp_path / "o.jsonl", "--model", "m", "--base-url",
                "http://127.0.0.1:9/v1", "--prices", _deep(tmp_path, "p.json"))
    elif where == "cost-prices":
        args = ("cost", graded, "--prices", _deep(tmp_path, "p.json"))
    elif where == "pools":
        args = ("ctrl", "build", "--source", "pools", "--pools", _deep(tmp_path, "pools.jsonl", deep_line),
                "--out", tmp_path / "b")
    elif where == "contexts":
        args = ("ctrl", "run", _deep(tmp_path, "contexts.jsonl", deep_line), "--model", "m", "--base-url",
                "http://127.0.0.1:9/v1", "--runs", tmp_path / "g", "--questions",
                ROOT / "data" / "runs" / "ctrl" / "build" / "pools.jsonl")
    else:
        args = ("ctrl", "calibrate", "--set", _deep(tmp_path, "set.json"))
    refused(*args, says="nested deeper than")


_MEASURED = """
import resource, sys
from trek.cli import app
try:
    app(sys.argv[1:], prog_name="trek")
except SystemExit as e:
    code = e.code
else:
    code = 0
print(f"maxrss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr)
sys.exit(code)
"""


def measured(*args: object, timeout: float = 300) -> tuple[int, str, int]:
    """Run ``trek ARGS`` in a child; exit code, stderr and its peak RSS in MB."""
    p = subprocess.run([sys.executable, "-c", _MEASURED, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env={k: v for k, v in os.environ.items() if not k.startswith("TREK_")})
    rss = int(p.stderr.rsplit("maxrss_kb=", 1)[1].split()[0]) // 1024
    return p.returncode, " ".join(p.stderr.split()), rss


def gzip_bomb(path: Path, size: int) -> Path:
    """A .jsonl.gz whose one line inflates to ``size`` bytes (compressed about 1,000 times)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as gz:
        gz.write(b'{"question_id": "q1", "record": {"output_text": "')
        chunk = b"0" * (1 << 24)
        for _ in range(size // len(chunk)):
            gz.write(chunk)
        gz.write(b'"}}\n')
    return path


@pytest.mark.slow
@pytest.mark.parametrize("size", [256 << 20, 2 << 30])
def test_B4_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path, size):
    bomb = gzip_bomb(tmp_path / "log.jsonl.gz", size)
    assert bomb.stat().st_size < size / 500
    code, err, rss = measured("import", "openai-responses", bomb, "--questions", EX / "questions.csv", "--map", MAP,
                              "--out", tmp_path / "o")
    assert code == 2 and "decompression bomb" in err and "Traceback" not in err, err
    assert rss < 1024, f"peak RSS {rss} MB"
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_B5_a_zip_bomb_in_an_eval_log_is_refused_in_bounded_memory(tmp_path):
    p = tmp_path / "log.eval"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("header.json", '{"eval": {"task": "t"}}')
        with z.open("samples/1_epoch_1.json", "w") as m:
            m.write(b'{"id": 1, "input": "')
            chunk = b" " * (1 << 24)
            for _ in range(64):  # 1 GiB
                m.write(chunk)
            m.write(b'"}')
    assert p.stat().st_size < 4 << 20
    code, err, rss = measured("import", "inspect-ai", p, "--out", tmp_path / "o")
    assert code == 2 and "decompression bomb" in err and "Traceback" not in err, err
    assert rss < 1024, f"peak RSS {rss} MB"


@pytest.mark.slow
@pytest.mark.parametrize("name", [runs.ANSWERS, runs.QUESTIONS, "run.json", runs.TRACE, "pages.sqlite"])
def test_B6_validate_never_hangs_on_a_named_pipe(graded, name):
    (graded / name).unlink(missing_ok=True)
    os.mkfifo(graded / name)
    code, err, _ = measured("validate", graded, timeout=60)  # a hang would raise TimeoutExpired
    assert code == 2 and "named pipe" in err, err


@pytest.mark.slow
def test_B7_an_imported_log_that_is_a_pipe(tmp_path):
    os.mkfifo(tmp_path / "log.jsonl")
    code, err, _ = measured("import", "openai-responses", tmp_path / "log.jsonl", "--questions", EX / "questions.csv",
                            "--map", MAP, "--out", tmp_path / "o", timeout=60)
    assert code == 2 and "named pipe" in err, err


# == T: typed import records =========================================================================
@pytest.mark.parametrize("usage, says", [
    ({"input_tokens": [1]}, "field 'usage.input_tokens': expected a non-negative whole number, got [1]"),
    ({"input_tokens": -5}, "field 'usage.input_tokens': expected a non-negative whole number, got -5"),
    ({"input_tokens": 12.7}, "got 12.7"),
    ({"input_tokens": True}, "got True"),
    ({"output_tokens": "many"}, "got 'many'"),
    ({"output_tokens_details": {"reasoning_tokens": {"n": 1}}}, "usage.output_tokens_details.reasoning_tokens"),
])
def test_T1_usage_counts_are_non_negative_whole_numbers(tmp_path, usage, says):
    code, out = import_cli(tmp_path, log_with(tmp_path, lambda rec: rec.__setitem__("usage", usage)))
    assert code == 2 and says in out and "log.jsonl" in out, out
    assert not (tmp_path / "out").exists()


def test_T2_a_number_that_overflows_to_infinity(tmp_path):
    p = tmp_path / "log.jsonl"
    p.write_text((EX / "openai-responses.jsonl").read_text().replace('"input_tokens": ', '"input_tokens": 1e400, '
                                                                      '"x": ', 1))
    code, out = import_cli(tmp_path, p)
    assert code == 2 and "overflows to infinity" in out and "line 1" in out, out


def _inspect(tmp_path: Path, edit) -> Path:
    data = json.loads((EX / "inspect-ai.json").read_text())
    edit(data["samples"][0])
    p = tmp_path / "log.json"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize("field, value, says", [
    ("epoch", [1], "field 'epoch': expected a non-negative whole number, got [1]"),
    ("epoch", "abc", "field 'epoch': expected a non-negative whole number, got 'abc'"),
    ("model_usage", "many", "field 'model_usage': expected an object"),
    ("model_usage", {"m": {"input_tokens": 1e30}}, "model_usage.m.input_tokens"),
    ("id", {"a": 1}, "field 'id': expected a string or an integer id"),
    ("target", [[["x"]]], "field 'target[0]': expected a string"),
])
def test_T3_inspect_samples_are_typed(tmp_path, field, value, says):
    p = _inspect(tmp_path, lambda s: s.__setitem__(field, value))
    code, out = trek("import", "inspect-ai", p, "--out", tmp_path / "o")
    assert code == 2 and says in out and "log.json" in out, out
    assert not (tmp_path / "o").exists()


def test_T4_cost_names_a_count_too_large_for_a_number(tmp_path, graded):
    t = Trajectory(question_id="q0", model="gpt-4o", final_answer="y").model_dump(mode="json")
    t["usage"] = {"prompt_tokens": 1e30, "calls": 1}
    (graded / runs.ANSWERS).write_text(json.dumps(t) + "\n")
    code, out = trek("cost", graded)
    assert code == 2 and "answers.jsonl" in out and "prompt_tokens" in out, out


@pytest.mark.parametrize("cell, says", [("100000000000000000000", "effective_year"), ("-5", "effective_year"),
                                        ("2024.5", "effective_year")])
def test_T5_years_are_plausible(tmp_path, cell, says):
    lines = (EX / "questions.csv").read_text().splitlines()
    head = lines[0].split(",")
    row = next(csv_rows(EX / "questions.csv"))
    row["year"] = cell
    q = tmp_path / "q.csv"
    import csv

    with q.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=head)
        w.writeheader()
        w.writerow(row)
    with pytest.raises(Exception) as e:  # noqa: PT011 - the type is checked below
        from trek.imports import load_questions

        load_questions(q, parse_mapping(MAP))
    assert type(e.value).__name__ == "RecordError" and says in str(e.value) and "q.csv, line 2" in str(e.value)


def csv_rows(path: Path):
    import csv

    with path.open(newline="") as fh:
        yield from csv.DictReader(fh)


@pytest.mark.parametrize("url", ["javascript:alert(1)", "file:///etc/passwd", "../../etc/passwd",
                                 "https://x.example/" + "a" * 100_000])
def test_T6_links_that_are_not_web_addresses_are_left_out(tmp_path, url):
    def edit(rec):
        target = rec.get("record", rec)
        target.setdefault("output", []).insert(0, {"type": "web_search_call", "id": "ws_bad", "status": "completed",
                                                   "action": {"type": "open_page", "url": url}})
        target["output"].append({"type": "message", "role": "assistant", "id": "m_bad", "content": [
            {"type": "output_text", "text": "see", "annotations": [
                {"type": "url_citation", "url": url, "title": "t", "start_index": 0, "end_index": 3}]}]})

    code, out = import_cli(tmp_path, log_with(tmp_path, edit))
    assert code == 0, out
    answers = runs.load_answers(tmp_path / "out")
    everywhere = json.dumps([t.model_dump(mode="json", exclude={"coverage", "source"}) for t in answers.values()])
    assert url[:40] not in everywhere
    import sqlite3

    with sqlite3.connect(tmp_path / "out" / "pages.sqlite") as c:
        keys = [k for (k,) in c.execute("SELECT key FROM pages")]
    assert all(k.startswith(("http://", "https://")) or "://" not in k for k in keys) and url[:40] not in str(keys)
    assert any("left out" in n for t in answers.values() for n in t.coverage.notes)


def test_T7_a_response_id_seen_twice_is_an_error(tmp_path):
    line = (EX / "openai-responses.jsonl").read_text().splitlines()[0]
    rec = json.loads(line)
    qids = [r["qid"] for r in csv_rows(EX / "questions.csv")]
    recs = [json.dumps({"question_id": q, "record": rec}) for q in qids]
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join(recs) + "\n")
    code, out = import_cli(tmp_path, p)
    assert code == 2 and "was already imported" in out and "line 2" in out, out


def test_T8_pages_add_of_one_url_twice_with_different_text(tmp_path, graded):
    p = tmp_path / "pages.jsonl"
    p.write_text(json.dumps({"url": "https://a.example/x", "text": "one"}) + "\n"
                 + json.dumps({"url": "https://a.example/x", "text": "two"}) + "\n")
    refused("pages", "add", graded, p, says="given twice")
    p.write_text(json.dumps({"url": "javascript:alert(1)", "text": "one"}) + "\n")
    refused("pages", "add", graded, p, says="not an http(s) URL")
    assert not (graded / "pages.sqlite").exists()


# == V: trek validate ================================================================================
def test_V1_validate_is_as_strict_as_the_commands(graded):
    assert validate_run(graded) == []
    (graded / "run.json").unlink()
    assert any("run.json" in str(p) and "does not exist" in str(p) for p in validate_run(graded))
    runs.write_meta(graded, runs.RunMeta(run_id="graded", kind="wild"))
    lines = (graded / runs.ANSWERS).read_text().splitlines()
    t = json.loads(lines[0])
    (graded / runs.ANSWERS).write_text("\n".join([*lines, json.dumps(t)]) + "\n")
    assert any("answered twice" in str(p) for p in validate_run(graded))
    (graded / runs.ANSWERS).write_text("\n".join([*lines[1:], json.dumps({**t, "schema_version": "1"})]) + "\n")
    assert any("schema_version" in str(p) for p in validate_run(graded))
    (graded / runs.ANSWERS).write_text("\n".join([*lines[1:], json.dumps({**t, "usage": {"prompt_tokens": -3}})])
                                       + "\n")
    assert any("usage.prompt_tokens" in str(p) for p in validate_run(graded))


def test_V2_validate_checks_trace_jsonl(graded):
    (graded / runs.TRACE).write_text('{"garbage": true}\n')
    found = [str(p) for p in validate_run(graded)]
    assert any("trace.jsonl, line 1" in p for p in found), found
    code, out = trek("validate", graded)
    assert code == 2 and "trace.jsonl" in out


# == X: tracebacks ===================================================================================
def test_X1_pages_add_when_pages_sqlite_is_not_a_database(tmp_path, graded):
    (graded / "pages.sqlite").write_text("not a database")
    p = tmp_path / "pages.jsonl"
    p.write_text(json.dumps({"url": "https://a.example/x", "text": "one"}) + "\n")
    refused("pages", "add", graded, p, says="not a Trek page store")
    assert (graded / "pages.sqlite").read_text() == "not a database"


@pytest.mark.parametrize("runs_value, says", [
    ("EMPTY", "is not a Trek run"), ("../../../../etc", "is not a Trek run"), ("IMPORTED", "is not graded"),
    ("TWICE", "give each run once"),
])
def test_X2_paper_params_runs_are_checked_before_a_notebook_starts(tmp_path, runs_value, says):
    from trek.paper import ParamsError, check_values

    (tmp_path / "empty").mkdir()
    imp = imported(tmp_path / "imp")
    value = {"EMPTY": {"a": str(tmp_path / "empty")}, "IMPORTED": {"a": str(imp)},
             "TWICE": {"a": str(imp), "b": str(tmp_path / "x" / ".." / "imp")}}.get(runs_value, {"a": runs_value})
    if runs_value == "TWICE":
        (tmp_path / "x").mkdir()
        (imp / runs.GRADES).write_text("")
    with pytest.raises(ParamsError, match=says):
        check_values({"runs": value}, tmp_path / "p.yaml")


def test_X3_trace_run_on_an_ungraded_import_is_not_a_success(tmp_path):
    run = imported(tmp_path / "imp")
    code, out = trek("trace", run, "--diagnostic-judge", "oracle", "--analysis-judge", "oracle",
                     "--base-url", "http://127.0.0.1:9/v1")
    assert code == 3 and "no grade" in out, out


# == D: duplicate inputs =============================================================================
def test_D1_the_same_run_twice_is_counted_once(graded, tmp_path):
    code, once = trek("judge", "audit", graded)
    code2, twice = trek("judge", "audit", graded, graded / "x" / "..")
    assert code == code2 == 0 and "counted once" in twice
    assert twice.split("counted once", 1)[1].strip() == once.strip()
    code, out = trek("trace", "view", graded, graded, "--out", tmp_path / "v.html")
    assert code == 0 and "shown once" in out, out
    assert (tmp_path / "v.html").read_text().count('class="case"') <= 1


def test_D2_a_key_given_twice_in_a_params_file(tmp_path):
    from trek.paper import ParamsError, _load_params

    p = tmp_path / "p.yaml"
    p.write_text("runs:\n  a: data/runs/wild/agentic\n  a: data/runs/wild/no-search\n")
    with pytest.raises(ParamsError, match="'a' is given twice"):
        _load_params(p, "x", None)


def test_D3_the_same_log_twice_in_one_import(tmp_path):
    code, out = trek("import", "openai-responses", EX / "openai-responses.jsonl", EX / "openai-responses.jsonl",
                     "--questions", EX / "questions.csv", "--map", MAP, "--out", tmp_path / "o")
    assert code == 2 and "given more than once" in out, out
