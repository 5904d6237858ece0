import json
import shutil

import pandas as pd
import papermill as pm
import pytest

from trek.paper import (
    ParamsError,
    _load_params,
    declared_parameters,
    demo_label,
    repo_root,
    run_notebook,
    save_table,
    to_latex,
)

NOTEBOOKS = sorted((repo_root() / "notebooks").glob("*.ipynb"))
DECLARED = {
    "tab1_wild_accuracy": ["runs", "runs_dir", "figures_dir", "tables_dir"],
    "tab10_reference_years": ["questions", "data_dir", "figures_dir", "tables_dir"],
}


def test_save_table_writes_csv_and_tex(tmp_path, monkeypatch):
    manifest = tmp_path / "m.txt"
    monkeypatch.setenv("TREK_PAPER_MANIFEST", str(manifest))
    df = pd.DataFrame({"accuracy": [50.0, 2 / 3 * 100], "n": [4, 3]}, index=pd.Index(["a_b", "c"], name="dataset"))
    paths = save_table(df, "tab_x", tmp_path / "tables", caption="Acc & more")
    csv, tex = (p.read_text() for p in paths)
    assert csv.splitlines()[0] == "dataset,accuracy,n" and "66.7" in csv
    assert r"a\_b & 50.0 & 4 \\" in tex and r"\caption{Acc \& more}" in tex
    assert manifest.read_text().split() == [str(p) for p in paths]


def test_to_latex_marks_missing_values():
    tex = to_latex(pd.DataFrame({"x": [float("nan")]}))
    assert "--" in tex and tex.count(r"\toprule") == 1


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


def test_demo_label():
    assert demo_label(True, "Table 1").startswith("DEMO DATA")
    assert demo_label(False, "Table 1") == "Table 1"


def test_stored_notebook_outputs_name_no_machine_path():
    # stored outputs are compared by nbval and read by people on other machines: a repr of an
    # absolute path (e.g. the list save_table returns) must not end up in them
    import tempfile

    from trek.paper import repo_root

    root = repo_root()
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        text = nb.read_text(encoding="utf-8")
        assert str(root) not in text and tempfile.gettempdir() + "/" not in text, nb.name


def test_runs_title_names_model_and_question_set_and_marks_demo_runs(tmp_path, demo_runs):
    from trek.paper import runs_title

    demo = runs_title("Accuracy (%)", {"x": demo_runs["demo-lm"]})
    assert demo.startswith("DEMO DATA") and "demo-lm" in demo and "TrekBench-Mini" in demo
    real = tmp_path / "real"
    shutil.copytree(demo_runs["demo-lm"], real)
    meta = json.loads((real / "run.json").read_text())
    meta["model"], meta["config"]["benchmark"] = "Quokka-13B", "My-Set"
    meta["config"].pop("demo", None)
    (real / "run.json").write_text(json.dumps(meta))
    title = runs_title("Accuracy (%)", [real])
    assert not title.startswith("DEMO DATA") and "Quokka-13B" in title and "My-Set" in title
