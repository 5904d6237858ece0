import json
import shutil

import papermill as pm
import pytest

from trek.paper import ParamsError, _load_params, declared_parameters, run_notebook
from trek.report.paths import repo_root

NOTEBOOKS = sorted((repo_root() / "notebooks").glob("*.ipynb"))
DECLARED = {
    "tab1_wild_accuracy": ["runs", "runs_dir", "figures_dir", "tables_dir"],
    "tab10_reference_years": ["questions", "data_dir", "figures_dir", "tables_dir"],
}


# -- parameters cells -----------------------------------------------------------------------
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_sees_every_assignment_of_the_parameters_cell(nb):
    import ast

    import nbformat

    cells = [c for c in nbformat.read(nb, as_version=4).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{nb.name}: exactly one cell tagged 'parameters'"
    assigned = [t.id for node in ast.parse(cells[0].source).body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)]
    assert assigned, f"{nb.name}: the parameters cell assigns nothing"
    assert list(pm.inspect_notebook(str(nb))) == assigned


def test_a_hidden_parameter_line_is_an_error(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('runs = None   # {label: dir}; None = all runs\nseed = 0\n')
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(ParamsError, match="runs"):
        declared_parameters(path)


# -- params files ---------------------------------------------------------------------------
def write(tmp_path, text):
    p = tmp_path / "params.yaml"
    p.write_text(text)
    return str(p)


def test_params_file_sections(tmp_path):
    p = write(tmp_path, "tables_dir: t\nruns_dir: runs/full\ntab1_wild_accuracy:\n  tables_dir: t1\n")
    assert _load_params(p, "tab1_wild_accuracy", DECLARED) == {"tables_dir": "t1", "runs_dir": "runs/full"}
    # top-level keys reach only the notebooks that declare them
    assert _load_params(p, "tab10_reference_years", DECLARED) == {"tables_dir": "t"}


def test_a_parameter_no_notebook_declares_is_an_error(tmp_path):
    p = write(tmp_path, "run: {a: b}\n")  # misspelt 'runs'
    with pytest.raises(ParamsError, match="no notebook declares run"):
        _load_params(p, "tab1_wild_accuracy", DECLARED)


def test_a_section_may_only_use_its_notebooks_names(tmp_path):
    p = write(tmp_path, "tab10_reference_years:\n  runs: {a: b}\n")
    with pytest.raises(ParamsError, match="tab10_reference_years does not declare"):
        _load_params(p, "tab10_reference_years", DECLARED)
    p = write(tmp_path, "tab10_reference_years: 3\n")
    with pytest.raises(ParamsError, match="must be a mapping"):
        _load_params(p, "tab1_wild_accuracy", DECLARED)


def test_bad_params_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(SystemExit, match="mapping"):
        _load_params(str(p), "x")
    with pytest.raises(SystemExit, match="does not exist"):
        _load_params(str(tmp_path / "none.yaml"), "x")
    with pytest.raises(SystemExit, match="is a folder"):
        _load_params(str(tmp_path), "x")


def test_the_shipped_params_files_fit_the_notebooks():
    declared = {nb.stem: declared_parameters(nb) for nb in NOTEBOOKS}
    for p in sorted((repo_root() / "params").glob("*.yaml")):
        for stem in declared:
            _load_params(str(p), stem, declared)


@pytest.mark.slow
def test_runs_from_a_params_file_reach_the_table(tmp_path, demo_runs):
    label = "Zebra-Run-7Q"
    run = tmp_path / "my-real-run"
    shutil.copytree(demo_runs["demo-lm"], run)
    # make the copy look like a run of a real model: the title names the model from run.json and
    # drops the DEMO DATA mark only when the run was not made by the scripted demo model
    meta = json.loads((run / "run.json").read_text())
    meta["model"] = "Quokka-13B"
    meta["config"].pop("demo", None)
    (run / "run.json").write_text(json.dumps(meta))
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    params = write(tmp_path, f"runs:\n  {label}: {run}\ntab1_wild_accuracy:\n  tables_dir: {tables}\n"
                             f"  figures_dir: {figures}\n")
    written = run_notebook(repo_root() / "notebooks" / "tab1_wild_accuracy.ipynb", tmp_path / "out.ipynb", params)
    csv = (tables / "tab1_wild_accuracy.csv").read_text()
    tex = (tables / "tab1_wild_accuracy.tex").read_text()
    assert label in csv and "demo-lm" not in csv + tex and "DEMO DATA" not in tex and "Quokka-13B" in tex
    assert str(tables / "tab1_wild_accuracy.csv") in written


def test_stored_notebook_outputs_name_no_machine_path():
    # stored outputs are compared by nbval and read by people on other machines: a repr of an
    # absolute path (e.g. the list save_table returns) must not end up in them
    import tempfile

    root = repo_root()
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        text = nb.read_text(encoding="utf-8")
        assert str(root) not in text and tempfile.gettempdir() + "/" not in text, nb.name


def _snapshot(*folders):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for f in folders for p in sorted(f.glob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_params_run_writes_to_build_paper_and_prints_one_quiet_line(tmp_path, demo_runs):
    import re
    import subprocess
    import sys
    import uuid

    root = repo_root()
    committed = _snapshot(root / "figures", root / "tables")
    assert committed
    name = f"mine-{uuid.uuid4().hex[:8]}"
    params = tmp_path / f"{name}.yaml"
    params.write_text(f"runs:\n  Zebra-Run-7Q: {demo_runs['demo-lm']}\n")
    out = root / "build" / "paper" / name
    try:
        res = subprocess.run([sys.executable, "-m", "trek.paper", "run", "notebooks/tab1_wild_accuracy.ipynb",
                              str(tmp_path / "executed.ipynb"), "--params", str(params)],
                             cwd=root, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        # one line, no kernel chatter: the kernel's log is kept beside the executed notebook
        assert re.fullmatch(r"tab1_wild_accuracy +\d+\.\d s  ok  \(4 files\)\n", res.stdout), res.stdout
        assert res.stderr == ""
        assert (tmp_path / "executed.log").exists()
        assert "Zebra-Run-7Q" in (out / "tables" / "tab1_wild_accuracy.csv").read_text()
        assert {p.name for p in (out / "figures").iterdir()} == {"tab1_wild_accuracy.pdf", "tab1_wild_accuracy.png"}
        assert sorted((tmp_path / "executed.outputs.txt").read_text().split()) == sorted(
            str(p) for p in [*(out / "figures").iterdir(), *(out / "tables").iterdir()])
        # --out sends them elsewhere
        res = subprocess.run([sys.executable, "-m", "trek.paper", "run", "notebooks/tab1_wild_accuracy.ipynb",
                              str(tmp_path / "executed2.ipynb"), "--params", str(params), "--out", str(tmp_path / "o")],
                             cwd=root, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0 and (tmp_path / "o" / "tables" / "tab1_wild_accuracy.tex").exists()
    finally:
        import shutil

        shutil.rmtree(out, ignore_errors=True)
    assert _snapshot(root / "figures", root / "tables") == committed  # the committed outputs are untouched


@pytest.mark.slow
def test_a_failing_notebook_says_failed_and_shows_why(tmp_path):
    import subprocess
    import sys

    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, nbformat.v4.new_code_cell("raise RuntimeError('the table is wrong')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "broken.ipynb")
    res = subprocess.run([sys.executable, "-m", "trek.paper", "run", str(tmp_path / "broken.ipynb"),
                          str(tmp_path / "out" / "broken.ipynb")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert res.stdout.split()[0] == "broken" and res.stdout.split()[-1] == "FAILED"
    assert "the table is wrong" in res.stderr


@pytest.mark.slow
def test_refreshing_notebooks_prints_one_line_each_and_keeps_kernel_chatter_in_logs(tmp_path):
    import re
    import subprocess
    import sys

    import nbformat

    script = repo_root() / "scripts" / "refresh_notebooks.py"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import sys; print('to stderr', file=sys.stderr); 6 * 7")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "fine.ipynb")
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "fine.ipynb"), "--logs", str(tmp_path / "logs")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert re.fullmatch(r"fine +\d+\.\d s  ok", lines[0]) and lines[1].startswith("make notebooks: 1 notebooks")
    assert len(lines) == 2 and res.stderr == ""  # no kernel warning on the terminal
    assert (tmp_path / "logs" / "fine.log").exists()
    assert nbformat.read(tmp_path / "fine.ipynb", as_version=4).cells[0].outputs[-1]["data"]["text/plain"] == "42"
    # a failing notebook: FAILED, the error shown, the file left as it was
    broken = nbformat.v4.new_notebook()
    broken.cells = [nbformat.v4.new_code_cell("raise RuntimeError('the table is wrong')")]
    broken.metadata["kernelspec"] = nb.metadata["kernelspec"]
    nbformat.write(broken, tmp_path / "broken.ipynb")
    before = (tmp_path / "broken.ipynb").read_bytes()
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "broken.ipynb"), "--logs", str(tmp_path / "logs")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and res.stdout.split()[-1] == "FAILED"
    assert "the table is wrong" in res.stderr
    assert (tmp_path / "broken.ipynb").read_bytes() == before


# -- values a notebook would fail on halfway are refused before it runs -----------------------------
@pytest.mark.parametrize("text, expected", [
    ("runs: 5\n", "runs: must be a mapping of label: run directory"),
    ("runs: .nan\n", "runs: must be a mapping of label: run directory (e.g. runs:\n  GPT-5.4: runs/gpt54), not nan"),
    ("runs: {}\n", "runs: must be a mapping"),
    ("runs:\n  A: does/not/exist\n", "runs: A: run directory"),
    ("runs:\n  A: 7\n", "runs: A: must be a path (text), not 7"),
    ("runs_dir: nowhere/at/all\n", "runs_dir: folder"),
    ("tab7_ctrl_full:\n  ctrl_runs_dir: .nan\n", "ctrl_runs_dir: must be a path (text), not nan"),
])
def test_bad_values_stop_before_the_notebook_runs(tmp_path, text, expected):
    params = write(tmp_path, text)
    stem = "tab7_ctrl_full" if "tab7" in text else "tab1_wild_accuracy"
    nb = repo_root() / "notebooks" / f"{stem}.ipynb"
    with pytest.raises(ParamsError) as e:
        run_notebook(nb, tmp_path / "out.ipynb", params)
    assert expected in str(e.value) and str(params) in str(e.value)
    assert not (tmp_path / "out.ipynb").exists()


def test_bad_values_through_the_make_paper_entry_point(tmp_path):
    import subprocess
    import sys

    params = write(tmp_path, "runs:\n  Mine: runs/never-made\n")
    res = subprocess.run([sys.executable, "-m", "trek.paper", "run", "notebooks/tab1_wild_accuracy.ipynb",
                          str(tmp_path / "x.ipynb"), "--params", str(params)], cwd=repo_root(), capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 1
    assert "runs: Mine: run directory" in res.stderr and "runs/never-made does not exist" in res.stderr
    assert "Traceback" not in res.stderr


def test_check_values_accepts_what_the_notebooks_take(tmp_path, demo_runs):
    from trek.paper import check_values

    check_values({"runs": {"A": str(demo_runs["demo-lm"])}, "reference": "A", "questions": "mini",
                  "figures_dir": str(tmp_path / "f"), "runs_dir": None}, "p.yaml")
    with pytest.raises(ParamsError, match="'B' is not one of the runs' labels"):
        check_values({"runs": {"A": str(demo_runs["demo-lm"])}, "reference": "B"}, "p.yaml")
    with pytest.raises(ParamsError, match="questions: must be text, not 5"):
        check_values({"questions": 5}, "p.yaml")
