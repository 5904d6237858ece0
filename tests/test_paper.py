import pandas as pd
import pytest

from trek.paper import _load_params, demo_label, save_table, to_latex


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


def test_params_file_sections(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("seed: 3\nruns_dir: runs/full\ntab1_wild_accuracy:\n  seed: 9\n")
    assert _load_params(str(p), "tab1_wild_accuracy")["seed"] == 9
    other = _load_params(str(p), "tab10_reference_years")
    assert other["seed"] == 3 and other["runs_dir"] == "runs/full"


def test_bad_params_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(SystemExit, match="mapping"):
        _load_params(str(p), "x")
    with pytest.raises(SystemExit, match="does not exist"):
        _load_params(str(tmp_path / "none.yaml"), "x")


def test_demo_label():
    assert demo_label(True, "Table 1").startswith("DEMO DATA")
    assert demo_label(False, "Table 1") == "Table 1"
