"""Where a notebook writes: the committed figures/ and tables/ only on the recorded runs with the
notebook's defaults; given other inputs, build/paper/custom/ (or the folders the reader names)."""

import ast
import json
import re
import uuid

import nbformat
import pytest

from trek.report import paths
from trek.report.paths import repo_root

CELL = '''runs = None          # {label: run directory}
runs_dir = None
method = "direct"
figures_dir = None
tables_dir = None
'''


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A scratch repository root holding one notebook, ``nb``, with ``CELL`` as its parameters."""
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(CELL, metadata={"tags": ["parameters"]})]
    nbformat.write(nb, tmp_path / "notebooks" / "nb.ipynb")
    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path)
    monkeypatch.delenv("TREK_PAPER_OUT", raising=False)
    return tmp_path


def test_the_defaults_write_the_committed_folders(root, capsys):
    assert paths.output_dirs(None, None, "nb", runs=None, runs_dir=None, method="direct") == (
        root / "figures", root / "tables")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("changed", [{"runs": {"mine": "runs/mine"}}, {"runs_dir": "runs"}, {"method": "rerank"}])
def test_other_inputs_go_to_build_and_say_so_in_one_line(root, capsys, changed):
    given = {"runs": None, "runs_dir": None, "method": "direct", **changed}
    f, t = paths.output_dirs(None, None, "nb", **given)
    assert (f, t) == (root / "build/paper/custom/figures", root / "build/paper/custom/tables")
    assert f.is_dir() and t.is_dir() and not (root / "figures").exists()
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and next(iter(changed)) in line and "figures_dir" in line


def test_named_folders_and_make_paper_win(root, monkeypatch, tmp_path):
    mine = {"runs": {"x": "y"}, "runs_dir": None, "method": "direct"}
    assert paths.output_dirs(str(tmp_path / "F"), str(tmp_path / "T"), "nb", **mine) == (tmp_path / "F", tmp_path / "T")
    monkeypatch.setenv("TREK_PAPER_OUT", str(tmp_path / "out"))
    assert paths.output_dirs(None, None, "nb", **mine)[0] == tmp_path / "out" / "figures"


def test_a_parameter_left_out_is_an_error(root):
    with pytest.raises(TypeError, match="missing: method"):
        paths.output_dirs(None, None, "nb", runs=None, runs_dir=None)
    with pytest.raises(TypeError, match="not its parameters: model"):
        paths.output_dirs(None, None, "nb", runs=None, runs_dir=None, method="direct", model="x")


def test_an_unreadable_notebook_never_writes_the_committed_folders(root):
    f, _ = paths.output_dirs(None, None, "not-there", runs=None)
    assert f == root / "build/paper/custom/figures"


@pytest.mark.parametrize("nb", sorted((repo_root() / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_notebook_passes_its_name_and_every_parameter(nb):
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    calls = [node for c in cells if c["cell_type"] == "code"
             for node in ast.walk(ast.parse(re.sub(r"^[%!].*$", "", "".join(c["source"]), flags=re.M)))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "output_dirs"]
    writes = "save_table" in nb.read_text(encoding="utf-8") or "save_figure" in nb.read_text(encoding="utf-8")
    if not writes:  # a notebook that writes no file (explore) has no output folders to choose
        assert calls == [], nb.name
        return
    assert len(calls) == 1, nb.name
    call = calls[0]
    assert len(call.args) == 3 and ast.literal_eval(call.args[2]) == nb.stem
    given = {k.arg: None for k in call.keywords}
    declared = set(paths.notebook_defaults(nb.stem)) - {"figures_dir", "tables_dir"}
    assert set(given) == declared, nb.name
    assert all(k.arg == getattr(k.value, "id", None) for k in call.keywords), nb.name  # each passes its own value


def _snapshot(*folders):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for f in folders for p in sorted(f.glob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_direct_papermill_run_on_ones_own_run_leaves_the_committed_outputs_alone(tmp_path, demo_runs, monkeypatch):
    """`papermill notebooks/tab1_wild_accuracy.ipynb out.ipynb -y "runs: {...}"`, as the docs allow:
    the committed figures/ and tables/ keep their bytes and times; the table is in build/paper/custom."""
    import subprocess
    import sys

    root = repo_root()
    committed = _snapshot(root / "figures", root / "tables")
    assert committed
    label = f"Mine-{uuid.uuid4().hex[:6]}"
    monkeypatch.delenv("TREK_PAPER_OUT", raising=False)
    out = root / "build" / "paper" / "custom"
    res = subprocess.run([sys.executable, "-m", "papermill", "notebooks/tab1_wild_accuracy.ipynb",
                          str(tmp_path / "out.ipynb"), "-y", json.dumps({"runs": {label: str(demo_runs["demo-lm"])}}),
                          "--no-progress-bar"], cwd=root, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _snapshot(root / "figures", root / "tables") == committed
    csv = out / "tables" / "tab1_wild_accuracy.csv"
    assert label in csv.read_text()
    executed = (tmp_path / "out.ipynb").read_text()
    assert "build/paper/custom/" in executed and "figures_dir" in executed  # the line that says where and how to choose
